package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/authorization/authstore"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestSourcesAreTheStoresTags pins the streams to the hash tags of the
// stores whose scripts write them: another tag would make the script
// touch two slots on a Redis Cluster.
func TestSourcesAreTheStoresTags(t *testing.T) {
	ss := audit.Sources("pfx", "pos", 2)
	want := []audit.Source{
		{Name: "p0", Key: redislayout.Of("pfx", "pos", 0).Audit()},
		{Name: "p1", Key: redislayout.Of("pfx", "pos", 1).Audit()},
		{Name: "zones", Key: zonestore.KeysOf("pfx").Tag() + ":audit"},
		{Name: "auths", Key: authstore.KeysOf("pfx").Tag() + ":audit"},
		{Name: "misc", Key: "{pfx:audit}:audit"},
	}
	if !slices.Equal(ss, want) {
		t.Errorf("Sources = %v, want %v", ss, want)
	}
}

// TestEncodeBounds: every field is clipped, a large or broken detail is
// replaced, id and ts are not stored.
func TestEncodeBounds(t *testing.T) {
	long := strings.Repeat("é", 1000)
	for _, c := range []struct {
		name string
		e    audit.Entry
		max  int
	}{
		{"long fields", audit.Entry{ID: "x", Who: long, Target: long, Client: long, Request: long, Action: "ack", Outcome: "ok"}, 4*audit.MaxField + 200},
		{"large detail", audit.Entry{Detail: []byte(`"` + string(make([]byte, 20000)) + `"`)}, 400},
		{"broken detail", audit.Entry{Detail: []byte(`{`)}, 400},
	} {
		b := c.e.Encode()
		if len(b) > c.max {
			t.Errorf("%s: %d bytes, want at most %d", c.name, len(b), c.max)
		}
		if e, err := audit.Decode("misc", "1-0", string(b)); err != nil || e.ID != "misc-1-0" || !e.TS.Equal(time.UnixMilli(1)) {
			t.Errorf("%s: decode %+v %v", c.name, e, err)
		}
	}
}

func newLog(t *testing.T, partitions int) (*audit.Log, redis.UniversalClient, string) {
	t.Helper()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "audit")
	return audit.NewLog(rdb, audit.Sources(prefix, "pos", partitions), 0, nil), rdb, prefix
}

