package alerterd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayZoneSummary: replay said nothing of the zones it ran over; it
// now logs the load summary and each warning on stderr, refuses a file
// that leaves no zone unless --allow-empty-zones, and takes the zone
// options of serve.
func TestReplayZoneSummary(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "telemetry.ndjson")
	rec := `{"drone_id":"A","seq":1,"ts":"2026-12-02T10:00:00Z","lat":46,"lon":7,"alt_m":460,"agl_m":60}` + "\n"
	if err := os.WriteFile(in, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noRef := write("noref.json", `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","geometry":[{"uomDimensions":"M","lowerLimit":0,"lowerVerticalReference":"AGL",`+
		`"upperLimit":120,"horizontalProjection":{"type":"Circle","center":[7,46],"radius":500}}]}]}`)
	empty := write("empty.geojson", `{"type":"FeatureCollection","features":[]}`)
	unknown := write("unknown.geojson", `{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[7,46]},"properties":{"id":"C","radius_m":500,"ceilng_m":120}}]}`)
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
		events int
	}{
		{"summary", []string{"--zones", zonesPath()}, 0, []string{`"msg":"zones loaded"`, `"zones":7`, `"summary":"` + zonesPath() + ` (geojson): 7 zones loaded, 0 dropped, `}, 0},
		{"missing reference refused", []string{"--zones", noRef}, 1, []string{noRef + `: feature 1 (id "Z1"): geometry[0].upperVerticalReference: required`}, 0},
		{"missing reference, conservative", []string{"--zones", noRef, "--conservative-zones"}, 0, []string{`"field":"geometry[0].upperVerticalReference"`, "read conservatively"}, 1},
		{"no zones refused", []string{"--zones", empty}, 1, []string{"0 zones loaded", "--allow-empty-zones"}, 0},
		{"no zones allowed", []string{"--zones", empty, "--allow-empty-zones"}, 0, []string{"none: nothing raises an alarm", `"zones":0`}, 0},
		{"unknown property warned", []string{"--zones", unknown}, 0, []string{`"field":"properties.ceilng_m"`, "unknown property"}, 1},
		{"unknown property strict", []string{"--zones", unknown, "--strict-zones"}, 1, []string{`properties.ceilng_m: unknown property`}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"replay", "--input", in}, c.args...)
			code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr.String())
			}
			for _, s := range c.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not say %s:\n%s", s, stderr.String())
				}
			}
			if n := len(splitLines(stdout.Bytes())); n != c.events {
				t.Errorf("%d events, want %d:\n%s", n, c.events, stdout.String())
			}
		})
	}
}
