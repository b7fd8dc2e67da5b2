package alerterd

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// amZone is the restricted zone the Alertmanager proofs fly into: 500 m
// around (10, 10).
const amZone = `{"type":"FeatureCollection","features":[{"type":"Feature",
 "geometry":{"type":"Point","coordinates":[10,10]},
 "properties":{"id":"AMZ","name":"Test airfield","category":"restricted","radius_m":500}}]}`

// amSetup is a pipeline (events topic on) whose alerters post to a private
// Alertmanager whose only receiver is rcv, with an operator token.
type amSetup struct {
	p     *pipeline
	am    *testenv.AlertmanagerProc
	rcv   *testenv.AMReceiver
	cfg   Config
	token string
}

func newAMSetup(t *testing.T, repeat time.Duration) *amSetup {
	t.Helper()
	s := &amSetup{rcv: testenv.StartAMReceiver(t)}
	s.am = testenv.StartAlertmanager(t, testenv.AlertmanagerConfig(s.rcv.URL(), repeat))
	s.p = newPipeline(t, testenv.Kafka(t), testenv.Redis(t), 2).withEvents()
	dir := t.TempDir()
	zones := filepath.Join(dir, "zones.geojson")
	if err := os.WriteFile(zones, []byte(amZone), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s.token = tok
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(api.Token{Name: "ops-alice", Role: api.RoleOperator, Hash: api.HashToken(tok)}.Line()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cfg = s.p.config()
	s.cfg.Zones = zones
	s.cfg.APITokens = tokens
	s.cfg.Alertmanagers = []string{s.am.URL()}
	s.cfg.PublicURLs = []string{"https://nofly.example"}
	return s
}

// amPos is drone's position seq, inside the zone or 15 km away.
func amPos(drone string, seq int64, inside bool) telemetry.Position {
	lat, lon := 10.0, 10.0
	if !inside {
		lat, lon = 10.1, 10.1
	}
	alt := 80.0
	return telemetry.Position{DroneID: drone, Seq: seq, TS: time.Now().UTC().Truncate(time.Millisecond), Lat: lat, Lon: lon, AltM: &alt}
}

// ack acknowledges alarm id through the API of pr as the operator token.
func (s *amSetup) ack(t *testing.T, pr *proc, id, note string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+pr.http+"/v1/alarms/"+id+"/ack", bytes.NewReader([]byte(`{"note":"`+note+`"}`)))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("ack %s: %s", id, res.Status)
	}
}

// lastStatus is the status of the last notification of alarm id, "" when none.
func (s *amSetup) lastStatus(id string) string {
	ns := s.rcv.Notified(id)
	if len(ns) == 0 {
		return ""
	}
	return ns[len(ns)-1].Status
}

