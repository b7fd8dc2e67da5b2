package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func TestParseSeverity(t *testing.T) {
	m, err := ParseSeverity(DefaultAlertmanagerSeverity)
	if err != nil || len(m) != 3 || m["restricted"] != "critical" || m["prohibited"] != "critical" || m["*"] != "warning" {
		t.Fatalf("default = %v, %v", m, err)
	}
	if got := FormatSeverity(m); got != "prohibited=critical,restricted=critical,*=warning" {
		t.Errorf("FormatSeverity = %q", got)
	}
	for _, bad := range []string{"", "restricted", "a=b,a=c", "a b=c", "x=", "=page"} {
		if _, err := ParseSeverity(bad); err == nil {
			t.Errorf("ParseSeverity(%q) = nil error", bad)
		}
	}
	for u, want := range map[string]string{"http://am1:9093": "am1:9093", "http://am1:9093/": "am1:9093", "https://h/am/": "h/am"} {
		if got := AlertmanagerName(u); got != want {
			t.Errorf("AlertmanagerName(%q) = %q, want %q", u, got, want)
		}
	}
	for _, bad := range []string{"am1:9093", "ftp://h", "http://h/?x=1", "http://u@h"} {
		if ValidateAlertmanagerURL(bad) == nil {
			t.Errorf("ValidateAlertmanagerURL(%q) = nil", bad)
		}
	}
}

// amFixture is a partition's outbox and alarm index written as the batch
// and ack scripts write them, for an Alertmanager output to read.
type amFixture struct {
	t   *testing.T
	rdb *redis.Client
	k   redislayout.Keys
	cfg Config
}

func newAMFixture(t *testing.T, urls ...string) *amFixture {
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "am")
	cfg := Config{Prefix: prefix, Topic: "t", Backoff: 20 * time.Millisecond, Block: 50 * time.Millisecond,
		LagInterval: 100 * time.Millisecond, Logger: testLogger(),
		Alertmanager: Alertmanager{URLs: urls, Refresh: 2 * time.Second, DashboardURL: "https://nofly.example/", BackoffMax: 200 * time.Millisecond}}
	return &amFixture{t: t, rdb: rdb, k: redislayout.Of(prefix, "t", 0), cfg: cfg}
}

// add appends ev to the outbox and files it in the alarm index.
func (f *amFixture) add(ev alerts.Event) {
	f.t.Helper()
	ctx := context.Background()
	ev.EventID = ev.AlarmID + ":" + ev.Type
	b, _ := json.Marshal(ev)
	k := f.k
	var err error
	switch ev.Type {
	case alerts.Raised:
		err = f.rdb.HSet(ctx, k.Alarms(), ev.AlarmID+dedup.SuffixRaised, b).Err()
		if err == nil {
			err = f.rdb.ZAdd(ctx, k.AlarmsActive(), redis.Z{Score: float64(ev.TS.UnixMilli()), Member: ev.AlarmID}).Err()
		}
	case alerts.Cleared:
		f.rdb.ZRem(ctx, k.AlarmsActive(), ev.AlarmID)
		f.rdb.ZAdd(ctx, k.AlarmsCleared(), redis.Z{Score: 1, Member: ev.AlarmID})
		err = f.rdb.HSet(ctx, k.Alarms(), ev.AlarmID+dedup.SuffixCleared, b).Err()
	case alerts.Acked:
		err = f.rdb.HSet(ctx, k.Alarms(), ev.AlarmID+dedup.SuffixAcked, b).Err()
	case alerts.Authorized, alerts.Unauthorized:
		ev.EventID += ":1"
		b, _ = json.Marshal(ev)
		err = f.rdb.HSet(ctx, k.Alarms(), ev.AlarmID+dedup.SuffixAuth, b).Err()
	}
	if err == nil {
		err = f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: redislayout.Entry{EventID: ev.EventID, Event: b}.Values()}).Err()
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func amEvent(typ, alarm, drone, zone, cat string) alerts.Event {
	alt := 85.0
	return alerts.Event{AlarmID: alarm, Type: typ, DroneID: drone, ZoneID: zone, ZoneName: zone + " zone", Category: cat,
		TS: time.Now().UTC().Add(-time.Second).Truncate(time.Millisecond), Lat: 51.47, Lon: -0.45, AltM: &alt, AltRef: "AMSL"}
}

