package geofence

import (
	"slices"
	"sort"
	"time"
)

// activity is when the zone set's activity can change: the instants at
// which a zone's window opens or closes, and the seconds of the week at
// which a weekly schedule does. The alerter asks it once a second of log
// time for each drone it has a position of (ActivityMayChange), so it is
// two binary searches, not a walk over the zones.
type activity struct {
	bounds []int64 // unix nanoseconds of every From/Until, sorted, unique
	weekly []int32 // seconds of the week of every weekly Start/End, sorted, unique
}

func newActivity(zones []*Zone) activity {
	var a activity
	add := func(t time.Time) {
		if !t.IsZero() {
			a.bounds = append(a.bounds, t.UnixNano())
		}
	}
	for _, z := range zones {
		add(z.ActiveFrom)
		add(z.ActiveUntil)
		for _, w := range z.Windows {
			add(w.From)
			add(w.Until)
			for _, iv := range w.Weekly {
				a.weekly = append(a.weekly, iv.Start%week, iv.End%week)
			}
		}
	}
	slices.Sort(a.bounds)
	a.bounds = slices.Compact(a.bounds)
	slices.Sort(a.weekly)
	a.weekly = slices.Compact(a.weekly)
	return a
}

// ActivityMayChange reports whether some zone of the set may be active at
// t1 and not at t0 or the other way round: whether a window opens or closes
// in (t0, t1]. It may say true when nothing changes for a given zone (a
// bound of another zone lies between), never false when something does.
func (ix *Index) ActivityMayChange(t0, t1 time.Time) bool {
	if ix == nil || !t0.Before(t1) {
		return false
	}
	a := &ix.activity
	if len(a.bounds) > 0 {
		lo, hi := t0.UnixNano(), t1.UnixNano()
		i := sort.Search(len(a.bounds), func(i int) bool { return a.bounds[i] > lo })
		if i < len(a.bounds) && a.bounds[i] <= hi {
			return true
		}
	}
	if len(a.weekly) == 0 {
		return false
	}
	if t1.Sub(t0) >= week*time.Second {
		return true
	}
	// The week seconds in (s0, s1], wrapping at the week's end.
	s0, s1 := weekSecond(t0), weekSecond(t1)
	in := func(lo, hi int32) bool { // any boundary in (lo, hi]
		i := sort.Search(len(a.weekly), func(i int) bool { return a.weekly[i] > lo })
		return i < len(a.weekly) && a.weekly[i] <= hi
	}
	if s0 < s1 {
		return in(s0, s1)
	}
	return in(s0, week) || in(-1, s1)
}

// NextActivityChange returns the first instant after t at which some zone
// of the set may turn active or inactive (a window's From or Until, a
// weekly interval's start or end), and false when none ever can. The
// alerter schedules its next look at a silent drone's zones by it, instead
// of looking every second.
func (ix *Index) NextActivityChange(t time.Time) (time.Time, bool) {
	if ix == nil {
		return time.Time{}, false
	}
	a := &ix.activity
	var next time.Time
	found := false
	if len(a.bounds) > 0 {
		ns := t.UnixNano()
		i := sort.Search(len(a.bounds), func(i int) bool { return a.bounds[i] > ns })
		if i < len(a.bounds) {
			next, found = time.Unix(0, a.bounds[i]).UTC(), true
		}
	}
	if len(a.weekly) > 0 {
		s := weekSecond(t)
		var wait int64 // seconds from t's second of the week to the next boundary
		i := sort.Search(len(a.weekly), func(i int) bool { return a.weekly[i] > s })
		if i < len(a.weekly) {
			wait = int64(a.weekly[i] - s)
		} else {
			wait = int64(week - s + a.weekly[0])
		}
		w := t.Truncate(time.Second).Add(time.Duration(wait) * time.Second)
		if !found || w.Before(next) {
			next, found = w, true
		}
	}
	return next, found
}
