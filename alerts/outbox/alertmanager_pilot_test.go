package outbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestAlertmanagerPilotAnnotations: a raise whose event carries the pilot
// fires with "operator" (where, what kind, as of when) and
// "operator_range" (how far, which way from the drone) a person can read,
// and the description says it; a raise without one has neither.
func TestAlertmanagerPilotAnnotations(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 0, 3, 0, time.UTC)
	tg := &amTarget{cfg: &Alertmanager{Refresh: time.Minute}}
	ev := alerts.Event{EventID: "a:raised", AlarmID: "a", Type: alerts.Raised, DroneID: "UAV-1", ZoneID: "LHR", ZoneName: "Heathrow",
		Category: "restricted", TS: ts, Lat: 51.47, Lon: -0.45}
	tests := []struct {
		name      string
		op        *alerts.OperatorFix
		at, rng   string
		wantDescr string
	}{
		{"none", nil, "", "", ""},
		{"live, south-west, 1.2 km", &alerts.OperatorFix{Lat: 51.462, Lon: -0.462, Type: "live", TS: ts.Add(-2 * time.Second)},
			"51.46200, -0.46200 (live GNSS, as of 2026-12-02T10:00:01Z)", "1.2 km at 223° from the drone",
			"Pilot at 51.46200, -0.46200 (live GNSS, as of 2026-12-02T10:00:01Z), 1.2 km at 223° from the drone."},
		{"take-off, north, 556 m", &alerts.OperatorFix{Lat: 51.475, Lon: -0.45, Type: "takeoff", TS: ts},
			"51.47500, -0.45000 (take-off point, as of 2026-12-02T10:00:03Z)", "556 m at 0° from the drone", ""},
		{"no type, east", &alerts.OperatorFix{Lat: 51.47, Lon: -0.44, TS: ts},
			"51.47000, -0.44000 (type unknown, as of 2026-12-02T10:00:03Z)", "693 m at 90° from the drone", ""},
		{"fixed, on the drone", &alerts.OperatorFix{Lat: 51.47, Lon: -0.45, Type: "fixed", TS: ts},
			"51.47000, -0.45000 (fixed location, as of 2026-12-02T10:00:03Z)", "0 m at 0° from the drone", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := ev
			e.Operator = tc.op
			a := tg.firing(e.AlarmID, stateFromEvent(&e), whereOf(&e), nil, nil, ts)
			at, hasAt := a.Annotations["operator"]
			rng, hasRng := a.Annotations["operator_range"]
			if tc.op == nil {
				if hasAt || hasRng || strings.Contains(a.Annotations["description"], "Pilot") {
					t.Errorf("annotations %v for a raise without a pilot", a.Annotations)
				}
				return
			}
			if at != tc.at || rng != tc.rng {
				t.Errorf("operator %q, operator_range %q\nwant %q, %q", at, rng, tc.at, tc.rng)
			}
			if tc.wantDescr != "" && !strings.HasSuffix(a.Annotations["description"], tc.wantDescr) {
				t.Errorf("description %q does not end with %q", a.Annotations["description"], tc.wantDescr)
			}
		})
	}
}

// TestAlertmanagerPilotAfterAuthorisationChange: an authorisation change's
// event carries no pilot, yet the post it makes for the other series
// keeps the raise's pilot (before, it lacked it until the next refresh;
// the refresh is an hour away here, so only the event's post can show it).
func TestAlertmanagerPilotAfterAuthorisationChange(t *testing.T) {
	t.Parallel()
	rcv := testenv.StartAMReceiver(t)
	am := testenv.StartAlertmanager(t, testenv.AlertmanagerConfig(rcv.URL(), time.Hour))
	f := newAMFixture(t, am.URL())
	f.cfg.Alertmanager.Refresh = time.Hour
	ctx := context.Background()
	runDispatcher(t, f.cfg, f.rdb, 0)
	id := "c0000000000000000000000000000000"
	r := amEvent(alerts.Raised, id, "UAV-3", "LHR", "restricted")
	r.Operator = &alerts.OperatorFix{Lat: 51.462, Lon: -0.462, Type: "live", TS: r.TS}
	f.add(r)
	posted := func(authorized string) (*testenv.AMAlert, error) {
		as, err := am.Alerts(ctx)
		if err != nil {
			return nil, err
		}
		a := findAlert(as, id, authorized)
		if a == nil {
			return nil, fmt.Errorf("no authorized=%s alert of %s in %v", authorized, id, as)
		}
		return a, nil
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		a, err := posted("false")
		if err == nil && a.Annotations["operator"] == "" {
			err = fmt.Errorf("the raise's post has no operator: %v", a.Annotations)
		}
		return err
	})
	au := amEvent(alerts.Authorized, id, "UAV-3", "LHR", "restricted")
	au.Authorization = &alerts.AuthRef{ID: "au-9", Reference: "permit 9", Until: time.Now().Add(time.Hour).UTC()}
	f.add(au)
	testenv.CheckFor(t, 10*time.Second, func() error {
		a, err := posted("true")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(a.Annotations["operator"], "51.46200, -0.46200 (live GNSS") || a.Annotations["operator_range"] == "" {
			return fmt.Errorf("the authorised series lacks the raise's pilot: %v", a.Annotations)
		}
		return nil
	})
}
