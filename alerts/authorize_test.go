package alerts_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
)

// auth is an authorisation of drone in zones from..until seconds after base.
func auth(base time.Time, id, drone string, zones authorization.Zones, from, until float64) authorization.Authorization {
	at := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	return authorization.Authorization{ID: id, Drone: drone, Zones: zones, From: at(from), Until: at(until),
		Reason: "inspection", Reference: "P-" + id, By: "admin"}
}

// authSummary is clockSummary with the authorisation an event carries.
func authSummary(l *clockLog, evs []alerts.Event) string {
	var parts []string
	for _, e := range evs {
		s := clockSummary(l, []alerts.Event{e})
		if e.Authorization != nil {
			s += " [" + e.Authorization.ID + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func TestAuthorizations(t *testing.T) {
	ix := index(t, zonesJSON)
	base := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	all := authorization.Zones{All: true}
	sq := authorization.Zones{IDs: []string{"SQ"}}
	restricted := authorization.Zones{Categories: []geofence.Category{"restricted"}}
	warning := authorization.Zones{Categories: []geofence.Category{"warning"}}
	tests := []struct {
		name  string
		auths []authorization.Authorization
		build func(l *clockLog)
		want  string
	}{
		{"covered by id: raised with its authorisation, cleared as always", []authorization.Authorization{auth(base, "a1", "A", sq, -60, 600)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.005, 0.005, 0)
				l.pos(1, "A", 2, 0.02, 0.005, 0)
			}, "@0 raised A SQ [a1]; @1 cleared A SQ exited"},
		{"a prefix and a category cover; another drone and another category do not", []authorization.Authorization{
			auth(base, "p", "POLICE-*", restricted, -60, 600), auth(base, "w", "B", warning, -60, 600)},
			func(l *clockLog) {
				l.pos(0, "POLICE-7", 1, 0.005, 0.005, 0)
				l.pos(0, "B", 1, 0.005, 0.005, 0)
				l.pos(0, "POL-1", 1, 0.005, 0.005, 0)
			}, "@0 raised POLICE-7 SQ [p]; @0 raised B SQ; @0 raised POL-1 SQ"},
		{"not yet started: raised plain, then one authorized at the first second of log time after from", []authorization.Authorization{auth(base, "a1", "A", all, 5.5, 600)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.005, 0.005, 0)
				l.ticks(1, 10)
			}, "@0 raised A SQ; @6 authorized A SQ age=6 [a1]"},
		{"ends while inside: one unauthorized (expired) at the tick after until, then nothing", []authorization.Authorization{auth(base, "a1", "A", all, -60, 10)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.005, 0.005, 0)
				for s := 1; s <= 20; s++ {
					l.pos(float64(s), "A", int64(s+1), 0.006, 0.005, 0)
				}
				l.ticks(21, 25)
			}, "@0 raised A SQ [a1]; @10 unauthorized A SQ expired age=1 [a1]"},
		{"a silent drone is unauthorized too, then loses its signal", []authorization.Authorization{auth(base, "a1", "A", all, -60, 10)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.005, 0.005, 0)
				l.ticks(1, 31)
			}, "@0 raised A SQ [a1]; @10 unauthorized A SQ expired age=10 [a1]; @30 signal_lost A SQ age=30"},
		{"two cover: the one lasting longer; at its hand-over to none, unauthorized", []authorization.Authorization{
			auth(base, "b", "A", all, -60, 5), auth(base, "a", "A", sq, -60, 8)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.005, 0.005, 0)
				l.ticks(1, 9)
			}, "@0 raised A SQ [a]; @8 unauthorized A SQ expired age=8 [a]"},
		{"an overlapping one that lasts longer takes over as it starts: authorized with it", []authorization.Authorization{
			auth(base, "first", "A", all, -60, 5), auth(base, "second", "A", all, 3, 600)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.005, 0.005, 0)
				l.ticks(1, 9)
			}, "@0 raised A SQ [first]; @3 authorized A SQ age=3 [second]"},
		{"several zones, one covered: only that alarm is authorised", []authorization.Authorization{auth(base, "a1", "A", sq, -60, 4)},
			func(l *clockLog) {
				l.pos(0, "A", 1, 0.05, 0, 0) // CIR
				l.pos(1, "A", 2, 0.005, 0.005, 0)
				l.ticks(2, 6)
			}, "@0 raised A CIR; @1 cleared A CIR exited; @1 raised A SQ [a1]; @4 unauthorized A SQ expired age=3 [a1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &clockLog{base: base}
			tc.build(l)
			e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
			if err != nil {
				t.Fatal(err)
			}
			e.SetAuthorizations(authorization.NewSet(1, tc.auths))
			out := e.Apply(ix, l.recs)
			if got := authSummary(l, out.Events); got != tc.want {
				t.Errorf("events:\n got %s\nwant %s", got, tc.want)
			}
			if out.Batch.AuthVersion != 1 {
				t.Errorf("batch authorisation version %d, want 1", out.Batch.AuthVersion)
			}
			// Batch by batch, the engine rebuilt from each commit's states,
			// decides the same events (the memory is in the state).
			if got := authSummary(l, applyRebuilt(t, ix, l, authorization.NewSet(1, tc.auths), 3)); got != tc.want {
				t.Errorf("rebuilt batch by batch:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// applyRebuilt applies l's records in batches of n, each on an engine
// rebuilt from the previous batches' stored states and clock, as the
// alerter does after a crash, and returns every event.
func applyRebuilt(t *testing.T, zs alerts.Zones, l *clockLog, set *authorization.Set, n int) []alerts.Event {
	t.Helper()
	st := dedup.NewMemory(0)
	ctx := t.Context()
	var all []alerts.Event
	for i := 0; i < len(l.recs); i += n {
		snap, err := st.Load(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			snap.ZoneVersion = alerts.NoZoneVersion
		}
		e, err := alerts.NewEngine(0, snap)
		if err != nil {
			t.Fatal(err)
		}
		e.SetAuthorizations(set)
		out := e.Apply(zs, l.recs[i:min(i+n, len(l.recs))])
		if out == nil {
			continue
		}
		res, err := st.Commit(ctx, 0, out.Expected, out.Batch)
		if err != nil {
			t.Fatal(err)
		}
		if res.Suppressed > 0 {
			t.Errorf("batch at %d: %d events suppressed by their unique keys: decided twice", i, res.Suppressed)
		}
		all = append(all, out.Events...)
	}
	return all
}

func TestAuthorizationVersions(t *testing.T) {
	ix := index(t, zonesJSON)
	base := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	a1 := auth(base, "a1", "A", authorization.Zones{All: true}, -60, 600)
	v1 := authorization.NewSet(1, []authorization.Authorization{a1})
	tests := []struct {
		name string
		next func() *authorization.Set
		want string
	}{
		{"revoked before the switch: unauthorized (revoked) at the switch's first record", func() *authorization.Set {
			s, _ := v1.Revoke("a1", base.Add(3*time.Second), "admin")
			return s
		}, "@0 raised A SQ [a1]; @5 unauthorized A SQ revoked age=5 [a1]"},
		{"revoked at a later log time: unauthorized at the tick after it", func() *authorization.Set {
			s, _ := v1.Revoke("a1", base.Add(7500*time.Millisecond), "admin")
			return s
		}, "@0 raised A SQ [a1]; @8 unauthorized A SQ revoked age=8 [a1]"},
		{"made while the drone is inside: authorized at the switch", func() *authorization.Set {
			s, _ := v1.Add(auth(base, "b", "A", authorization.Zones{All: true}, -60, 900))
			return s
		}, "@0 raised A SQ [a1]; @5 authorized A SQ age=5 [b]"},
		{"a change that does not touch it: nothing", func() *authorization.Set {
			s, _ := v1.Add(auth(base, "c", "Z", authorization.Zones{All: true}, -60, 900))
			return s
		}, "@0 raised A SQ [a1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &clockLog{base: base}
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			l.ticks(1, 4)
			split := len(l.recs)
			l.ticks(5, 12)
			e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
			if err != nil {
				t.Fatal(err)
			}
			e.SetAuthorizations(v1)
			first := e.Apply(ix, l.recs[:split])
			next := tc.next()
			e.SetAuthorizations(next)
			second := e.Apply(ix, l.recs[split:])
			if second.Batch.AuthVersion != next.Version {
				t.Errorf("second batch's authorisation version %d, want %d", second.Batch.AuthVersion, next.Version)
			}
			got := authSummary(l, append(first.Events, second.Events...))
			if got != tc.want {
				t.Errorf("events:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestAuthorizationEventIDs(t *testing.T) {
	ix := index(t, zonesJSON)
	base := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	// Covered 0–3 s, not 3–6, covered 6–9, not after: four changes, each
	// its own event with its own id.
	set := authorization.NewSet(1, []authorization.Authorization{
		auth(base, "a", "A", authorization.Zones{All: true}, -60, 3), auth(base, "b", "A", authorization.Zones{All: true}, 6, 9)})
	l := &clockLog{base: base}
	l.pos(0, "A", 1, 0.005, 0.005, 0)
	l.ticks(1, 12)
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		t.Fatal(err)
	}
	e.SetAuthorizations(set)
	out := e.Apply(ix, l.recs)
	var ids []string
	for _, ev := range out.Events {
		ids = append(ids, strings.TrimPrefix(ev.EventID, ev.AlarmID))
	}
	if got, want := fmt.Sprint(ids), "[:raised :unauthorized:1 :authorized:2 :unauthorized:3]"; got != want {
		t.Errorf("event ids %s, want %s (%s)", got, want, authSummary(l, out.Events))
	}
	if out.Stats.Authorized != 1 || out.Stats.Unauthorized != 2 {
		t.Errorf("stats authorized %d unauthorized %d, want 1 and 2", out.Stats.Authorized, out.Stats.Unauthorized)
	}
}
