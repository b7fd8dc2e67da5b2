package geofence

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestActivityMayChange holds ActivityMayChange to its promise against
// Zone.Active, on zones with fixed windows and weekly schedules: whenever a
// zone's activity at t0 and t1 differs, or a window lies wholly between, it
// says true.
func TestActivityMayChange(t *testing.T) {
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	zones := []*Zone{
		{ID: "fixed", ActiveFrom: base.Add(5 * time.Minute), ActiveUntil: base.Add(12 * time.Minute)},
		{ID: "weekly", Windows: []Window{{Weekly: []WeeklyInterval{{Start: 3600, End: 7200}, {Start: 600000, End: 604800}}}}},
		{ID: "window", Windows: []Window{{From: base.Add(time.Hour), Until: base.Add(2 * time.Hour)}}},
		{ID: "always"},
	}
	ix := &Index{zones: zones, activity: newActivity(zones)}
	tests := []struct {
		name   string
		t0, t1 time.Time
		want   bool
	}{
		{"before the first window, a second", base, base.Add(time.Second), false},
		{"the fixed window opens", base.Add(5*time.Minute - time.Second), base.Add(5 * time.Minute), true},
		{"at the open instant itself, then after", base.Add(5 * time.Minute), base.Add(5*time.Minute + time.Second), false},
		{"the fixed window closes", base.Add(12*time.Minute - time.Millisecond), base.Add(12 * time.Minute), true},
		{"empty interval", base.Add(5 * time.Minute), base.Add(5 * time.Minute), false},
		{"backwards", base.Add(6 * time.Minute), base.Add(4 * time.Minute), false},
	}
	for _, tc := range tests {
		if got := ix.ActivityMayChange(tc.t0, tc.t1); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
	// Against Active, on random intervals of up to a day.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		t0 := base.Add(time.Duration(rng.Int64N(int64(14*24*time.Hour))) - 7*24*time.Hour)
		t1 := t0.Add(time.Duration(rng.Int64N(int64(2 * time.Hour))))
		differs := false
		for _, z := range zones {
			if z.Active(t0) != z.Active(t1) {
				differs = true
			}
		}
		if differs && !ix.ActivityMayChange(t0, t1) {
			t.Fatalf("(%v, %v]: a zone's activity changes, ActivityMayChange says no", t0, t1)
		}
	}
	// A set without time-dependent zones never changes.
	plain := &Index{activity: newActivity([]*Zone{{ID: "a"}})}
	if plain.ActivityMayChange(base, base.Add(365*24*time.Hour)) {
		t.Error("a set of always-active zones may change")
	}
}

// TestNextActivityChange: no zone's activity changes between t and the
// next change it names, and it does change there (or a bound of a zone
// lies there), on random instants.
func TestNextActivityChange(t *testing.T) {
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	zones := []*Zone{
		{ID: "fixed", ActiveFrom: base.Add(5 * time.Minute), ActiveUntil: base.Add(12 * time.Minute)},
		{ID: "weekly", Windows: []Window{{Weekly: []WeeklyInterval{{Start: 3600, End: 7200}, {Start: 600000, End: 604800}}}}},
		{ID: "always"},
	}
	ix := &Index{zones: zones, activity: newActivity(zones)}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		t0 := base.Add(time.Duration(rng.Int64N(int64(14*24*time.Hour))) - 7*24*time.Hour)
		next, ok := ix.NextActivityChange(t0)
		if !ok || !next.After(t0) {
			t.Fatalf("after %v: %v %v", t0, next, ok)
		}
		if ix.ActivityMayChange(t0, next.Add(-time.Nanosecond)) {
			t.Fatalf("after %v: a change before the next one named (%v)", t0, next)
		}
		if !ix.ActivityMayChange(t0, next) {
			t.Fatalf("after %v: no change at the next one named (%v)", t0, next)
		}
	}
	if _, ok := (&Index{activity: newActivity([]*Zone{{ID: "a"}})}).NextActivityChange(base); ok {
		t.Error("a set of always-active zones names a change")
	}
}
