package alerterd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/internal/pmtiles"
)

// TestMapPMTilesAtStart: --map-pmtiles is read at start; a file the page
// cannot draw stops the alerter naming the flag and the file, a good one
// gives its header and its own attribution as text.
func TestMapPMTilesAtStart(t *testing.T) {
	dir := t.TempDir()
	archive := func(name string, tt pmtiles.TileType, tc pmtiles.Compression, meta map[string]any) string {
		var buf bytes.Buffer
		if err := pmtiles.Write(&buf, pmtiles.Archive{TileType: tt, TileCompression: tc, Metadata: meta,
			Tiles: []pmtiles.Tile{{Z: 3, X: 1, Y: 2, Data: []byte("t")}, {Z: 5, X: 4, Y: 9, Data: []byte("u")}}}); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := archive("good.pmtiles", pmtiles.TileMVT, pmtiles.CompressionGzip,
		map[string]any{"attribution": `<a href="https://www.openstreetmap.org/copyright" target="_blank">&copy; OpenStreetMap contributors</a>`})
	bare := archive("bare.pmtiles", pmtiles.TileMVT, pmtiles.CompressionNone, nil)
	raster := archive("raster.pmtiles", pmtiles.TilePNG, pmtiles.CompressionNone, nil)
	brotli := archive("brotli.pmtiles", pmtiles.TileMVT, pmtiles.CompressionBrotli, nil)
	text := filepath.Join(dir, "text.pmtiles")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a map ", 20)), 0o600); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(good)
	cut := filepath.Join(dir, "cut.pmtiles")
	if err := os.WriteFile(cut, whole[:len(whole)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file, attr, want, wantAttr string
	}{
		{"good", good, "", "", "© OpenStreetMap contributors"},
		{"no attribution of its own", bare, "", "", osmAttribution},
		{"attribution given", good, "Ordnance Survey", "", "Ordnance Survey"},
		{"raster", raster, "", "holds png tiles", ""},
		{"brotli", brotli, "", "compressed with brotli", ""},
		{"not an archive", text, "", "no \"PMTiles\" magic", ""},
		{"cut off", cut, "", "cut off?", ""},
	} {
		bm, err := Config{MapPMTiles: c.file, MapAttribution: c.attr}.loadBasemap()
		if c.want != "" {
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--map-pmtiles") ||
				!strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a config error naming --map-pmtiles, %s and %q", c.name, err, c.file, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if bm.Attribution != c.wantAttr || bm.PMTiles != c.file || bm.Header.MinZoom != 3 || bm.Header.MaxZoom != 5 {
			t.Errorf("%s: %+v", c.name, bm)
		}
	}
}
