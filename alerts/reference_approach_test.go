package alerts_test

import (
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
)

// TestEngineEqualsReferenceApproaching: the clock scenario — duplicates,
// stale re-sends, counter restarts, silent drones — on six partitions
// with approaching warnings on (a horizon per category, a buffer): the
// engines' approaching and approach_ended events, beside every other,
// equal the independent reference's, in batches of several sizes (each
// engine rebuilt from its committed state between batches, so the
// velocity and the episodes are proven to live in the state).
func TestEngineEqualsReferenceApproaching(t *testing.T) {
	const partitions = 6
	_, ix, refZones := scenarioZones(t)
	before := map[string]time.Duration{"restricted": 30 * time.Second, "*": 20 * time.Second}
	const buffer = 50.0
	sc := scenario.Generate(scenario.DefaultConfig())
	logs, refRecs, _ := clockLogs(sc, partitions, -1)
	want := reference.Run(reference.Input{Sets: [][]reference.Zone{refZones}, Recs: refRecs, Partitions: partitions,
		Approach: reference.ApproachSettings{Before: before, BufferM: buffer}})
	counts := map[string]int{}
	for _, e := range want {
		counts[e.Type+"/"+e.Reason]++
	}
	if counts["approaching/"] < 20 || counts["approach_ended/turned_away"] < 3 {
		t.Fatalf("the scenario approaches too little to prove anything: %v", counts)
	}
	t.Logf("reference: %v", counts)
	for _, batch := range []int{3, 50, 1000} {
		var got []reference.Event
		for q, recs := range logs {
			st := dedup.NewMemory(0)
			for from := 0; from < len(recs); from += batch {
				snap, err := st.Load(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				if from == 0 {
					snap.ZoneVersion = alerts.NoZoneVersion
				}
				e, err := alerts.NewEngine(q, snap)
				if err != nil {
					t.Fatal(err)
				}
				e.SetApproach(alerts.ApproachSettings{Before: before, BufferM: buffer})
				out := e.Apply(ix, plain(recs[from:min(from+batch, len(recs))]))
				if out == nil {
					continue
				}
				if _, err := st.Commit(t.Context(), q, out.Expected, out.Batch); err != nil {
					t.Fatal(err)
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
		} else if batch == 3 {
			t.Logf("batch %d: %v", batch, d)
		}
	}
}
