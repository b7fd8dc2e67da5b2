package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nofly-dev/nofly/internal/benchcharts"
)

// --check writes nothing and names what is stale; a run writes exactly
// that, after which --check finds nothing.
func TestRunAndCheck(t *testing.T) {
	dir := t.TempDir()
	jsons, err := filepath.Glob(filepath.Join("..", "..", "benchmarks", "*.json"))
	if err != nil || len(jsons) == 0 {
		t.Fatalf("no committed JSON: %v", err)
	}
	for _, p := range jsons {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	every := len(benchcharts.Charts)
	for _, step := range []struct {
		name            string
		check           bool
		stale, svgFiles int
	}{
		{"check on no SVG", true, every, 0},
		{"write", false, every, every},
		{"check after writing", true, 0, every},
		{"write again", false, 0, every},
	} {
		stale, err := run(dir, step.check)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		svgs, _ := filepath.Glob(filepath.Join(dir, "*.svg"))
		if len(stale) != step.stale || len(svgs) != step.svgFiles {
			t.Errorf("%s: stale %v, %d SVG files; want %d stale, %d files", step.name, stale, len(svgs), step.stale, step.svgFiles)
		}
	}
	// A changed SVG is found stale and rewritten.
	if err := os.WriteFile(filepath.Join(dir, "scale.svg"), []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stale, err := run(dir, true); err != nil || !slices.Equal(stale, []string{"scale.svg"}) {
		t.Errorf("after an edit: stale %v, %v; want [scale.svg]", stale, err)
	}
	// A missing input is an error, not an empty chart.
	if err := os.Remove(filepath.Join(dir, "redis.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(dir, true); err == nil {
		t.Error("no error without redis.json")
	}
}
