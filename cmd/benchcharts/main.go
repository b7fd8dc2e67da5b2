// Command benchcharts draws BENCHMARKS.md's charts from the JSON beside
// them (internal/benchcharts): it reads benchmarks/*.json and writes
// benchmarks/*.svg, the same bytes for the same JSON. Run it from the
// repository root after adding or replacing a JSON file:
//
//	go run ./cmd/benchcharts            # write the SVGs
//	go run ./cmd/benchcharts --check    # only say which SVGs are stale (exit 1)
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nofly-dev/nofly/internal/benchcharts"
)

func main() {
	dir := flag.String("dir", "benchmarks", "directory of the JSON inputs and the SVG outputs")
	check := flag.Bool("check", false, "write nothing; exit 1 if an SVG differs from what the JSON gives")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "benchcharts: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	stale, err := run(*dir, *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcharts:", err)
		os.Exit(1)
	}
	if *check && len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "benchcharts: stale: %v; run go run ./cmd/benchcharts\n", stale)
		os.Exit(1)
	}
}

// run renders every chart and writes those that changed (none with
// check); it returns the names that differed.
func run(dir string, check bool) ([]string, error) {
	outs, err := benchcharts.Generate(dir)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, o := range outs {
		path := filepath.Join(dir, o.Name)
		old, err := os.ReadFile(path)
		if err == nil && bytes.Equal(old, o.SVG) {
			continue
		}
		stale = append(stale, o.Name)
		if check {
			continue
		}
		if err := os.WriteFile(path, o.SVG, 0o644); err != nil {
			return stale, fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Println("wrote", path)
	}
	return stale, nil
}
