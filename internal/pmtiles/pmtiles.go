// Package pmtiles reads the header of a PMTiles v3 archive (the alerter
// checks --map-pmtiles with it at start) and writes small archives: the
// base map of the demo (cmd/basemap) and the archives tests build. The
// format is one file: a 127-byte header, a root directory of tile ids
// (varints), JSON metadata and the tiles
// (https://github.com/protomaps/PMTiles/blob/main/spec/v3/spec.md). The
// writer keeps every entry in the root directory (no leaf directories),
// which holds some thousands of tiles: enough for a city, not a country.
package pmtiles

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// HeaderLen is the size of a v3 header.
const HeaderLen = 127

// rootMax is how far into the file the header and the root directory may
// reach: a client reads that much first.
const rootMax = 16384

// Compression and TileType are the header's codes.
type (
	Compression uint8
	TileType    uint8
)

// The codes of the v3 header.
const (
	CompressionUnknown Compression = 0
	CompressionNone    Compression = 1
	CompressionGzip    Compression = 2
	CompressionBrotli  Compression = 3
	CompressionZstd    Compression = 4

	TileUnknown TileType = 0
	TileMVT     TileType = 1
	TilePNG     TileType = 2
	TileJPEG    TileType = 3
	TileWebP    TileType = 4
	TileAVIF    TileType = 5
)

func (t TileType) String() string {
	switch t {
	case TileMVT:
		return "mvt"
	case TilePNG:
		return "png"
	case TileJPEG:
		return "jpeg"
	case TileWebP:
		return "webp"
	case TileAVIF:
		return "avif"
	}
	return fmt.Sprintf("unknown (%d)", uint8(t))
}

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionBrotli:
		return "brotli"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown (%d)", uint8(c))
}

// Header is what a v3 header says that a reader of the archive needs.
type Header struct {
	RootOffset, RootLength         uint64
	MetadataOffset, MetadataLength uint64
	LeafOffset, LeafLength         uint64
	DataOffset, DataLength         uint64
	AddressedTiles, TileEntries    uint64
	TileContents                   uint64
	Clustered                      bool
	InternalCompression            Compression
	TileCompression                Compression
	TileType                       TileType
	MinZoom, MaxZoom               uint8
	// Bounds are west, south, east, north in degrees.
	Bounds     [4]float64
	CenterZoom uint8
	// Center is longitude, latitude in degrees.
	Center [2]float64
}

// ParseHeader reads a v3 header: an error says what is wrong with it.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("pmtiles: %d bytes, shorter than a header (%d)", len(b), HeaderLen)
	}
	if string(b[:7]) != "PMTiles" {
		return Header{}, errors.New("pmtiles: not a PMTiles archive (no \"PMTiles\" magic)")
	}
	if b[7] != 3 {
		return Header{}, fmt.Errorf("pmtiles: version %d; only version 3 is read", b[7])
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
	deg := func(i int) float64 { return float64(int32(binary.LittleEndian.Uint32(b[i:]))) / 1e7 }
	h := Header{
		RootOffset: u(8), RootLength: u(16), MetadataOffset: u(24), MetadataLength: u(32),
		LeafOffset: u(40), LeafLength: u(48), DataOffset: u(56), DataLength: u(64),
		AddressedTiles: u(72), TileEntries: u(80), TileContents: u(88),
		Clustered: b[96] == 1, InternalCompression: Compression(b[97]), TileCompression: Compression(b[98]),
		TileType: TileType(b[99]), MinZoom: b[100], MaxZoom: b[101],
		Bounds:     [4]float64{deg(102), deg(106), deg(110), deg(114)},
		CenterZoom: b[118], Center: [2]float64{deg(119), deg(123)},
	}
	if h.MinZoom > h.MaxZoom || h.MaxZoom > 30 {
		return Header{}, fmt.Errorf("pmtiles: zooms %d-%d out of order or past 30", h.MinZoom, h.MaxZoom)
	}
	return h, nil
}

func (h Header) bytes() []byte {
	b := make([]byte, HeaderLen)
	copy(b, "PMTiles")
	b[7] = 3
	for i, v := range []uint64{h.RootOffset, h.RootLength, h.MetadataOffset, h.MetadataLength, h.LeafOffset, h.LeafLength,
		h.DataOffset, h.DataLength, h.AddressedTiles, h.TileEntries, h.TileContents} {
		binary.LittleEndian.PutUint64(b[8+8*i:], v)
	}
	if h.Clustered {
		b[96] = 1
	}
	b[97], b[98], b[99], b[100], b[101] = byte(h.InternalCompression), byte(h.TileCompression), byte(h.TileType), h.MinZoom, h.MaxZoom
	e7 := func(i int, d float64) { binary.LittleEndian.PutUint32(b[i:], uint32(int32(d*1e7))) }
	e7(102, h.Bounds[0])
	e7(106, h.Bounds[1])
	e7(110, h.Bounds[2])
	e7(114, h.Bounds[3])
	b[118] = h.CenterZoom
	e7(119, h.Center[0])
	e7(123, h.Center[1])
	return b
}