// TestAlertmanagerProof: an alarm reaches a person through the real
// Alertmanager. The raise arrives at the receiver as a firing alert with
// nofly's labels and the dashboard's deep link, and repeats; an ack
// through the API makes a silence (createdBy the token's name, comment
// the note) and the repeats stop; the alerter is SIGKILLed, the drone
// leaves meanwhile, and the restarted alerter gets the resolved
// notification out (its output resumes at its cursor) and expires the
// silence.
func TestAlertmanagerProof(t *testing.T) {
	t.Parallel()
	s := newAMSetup(t, 2*time.Second)
	ctx := context.Background()
	pr := s.p.startProc("am-1", s.cfg)
	pr.up(90 * time.Second)

	id := alerts.AlarmID("AM-1", "AMZ", 1)
	began := time.Now()
	s.p.produce([]telemetry.Position{amPos("AM-1", 1, true)})
	testenv.CheckFor(t, 30*time.Second, func() error {
		if s.lastStatus(id) != "firing" {
			return fmt.Errorf("no firing notification of %s yet", id)
		}
		return nil
	})
	t.Logf("raise to firing notification: %v", time.Since(began).Round(time.Millisecond))
	n := s.rcv.Notified(id)[0].Alert
	want := map[string]string{"alertname": "DroneInZone", "alarm_id": id, "drone": "AM-1", "zone": "AMZ", "zone_name": "Test airfield",
		"category": "restricted", "severity": "critical", "authorized": "false"}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if link := "https://nofly.example/#alarm=" + id; n.GeneratorURL != link || n.Annotations["dashboard"] != link {
		t.Errorf("generatorURL %q, dashboard %q; want %s", n.GeneratorURL, n.Annotations["dashboard"], link)
	}
	if !strings.Contains(n.Annotations["description"], "at 10.00000, 10.00000, 80 m AMSL") || n.Annotations["summary"] == "" {
		t.Errorf("annotations %v", n.Annotations)
	}
	testenv.CheckFor(t, 20*time.Second, func() error {
		if k := len(s.rcv.Notified(id)); k < 2 {
			return fmt.Errorf("%d notifications: no repeat yet", k)
		}
		return nil
	})

	s.ack(t, pr, id, "on my way")
	var silence string
	testenv.CheckFor(t, 20*time.Second, func() error {
		ss, err := s.am.Silences(ctx)
		if err != nil {
			return err
		}
		for _, x := range ss {
			if len(x.Matchers) == 1 && x.Matchers[0].Name == "alarm_id" && x.Matchers[0].Value == id && x.Status.State == "active" {
				if x.CreatedBy != "ops-alice" || x.Comment != "on my way" || time.Until(x.EndsAt) < 23*time.Hour {
					return fmt.Errorf("silence %+v", x)
				}
				silence = x.ID
				return nil
			}
		}
		return fmt.Errorf("no silence of %s yet", id)
	})
	time.Sleep(1500 * time.Millisecond) // a notification flushed as the silence came
	before := len(s.rcv.Notified(id))
	time.Sleep(6 * time.Second) // three repeat intervals
	if got := len(s.rcv.Notified(id)); got != before {
		t.Fatalf("%d notifications of %s after its ack's silence, want none", got-before, id)
	}

	pr.kill()
	s.p.produce([]telemetry.Position{amPos("AM-1", 2, false)})
	killed := time.Now()
	pr2 := s.p.startProc("am-2", s.cfg)
	pr2.up(90 * time.Second)
	testenv.CheckFor(t, 60*time.Second, func() error {
		if st := s.lastStatus(id); st != "resolved" {
			return fmt.Errorf("last notification of %s: %q, want resolved", id, st)
		}
		ss, err := s.am.Silences(ctx)
		if err != nil {
			return err
		}
		for _, x := range ss {
			if x.ID == silence && x.Status.State != "expired" {
				return fmt.Errorf("silence %s still %s", silence, x.Status.State)
			}
		}
		return nil
	})
	t.Logf("SIGKILL, clear and restart to resolved notification: %v", time.Since(killed).Round(time.Millisecond))
	if v, err := pr2.metric(`nofly_alertmanager_silences_expired_total{alertmanager="` + strings.TrimPrefix(s.am.URL(), "http://") + `"}`); err != nil || v != 1 {
		t.Errorf("silences expired = %v, %v; want 1", v, err)
	}
}

