package alerterd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// writeZones writes the scenario's zones, minus the ids in drop and with
// edit applied to each feature's text, as a FeatureCollection.
func writeZones(t *testing.T, path string, drop string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(zonesPath())
	if err != nil {
		t.Fatal(err)
	}
	var fc struct {
		Features []json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(b, &fc); err != nil {
		t.Fatal(err)
	}
	var keep []json.RawMessage
	for _, f := range fc.Features {
		if drop != "" && strings.Contains(string(f), `"id":"`+drop+`"`) {
			continue
		}
		keep = append(keep, json.RawMessage(edit(string(f))))
	}
	out, err := json.Marshal(map[string]any{"type": "FeatureCollection", "features": keep})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestZoneReloadProof: the alerter (a subprocess) reloads its zone file on
// SIGHUP halfway through the scenario — POLY removed, CIRC's radius changed
// — and the outbox equals the reference computed with the switch: alarms of
// POLY and CIRC clear at their drone's next position (zone_removed,
// zone_changed), CIRC raises again where the new circle holds the drone.
func TestZoneReloadProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.geojson"), filepath.Join(dir, "after.geojson")
	same := func(s string) string { return s }
	writeZones(t, before, "", same)
	writeZones(t, after, "POLY", func(s string) string { return strings.Replace(s, `"radius_m":1500`, `"radius_m":1200`, 1) })
	live := filepath.Join(dir, "zones.geojson")
	writeZones(t, live, "", same)

	sc := scenario.Generate(scenario.DefaultConfig())
	half := len(sc.Records) / 2
	want := referenceReloadedAt([][]refZone{loadRefZones(t, before), loadRefZones(t, after)}, []int{half}, sc, 6)
	p := newPipeline(t, brokers, raddr, 6)
	cfg := p.config()
	cfg.Zones = live
	alerterBinary(t)
	a := p.startProc("alerter", cfg)
	p.produceAt(sc.Records[:half], sc.Received[:half])
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)

	if err := os.Rename(after, live); err != nil {
		t.Fatal(err)
	}
	a.signal(syscall.SIGHUP)
	testenv.CheckFor(t, 30*time.Second, func() error {
		n, err := a.metric(`nofly_alerter_zone_reloads_total{result="ok"}`)
		if err == nil && n < 1 {
			err = fmt.Errorf("%v reloads", n)
		}
		return err
	})
	p.produceAt(sc.Records[half:], sc.Received[half:])
	p.finish(want, closed())
	a.stop()

	reasons := map[string]int{}
	for _, b := range p.outbox() {
		var e struct {
			ZoneID string `json:"zone_id"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Reason == "zone_removed" || e.Reason == "zone_changed" {
			reasons[e.ZoneID+" "+e.Reason]++
		}
	}
	if reasons["POLY zone_removed"] == 0 || reasons["CIRC zone_changed"] == 0 || len(reasons) != 2 {
		t.Errorf("reload clears: %v, want POLY zone_removed and CIRC zone_changed only", reasons)
	}
	t.Logf("reload clears: %v", reasons)
}
