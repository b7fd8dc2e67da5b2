package benchcompare

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The --json output's shape is what internal/benchcharts and the
// transcribed benchmarks/benchcompare-*.json rely on: field names, units
// in them, own and other processes apart, an unmeasured process absent.
func TestReportJSON(t *testing.T) {
	cpu := func(ms ...int) (c [nProcs]time.Duration) {
		for i := range c {
			c[i] = -1
		}
		for i, v := range ms {
			c[i] = time.Duration(v) * time.Millisecond
		}
		return c
	}
	nofly := Row{Side: "nofly", Round: 1, Records: 1000, Wall: 2 * time.Second,
		CPU:  cpu(3, 4, 5, 1, -1, 2), // ingest alerter kafka redis (tile38 not measured) client
		Diff: Diff{Events: 10, Reference: 10}}
	tile := Row{Side: "tile38", Round: 1, Records: 1000, Wall: time.Second,
		CPU:        cpu(0, 0, 1, 0, 9, 2),
		Diff:       Diff{Events: 12, Reference: 10, Missing: 1, Extra: 3, ExtraRaised: 2, ExtraCleared: 1},
		StaleBlind: Diff{Events: 12, Reference: 12}}
	cfg := Config{Tile38: "127.0.0.1:9851", Partitions: 12, Drones: 320, Positions: 500, Seed: 1, Clients: 8, Batch: 500, Rounds: 1}
	var b bytes.Buffer
	if err := NewReport(cfg, "go run ./cmd/benchcompare --rounds 1", "1.00 2.00 3.00", "4.00 5.00 6.00", []Row{nofly, tile}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}

	// Strict decoding: every field the command writes is in Report.
	dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
	dec.DisallowUnknownFields()
	var got Report
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode: %v\n%s", err, b.String())
	}
	if got.Source != "" || strings.Contains(b.String(), `"source"`) {
		t.Errorf("a run of the command has a source: %q", got.Source)
	}
	if got.Command != "go run ./cmd/benchcompare --rounds 1" || got.Config.Drones != 320 || got.Config.Tile38 != "127.0.0.1:9851" ||
		got.Machine.LoadStart != "1.00 2.00 3.00" || got.Machine.LoadEnd != "4.00 5.00 6.00" || got.Machine.CPUs < 1 {
		t.Errorf("header: %+v", got)
	}
	for _, tc := range []struct {
		name                  string
		row                   ReportRow
		perSecond, total      float64
		own, other            map[string]float64
		delivered, staleExtra int
	}{
		{"nofly", got.Rows[0], 500, 13,
			map[string]float64{"ingest": 3, "alerter": 4, "kafka": 5, "redis": 1}, map[string]float64{"client": 2}, 10, 0},
		{"tile38", got.Rows[1], 1000, 9,
			map[string]float64{"tile38": 9}, map[string]float64{"ingest": 0, "alerter": 0, "kafka": 1, "redis": 0, "client": 2}, 12, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.row
			if r.Side != tc.name || r.Round != 1 || r.Positions != 1000 || r.PositionsPerSecond != tc.perSecond || r.CPUTotal != tc.total {
				t.Errorf("row %+v", r)
			}
			if !reflect.DeepEqual(r.CPUOwn, tc.own) || !reflect.DeepEqual(r.CPUOther, tc.other) {
				t.Errorf("cpu own %v other %v; want %v, %v", r.CPUOwn, r.CPUOther, tc.own, tc.other)
			}
			if r.Events == nil || r.Events.Delivered != tc.delivered || r.Events.StaleBlind.Extra != tc.staleExtra {
				t.Errorf("events %+v", r.Events)
			}
		})
	}
	if e := got.Rows[1].Events; e.Missing != 1 || e.Extra != 3 || e.ExtraRaised != 2 || e.ExtraCleared != 1 {
		t.Errorf("tile38 events %+v", e)
	}

	// The keys themselves, as benchcharts and the transcriptions spell them.
	var raw map[string]any
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	row := raw["rows"].([]any)[0].(map[string]any)
	for _, k := range []string{"round", "side", "positions", "wall_s", "positions_per_s", "cpu_us_per_position",
		"other_cpu_us_per_position", "total_cpu_us_per_position", "events"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row has no %q: %v", k, row)
		}
	}
	if _, ok := row["cpu_us_per_position"].(map[string]any)["tile38"]; ok {
		t.Error("an unmeasured process is in the row")
	}
}
