package alerterd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence/zonestore"
)

// TestReplayZoneHistoryErrors: replay with a zone history refuses what it
// cannot reproduce, saying why: no partition, a partition beyond the topic,
// a switch to a version the history no longer holds, records before the
// first switch without --zones.
func TestReplayZoneHistoryErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "p0.ndjson")
	if err := os.WriteFile(in, []byte(`{"drone_id":"A","seq":1,"ts":"2026-12-02T10:00:00Z","lat":51.47,"lon":-0.47}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zones, err := os.ReadFile(zonesPath())
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _, err := DefaultConfig().zoneValidator().Normalize(zones)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, sw map[string][]zonestore.Switch) string {
		h := zonestore.History{Topic: "t", Partitions: 2, Current: 2, Switches: sw,
			Versions: []zonestore.Entry{{Version: 2, At: time.Now(), By: "test", Format: "geojson", Zones: doc}}}
		b, _ := json.Marshal(h)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", map[string][]zonestore.Switch{"0": {{Version: 2, AfterOffset: -1}}, "1": {}})
	trimmed := write("trimmed.json", map[string][]zonestore.Switch{"0": {{Version: 1, AfterOffset: -1}, {Version: 2, AfterOffset: 10}}})
	late := write("late.json", map[string][]zonestore.Switch{"0": {{Version: 2, AfterOffset: 10}}})
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"good", []string{"--zone-history", good, "--partition", "0"}, 0, `"msg":"zone history","partition":0,"switches":1`},
		{"no partition", []string{"--zone-history", good}, 2, "--zone-history needs --partition"},
		{"partition beyond the topic", []string{"--zone-history", good, "--partition", "2"}, 2, "has 2 partitions"},
		{"no switch without --zones", []string{"--zone-history", good, "--partition", "1"}, 1, "partition 1 has no zone switch"},
		{"no switch, --zones", []string{"--zone-history", good, "--partition", "1", "--zones", zonesPath()}, 0, "zones loaded"},
		{"version trimmed", []string{"--zone-history", trimmed, "--partition", "0"}, 1, "zone version 1 after offset -1, which the history no longer holds"},
		{"records before the first switch", []string{"--zone-history", late, "--partition", "0"}, 1, "up to offset 10 were evaluated before its first zone switch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"replay", "--input", in}, c.args...), func(string) string { return "" }, &stdout, &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, want %d saying %s:\n%s", code, c.code, c.want, stderr.String())
			}
		})
	}
}
