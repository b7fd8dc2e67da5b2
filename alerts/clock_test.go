package alerts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

// clockLog builds a partition's records on the log's clock: positions and
// ticks, each received at a time, at consecutive offsets.
type clockLog struct {
	base time.Time
	recs []alerts.Record
}

func (l *clockLog) at(sec float64) time.Time {
	return l.base.Add(time.Duration(sec * float64(time.Second)))
}

// pos appends drone's position with seq at lon (inside SQ: 0.005; outside
// every zone: 0.02), its ts tsOff seconds after its receive time rx.
func (l *clockLog) pos(rx float64, id string, seq int64, lon, lat float64, tsOff float64) {
	p := telemetry.Position{DroneID: id, Seq: seq, TS: l.at(rx + tsOff), Lat: lat, Lon: lon}
	l.recs = append(l.recs, alerts.Record{Offset: int64(len(l.recs)), Time: l.at(rx), Value: p.AppendJSON(nil)})
}

// ticks appends a tick every second from from to to (receive times).
func (l *clockLog) ticks(from, to float64) {
	for s := from; s <= to; s++ {
		tk := telemetry.Tick{At: l.at(s), From: "test"}
		l.recs = append(l.recs, alerts.Record{Offset: int64(len(l.recs)), Time: l.at(s), Value: tk.AppendJSON(nil)})
	}
}

