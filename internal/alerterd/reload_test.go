package alerterd

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/geofence"
)

// TestReloadZones: a good file replaces the zones in use; a bad one, or
// one that leaves no zone (unless allowed), keeps them; each is counted and
// logged, warnings included.
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
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	noRestriction := `{"features":[{"identifier":"N","restriction":"NO_RESTRICTION","geometry":[{"uomDimensions":"M","lowerLimit":0,"lowerVerticalReference":"AGL",` +
		`"upperLimit":120,"upperVerticalReference":"AGL","horizontalProjection":{"type":"Circle","center":[7,46],"radius":500}}]}]}`
	steps := []struct {
		name       string
		content    string
		allowEmpty bool
		want       string // a zone id that must be in the set in use
		gone       string // one that must not
		log        string // what the log must say
	}{
		{"removed and renamed", strings.Replace(string(orig), `"id":"POLY"`, `"id":"POLY2"`, 1), false, "POLY2", "POLY", "zones reloaded"},
		{"bad file keeps the zones", `{"type":"FeatureCollection","features":[{"type":"Feature"}]}`, false, "POLY2", "POLY", "zone reload failed"},
		{"empty file keeps the zones", `{"type":"FeatureCollection","features":[]}`, false, "POLY2", "POLY", "no zone loaded"},
		{"only NO_RESTRICTION keeps the zones", noRestriction, false, "POLY2", "POLY", "1 dropped (NO_RESTRICTION 1)"},
		{"warnings are logged", strings.Replace(string(orig), `"id":"POLY"`, `"id":"POLY","colour":"red"`, 1), false, "POLY", "POLY2", "properties.colour"},
		{"empty file allowed", `{"type":"FeatureCollection","features":[]}`, true, "", "POLY", "none: nothing raises an alarm"},
		{"back", string(orig), false, "POLY", "POLY2", "zones reloaded"},
	}
	for _, st := range steps {
		write(st.content)
		logs.Reset()
		reloadZones(zoneSource{path: path, allowEmpty: st.allowEmpty}, &cur, m, log)
		if _, ok := cur.Load().Zone(st.want); st.want != "" && !ok {
			t.Errorf("%s: zone %s not in use", st.name, st.want)
		}
		if _, ok := cur.Load().Zone(st.gone); ok {
			t.Errorf("%s: zone %s still in use", st.name, st.gone)
		}
		if !strings.Contains(logs.String(), st.log) {
			t.Errorf("%s: log does not say %q:\n%s", st.name, st.log, logs.String())
		}
	}
}

// TestServeRefusesNoZones: the alerter does not start on a zone file that
// leaves no zone (nothing would alarm, and nothing would say so) unless
// --allow-empty-zones.
func TestServeRefusesNoZones(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.geojson")
	if err := os.WriteFile(path, []byte(`{"type":"FeatureCollection","features":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Zones = path
	cfg.RedisAddr = "127.0.0.1:1" // never reached: the zones are refused first
	err := serve(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err == nil || !strings.Contains(err.Error(), path+" (geojson): 0 zones loaded") || !strings.Contains(err.Error(), "--allow-empty-zones") {
		t.Fatalf("serve: %v", err)
	}
	cfg.AllowEmptyZones = true
	if _, _, err := cfg.zoneSource().load(); err != nil {
		t.Errorf("allowed: %v", err)
	}
}
