package alarmstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

const parts = 3

// model is what the test wrote: alarm id → its expected state.
type model struct {
	raised  map[string]alerts.Event
	cleared map[string]bool
	acked   map[string]bool
}

// fixture writes 60 alarms over three partitions through the batch
// script: raise times one second apart in groups of five at the same millisecond
// (ties broken by alarm id), every third cleared, every fifth acked.
func fixture(t testing.TB) (*alarmstore.Store, *model, string) {
	t.Helper()
	ctx := context.Background()
	rc := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "alarms")
	ds, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := alarmstore.New(alarmstore.Options{Redis: rc, Prefix: prefix, Topic: "pos", Partitions: parts,
		Now: func() time.Time { return time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	m := &model{raised: map[string]alerts.Event{}, cleared: map[string]bool{}, acked: map[string]bool{}}
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ids []string
	for i := 0; i < 60; i++ {
		drone := fmt.Sprintf("D%d", i%10)
		cat := []string{"restricted", "prohibited"}[i%2]
		ts := base.Add(time.Duration(i/5) * time.Second).Add(123456 * time.Nanosecond)
		e := storetest.Raised((i/5)%parts, drone, fmt.Sprintf("Z%d", i%4), cat, int64(100+i), ts)
		w.Add(e)
		m.raised[e.AlarmID] = e
		ids = append(ids, e.AlarmID)
		if i%20 == 19 {
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, id := range ids {
		if i%3 == 0 {
			r := m.raised[id]
			w.Add(storetest.ClearedOf(r, r.Seq+1000, r.TS.Add(time.Minute), alerts.ReasonExited))
			m.cleared[id] = true
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if i%5 == 0 {
			if _, already, err := s.Ack(ctx, id, "ops", "seen"); err != nil || already {
				t.Fatalf("ack %s: already %v, %v", id, already, err)
			}
			m.acked[id] = true
		}
	}
	return s, m, prefix
}

// want lists the model's alarms matching keep, newest first.
func (m *model) want(keep func(e alerts.Event, cleared, acked bool) bool) []string {
	var out []alerts.Event
	for id, e := range m.raised {
		if keep(e, m.cleared[id], m.acked[id]) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b alerts.Event) int {
		if c := b.TS.UnixMilli() - a.TS.UnixMilli(); c != 0 {
			if c > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(b.AlarmID, a.AlarmID)
	})
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.AlarmID
	}
	return ids
}

// listAll pages through f, checking each page's size.
func listAll(t *testing.T, s *alarmstore.Store, f alarmstore.Filter) []alarmstore.Alarm {
	t.Helper()
	var all []alarmstore.Alarm
	for pages := 0; ; pages++ {
		as, next, err := s.List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) > f.Limit && f.Limit > 0 {
			t.Fatalf("page of %d, limit %d", len(as), f.Limit)
		}
		all = append(all, as...)
		if next == "" {
			return all
		}
		if len(as) == 0 || pages > 100 {
			t.Fatalf("page %d: %d alarms and next cursor %q", pages, len(as), next)
		}
		f.Cursor = next
	}
}

// TestList runs with the normal first pages, and with pages of one member
// that double on each refill, so that paging within a partition and ties
// (equal raise times) across pages are covered.
func TestList(t *testing.T) {
	for _, minPage := range []int64{16, 1} {
		t.Run(fmt.Sprintf("minPage=%d", minPage), func(t *testing.T) {
			old := alarmstore.SetMinPage(minPage)
			defer alarmstore.SetMinPage(old)
			testList(t)
		})
	}
}

func testList(t *testing.T) {
	s, m, _ := fixture(t)
	yes, no := true, false
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		f    alarmstore.Filter
		keep func(e alerts.Event, cleared, acked bool) bool
	}{
		{"default active", alarmstore.Filter{}, func(e alerts.Event, c, a bool) bool { return !c }},
		{"cleared", alarmstore.Filter{State: "cleared", Limit: 4}, func(e alerts.Event, c, a bool) bool { return c }},
		{"all by 7", alarmstore.Filter{State: "all", Limit: 7}, func(e alerts.Event, c, a bool) bool { return true }},
		{"all by 1", alarmstore.Filter{State: "all", Limit: 1}, func(e alerts.Event, c, a bool) bool { return true }},
		{"acked", alarmstore.Filter{State: "all", Acked: &yes, Limit: 3}, func(e alerts.Event, c, a bool) bool { return a }},
		{"unacked active", alarmstore.Filter{Acked: &no, Limit: 5}, func(e alerts.Event, c, a bool) bool { return !a && !c }},
		{"drone", alarmstore.Filter{State: "all", Drone: "D3", Limit: 2}, func(e alerts.Event, c, a bool) bool { return e.DroneID == "D3" }},
		{"zone and category", alarmstore.Filter{State: "all", Zone: "Z1", Category: "prohibited"}, func(e alerts.Event, c, a bool) bool {
			return e.ZoneID == "Z1" && e.Category == "prohibited"
		}},
		{"unknown drone", alarmstore.Filter{Drone: "nope"}, func(e alerts.Event, c, a bool) bool { return false }},
		{"since until", alarmstore.Filter{State: "all", Since: base.Add(5 * time.Second), Until: base.Add(20*time.Second + 123*time.Microsecond), Limit: 6},
			func(e alerts.Event, c, a bool) bool {
				return !e.TS.Before(base.Add(5*time.Second)) && e.TS.UnixMilli() <= base.Add(20*time.Second).UnixMilli()
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := listAll(t, s, tt.f)
			var ids []string
			for _, a := range got {
				ids = append(ids, a.AlarmID)
				if a.State == "cleared" != m.cleared[a.AlarmID] || (a.Cleared != nil) != m.cleared[a.AlarmID] || (a.Ack != nil) != m.acked[a.AlarmID] {
					t.Errorf("alarm %s: state %s cleared %v ack %v", a.AlarmID, a.State, a.Cleared, a.Ack)
				}
			}
			if want := tt.keep; !slices.Equal(ids, m.want(want)) {
				t.Errorf("listed %d %q\nwant   %d %q", len(ids), ids, len(m.want(want)), m.want(want))
			}
		})
	}
}

func TestListBadInput(t *testing.T) {
	s, _, _ := fixture(t)
	for _, f := range []alarmstore.Filter{{State: "open"}, {Cursor: "!!"}, {Cursor: "MTIz"}} {
		if _, _, err := s.List(context.Background(), f); err == nil {
			t.Errorf("List(%+v): no error", f)
		}
	}
}

func TestGet(t *testing.T) {
	s, m, _ := fixture(t)
	ctx := context.Background()
	for id, e := range m.raised {
		a, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.DroneID != e.DroneID || a.ZoneID != e.ZoneID || a.ZoneName != e.ZoneName || a.Category != e.Category ||
			!a.Raised.TS.Equal(e.TS) || a.Raised.EventID != e.EventID || a.Raised.Seq != e.Seq || a.ZoneVersion != 3 ||
			a.Partition != e.Partition || *a.Raised.AltM != 80.5 || a.Raised.AltRef != "agl" {
			t.Fatalf("Get(%s) = %+v, raised %+v", id, a, e)
		}
		if m.cleared[id] && (a.Cleared == nil || a.Cleared.Reason != "exited" || a.Cleared.Seq != e.Seq+1000 || a.State != "cleared") {
			t.Errorf("Get(%s).Cleared = %+v", id, a.Cleared)
		}
		if m.acked[id] && (a.Ack == nil || a.Ack.By != "ops" || a.Ack.Note != "seen" || !a.Ack.At.Equal(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))) {
			t.Errorf("Get(%s).Ack = %+v", id, a.Ack)
		}
	}
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "x", "", "0123456789ABCDEF0123456789ABCDEF", "{evil}:*"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, alarmstore.ErrNotFound) {
			t.Errorf("Get(%q) err = %v, want ErrNotFound", id, err)
		}
	}
}

