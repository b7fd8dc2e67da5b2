package alerts_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/paulmach/orb"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// Zones of the unit tests, near (0, 0):
//   - SQ: the square lon 0..0.01, lat 0..0.01 (about 1.1 km a side);
//   - CIR: a 200 m circle at lon 0.05, lat 0 with a 100 m clear buffer;
//   - BAND: the square lon 0.1..0.11, lat 0..0.01 between 100 and 200 m AMSL;
//   - TMP: the square lon 0.2..0.21 active 10:00 to 11:00 on 2026-12-02.
const zonesJSON = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"SQ","name":"Square","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[0,0],[0.01,0],[0.01,0.01],[0,0.01],[0,0]]]}},
{"type":"Feature","properties":{"id":"CIR","name":"Circle","category":"warning","radius_m":200,"clear_buffer_m":100},
 "geometry":{"type":"Point","coordinates":[0.05,0]}},
{"type":"Feature","properties":{"id":"BAND","name":"Band","category":"restricted","floor_m":100,"ceiling_m":200},
 "geometry":{"type":"Polygon","coordinates":[[[0.1,0],[0.11,0],[0.11,0.01],[0.1,0.01],[0.1,0]]]}},
{"type":"Feature","properties":{"id":"TMP","name":"Temporary","category":"restricted","active_from":"2026-12-02T10:00:00Z","active_until":"2026-12-02T11:00:00Z"},
 "geometry":{"type":"Polygon","coordinates":[[[0.2,0],[0.21,0],[0.21,0.01],[0.2,0.01],[0.2,0]]]}}
]}`

func index(t testing.TB, src string) *geofence.Index {
	t.Helper()
	set, _, err := geofence.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

var t0 = time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)

func pos(seq int64, lon, lat float64, alt *float64) telemetry.Position {
	return telemetry.Position{DroneID: "D1", Seq: seq, TS: t0.Add(time.Duration(seq) * time.Second), Lat: lat, Lon: lon, AltM: alt}
}

// metres east of lon 0.05 on the equator, in degrees.
func east(m float64) float64 { return 0.05 + m/(orb.EarthRadius*math.Pi/180) }

// summary renders events as "type zone seq [reason] [assumed]".
func summary(evs []alerts.Event) string {
	var parts []string
	for _, e := range evs {
		s := fmt.Sprintf("%s %s %d", e.Type, e.ZoneID, e.Seq)
		if e.Reason != "" {
			s += " " + e.Reason
		}
		if e.HeightAssumed {
			s += " assumed"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func TestStep(t *testing.T) {
	ix := index(t, zonesJSON)
	alt := telemetry.Float
	tests := []struct {
		name string
		path []telemetry.Position
		want []string // events after each position
	}{
		{"enter stay exit", []telemetry.Position{pos(1, -0.01, 0.005, nil), pos(2, 0.005, 0.005, nil), pos(3, 0.006, 0.005, nil), pos(4, 0.02, 0.005, nil)},
			[]string{"", "raised SQ 2", "", "cleared SQ 4 exited"}},
		{"duplicate and stale change nothing", []telemetry.Position{pos(5, 0.005, 0.005, nil), pos(5, 0.02, 0.005, nil), pos(3, 0.02, 0.005, nil), pos(6, 0.02, 0.005, nil)},
			[]string{"raised SQ 5", "-", "-", "cleared SQ 6 exited"}},
		{"re-entry is a new alarm", []telemetry.Position{pos(1, 0.005, 0.005, nil), pos(2, 0.02, 0.005, nil), pos(3, 0.005, 0.005, nil)},
			[]string{"raised SQ 1", "cleared SQ 2 exited", "raised SQ 3"}},
		{"hysteresis: within the clear buffer stays", []telemetry.Position{pos(1, east(150), 0, nil), pos(2, east(250), 0, nil), pos(3, east(290), 0, nil), pos(4, east(310), 0, nil)},
			[]string{"raised CIR 1", "", "", "cleared CIR 4 exited"}},
		{"outside the buffer before entering raises nothing", []telemetry.Position{pos(1, east(250), 0, nil), pos(2, east(199), 0, nil)},
			[]string{"", "raised CIR 2"}},
		{"altitude band", []telemetry.Position{pos(1, 0.105, 0.005, alt(50)), pos(2, 0.105, 0.005, alt(150)), pos(3, 0.105, 0.005, alt(250)), pos(4, 0.105, 0.005, nil), pos(5, 0.105, 0.005, alt(200))},
			[]string{"", "raised BAND 2", "cleared BAND 3 exited", "raised BAND 4 assumed", ""}},
		{"height in another reference is unknown", []telemetry.Position{{DroneID: "D1", Seq: 1, TS: t0, Lat: 0.005, Lon: 0.105, AltM: alt(500), AltRef: telemetry.RefAGL}},
			[]string{"raised BAND 1 assumed"}},
		{"time window", []telemetry.Position{
			{DroneID: "D1", Seq: 1, TS: t0.Add(-time.Hour), Lat: 0.005, Lon: 0.205},
			{DroneID: "D1", Seq: 2, TS: t0, Lat: 0.005, Lon: 0.205},
			{DroneID: "D1", Seq: 3, TS: t0.Add(30 * time.Minute), Lat: 0.005, Lon: 0.205}},
			[]string{"", "raised TMP 2", "cleared TMP 3 zone_inactive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := alerts.NewDroneState()
			for i, p := range tc.path {
				evs, _, ok := alerts.Step(&s, &p, ix, nil, nil)
				got := summary(evs)
				if !ok {
					got = "-"
				}
				if got != tc.want[i] {
					t.Errorf("position %d (seq %d): events %q, want %q", i, p.Seq, got, tc.want[i])
				}
			}
		})
	}
}

func TestStepEventFields(t *testing.T) {
	ix := index(t, zonesJSON)
	s := alerts.NewDroneState()
	p := pos(7, 0.005, 0.005, telemetry.Float(42))
	evs, _, _ := alerts.Step(&s, &p, ix, nil, nil)
	if len(evs) != 1 {
		t.Fatalf("events = %+v", evs)
	}
	e := evs[0]
	id := alerts.AlarmID("D1", "SQ", 7)
	if e.AlarmID != id || e.EventID != id+":raised" || len(id) != 32 {
		t.Errorf("ids = %s %s", e.AlarmID, e.EventID)
	}
	if e.ZoneName != "Square" || e.Category != "restricted" || e.DroneID != "D1" || *e.AltM != 42 || e.AltRef != "AMSL" || !e.TS.Equal(p.TS) {
		t.Errorf("event = %+v", e)
	}
	q := pos(8, 0.5, 0.5, nil)
	evs, _, _ = alerts.Step(&s, &q, ix, nil, nil)
	if len(evs) != 1 || evs[0].AlarmID != id || evs[0].EventID != id+":cleared" || evs[0].ZoneName != "Square" || evs[0].AltM != nil {
		t.Errorf("clear = %+v", evs)
	}
	if alerts.AlarmID("D1", "SQ", 7) == alerts.AlarmID("D1", "SQ", 8) || alerts.AlarmID("D1", "SQ", 7) == alerts.AlarmID("D1S", "Q", 7) {
		t.Error("alarm ids collide")
	}
}

// TestStepZoneReload: an alarm whose zone was removed or changed clears at
// the drone's next position; a changed zone that still holds the drone
// raises a new alarm.
func TestStepZoneReload(t *testing.T) {
	ix := index(t, zonesJSON)
	removed := index(t, strings.Replace(zonesJSON, `"id":"SQ"`, `"id":"SQ2"`, 1))
	changed := index(t, strings.Replace(zonesJSON, `"name":"Square"`, `"name":"Square v2"`, 1))
	tests := []struct {
		name  string
		after *geofence.Index
		want  string
	}{
		{"same set", ix, ""},
		{"removed", removed, "cleared SQ 2 zone_removed; raised SQ2 2"},
		{"changed", changed, "cleared SQ 2 zone_changed; raised SQ 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := alerts.NewDroneState()
			p1, p2 := pos(1, 0.005, 0.005, nil), pos(2, 0.005, 0.005, nil)
			alerts.Step(&s, &p1, ix, nil, nil)
			evs, _, _ := alerts.Step(&s, &p2, tc.after, nil, nil)
			if got := summary(evs); got != tc.want {
				t.Errorf("events %q, want %q", got, tc.want)
			}
			if tc.name == "changed" && (evs[0].AlarmID == evs[1].AlarmID || evs[0].ZoneName != "Square" || evs[1].ZoneName != "Square v2") {
				t.Errorf("changed zone: %+v", evs)
			}
		})
	}
}

// TestStepOrder: a drone's records are ordered by ts, then seq
// (docs/exactly-once.md, "A drone's order"). No seq can hold a drone's
// later records back; a restarted counter is heard; duplicates and stale
// re-sends still change nothing; a seq used again raises under another
// alarm id.
func TestStepOrder(t *testing.T) {
	ix := index(t, zonesJSON)
	const in, out = 0.005, 0.02 // lon inside SQ, outside every zone
	fix := func(seq int64, sec int, lon float64) telemetry.Position {
		return telemetry.Position{DroneID: "D1", Seq: seq, TS: t0.Add(time.Duration(sec) * time.Second), Lat: 0.005, Lon: lon}
	}
	const wild = math.MaxInt64
	tests := []struct {
		name string
		path []telemetry.Position
		want []string // events after each position ("-": not applied)
	}{
		{"a wild seq holds nothing back", []telemetry.Position{fix(1, 1, out), fix(wild, 2, out), fix(2, 3, in), fix(3, 4, out)},
			[]string{"", "", "raised SQ 2", "cleared SQ 3 exited"}},
		{"the wild record's duplicate is still a duplicate", []telemetry.Position{fix(wild, 2, in), fix(2, 3, in), fix(wild, 2, in), fix(3, 4, out)},
			[]string{"raised SQ " + fmt.Sprint(int64(wild)), "", "-", "cleared SQ 3 exited"}},
		{"a restarted counter is heard; stale re-sends from before it are not", []telemetry.Position{
			fix(100, 1, in), fix(101, 2, out), fix(0, 60, out), fix(1, 61, in), fix(101, 2, in), fix(1, 61, in), fix(100, 1, in), fix(2, 62, out)},
			[]string{"raised SQ 100", "cleared SQ 101 exited", "", "raised SQ 1", "-", "-", "-", "cleared SQ 2 exited"}},
		{"same ts: seq decides", []telemetry.Position{fix(5, 1, out), fix(6, 1, in), fix(4, 1, out), fix(6, 1, out), fix(7, 1, out)},
			[]string{"", "raised SQ 6", "-", "-", "cleared SQ 7 exited"}},
		{"a feed that never counts: every later ts is a new fix", []telemetry.Position{fix(0, 1, out), fix(0, 2, in), fix(0, 2, out), fix(0, 3, out)},
			[]string{"", "raised SQ 0", "-", "cleared SQ 0 exited"}},
		{"ts back with a higher seq is stale", []telemetry.Position{fix(1, 10, out), fix(2, 5, in), fix(3, 11, out)},
			[]string{"", "-", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := alerts.NewDroneState()
			for i, p := range tc.path {
				evs, _, ok := alerts.Step(&s, &p, ix, nil, nil)
				got := summary(evs)
				if !ok {
					got = "-"
				}
				if got != tc.want[i] {
					t.Errorf("position %d (seq %d, ts %v): events %q, want %q", i, p.Seq, p.TS.Sub(t0), got, tc.want[i])
				}
			}
		})
	}

	t.Run("a seq used again names another alarm", func(t *testing.T) {
		s := alerts.NewDroneState()
		var ids []string
		for _, p := range []telemetry.Position{fix(7, 1, in), fix(8, 2, out), fix(7, 30, in), fix(8, 31, out), fix(7, 60, in)} {
			evs, _, ok := alerts.Step(&s, &p, ix, nil, nil)
			if !ok {
				t.Fatalf("seq %d at %v not applied", p.Seq, p.TS)
			}
			for _, e := range evs {
				if e.Type == alerts.Raised {
					ids = append(ids, e.AlarmID)
				}
			}
		}
		want := []string{alerts.AlarmID("D1", "SQ", 7), alerts.AlarmIDAt("D1", "SQ", 7, 1), alerts.AlarmIDAt("D1", "SQ", 7, 2)}
		if fmt.Sprint(ids) != fmt.Sprint(want) || want[0] == want[1] || want[1] == want[2] {
			t.Errorf("alarm ids %v, want %v, all different", ids, want)
		}
		if s.Resets != 2 {
			t.Errorf("resets %d, want 2", s.Resets)
		}
		if alerts.AlarmIDAt("D1", "SQ", 7, 0) != alerts.AlarmID("D1", "SQ", 7) {
			t.Error("run 0's id is not the contract's AlarmID")
		}
	})

	t.Run("a state written before states kept a position goes by seq", func(t *testing.T) {
		s, err := alerts.DecodeDroneState([]byte(`{"seq":4}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			p    telemetry.Position
			want bool
		}{{fix(3, 100, out), false}, {fix(4, 100, out), false}, {fix(5, 1, out), true}, {fix(4, 2, out), true}} {
			if _, _, ok := alerts.Step(&s, &c.p, ix, nil, nil); ok != c.want {
				t.Errorf("seq %d ts %v: applied %v, want %v", c.p.Seq, c.p.TS.Sub(t0), ok, c.want)
			}
		}
	})
}
