package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nofly-dev/nofly/internal/pmtiles"
)

// TestCommittedArchive: the defaults make testdata/basemap/ilg.pmtiles
// byte for byte from the extract in the module cache, so the committed
// map is what the code makes.
func TestCommittedArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ilg.pmtiles")
	if err := run(context.Background(), []string{"--out", out}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../testdata/basemap/ilg.pmtiles")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("made %d bytes, testdata/basemap/ilg.pmtiles has %d: regenerate it (go run ./cmd/basemap) and its README", len(got), len(want))
	}
	h, err := pmtiles.ParseHeader(got)
	if err != nil {
		t.Fatal(err)
	}
	if h.TileType != pmtiles.TileMVT || h.MinZoom != 10 || h.MaxZoom != 15 || h.AddressedTiles < 200 {
		t.Errorf("header %+v", h)
	}
}

func TestFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--bbox", "1,2,3"}, {"--bbox", "3,2,1,4"}, {"--max-zoom", "17"}, {"--min-zoom", "12", "--max-zoom", "11"},
	} {
		if err := run(context.Background(), args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
