package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/geofence"
)

// TestReloadZones: a good file replaces the zones in use, a bad one keeps
// them; both are counted.
func TestReloadZones(t *testing.T) {
	orig, err := os.ReadFile(zonesPath())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "zones.geojson")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(string(orig))
	ix, err := loadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	var cur geofence.Current
	cur.Store(ix)
	m := newMetrics()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	steps := []struct {
		name    string
		content string
		want    string // a zone id that must be in the set in use
		gone    string // one that must not
	}{
		{"removed and renamed", strings.Replace(string(orig), `"id":"POLY"`, `"id":"POLY2"`, 1), "POLY2", "POLY"},
		{"bad file keeps the zones", `{"type":"FeatureCollection","features":[{"type":"Feature"}]}`, "POLY2", "POLY"},
		{"back", string(orig), "POLY", "POLY2"},
	}
	for _, st := range steps {
		write(st.content)
		reloadZones(path, &cur, m, log)
		if _, ok := cur.Load().Zone(st.want); !ok {
			t.Errorf("%s: zone %s not in use", st.name, st.want)
		}
		if _, ok := cur.Load().Zone(st.gone); ok {
			t.Errorf("%s: zone %s still in use", st.name, st.gone)
		}
	}
}