// TestAckConcurrent: ten concurrent acks of one alarm record one ack and
// append one acked event to the alarm's partition outbox; the others
// answer already acked with the first ack.
func TestAckConcurrent(t *testing.T) {
	s, m, prefix := fixture(t)
	ctx := context.Background()
	var id string
	for i, e := range m.raised {
		if !m.acked[i] && m.cleared[i] {
			id = e.AlarmID
			break
		}
	}
	type res struct {
		a       alarmstore.Alarm
		already bool
		err     error
	}
	out := make([]res, 10)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, already, err := s.Ack(ctx, id, fmt.Sprintf("op%d", i), fmt.Sprintf("note %d", i))
			out[i] = res{a, already, err}
		}()
	}
	wg.Wait()
	first := 0
	var by string
	for _, r := range out {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.already {
			first++
			by = r.a.Ack.By
		}
	}
	if first != 1 {
		t.Fatalf("%d acks were first, want 1", first)
	}
	for _, r := range out {
		if r.a.Ack == nil || r.a.Ack.By != by || r.a.State != "cleared" {
			t.Errorf("an ack answered %+v, want the first ack by %s", r.a.Ack, by)
		}
	}
	e := m.raised[id]
	entries, err := redislayout.ReadOutbox(ctx, testenv.RedisClient(t), redislayout.Of(prefix, "pos", e.Partition), "", 10000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var acked []redislayout.Entry
	for _, en := range entries {
		if en.EventID == id+":acked" {
			acked = append(acked, en)
		}
	}
	if len(acked) != 1 {
		t.Fatalf("%d acked entries, want 1", len(acked))
	}
	want := e
	want.EventID, want.Type, want.TS, want.By, want.Note = id+":acked", "acked", time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), by, "note "+strings.TrimPrefix(by, "op")
	if got := string(acked[0].Event); got != string(want.AppendJSON(nil)) {
		t.Errorf("acked event = %s\nwant %s", got, want.AppendJSON(nil))
	}
}