// TestAlertmanagerOutageProof: the Alertmanager is down for 30 s while
// drones enter and leave. The pipeline never stalls (the engine keeps
// applying, alerts.events keeps growing), nothing is dropped, and once the
// Alertmanager is back it holds exactly the active alarms, firing, and the
// receiver is told of each raised during the outage.
func TestAlertmanagerOutageProof(t *testing.T) {
	t.Parallel()
	s := newAMSetup(t, time.Hour)
	s.cfg.AlertmanagerRefresh = 5 * time.Second
	ctx := context.Background()
	pr := s.p.startProc("am-out", s.cfg)
	pr.up(90 * time.Second)

	seq := map[string]int64{}
	pos := func(drone string, inside bool) telemetry.Position {
		seq[drone]++
		return amPos(drone, seq[drone], inside)
	}
	raisedAt := map[string]int64{} // drone → the seq it raised at
	var before, during []string
	var recs []telemetry.Position
	for i := range 6 {
		d := fmt.Sprintf("B-%d", i)
		before = append(before, d)
		recs = append(recs, pos(d, true))
		raisedAt[d] = seq[d]
	}
	s.p.produce(recs)
	testenv.CheckFor(t, 30*time.Second, func() error {
		as, err := s.am.Alerts(ctx)
		if err == nil && len(as) != len(before) {
			err = fmt.Errorf("%d alerts, want %d", len(as), len(before))
		}
		return err
	})

	if err := s.am.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	eventsAtDown, err := s.p.topicEnd(ctx, s.p.events)
	if err != nil {
		t.Fatal(err)
	}
	// During the outage, a second at a time: half the early drones leave,
	// new ones enter, half of those leave again; every drone in the air
	// reports each second. alerts.events must grow with every decision.
	for sec := 0; sec < 30; sec++ {
		recs = recs[:0]
		for _, d := range before {
			recs = append(recs, pos(d, !(sec >= 5 && d < "B-3")))
		}
		if sec >= 10 {
			for i := range 6 {
				d := fmt.Sprintf("D-%d", i)
				if sec == 10 {
					during = append(during, d)
					raisedAt[d] = seq[d] + 1
				}
				recs = append(recs, pos(d, !(sec >= 20 && d < "D-3")))
			}
		}
		s.p.produce(recs)
		if sec == 12 || sec == 22 || sec == 29 {
			// The decisions of a moment ago are in alerts.events already.
			testenv.CheckFor(t, 5*time.Second, s.p.caughtUp)
			n, err := s.p.topicEnd(ctx, s.p.events)
			if err != nil {
				t.Fatal(err)
			}
			want := eventsAtDown + 3 // the B-0..2 clears
			if sec >= 12 {
				want += 6 // the D raises
			}
			if sec >= 22 {
				want += 3 // the D-0..2 clears
			}
			if n < want {
				t.Fatalf("alerts.events holds %d events %d s into the outage, want at least %d: the pipeline stalled", n, sec, want)
			}
		}
		time.Sleep(time.Until(down.Add(time.Duration(sec+1) * time.Second)))
	}
	if err := s.am.Start(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("alertmanager down for %v", back.Sub(down).Round(time.Millisecond))

	active := map[string]bool{}
	for _, d := range append(append([]string{}, before...), during...) {
		if !(d < "B-3" || (strings.HasPrefix(d, "D-") && d < "D-3")) {
			active[alerts.AlarmID(d, "AMZ", raisedAt[d])] = true
		}
	}
	testenv.CheckFor(t, 60*time.Second, func() error {
		as, err := s.am.Alerts(ctx)
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, a := range as {
			got[a.Labels["alarm_id"]] = true
		}
		for id := range active {
			if !got[id] {
				return fmt.Errorf("active alarm %s is not firing in the Alertmanager", id)
			}
		}
		if len(got) != len(active) {
			return fmt.Errorf("the Alertmanager holds %d alerts, want the %d active alarms", len(got), len(active))
		}
		for _, d := range during {
			id := alerts.AlarmID(d, "AMZ", raisedAt[d])
			if active[id] && s.lastStatus(id) != "firing" {
				return fmt.Errorf("no firing notification of %s, raised during the outage", id)
			}
		}
		return nil
	})
	t.Logf("alertmanager back to every active alarm notified: %v", time.Since(back).Round(time.Millisecond))
	name := strings.TrimPrefix(s.am.URL(), "http://")
	for _, reason := range []string{"refused", "backlog", "undecodable"} {
		if v, err := pr.metric(`nofly_alertmanager_drops_total{alertmanager="` + name + `",reason="` + reason + `"}`); err == nil && v != 0 {
			t.Errorf("drops (%s) = %v, want 0", reason, v)
		}
	}
	if v, err := pr.metric(`nofly_alertmanager_failures_total{alertmanager="` + name + `"}`); err != nil || v == 0 {
		t.Errorf("failures = %v, %v: the outage was not seen", v, err)
	}
}

// TestAlertmanagerSampleConfig: compose/alertmanager.yml, the sample
// routing docs/operations.md shows, is a configuration Alertmanager takes.
func TestAlertmanagerSampleConfig(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "scripts", "alertmanager.sh"), "check")
	cmd.Env = append(os.Environ(), "ALERTMANAGER_CONFIG="+filepath.Join(testenv.RepoRoot(), "compose", "alertmanager.yml"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/alertmanager.sh check: %v\n%s", err, out)
	}
}
