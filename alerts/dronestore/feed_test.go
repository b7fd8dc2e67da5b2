package dronestore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/alerts/dronestore/dronetest"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestFeedEqualsScanner: after every batch of a flight (drones moving,
// an alarm raised and cleared, a drone going quiet past the window, one
// forgotten), a Feed's active drones equal a Scanner's, which reads every
// state; and a Feed reads only the states the batches wrote.
func TestFeedEqualsScanner(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fd := e.st.Feed()
	since := base.Add(-time.Hour)
	answer := func(ds []dronestore.Drone) string {
		slices.SortFunc(ds, func(a, b dronestore.Drone) int { return strings.Compare(a.DroneID, b.DroneID) })
		b, err := json.Marshal(ds)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	check := func(step string, wantReads int64) {
		t.Helper()
		got, err := fd.Active(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.st.Active(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := answer(got), answer(want); g != w {
			t.Errorf("%s: the feed answers\n%s\nreading every state answers\n%s", step, g, w)
		}
		if wantReads >= 0 && fd.Reads() != wantReads {
			t.Errorf("%s: the feed read %d states, want %d", step, fd.Reads(), wantReads)
		}
	}
	check("first: every drone (MOVE on two partitions)", 7)
	check("nothing flew", 0)
	if _, err := dronetest.Fly(ctx, e.ds, e.zones, 0, dronetest.Pos("OUT", 31, base.Add(31*time.Second), dronetest.InsideLat, dronetest.InsideLon)); err != nil {
		t.Fatal(err)
	}
	check("OUT enters POLY", 1)
	if _, err := dronetest.Fly(ctx, e.ds, e.zones, 1,
		dronetest.Pos("IN", 4, base.Add(2*time.Minute), dronetest.OutsideLat, dronetest.OutsideLon),
		dronetest.Pos("NEW", 1, base.Add(2*time.Minute), dronetest.InsideLat, dronetest.InsideLon)); err != nil {
		t.Fatal(err)
	}
	check("IN leaves, NEW enters", 2)
	since = base.Add(time.Minute + 30*time.Second) // the window passes most drones by
	check("window moved", 0)
	since = base.Add(-time.Hour) // and back: what the feed let go is read from Redis again only when written
	if _, err := dronetest.Fly(ctx, e.ds, e.zones, 2, dronetest.Pos("LONG", 61, base.Add(11*time.Minute), dronetest.OutsideLat, dronetest.OutsideLon)); err != nil {
		t.Fatal(err)
	}
	got, err := fd.Active(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if fd.Reads() != 1 {
		t.Errorf("LONG moved: the feed read %d states, want 1", fd.Reads())
	}
	var ids []string
	for _, d := range got {
		ids = append(ids, d.DroneID)
	}
	slices.Sort(ids)
	// IN and NEW were in the window, MOVE and OUT hold alarms (kept
	// whatever their age), LONG was written since; OLD and OLDA, without
	// a position, were let go.
	if want := []string{"IN", "LONG", "MOVE", "NEW", "OUT"}; !slices.Equal(ids, want) {
		t.Errorf("after the window moved back: %v, want %v", ids, want)
	}
	// An alerter from before the changes stream writes a state on
	// partition 1 (a batch with no entry: the applied offset moves past
	// the chain): the feed reads partition 1 whole, then follows the chain
	// again from the next batch.
	rdb := testenv.RedisClient(t)
	k := e.ds.Keys(1)
	applied, err := rdb.Get(ctx, k.Applied()).Int64()
	if err != nil {
		t.Fatal(err)
	}
	old := `{"seq":1,"pos":{"ts":"2026-12-02T09:12:00Z","lat":51.3,"lon":-0.8}}`
	if err := rdb.HSet(ctx, k.Drones(), "OLDW", old).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, k.Applied(), applied+1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := rdb.HLen(ctx, k.Drones()).Result()
	if err != nil {
		t.Fatal(err)
	}
	check("a batch without an entry", n)
	check("quiet again", 0)
	if _, err := dronetest.Fly(ctx, e.ds, e.zones, 1, dronetest.Pos("NEW", 2, base.Add(12*time.Minute), dronetest.OutsideLat, dronetest.OutsideLon)); err != nil {
		t.Fatal(err)
	}
	check("the chain again", 1)
}
