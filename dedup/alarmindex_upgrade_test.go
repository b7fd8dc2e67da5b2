package dedup_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestAlarmIndexUpgrade: alarms the release before the secondary sets
// wrote (its batch script, verbatim) are listed by drone, zone and
// category exactly as a brute-force filter finds them while the store
// backfills the sets, a few alarms per request, with this release's
// batches committed in between; once backfilled the sets equal the alarms
// hash. An earlier release committing again (a rolling upgrade: raises the
// sets miss, clears that do not move them, a GC that leaves their members)
// invalidates the mark, and the lists stay right through a second
// backfill, which, with the lists' removal of members whose alarm is
// gone, makes the sets right again.
func TestAlarmIndexUpgrade(t *testing.T) {
	ctx := context.Background()
	rc := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "ixupgrade")
	const parts = 2
	ds, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "pos", AlarmRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s, err := alarmstore.New(alarmstore.Options{Redis: rc, Prefix: prefix, Topic: "pos", Partitions: parts,
		BackfillStep: 7, BackfillBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	base := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var active []alerts.Event
	seq := int64(0)
	// write raises n alarms and clears every third active one (some in
	// their raise's batch), in batches of 10.
	write := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			seq++
			d := int(seq*7) % 9
			e := storetest.Raised(d%parts, fmt.Sprintf("D%d", d), fmt.Sprintf("Z%d", seq%5), []string{"restricted", "warning"}[seq%5%2], seq,
				base.Add(time.Duration(seq%40)*time.Second))
			w.Add(e)
			active = append(active, e)
			if i%3 == 2 {
				c := active[int(seq)%len(active)]
				w.Add(storetest.ClearedOf(c, c.Seq+10000, c.TS.Add(time.Minute), alerts.ReasonExited))
				active = slices.DeleteFunc(active, func(a alerts.Event) bool { return a.AlarmID == c.AlarmID })
			}
			if i%10 == 9 {
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	filters := []alarmstore.Filter{
		{Drone: "D4"}, {State: "cleared", Drone: "D2"}, {State: "all", Zone: "Z3"}, {Zone: "Z1", Category: "warning"},
		{State: "all", Category: "restricted", Limit: 5}, {State: "cleared", Drone: "D5", Zone: "Z0", Category: "restricted"},
		{State: "all", Drone: "D7", Acked: &yes},
	}
	// Every set is read whole, so the lists meet every member an earlier
	// release's clears and GC left.
	for _, st := range []string{"active", "cleared"} {
		for z := 0; z < 5; z++ {
			filters = append(filters, alarmstore.Filter{State: st, Zone: fmt.Sprintf("Z%d", z)})
		}
		for d := 0; d < 9; d++ {
			filters = append(filters, alarmstore.Filter{State: st, Drone: fmt.Sprintf("D%d", d)})
		}
		filters = append(filters, alarmstore.Filter{State: st, Category: "warning"}, alarmstore.Filter{State: st, Category: "restricted"})
	}
	// check lists every filter once and compares with the brute force.
	check := func(step string) {
		t.Helper()
		all, err := storetest.ReadAll(ctx, rc, prefix, "pos", parts)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range filters {
			var got []string
			for {
				as, next, err := s.List(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					got = append(got, a.AlarmID)
				}
				if next == "" {
					break
				}
				f.Cursor = next
			}
			f.Cursor = ""
			if want := storetest.Want(all, f); !slices.Equal(got, want) {
				t.Errorf("%s: %+v lists %d %q\nwant %d %q", step, f, len(got), got, len(want), want)
			}
		}
	}
	done := func() bool {
		t.Helper()
		for p := 0; p < parts; p++ {
			k := redislayout.Of(prefix, "pos", p)
			mark, _ := rc.Get(ctx, k.AlarmsIndexMark()).Result()
			applied, _ := rc.Get(ctx, k.Applied()).Result()
			if !dedup.AlarmIndexDone(mark, applied) {
				return false
			}
		}
		return true
	}
	// backfill lists once (one step of 7 alarms on each partition: not
	// all), commits with this release's script, and lists until the marks
	// say done.
	backfill := func(step string) {
		t.Helper()
		if _, _, err := s.List(ctx, alarmstore.Filter{Zone: "Z1"}); err != nil || done() {
			t.Fatalf("%s: one list backfilled the partitions whole, or %v", step, err)
		}
		w.Commit = nil
		write(10)
		if done() {
			t.Fatalf("%s: a batch of this release took the backfill's mark for done", step)
		}
		for rounds := 0; !done(); rounds++ {
			if rounds > 200 {
				t.Fatalf("%s: the backfill did not end", step)
			}
			check(fmt.Sprintf("%s, round %d", step, rounds))
		}
		check(step + ", done")
		for p := 0; p < parts; p++ {
			problems, err := storetest.IndexProblems(ctx, rc, redislayout.Of(prefix, "pos", p))
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) > 0 {
				t.Errorf("%s: partition %d's index differs from its alarms hash:\n%q", step, p, problems)
			}
		}
	}

	// The release before: no secondary sets, no mark.
	w.Commit = ds.PreIndexCommit
	write(120)
	for i, a := range active {
		if i%4 == 0 {
			if _, _, err := s.Ack(ctx, a.AlarmID, "ops", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ks := rc.Keys(ctx, "*"+prefix+"*:alarms:*:*").Val(); len(ks) != 0 || done() {
		t.Fatalf("the earlier release's script wrote secondary sets %q or a mark", ks)
	}
	backfill("upgrade")

	// An earlier release's alerter commits again, with a GC (retention
	// 1 ms) that deletes every cleared alarm.
	old, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "pos", AlarmRetention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Commit = old.PreIndexCommit
	time.Sleep(5 * time.Millisecond)
	write(20)
	if done() {
		t.Fatal("the mark survived an earlier release's commit")
	}
	if n := rc.ZCard(ctx, redislayout.Of(prefix, "pos", 0).AlarmsCleared()).Val(); n > 10 {
		t.Fatalf("the earlier release's GC left %d cleared alarms", n)
	}
	backfill("after an earlier release")
	if n, err := rc.Exists(ctx, redislayout.Of(prefix, "pos", 0).AlarmsIndexMark()).Result(); err != nil || n != 1 {
		t.Fatalf("mark: %d, %v", n, err)
	}
}