func TestAckErrors(t *testing.T) {
	s, m, _ := fixture(t)
	ctx := context.Background()
	var id string
	for i := range m.raised {
		id = i
		break
	}
	if _, _, err := s.Ack(ctx, id, "ops", strings.Repeat("x", alarmstore.MaxNote+1)); err == nil {
		t.Error("a note over MaxNote was accepted")
	}
	if _, _, err := s.Ack(ctx, "0123456789abcdef0123456789abcdef", "ops", ""); !errors.Is(err, alarmstore.ErrNotFound) {
		t.Errorf("ack of an unknown alarm: %v", err)
	}
}

// TestAuthorization: an alarm's authorisation is the raise's until an
// authorized or unauthorized event says otherwise (the batch script's
// :auth entry), and the authorized filter lists by it.
func TestAuthorization(t *testing.T) {
	ctx := context.Background()
	rc := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "alarmauth")
	ds, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := alarmstore.New(alarmstore.Options{Redis: rc, Prefix: prefix, Topic: "pos", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	permit := &alerts.AuthRef{ID: "police-1", Reference: "P-7", Until: base.Add(time.Hour)}
	covered := storetest.Raised(0, "POLICE-1", "Z", "restricted", 1, base)
	covered.Authorization = permit
	plain := storetest.Raised(0, "X", "Z", "restricted", 2, base.Add(time.Second))
	later := storetest.Raised(0, "Y", "Z", "restricted", 3, base.Add(2*time.Second))
	for _, e := range []alerts.Event{covered, plain, later} {
		w.Add(e)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	change := func(of alerts.Event, typ string, n int64, au *alerts.AuthRef) {
		e := of
		e.EventID, e.Type, e.Authorization = alerts.SignalEventID(of.AlarmID, typ, n), typ, au
		w.Add(e)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	authorized := func(a alarmstore.Alarm) string {
		if a.Authorization == nil {
			return "-"
		}
		return a.Authorization.ID
	}
	check := func(step string, want map[string]string) {
		t.Helper()
		for id, au := range want {
			a, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if authorized(a) != au {
				t.Errorf("%s: alarm of %s authorisation %s, want %s", step, a.DroneID, authorized(a), au)
			}
		}
		yes, no := true, false
		for _, f := range []*bool{&yes, &no} {
			as, _, err := s.List(ctx, alarmstore.Filter{Authorized: f})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				if (a.Authorization != nil) != *f {
					t.Errorf("%s: authorized=%v lists %s (%s)", step, *f, a.DroneID, authorized(a))
				}
			}
			if n := countAuth(want, *f); len(as) != n {
				t.Errorf("%s: authorized=%v lists %d alarms, want %d", step, *f, len(as), n)
			}
		}
	}
	check("raised", map[string]string{covered.AlarmID: "police-1", plain.AlarmID: "-", later.AlarmID: "-"})
	change(covered, alerts.Unauthorized, 1, permit)
	change(later, alerts.Authorized, 1, &alerts.AuthRef{ID: "film", Reference: "F-1", Until: base.Add(time.Hour)})
	check("after unauthorized and authorized", map[string]string{covered.AlarmID: "-", plain.AlarmID: "-", later.AlarmID: "film"})
	change(covered, alerts.Authorized, 2, permit)
	check("authorized again", map[string]string{covered.AlarmID: "police-1", plain.AlarmID: "-", later.AlarmID: "film"})
}

func countAuth(want map[string]string, authorized bool) int {
	n := 0
	for _, au := range want {
		if (au != "-") == authorized {
			n++
		}
	}
	return n
}