// TestListMergesAndPages: entries of every stream, listed newest first
// across streams (equal ids ordered by stream), each once whatever the
// page size, with filters.
func TestListMergesAndPages(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := newLog(t, 3)
	ss := l.Sources()
	type key struct {
		ms   int64
		src  int
		name string
	}
	var keys []key
	for i := range 250 {
		src := (i * 7) % len(ss)
		// Every fifth entry shares its id with the one before (in another stream).
		ms := 1_000_000 + int64(i) - int64(i%5/4)
		id := fmt.Sprintf("%d-0", ms)
		e := audit.Entry{Who: fmt.Sprintf("u%d", i%3), Action: []string{audit.ActionAck, audit.ActionZonePut}[i%2], Target: fmt.Sprint(i), Outcome: "ok"}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: ss[src].Key, ID: id, Values: []any{audit.FieldEntry, e.Encode()}}).Err(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key{ms, src, ss[src].Name + "-" + id})
	}
	// The merged order: id descending, then source index descending.
	slices.SortFunc(keys, func(a, b key) int {
		if a.ms != b.ms {
			return int(b.ms - a.ms)
		}
		return b.src - a.src
	})
	var want []string
	for _, k := range keys {
		want = append(want, k.name)
	}
	for _, limit := range []int{1, 7, 100, 500} {
		var got []string
		cursor := ""
		for range 1000 {
			es, next, err := l.List(ctx, audit.Filter{Limit: limit, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				got = append(got, e.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: %d entries, want %d; first %v, want %v", limit, len(got), len(want), got[:min(5, len(got))], want[:5])
		}
	}
	for _, c := range []struct {
		f audit.Filter
		n int
	}{
		{audit.Filter{Who: "u1"}, 0},
		{audit.Filter{Action: audit.ActionAck, Limit: 500}, 0},
		{audit.Filter{Target: "17"}, 1},
		{audit.Filter{Since: time.UnixMilli(1_000_200), Limit: 500}, 0},
		{audit.Filter{Until: time.UnixMilli(1_000_009), Limit: 500}, 0},
	} {
		es, _, err := l.List(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if (c.f.Who != "" && e.Who != c.f.Who) || (c.f.Action != "" && e.Action != c.f.Action) ||
				(!c.f.Since.IsZero() && e.TS.Before(c.f.Since)) || (!c.f.Until.IsZero() && e.TS.After(c.f.Until)) {
				t.Errorf("%+v matched %+v", c.f, e)
			}
		}
		if len(es) == 0 || (c.n > 0 && len(es) != c.n) {
			t.Errorf("%+v: %d entries", c.f, len(es))
		}
	}
	if _, _, err := l.List(ctx, audit.Filter{Cursor: "bm9wZQ"}); err != audit.ErrBadCursor {
		t.Errorf("a cursor not handed out: %v", err)
	}
}

// TestListScanIsBounded: a filter that matches nothing among more than
// MaxScan entries reads at most MaxScan per request and hands a cursor
// on, so no request reads the whole trail; following it ends.
func TestListScanIsBounded(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := newLog(t, 1)
	src := l.Sources()[0]
	n := audit.MaxScan + 1500
	_, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i := range n {
			pl.XAdd(ctx, &redis.XAddArgs{Stream: src.Key, ID: fmt.Sprintf("%d-0", i+1), Values: []any{audit.FieldEntry, audit.Entry{Who: "a", Action: "ack"}.Encode()}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	es, next, err := l.List(ctx, audit.Filter{Who: "nobody"})
	took := time.Since(start)
	if err != nil || len(es) != 0 || next == "" {
		t.Fatalf("first page: %d entries, next %q, %v", len(es), next, err)
	}
	t.Logf("a page reading %d entries that match nothing: %v", audit.MaxScan, took)
	es, next, err = l.List(ctx, audit.Filter{Who: "nobody", Cursor: next})
	if err != nil || len(es) != 0 || next != "" {
		t.Fatalf("second page: %d entries, next %q, %v", len(es), next, err)
	}
}

// TestConcurrentAcksAuditOnce: ten clients acking one alarm at once (a
// client retrying) make one ack and one entry: the ack script writes the
// entry only when it writes the ack.
func TestConcurrentAcksAuditOnce(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "audit-ack")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	ev := storetest.Raised(0, "UAV-1", "Z", "restricted", 3, time.Now())
	w.Add(ev)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := alarmstore.New(alarmstore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	fresh := make(chan bool, 10)
	for i := range 10 {
		wg.Go(func() {
			c := audit.WithChange(ctx, audit.Entry{Who: fmt.Sprint("client", i), Action: audit.ActionAck, Target: ev.AlarmID, Outcome: "ok"}, time.Hour, nil)
			_, already, err := st.Ack(c, ev.AlarmID, fmt.Sprint("client", i), "")
			if err != nil {
				t.Error(err)
			}
			fresh <- !already
		})
	}
	wg.Wait()
	close(fresh)
	acks := 0
	for f := range fresh {
		if f {
			acks++
		}
	}
	l := audit.NewLog(rdb, audit.Sources(prefix, "pos", 1), time.Hour, nil)
	es, _, err := l.List(ctx, audit.Filter{Action: audit.ActionAck})
	if err != nil {
		t.Fatal(err)
	}
	if acks != 1 || len(es) != 1 {
		t.Fatalf("%d acks written, %d entries; want 1 and 1", acks, len(es))
	}
	a, err := st.Get(ctx, ev.AlarmID)
	if err != nil || a.Ack == nil || a.Ack.By != es[0].Who {
		t.Errorf("the ack (%+v, %v) and its entry (%s) name different callers", a.Ack, err, es[0].Who)
	}
}

// TestRecordTrimsByAge: Record's XADD drops entries older than the
// retention (MINID ~ trims whole nodes: an old node goes once a newer
// one exists).
func TestRecordTrimsByAge(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "audit-trim")
	ss := audit.Sources(prefix, "pos", 1)
	misc := ss[len(ss)-1].Key
	old := time.Now().Add(-48 * time.Hour)
	_, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i := range 300 { // more than a stream node holds (100)
			pl.XAdd(ctx, &redis.XAddArgs{Stream: misc, ID: fmt.Sprintf("%d-%d", old.UnixMilli(), i+1), Values: []any{audit.FieldEntry, "{}"}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l := audit.NewLog(rdb, ss, 24*time.Hour, nil)
	for range 101 {
		if err := l.Record(ctx, audit.Entry{Who: "alerter", Action: audit.ActionTokenReload, Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	es, _, err := l.List(ctx, audit.Filter{Until: time.Now().Add(-time.Hour), Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 0 {
		t.Errorf("%d entries older than the retention kept", len(es))
	}
}
