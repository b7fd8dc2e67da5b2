package approachreport

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/geofence"
)

// TestFleetApproaches holds the warnings on a small fleet (GNSS noise on)
// to what BENCHMARKS.md reports on the large one: every real approach
// warned, at most 1.05 warning episodes per real approach, none for the
// drones that never enter, and the median lead time near the horizon —
// with the reported velocity and with the velocity derived from the noisy
// positions alone.
func TestFleetApproaches(t *testing.T) {
	set, err := geofence.LoadFile(filepath.Join("..", "..", "testdata", "zones", "airports.geojson"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	for _, derived := range []bool{false, true} {
		r, err := Measure(context.Background(), Options{Drones: 150, Duration: 40 * time.Minute, Seed: 5, Derived: derived,
			Approach: alerts.ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}, BufferM: 50}, Zones: ix})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("derived %v: %d entries, %d warned, %.3f episodes per approach, lead median %.0f s p10 %.0f s, false: %d clear, %d stray",
			derived, r.Entries, r.Warned, r.EpisodesPerApproach(), r.LeadMedian, r.LeadP10, r.FalseClear, r.FalseStray)
		switch {
		case r.Entries < 50:
			t.Errorf("derived %v: %d real approaches: too few to say anything", derived, r.Entries)
		case r.Missed > 0:
			t.Errorf("derived %v: %d of %d entries not warned (%d vertical, %d clock, %d other)", derived, r.Missed, r.Entries, r.MissedVertical, r.MissedClock, r.MissedOther)
		case r.EpisodesPerApproach() > 1.05:
			t.Errorf("derived %v: %.3f episodes per real approach, want at most 1.05", derived, r.EpisodesPerApproach())
		case r.FalseClear > 0:
			t.Errorf("derived %v: %d warnings for drones that never enter a zone", derived, r.FalseClear)
		case r.LeadMedian < 20 || r.LeadP10 < 10:
			t.Errorf("derived %v: lead time median %.0f s, p10 %.0f s: warned too late for a 30 s horizon", derived, r.LeadMedian, r.LeadP10)
		}
	}
}
