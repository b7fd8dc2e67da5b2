package alarmstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/embedded"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// filterFixture writes alarms over three partitions through the batch
// script in two phases a retention apart, so the second phase's batches
// delete the first phase's cleared alarms (GC): drones mostly on one
// partition each (D24 on all three, as after a repartition), zones of
// one category each but Z9, whose alarms have either; raise times with
// many ties; clears in the raise's batch and later; acks.
func filterFixture(t *testing.T, rc redis.UniversalClient) (*alarmstore.Store, string) {
	t.Helper()
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, "alarmfilter")
	const retention = 1500 * time.Millisecond
	ds, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "pos", AlarmRetention: retention})
	if err != nil {
		t.Fatal(err)
	}
	s, err := alarmstore.New(alarmstore.Options{Redis: rc, Prefix: prefix, Topic: "pos", Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	rnd := rand.New(rand.NewPCG(29, 2))
	base := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	var active []alerts.Event
	seq := int64(0)
	phase := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			d := rnd.IntN(25)
			drone, p := fmt.Sprintf("D%02d", d), d%parts
			if d == 24 {
				p = i % parts
			}
			z := rnd.IntN(10)
			cat := []string{"restricted", "warning"}[z%2]
			if z == 9 {
				cat = []string{"restricted", "warning"}[rnd.IntN(2)]
			}
			seq++
			e := storetest.Raised(p, drone, fmt.Sprintf("Z%d", z), cat, seq, base.Add(time.Duration(rnd.IntN(120))*37*time.Millisecond))
			w.Add(e)
			switch r := rnd.IntN(10); {
			case r < 2: // cleared in its own batch
				w.Add(storetest.ClearedOf(e, seq+100000, e.TS.Add(time.Minute), alerts.ReasonExited))
			default:
				active = append(active, e)
			}
			if i%25 == 24 {
				// Clear some of the active ones, in the next batch.
				for j := 0; j < 6 && len(active) > 0; j++ {
					k := rnd.IntN(len(active))
					w.Add(storetest.ClearedOf(active[k], active[k].Seq+100000, active[k].TS.Add(time.Minute), alerts.ReasonZoneRemoved))
					active = slices.Delete(active, k, k+1)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ackSome := func() {
		t.Helper()
		all, err := storetest.ReadAll(ctx, rc, prefix, "pos", parts)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range all {
			if i%4 == 0 && !a.Acked {
				if _, _, err := s.Ack(ctx, a.Raised.AlarmID, "ops", ""); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	phase(150)
	ackSome()
	before, err := storetest.ReadAll(ctx, rc, prefix, "pos", parts)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(retention + 200*time.Millisecond)
	phase(150)
	ackSome()
	after, err := storetest.ReadAll(ctx, rc, prefix, "pos", parts)
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, a := range before {
		if a.Cleared && !slices.ContainsFunc(after, func(b storetest.Found) bool { return b.Raised.AlarmID == a.Raised.AlarmID }) {
			gone++
		}
	}
	if gone < 20 {
		t.Fatalf("the second phase deleted %d of the first phase's cleared alarms, want most (GC)", gone)
	}
	for p := 0; p < parts; p++ {
		problems, err := storetest.IndexProblems(ctx, rc, redislayout.Of(prefix, "pos", p))
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > 0 {
			t.Errorf("partition %d's index differs from its alarms hash:\n%q", p, problems)
		}
	}
	return s, prefix
}

// TestListFilters: every filter by drone, zone and category, alone and
// combined, with each state and acked, lists exactly what a brute-force
// filter of all the alarms (HGETALL of the alarms hashes) gives, in
// order, paged with cursors; also with one-member first pages and a work
// bound of 5 alarms a request, so that pages end at the bound (some
// empty) and cursors resume there. On the real Redis and on the embedded
// default's (miniredis, cmd/demo), whose Lua runs the same scripts.
func TestListFilters(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testListFilters(t, testenv.RedisClient(t)) })
	t.Run("embedded", func(t *testing.T) {
		r, err := embedded.StartRedis(0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1,
			ReadTimeout: testenv.TestRedisTimeout, WriteTimeout: testenv.TestRedisTimeout})
		t.Cleanup(func() { _ = c.Close() })
		testListFilters(t, c)
	})
}

func testListFilters(t *testing.T, rc redis.UniversalClient) {
	s, prefix := filterFixture(t, rc)
	ctx := context.Background()
	all, err := storetest.ReadAll(ctx, rc, prefix, "pos", parts)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	var filters []alarmstore.Filter
	for _, st := range []string{"active", "cleared", "all"} {
		for _, drone := range []string{"", "D03", "D24", "nope"} {
			for _, zone := range []string{"", "Z4", "Z9"} {
				for _, cat := range []string{"", "restricted", "warning"} {
					for _, acked := range []*bool{nil, &yes, &no} {
						filters = append(filters, alarmstore.Filter{State: st, Drone: drone, Zone: zone, Category: cat, Acked: acked})
					}
				}
			}
		}
	}
	base := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	filters = append(filters,
		alarmstore.Filter{State: "all", Zone: "Z2", Since: base.Add(time.Second), Until: base.Add(3 * time.Second)},
		alarmstore.Filter{State: "cleared", Drone: "D24", Category: "warning", Until: base.Add(2 * time.Second)})
	tests := []struct {
		name       string
		minPage    int64
		maxExamine int
		limits     []int
		every      int // test every n-th filter
	}{
		{"defaults", 16, 2000, []int{1000, 3, 7}, 1},
		{"small pages and bound", 1, 5, []int{2, 4}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer alarmstore.SetMinPage(alarmstore.SetMinPage(tt.minPage))
			defer alarmstore.SetMaxExamine(alarmstore.SetMaxExamine(tt.maxExamine))
			nonEmpty := 0
			for i, f := range filters {
				if i%tt.every != 0 && i < len(filters)-2 {
					continue
				}
				f.Limit = tt.limits[i%len(tt.limits)]
				want := storetest.Want(all, f)
				if len(want) > 0 {
					nonEmpty++
				}
				got := listAllPages(t, s, f, tt.maxExamine)
				if !slices.Equal(got, want) {
					t.Errorf("%+v:\nlisted %d %q\nwant   %d %q", f, len(got), got, len(want), want)
				}
			}
			if nonEmpty < 10 {
				t.Errorf("only %d filters list anything: the fixture does not test much", nonEmpty)
			}
		})
	}
}

// listAllPages pages through f, checking each page against the limit and
// each listed alarm against the filter.
func listAllPages(t *testing.T, s *alarmstore.Store, f alarmstore.Filter, maxExamine int) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		as, next, err := s.List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) > f.Limit || len(as) > maxExamine {
			t.Fatalf("%+v: page of %d", f, len(as))
		}
		for _, a := range as {
			if (f.State == "active" || f.State == "") != (a.State == "active") && f.State != "all" {
				t.Errorf("%+v: listed %s alarm %s", f, a.State, a.AlarmID)
			}
			ids = append(ids, a.AlarmID)
		}
		if next == "" {
			return ids
		}
		if pages > 1000 {
			t.Fatalf("%+v: over 1,000 pages", f)
		}
		f.Cursor = next
	}
}