// clockSummary renders events as "@rx type drone zone [reason] [age]", rx
// the receive time (seconds after base) of the record each was decided at.
func clockSummary(l *clockLog, evs []alerts.Event) string {
	var parts []string
	for _, e := range evs {
		s := fmt.Sprintf("@%g %s %s %s", l.recs[e.Offset].Time.Sub(l.base).Seconds(), e.Type, e.DroneID, e.ZoneID)
		if e.Reason != "" {
			s += " " + e.Reason
		}
		if e.AgeS != nil {
			s += fmt.Sprintf(" age=%g", *e.AgeS)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func runLog(t *testing.T, zs alerts.Zones, l *clockLog, timing alerts.Timing) []alerts.Event {
	t.Helper()
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		t.Fatal(err)
	}
	e.SetTiming(timing)
	out := e.Apply(zs, l.recs)
	return out.Events
}

func TestClockSignalLost(t *testing.T) {
	ix := index(t, zonesJSON)
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		build func(l *clockLog)
		want  string
	}{
		{"silent inside: one signal_lost after 30 s of log time, regained by the next position", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			l.pos(1, "A", 2, 0.006, 0.005, 0)
			l.ticks(2, 40)
			l.pos(45, "A", 3, 0.006, 0.005, 0)
			l.pos(46, "A", 4, 0.02, 0.005, 0)
		}, "@0 raised A SQ; @31 signal_lost A SQ age=30; @45 signal_regained A SQ age=44; @46 cleared A SQ exited"},
		{"no ticks, no other traffic: the clock stands still, nothing is decided", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
		}, "@0 raised A SQ"},
		{"another drone's traffic moves the clock too", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			for s := 1; s <= 35; s++ {
				l.pos(float64(s), "B", int64(s), 0.5, 0.5, 0)
			}
		}, "@0 raised A SQ; @30 signal_lost A SQ age=30"},
		{"a drone whose ts runs 5 minutes ahead makes nobody lost early, and is not lost itself", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			l.pos(0.5, "F", 1, 0.005, 0.005, 300)
			for s := 1; s <= 20; s++ {
				l.pos(float64(s), "F", int64(s+1), 0.006, 0.005, 300)
			}
			l.ticks(21, 31)
		}, "@0 raised A SQ; @0.5 raised F SQ; @30 signal_lost A SQ age=30"},
		{"lost twice: two events, each once", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			l.ticks(1, 30)
			l.pos(31, "A", 2, 0.005, 0.005, 0)
			l.ticks(32, 62)
		}, "@0 raised A SQ; @30 signal_lost A SQ age=30; @31 signal_regained A SQ age=31; @61 signal_lost A SQ age=30"},
		{"a duplicate is not a sign of life", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			l.ticks(1, 20)
			l.pos(21, "A", 1, 0.005, 0.005, -21) // the same record again
			l.ticks(22, 31)
		}, "@0 raised A SQ; @30 signal_lost A SQ age=30"},
		{"the clock never goes back: a late record of another writer", func(l *clockLog) {
			l.pos(0, "A", 1, 0.005, 0.005, 0)
			l.ticks(1, 29)
			l.pos(2, "B", 1, 0.5, 0.5, 0) // received at 2 s by a slower ingest
			l.ticks(30, 30)
		}, "@0 raised A SQ; @30 signal_lost A SQ age=30"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &clockLog{base: base}
			tc.build(l)
			got := clockSummary(l, runLog(t, ix, l, alerts.Timing{}))
			if got != tc.want {
				t.Errorf("events\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestClockSignalEventFields(t *testing.T) {
	ix := index(t, zonesJSON)
	l := &clockLog{base: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	l.pos(0, "A", 7, 0.005, 0.005, 0)
	l.ticks(1, 30)
	l.pos(31, "A", 8, 0.006, 0.005, 0)
	evs := runLog(t, ix, l, alerts.Timing{})
	if len(evs) != 3 {
		t.Fatalf("events %s", clockSummary(l, evs))
	}
	raised, lost, back := evs[0], evs[1], evs[2]
	if lost.EventID != raised.AlarmID+":signal_lost:1" || back.EventID != raised.AlarmID+":signal_regained:1" || lost.AlarmID != raised.AlarmID {
		t.Errorf("ids %s %s (alarm %s)", lost.EventID, back.EventID, raised.AlarmID)
	}
	if lost.Seq != 7 || !lost.TS.Equal(l.at(0)) || lost.Lat != 0.005 || lost.LastSeen == nil || !lost.LastSeen.Equal(l.at(0)) ||
		lost.ZoneName != "Square" || lost.Offset != 30 {
		t.Errorf("signal_lost %+v: want the last known position, last seen at 0 s, decided at the 30 s tick (offset 30)", lost)
	}
	if back.Seq != 8 || back.Lon != 0.006 || back.LastSeen == nil || !back.LastSeen.Equal(l.at(0)) || *back.AgeS != 31 {
		t.Errorf("signal_regained %+v: want the new position, last seen at 0, silent 31 s", back)
	}
}

// TestClockZones: a zone whose window opens or closes around a silent
// drone, and a zone set that changes, are judged at the first tick — at
// the drone's own time, so a drone whose clock is off does not flap.
func TestClockZones(t *testing.T) {
	ix := index(t, zonesJSON) // TMP: lon 0.2..0.21, active 10:00 to 11:00 on 2026-12-02
	base := time.Date(2026, 12, 2, 9, 59, 50, 0, time.UTC)
	never := alerts.Timing{SignalLostAfter: -1}
	tests := []struct {
		name   string
		timing alerts.Timing
		build  func(l *clockLog)
		want   string
	}{
		{"the window opens over a silent drone: raised at the first tick after", never, func(l *clockLog) {
			l.pos(0, "A", 1, 0.205, 0.005, 0)
			l.ticks(1, 12)
		}, "@10 raised A TMP zone_activated age=10"},
		{"and it is lost 30 s after it was last heard", alerts.Timing{}, func(l *clockLog) {
			l.pos(0, "A", 1, 0.205, 0.005, 0)
			l.ticks(1, 31)
		}, "@10 raised A TMP zone_activated age=10; @30 signal_lost A TMP age=30"},
		{"the window closes over a silent drone: cleared zone_inactive", never, func(l *clockLog) {
			l.pos(0, "A", 1, 0.205, 0.005, 3590) // its ts 10:59:40
			l.ticks(1, 25)
		}, "@0 raised A TMP; @20 cleared A TMP zone_inactive age=20"},
		{"a drone whose clock is 5 minutes slow is judged at its own time: no raise at 10:00 by the log", never, func(l *clockLog) {
			l.pos(0, "S", 1, 0.205, 0.005, -300)
			l.ticks(1, 30)
		}, ""},
		{"a drone heard each second is decided by its positions, not twice", never, func(l *clockLog) {
			for s := 0; s <= 15; s++ {
				l.pos(float64(s), "A", int64(s+1), 0.205, 0.005, 0)
			}
		}, "@10 raised A TMP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &clockLog{base: base}
			tc.build(l)
			if got := clockSummary(l, runLog(t, ix, l, tc.timing)); got != tc.want {
				t.Errorf("events\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestClockZoneSetChanges(t *testing.T) {
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	v1 := versioned(t, zonesJSON, 1)
	// v2: SQ removed, CIR's radius grown (changed), a new zone NEW over 0.5, 0.5.
	v2 := versioned(t, strings.NewReplacer(
		`{"type":"Feature","properties":{"id":"SQ","name":"Square","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[0,0],[0.01,0],[0.01,0.01],[0,0.01],[0,0]]]}},`,
		`{"type":"Feature","properties":{"id":"NEW","name":"New","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[0.49,0.49],[0.51,0.49],[0.51,0.51],[0.49,0.51],[0.49,0.49]]]}},`,
		`"radius_m":200,`, `"radius_m":400,`).Replace(zonesJSON), 2)
	l := &clockLog{base: base}
	l.pos(0, "A", 1, 0.005, 0.005, 0) // in SQ
	l.pos(0, "B", 1, east(150), 0, 0) // in CIR
	l.pos(0, "C", 1, 0.5, 0.5, 0)     // in no zone yet
	l.ticks(1, 3)
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		t.Fatal(err)
	}
	evs := e.Apply(v1, l.recs[:4]).Events
	evs = append(evs, e.Apply(v2, l.recs[4:]).Events...)
	want := "@0 raised A SQ; @0 raised B CIR; @2 cleared A SQ zone_removed age=2; @2 cleared B CIR zone_changed age=2; " +
		"@2 raised B CIR zone_changed age=2; @2 raised C NEW zone_changed age=2"
	if got := clockSummary(l, evs); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
}

func versioned(t *testing.T, src string, v int64) alerts.Zones {
	t.Helper()
	ix := index(t, src)
	return zonesAt{ix, v}
}

// zonesAt is an index with a zone store version.
type zonesAt struct {
	alerts.Zones
	v int64
}

func (z zonesAt) ZoneVersion() int64 { return z.v }

func TestClockForgets(t *testing.T) {
	ix := index(t, zonesJSON)
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	timing := alerts.Timing{DroneTTL: time.Hour, KeepAfterRaise: 3 * time.Hour}
	l := &clockLog{base: base}
	l.pos(0, "Q", 1, 0.5, 0.5, 0)     // quiet, never raised: forgotten after an hour
	l.pos(0, "R", 1, 0.005, 0.005, 0) // raised ...
	l.pos(1, "R", 2, 0.02, 0.005, 0)  // ... and cleared: kept three hours after the raise
	for h := 1; h <= 4; h++ {
		l.ticks(float64(h*3600-1), float64(h*3600+1))
	}
	l.pos(4*3600+2, "Q", 1, 0.5, 0.5, -4*3600-2) // a late duplicate of Q's record: Q starts afresh
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		t.Fatal(err)
	}
	e.SetTiming(timing)
	var forgot []string
	at := 0
	for i := range l.recs {
		out := e.Apply(ix, l.recs[i:i+1])
		for _, id := range out.Batch.Forgotten {
			forgot = append(forgot, fmt.Sprintf("%s@%gh", id, l.recs[i].Time.Sub(base).Hours()))
			at++
		}
	}
	if got := strings.Join(forgot, " "); got != "Q@1h R@3h" {
		t.Errorf("forgotten %q, want Q at 1 h, R at 3 h (its raise's keys)", got)
	}
	if _, ok := e.Drone("R"); ok {
		t.Error("R still known")
	}
	if q, ok := e.Drone("Q"); !ok || q.Seq != 1 {
		t.Errorf("Q back afresh: %+v %v", q, ok)
	}
}

// TestClockRestartEquivalence: an engine rebuilt from the store between
// two batches (a crash, a rebalance) decides by the clock exactly as one
// that went on: the clock and the lost flags are in the commit.
func TestClockRestartEquivalence(t *testing.T) {
	ix := index(t, zonesJSON)
	l := &clockLog{base: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	l.pos(0, "A", 1, 0.005, 0.005, 0)
	l.ticks(1, 20)
	l.pos(20.5, "B", 1, 0.5, 0.5, 0) // a late writer's record: received before the clock
	l.ticks(21, 45)
	l.pos(46, "A", 2, 0.005, 0.005, 0)
	l.ticks(47, 80)
	straight := clockSummary(l, runLog(t, ix, l, alerts.Timing{}))
	for cut := 1; cut < len(l.recs); cut += 7 {
		store := dedup.NewMemory(0)
		ctx := context.Background()
		var evs []alerts.Event
		for _, part := range [][]alerts.Record{l.recs[:cut], l.recs[cut:]} {
			snap, err := store.Load(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			e, err := alerts.NewEngine(0, snap)
			if err != nil {
				t.Fatal(err)
			}
			out := e.Apply(ix, part)
			if _, err := store.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, out.Events...)
		}
		if got := clockSummary(l, evs); got != straight {
			t.Errorf("cut at %d:\n got %s\nwant %s", cut, got, straight)
		}
	}
	if !strings.Contains(straight, "signal_lost") || !strings.Contains(straight, "signal_regained") {
		t.Fatalf("the log decides nothing by the clock: %s", straight)
	}
}
