// Command gen writes docs/configuration.md from the commands' -h output
// (package configref). Run from anywhere inside the repository:
//
//	go run ./internal/configref/gen            # rewrite docs/configuration.md
//	go run ./internal/configref/gen -check     # exit 1 if it is stale
//	go run ./internal/configref/gen -o -       # print it
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nofly-dev/nofly/internal/configref"
)

func main() {
	out := flag.String("o", "", "file to write, - for stdout (default: docs/configuration.md of the module root)")
	check := flag.Bool("check", false, "write nothing; exit 1 if the file differs from what would be generated")
	flag.Parse()
	if err := run(*out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "configref:", err)
		os.Exit(1)
	}
}

func run(out string, check bool) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := configref.Root(wd)
	if err != nil {
		return err
	}
	doc, err := configref.Generate(context.Background(), configref.Options{Root: root})
	if err != nil {
		return err
	}
	switch {
	case out == "-":
		_, err = os.Stdout.Write(doc)
		return err
	case out == "":
		out = filepath.Join(root, configref.DocPath)
	}
	if check {
		have, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !bytes.Equal(have, doc) {
			return fmt.Errorf("%s is stale: run %s", out, configref.Regenerate)
		}
		return nil
	}
	return os.WriteFile(out, doc, 0o644)
}
