package alerterd

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/dashboard"
	"github.com/nofly-dev/nofly/internal/pmtiles"
)

// maxAttribution bounds --map-attribution: a line in the map's corner.
const maxAttribution = 300

// osmAttribution is what an archive without an attribution of its own is
// credited with: the extracts --map-pmtiles is for are OpenStreetMap data,
// whose licence (ODbL) asks for it.
const osmAttribution = "© OpenStreetMap contributors"

// checkBasemap checks --map-tiles, --map-pmtiles and --map-attribution,
// reading the archive's header: a start-up error names the flag (and the
// file).
func (c Config) checkBasemap() error {
	_, err := c.loadBasemap()
	return err
}

// loadBasemap is the base map the API describes and serves, with the
// origin the dashboard's CSP must admit ("" for none).
func (c Config) loadBasemap() (api.Basemap, error) {
	if n := utf8.RuneCountInString(c.MapAttribution); n > maxAttribution || !utf8.ValidString(c.MapAttribution) ||
		strings.ContainsFunc(c.MapAttribution, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return api.Basemap{}, badField("MapAttribution", fmt.Sprintf("must be at most %d characters of text, no control characters", maxAttribution))
	}
	switch {
	case c.MapTiles != "" && c.MapPMTiles != "":
		return api.Basemap{}, badField("MapPMTiles", "give --map-tiles or --map-pmtiles, not both")
	case c.MapTiles != "":
		if _, err := dashboard.TileOrigin(c.MapTiles); err != nil {
			return api.Basemap{}, badField("MapTiles", err.Error())
		}
		if strings.TrimSpace(c.MapAttribution) == "" {
			return api.Basemap{}, badField("MapAttribution", "is required with --map-tiles: a tile server's terms ask for its credit (for OpenStreetMap data: \""+osmAttribution+"\")")
		}
		return api.Basemap{TilesURL: c.MapTiles, Attribution: c.MapAttribution}, nil
	case c.MapPMTiles != "":
		h, attr, err := readArchive(c.MapPMTiles)
		if err != nil {
			return api.Basemap{}, badField("MapPMTiles", c.MapPMTiles+": "+err.Error())
		}
		if c.MapAttribution != "" {
			attr = c.MapAttribution
		}
		return api.Basemap{PMTiles: c.MapPMTiles, Header: h, Attribution: attr}, nil
	case c.MapAttribution != "":
		return api.Basemap{}, badField("MapAttribution", "credits a base map: give --map-tiles or --map-pmtiles with it")
	}
	return api.Basemap{}, nil
}

// tileOrigin is the origin the dashboard admits for --map-tiles, "" without.
func (c Config) tileOrigin() string {
	o, _ := dashboard.TileOrigin(c.MapTiles) // Validate checked it
	return o
}

// readArchive reads the header of a PMTiles archive the page can draw
// (vector tiles, compressed as a browser can decompress) and the
// attribution its metadata gives, as plain text (osmAttribution without).
func readArchive(path string) (pmtiles.Header, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return pmtiles.Header{}, "", err
	}
	defer f.Close()
	b := make([]byte, pmtiles.HeaderLen)
	if _, err := io.ReadFull(f, b); err != nil {
		return pmtiles.Header{}, "", fmt.Errorf("not a PMTiles archive: %w", err)
	}
	h, err := pmtiles.ParseHeader(b)
	if err != nil {
		return pmtiles.Header{}, "", err
	}
	if h.TileType != pmtiles.TileMVT {
		return pmtiles.Header{}, "", fmt.Errorf("holds %s tiles; the dashboard draws vector (mvt) archives: use --map-tiles for raster tiles", h.TileType)
	}
	for _, c := range []pmtiles.Compression{h.TileCompression, h.InternalCompression} {
		if c != pmtiles.CompressionNone && c != pmtiles.CompressionGzip {
			return pmtiles.Header{}, "", fmt.Errorf("is compressed with %s, which a browser cannot read: convert it with gzip (pmtiles convert)", c)
		}
	}
	if fi, err := f.Stat(); err == nil && uint64(fi.Size()) < h.DataOffset+h.DataLength {
		return pmtiles.Header{}, "", fmt.Errorf("is %d bytes, shorter than its header says (%d): cut off?", fi.Size(), h.DataOffset+h.DataLength)
	}
	return h, archiveAttribution(f, h), nil
}

var tags = regexp.MustCompile(`<[^>]*>`)

// archiveAttribution is the "attribution" of the archive's metadata with
// its HTML tags dropped (the page shows text), or osmAttribution.
func archiveAttribution(f io.ReaderAt, h pmtiles.Header) string {
	if h.MetadataLength == 0 || h.MetadataLength > 1<<20 {
		return osmAttribution
	}
	raw := make([]byte, h.MetadataLength)
	if _, err := f.ReadAt(raw, int64(h.MetadataOffset)); err != nil {
		return osmAttribution
	}
	var r io.Reader = bytes.NewReader(raw)
	if h.InternalCompression == pmtiles.CompressionGzip {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return osmAttribution
		}
		r = io.LimitReader(zr, 1<<20)
	}
	var m struct {
		Attribution string `json:"attribution"`
	}
	if json.NewDecoder(r).Decode(&m) != nil {
		return osmAttribution
	}
	a := strings.Join(strings.Fields(tags.ReplaceAllString(m.Attribution, "")), " ")
	a = strings.NewReplacer("&copy;", "©", "&amp;", "&").Replace(a)
	if a == "" || utf8.RuneCountInString(a) > maxAttribution {
		return osmAttribution
	}
	return a
}
