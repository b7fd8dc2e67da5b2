package pmtiles

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestTileID: the ids of the v3 spec's examples and its reference
// implementations' tests.
func TestTileID(t *testing.T) {
	for _, c := range []struct {
		z    uint8
		x, y uint32
		want uint64
	}{
		{0, 0, 0, 0},
		{1, 0, 0, 1}, {1, 0, 1, 2}, {1, 1, 1, 3}, {1, 1, 0, 4},
		{2, 0, 0, 5},
		{3, 0, 0, 21}, {3, 7, 0, 84},
		{12, 3423, 1763, 19078479},
	} {
		if got := TileID(c.z, c.x, c.y); got != c.want {
			t.Errorf("TileID(%d, %d, %d) = %d, want %d", c.z, c.x, c.y, got, c.want)
		}
	}
}

// readTile finds z/x/y in an archive the way a reader does: header, root
// directory (gzipped varint columns), the tile's bytes.
func readTile(t *testing.T, b []byte, z uint8, x, y uint32) ([]byte, bool) {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b[h.RootOffset : h.RootOffset+h.RootLength]))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(dir)
	next := func() uint64 {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	n := int(next())
	ids, runs, lens, offs := make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
	var last uint64
	for i := range ids {
		last += next()
		ids[i] = last
	}
	for i := range runs {
		runs[i] = next()
	}
	for i := range lens {
		lens[i] = next()
	}
	for i := range offs {
		v := next()
		if v == 0 && i > 0 {
			offs[i] = offs[i-1] + lens[i-1]
		} else {
			offs[i] = v - 1
		}
	}
	id := TileID(z, x, y)
	for i := range ids {
		if ids[i] <= id && id < ids[i]+runs[i] {
			o := h.DataOffset + offs[i]
			return b[o : o+lens[i]], true
		}
	}
	return nil, false
}

func TestWriteRead(t *testing.T) {
	tiles := []Tile{
		{Z: 14, X: 4700, Y: 6200, Data: []byte("tile a")},
		{Z: 10, X: 293, Y: 387, Data: []byte("tile b")},
		{Z: 14, X: 4701, Y: 6200, Data: []byte("tile a")}, // the same bytes: stored once
		{Z: 15, X: 9402, Y: 12401, Data: []byte("tile c")},
	}
	var buf bytes.Buffer
	err := Write(&buf, Archive{TileType: TileMVT, TileCompression: CompressionGzip, Bounds: [4]float64{-75.7, 39.6, -75.5, 39.7},
		Center: [2]float64{-75.6, 39.68}, CenterZoom: 14, Metadata: map[string]any{"attribution": "© OpenStreetMap contributors"}, Tiles: tiles})
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.TileType != TileMVT || h.TileCompression != CompressionGzip || h.MinZoom != 10 || h.MaxZoom != 15 || h.CenterZoom != 14 {
		t.Errorf("header %+v", h)
	}
	if h.Bounds != [4]float64{-75.7, 39.6, -75.5, 39.7} || h.Center != [2]float64{-75.6, 39.68} {
		t.Errorf("bounds %v centre %v", h.Bounds, h.Center)
	}
	if h.AddressedTiles != 4 || h.TileContents != 3 || h.DataLength != 18 || uint64(len(b)) != h.DataOffset+h.DataLength {
		t.Errorf("counts %+v, %d bytes", h, len(b))
	}
	for _, tl := range tiles {
		got, ok := readTile(t, b, tl.Z, tl.X, tl.Y)
		if !ok || string(got) != string(tl.Data) {
			t.Errorf("tile %d/%d/%d: %q %v", tl.Z, tl.X, tl.Y, got, ok)
		}
	}
	if _, ok := readTile(t, b, 14, 4702, 6200); ok {
		t.Error("a tile never written was found")
	}
	zr, _ := gzip.NewReader(bytes.NewReader(b[h.MetadataOffset : h.MetadataOffset+h.MetadataLength]))
	var meta map[string]string
	if err := json.NewDecoder(zr).Decode(&meta); err != nil || meta["attribution"] != "© OpenStreetMap contributors" {
		t.Errorf("metadata %v %v", meta, err)
	}
}

func TestWriteRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		tiles []Tile
		want  string
	}{
		{"none", nil, "no tiles"},
		{"twice", []Tile{{Z: 1, Data: []byte("a")}, {Z: 1, Data: []byte("b")}}, "twice"},
	} {
		err := Write(io.Discard, Archive{TileType: TileMVT, Tiles: c.tiles})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestParseHeaderRefuses(t *testing.T) {
	good := Header{TileType: TileMVT, MinZoom: 0, MaxZoom: 14}.bytes()
	v2 := append([]byte(nil), good...)
	v2[7] = 2
	zooms := append([]byte(nil), good...)
	zooms[100], zooms[101] = 9, 3
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:50], "shorter than a header"},
		{"magic", append([]byte("NOTILES"), good[7:]...), "magic"},
		{"version", v2, "version 2"},
		{"zooms", zooms, "out of order"},
	} {
		_, err := ParseHeader(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := ParseHeader(good); err != nil {
		t.Errorf("good header: %v", err)
	}
}