func findAlert(as []testenv.AMAlert, alarm, authorized string) *testenv.AMAlert {
	for i := range as {
		if as[i].Labels["alarm_id"] == alarm && as[i].Labels["authorized"] == authorized {
			return &as[i]
		}
	}
	return nil
}

// TestAlertmanagerOutput drives one output against a real Alertmanager:
// a raise is a firing alert with nofly's labels, annotations and deep
// link; an authorisation change moves the alarm to the other series; an
// ack makes a silence (createdBy, comment, matcher) that stops the
// repeats; a clear resolves the alert (the receiver is told) and expires
// the silence; a restart resumes at the cursor.
func TestAlertmanagerOutput(t *testing.T) {
	t.Parallel()
	rcv := testenv.StartAMReceiver(t)
	am := testenv.StartAlertmanager(t, testenv.AlertmanagerConfig(rcv.URL(), 2*time.Second))
	f := newAMFixture(t, am.URL())
	reg := prometheus.NewRegistry()
	f.cfg.Registerer = reg
	ctx := context.Background()

	// History before the output's first start is not replayed: only the
	// active alarm, by the first refresh.
	old := "00000000000000000000000000000001"
	gone := "00000000000000000000000000000002"
	f.add(amEvent(alerts.Raised, old, "UAV-0", "OLD", "warning"))
	f.add(amEvent(alerts.Raised, gone, "UAV-9", "GONE", "warning"))
	f.add(amEvent(alerts.Cleared, gone, "UAV-9", "GONE", "warning"))
	stop := runDispatcher(t, f.cfg, f.rdb, 0)
	testenv.CheckFor(t, 10*time.Second, func() error {
		as, err := am.Alerts(ctx)
		if err != nil {
			return err
		}
		if findAlert(as, old, "false") == nil {
			return fmt.Errorf("the active alarm is not posted at start: %v", as)
		}
		if findAlert(as, gone, "false") != nil {
			return fmt.Errorf("a cleared alarm of the history was posted")
		}
		return nil
	})

	a := "a0000000000000000000000000000000"
	b := "b0000000000000000000000000000000"
	f.add(amEvent(alerts.Raised, a, "UAV-1", "LHR", "restricted"))
	rb := amEvent(alerts.Raised, b, "UAV-2", "FILM", "warning")
	rb.Authorization = &alerts.AuthRef{ID: "au-1", Reference: "permit 7", Until: time.Now().Add(time.Hour).UTC()}
	f.add(rb)
	testenv.CheckFor(t, 10*time.Second, func() error {
		as, err := am.Alerts(ctx)
		if err != nil {
			return err
		}
		al, bl := findAlert(as, a, "false"), findAlert(as, b, "true")
		if al == nil || bl == nil {
			return fmt.Errorf("alerts %v: want %s unauthorised and %s authorised", as, a, b)
		}
		want := map[string]string{"alertname": "DroneInZone", "alarm_id": a, "drone": "UAV-1", "zone": "LHR", "zone_name": "LHR zone",
			"category": "restricted", "severity": "critical", "authorized": "false"}
		for k, v := range want {
			if al.Labels[k] != v {
				return fmt.Errorf("label %s = %q, want %q (%v)", k, al.Labels[k], v, al.Labels)
			}
		}
		if len(al.Labels) != len(want) {
			return fmt.Errorf("labels %v, want %v", al.Labels, want)
		}
		link := "https://nofly.example/#alarm=" + a
		if al.GeneratorURL != link || al.Annotations["dashboard"] != link || !strings.Contains(al.Annotations["description"], "85 m AMSL") ||
			al.Annotations["summary"] != "Drone UAV-1 in LHR zone (restricted)" {
			return fmt.Errorf("alert %+v", al)
		}
		if bl.Labels["severity"] != "warning" || !strings.Contains(bl.Annotations["authorization"], "permit 7") {
			return fmt.Errorf("authorised alert %+v", bl)
		}
		return nil
	})
	// The receiver hears a and repeats it (repeat_interval 2s).
	testenv.CheckFor(t, 15*time.Second, func() error {
		if n := len(rcv.Notified(a)); n < 2 {
			return fmt.Errorf("%d notifications of %s, want a repeat", n, a)
		}
		return nil
	})

	// The ack: a silence, and the repeats stop.
	ack := amEvent(alerts.Acked, a, "UAV-1", "LHR", "restricted")
	ack.TS, ack.By, ack.Note = time.Now().UTC(), "alice", "on my way"
	f.add(ack)
	var silence string
	testenv.CheckFor(t, 10*time.Second, func() error {
		ss, err := am.Silences(ctx)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if len(s.Matchers) == 1 && s.Matchers[0].Name == "alarm_id" && s.Matchers[0].Value == a && !s.Matchers[0].IsRegex && s.Status.State == "active" {
				if s.CreatedBy != "alice" || s.Comment != "on my way" || s.EndsAt.Sub(ack.TS) < 23*time.Hour {
					return fmt.Errorf("silence %+v", s)
				}
				silence = s.ID
				return nil
			}
		}
		return fmt.Errorf("no silence of %s in %+v", a, ss)
	})
	// The silence is made, then the state saved with the cursor: wait for
	// it rather than read between the two.
	testenv.CheckFor(t, 10*time.Second, func() error {
		st, err := f.rdb.HGet(ctx, f.k.State(alertmanagerOutput(am.URL())), a).Result()
		if err != nil || !strings.Contains(st, silence) {
			return fmt.Errorf("state of %s = %q, %v; want the silence %s", a, st, err, silence)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // a notification in flight at the ack
	n := len(rcv.Notified(a))
	time.Sleep(5 * time.Second) // two and a half repeat intervals
	if got := len(rcv.Notified(a)); got != n {
		t.Fatalf("%d notifications of %s after its ack, want none", got-n, a)
	}

	// The authorisation of b ends: the "true" series resolves, "false" fires.
	un := amEvent(alerts.Unauthorized, b, "UAV-2", "FILM", "warning")
	un.Authorization, un.Reason = rb.Authorization, alerts.ReasonRevoked
	f.add(un)
	testenv.CheckFor(t, 10*time.Second, func() error {
		as, err := am.Alerts(ctx)
		if err != nil {
			return err
		}
		if findAlert(as, b, "true") != nil || findAlert(as, b, "false") == nil {
			return fmt.Errorf("after unauthorized: %v", as)
		}
		return nil
	})

	// The clear of a: resolved at the receiver, its silence expired.
	f.add(amEvent(alerts.Cleared, a, "UAV-1", "LHR", "restricted"))
	testenv.CheckFor(t, 15*time.Second, func() error {
		ns := rcv.Notified(a)
		if len(ns) == 0 || ns[len(ns)-1].Status != "resolved" {
			return fmt.Errorf("no resolved notification of %s: %v", a, ns)
		}
		ss, err := am.Silences(ctx)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.ID == silence && s.Status.State != "expired" {
				return fmt.Errorf("silence %s is %s", silence, s.Status.State)
			}
		}
		return nil
	})
	if ok, _ := f.rdb.HExists(ctx, f.k.State(alertmanagerOutput(am.URL())), a).Result(); ok {
		t.Errorf("state of %s kept after its clear", a)
	}

	// A restart resumes at the cursor: a clear made while stopped reaches
	// the Alertmanager.
	stop()
	f.add(amEvent(alerts.Cleared, b, "UAV-2", "FILM", "warning"))
	runDispatcher(t, f.cfg, f.rdb, 0)
	testenv.CheckFor(t, 10*time.Second, func() error {
		as, err := am.Alerts(ctx)
		if err != nil {
			return err
		}
		if findAlert(as, b, "false") != nil || findAlert(as, b, "true") != nil {
			return fmt.Errorf("%s still firing after its clear: %v", b, as)
		}
		return nil
	})
	if v := amMetric(t, reg, "nofly_alertmanager_silences_created_total"); v != 1 {
		t.Errorf("silences created = %v, want 1", v)
	}
	if v := amMetric(t, reg, "nofly_alertmanager_silences_expired_total"); v != 1 {
		t.Errorf("silences expired = %v, want 1", v)
	}
}

// TestAlertmanagerBacklogBound: an Alertmanager that is down never holds
// the outbox beyond the bound: past MaxBacklog entries the output drops
// them (counted) and moves its cursor to the end; once the Alertmanager
// is back, the refresh posts the active alarms and resolves what the
// state holds that cleared meanwhile.
func TestAlertmanagerBacklogBound(t *testing.T) {
	t.Parallel()
	rcv := testenv.StartAMReceiver(t)
	am := testenv.StartAlertmanager(t, testenv.AlertmanagerConfig(rcv.URL(), time.Hour))
	f := newAMFixture(t, am.URL())
	f.cfg.Alertmanager.MaxBacklog = 5
	reg := prometheus.NewRegistry()
	f.cfg.Registerer = reg
	ctx := context.Background()
	runDispatcher(t, f.cfg, f.rdb, 0)
	a := "a1000000000000000000000000000000"
	f.add(amEvent(alerts.Raised, a, "UAV-1", "LHR", "restricted"))
	testenv.CheckFor(t, 10*time.Second, func() error {
		as, err := am.Alerts(ctx)
		if err == nil && findAlert(as, a, "false") == nil {
			err = fmt.Errorf("%s not posted", a)
		}
		return err
	})
	if err := am.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	f.add(amEvent(alerts.Cleared, a, "UAV-1", "LHR", "restricted"))
	var still []string
	for i := range 20 {
		id := fmt.Sprintf("c%031d", i)
		f.add(amEvent(alerts.Raised, id, "UAV-2", fmt.Sprintf("Z%d", i), "warning"))
		still = append(still, id)
	}
	testenv.CheckFor(t, 20*time.Second, func() error {
		if v := amMetric(t, reg, "nofly_alertmanager_drops_total"); v < 6 {
			return fmt.Errorf("drops = %v", v)
		}
		end, err := f.rdb.XRevRangeN(ctx, f.k.Outbox(), "+", "-", 1).Result()
		if err != nil {
			return err
		}
		// The bound holds: what is left after the cursor is at most
		// MaxBacklog (a drop jumps to the end of the outbox as it is then;
		// entries added after wait, as long as they are few).
		cur, err := f.rdb.Get(ctx, f.k.Cursor(alertmanagerOutput(am.URL()))).Result()
		if err != nil {
			return err
		}
		left, err := f.rdb.XRange(ctx, f.k.Outbox(), "("+cur, "+").Result()
		if err != nil || int64(len(left)) > f.cfg.Alertmanager.MaxBacklog {
			return fmt.Errorf("%d entries after the cursor %q (%v); want at most %d (the end is %s)", len(left), cur, err, f.cfg.Alertmanager.MaxBacklog, end[0].ID)
		}
		return nil
	})
	// Alertmanager keeps no alerts across a restart; the refresh posts the
	// active ones again, and the cleared one stays resolved.
	if err := am.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 20*time.Second, func() error {
		as, err := am.Alerts(ctx)
		if err != nil {
			return err
		}
		for _, id := range still {
			if findAlert(as, id, "false") == nil {
				return fmt.Errorf("%s not posted again", id)
			}
		}
		if findAlert(as, a, "false") != nil {
			return fmt.Errorf("the cleared %s fires", a)
		}
		// The refresh saves its states after its posts: wait for them
		// rather than read between the two.
		if ok, err := f.rdb.HExists(ctx, f.k.State(alertmanagerOutput(am.URL())), a).Result(); err != nil || ok {
			return fmt.Errorf("state of the cleared %s kept after the refresh (%v)", a, err)
		}
		return nil
	})
}

// amMetric sums a metric's samples.
func amMetric(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if m.Counter != nil {
				sum += m.Counter.GetValue()
			}
			if m.Gauge != nil {
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}
