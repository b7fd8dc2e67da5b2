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
	_, ix, refZones := scenarioZones(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	logs, refRecs, _ := clockLogs(sc, partitions, -1)
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
				out := e.Apply(ix, plain(recs[from:min(from+batch, len(recs))]))
				if out == nil {
					continue
				}
				got = append(got, asReference(t, out.Events)...)
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

// indexed is a partition's record and its index in the reference's
// records: where a set switch at a reference index falls in a partition.
type indexed struct {
	r   alerts.Record
	idx int
}

func plain(rs []indexed) []alerts.Record {
	out := make([]alerts.Record, len(rs))
	for i := range rs {
		out[i] = rs[i].r
	}
	return out
}

// clockLogs lays the scenario's records out as the partitions' logs, with
// a tick on every partition at each whole second between them, and as the
// reference's records; the second result's index of the scenario's record
// at mark is returned too (-1 when mark < 0).
func clockLogs(sc *scenario.Scenario, partitions, mark int) ([][]indexed, []reference.Rec, int) {
	logs := make([][]indexed, partitions)
	var refRecs []reference.Rec
	at := -1
	lastTick := time.Time{}
	for i, p := range sc.Records {
		if i == mark {
			at = len(refRecs)
		}
		rx := sc.Received[i]
		for tk := lastTick.Add(time.Second).Truncate(time.Second); !lastTick.IsZero() && !tk.After(rx); tk = tk.Add(time.Second) {
			v := (&telemetry.Tick{At: tk}).AppendJSON(nil)
			for q := range logs {
				logs[q] = append(logs[q], indexed{alerts.Record{Offset: int64(len(logs[q])), Time: tk, Value: v}, len(refRecs)})
			}
			refRecs = append(refRecs, reference.Rec{At: tk, Tick: true, Partition: -1})
		}
		if lastTick.IsZero() || rx.After(lastTick) {
			lastTick = rx.Truncate(time.Second)
		}
		q := reference.PartitionOf(p.DroneID, partitions)
		logs[q] = append(logs[q], indexed{alerts.Record{Offset: int64(len(logs[q])), Time: rx, Value: p.AppendJSON(nil)}, len(refRecs)})
		refRecs = append(refRecs, reference.Rec{Pos: p, At: rx})
	}
	return logs, refRecs, at
}

// scenarioZones loads the scenario's zone file for the engine (the set and
// its index) and for the reference, by its own loader.
func scenarioZones(t *testing.T) (*geofence.ZoneSet, *geofence.Index, []reference.Zone) {
	t.Helper()
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
	return set, ix, refZones
}

// asReference is the engine's events as the reference compares them,
// through their JSON.
func asReference(t *testing.T, evs []alerts.Event) []reference.Event {
	t.Helper()
	out := make([]reference.Event, 0, len(evs))
	for i := range evs {
		parsed, err := reference.ParseEvents([][]byte{evs[i].AppendJSON(nil)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parsed...)
	}
	return out
}