// TileID is the tile's position on the archive's Hilbert curve: the tiles
// of every lower zoom first, then the curve over zoom z.
func TileID(z uint8, x, y uint32) uint64 {
	id := (uint64(1)<<(2*uint64(z)) - 1) / 3
	n := uint32(1) << z
	var d uint64
	for s := n / 2; s > 0; s /= 2 {
		var rx, ry uint32
		if x&s != 0 {
			rx = 1
		}
		if y&s != 0 {
			ry = 1
		}
		d += uint64(s) * uint64(s) * uint64((3*rx)^ry)
		// Rotate the quadrant so the curve's next level is read alike.
		if ry == 0 {
			if rx == 1 {
				x = s - 1 - x%s
				y = s - 1 - y%s
			}
			x, y = y, x
		}
	}
	return id + d
}

// Tile is one tile to write: its coordinates and its bytes, already
// compressed as the archive's TileCompression says.
type Tile struct {
	Z    uint8
	X, Y uint32
	Data []byte
}

// Archive is what Write writes.
type Archive struct {
	TileType        TileType
	TileCompression Compression
	// Bounds are west, south, east, north; Center is lon, lat.
	Bounds     [4]float64
	Center     [2]float64
	CenterZoom uint8
	// Metadata is the archive's JSON metadata (name, attribution,
	// vector_layers...).
	Metadata map[string]any
	Tiles    []Tile
}

type entry struct {
	id, offset uint64
	length     uint32
}

// Write writes a to w: tiles in id order, identical tiles stored once,
// directories and metadata gzipped.
func Write(w io.Writer, a Archive) error {
	if len(a.Tiles) == 0 {
		return errors.New("pmtiles: no tiles")
	}
	tiles := slices.Clone(a.Tiles)
	slices.SortFunc(tiles, func(p, q Tile) int {
		return cmpU64(TileID(p.Z, p.X, p.Y), TileID(q.Z, q.X, q.Y))
	})
	var data bytes.Buffer
	seen := map[string]uint64{}
	entries := make([]entry, 0, len(tiles))
	minZ, maxZ := tiles[0].Z, tiles[0].Z
	for i, t := range tiles {
		id := TileID(t.Z, t.X, t.Y)
		if i > 0 && id == entries[len(entries)-1].id {
			return fmt.Errorf("pmtiles: tile %d/%d/%d twice", t.Z, t.X, t.Y)
		}
		off, ok := seen[string(t.Data)]
		if !ok {
			off = uint64(data.Len())
			seen[string(t.Data)] = off
			data.Write(t.Data)
		}
		entries = append(entries, entry{id: id, offset: off, length: uint32(len(t.Data))})
		minZ, maxZ = min(minZ, t.Z), max(maxZ, t.Z)
	}
	root, err := gz(directory(entries))
	if err != nil {
		return err
	}
	if HeaderLen+len(root) > rootMax {
		return fmt.Errorf("pmtiles: %d tiles make a root directory of %d bytes, past the %d this writer (no leaf directories) allows",
			len(entries), len(root), rootMax-HeaderLen)
	}
	meta, err := json.Marshal(a.Metadata)
	if err != nil {
		return fmt.Errorf("pmtiles metadata: %w", err)
	}
	if meta, err = gz(meta); err != nil {
		return err
	}
	h := Header{
		RootOffset: HeaderLen, RootLength: uint64(len(root)),
		MetadataOffset: HeaderLen + uint64(len(root)), MetadataLength: uint64(len(meta)),
		AddressedTiles: uint64(len(entries)), TileEntries: uint64(len(entries)), TileContents: uint64(len(seen)),
		Clustered: len(seen) == len(entries), InternalCompression: CompressionGzip, TileCompression: a.TileCompression,
		TileType: a.TileType, MinZoom: minZ, MaxZoom: maxZ, Bounds: a.Bounds, CenterZoom: a.CenterZoom, Center: a.Center,
	}
	h.LeafOffset = h.MetadataOffset + h.MetadataLength
	h.DataOffset = h.LeafOffset
	h.DataLength = uint64(data.Len())
	for _, b := range [][]byte{h.bytes(), root, meta, data.Bytes()} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("pmtiles: %w", err)
		}
	}
	return nil
}

// directory is the v3 encoding of entries (run length 1 each): their
// count, then the id deltas, run lengths, lengths and offsets as columns
// of varints, an offset 0 meaning "right after the previous tile".
func directory(es []entry) []byte {
	b := binary.AppendUvarint(nil, uint64(len(es)))
	var last uint64
	for _, e := range es {
		b = binary.AppendUvarint(b, e.id-last)
		last = e.id
	}
	for range es {
		b = binary.AppendUvarint(b, 1)
	}
	for _, e := range es {
		b = binary.AppendUvarint(b, uint64(e.length))
	}
	for i, e := range es {
		if i > 0 && e.offset == es[i-1].offset+uint64(es[i-1].length) {
			b = binary.AppendUvarint(b, 0)
		} else {
			b = binary.AppendUvarint(b, e.offset+1)
		}
	}
	return b
}

// Gzip compresses b as the archives here store tiles and directories.
func Gzip(b []byte) ([]byte, error) { return gz(b) }

func gz(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("pmtiles gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("pmtiles gzip: %w", err)
	}
	return buf.Bytes(), nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
