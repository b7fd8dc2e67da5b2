package alerts_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestEngineEqualsReferenceOnTheClock: the scenario — duplicates, stale
// re-sends, wild seqs, counter restarts, silent drones, the TIME zone's
// window opening and closing — on six partitions, each with its own log
// clock (the records' receive times) and ticks every second; the engines'
// events equal the independent reference's, signal_lost, signal_regained
// and the clock's raises and clears included, in batches of several sizes.
func TestEngineEqualsReferenceOnTheClock(t *testing.T) {
	const partitions = 6
	path := filepath.Join("..", scenario.ZonesFile)
	set, err := geofence.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	refZones, err := reference.LoadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := scenario.Generate(scenario.DefaultConfig())
	// The partitions' logs: the scenario's records in order, and a tick on
	// every partition at each whole second between them.
	logs := make([][]alerts.Record, partitions)
	var refRecs []reference.Rec
	lastTick := time.Time{}
	for i, p := range sc.Records {
		at := sc.Received[i]
		for tk := lastTick.Add(time.Second).Truncate(time.Second); !lastTick.IsZero() && !tk.After(at); tk = tk.Add(time.Second) {
			v := (&telemetry.Tick{At: tk}).AppendJSON(nil)
			for q := range logs {
				logs[q] = append(logs[q], alerts.Record{Offset: int64(len(logs[q])), Time: tk, Value: v})
			}
			refRecs = append(refRecs, reference.Rec{At: tk, Tick: true, Partition: -1})
		}
		if lastTick.IsZero() || at.After(lastTick) {
			lastTick = at.Truncate(time.Second)
		}
		q := reference.PartitionOf(p.DroneID, partitions)
		logs[q] = append(logs[q], alerts.Record{Offset: int64(len(logs[q])), Time: at, Value: p.AppendJSON(nil)})
		refRecs = append(refRecs, reference.Rec{Pos: p, At: at})
	}
	want := reference.Run(reference.Input{Sets: [][]reference.Zone{refZones}, Recs: refRecs, Partitions: partitions})
	counts := map[string]int{}
	for _, e := range want {
		counts[e.Type]++
	}
	if counts["signal_lost"] < 10 || counts["signal_regained"] < 10 {
		t.Fatalf("the scenario loses too few signals to prove anything: %v", counts)
	}
	t.Logf("reference: %v", counts)
	for _, batch := range []int{1, 50, 1000} {
		var got []reference.Event
		for q, recs := range logs {
			e, err := alerts.NewEngine(q, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
			if err != nil {
				t.Fatal(err)
			}
			for from := 0; from < len(recs); from += batch {
				out := e.Apply(ix, recs[from:min(from+batch, len(recs))])
				if out == nil {
					continue
				}
				for _, ev := range out.Events {
					parsed, err := reference.ParseEvents([][]byte{ev.AppendJSON(nil)})
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, parsed...)
				}
			}
		}
		d, err := reference.Compare(want, got)
		if err != nil {
			t.Fatal(err)
		}
		if !d.OK() {
			t.Errorf("batch %d: %v", batch, d)
		} else if batch == 1 {
			t.Logf("batch %d: %v", batch, d)
		}
	}
}
