package reference

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// The approach tests' frame: x metres east, y metres north of (0°, 51°N).
func ll(x, y float64) (lon, lat float64) {
	return x / (math.Cos(51*math.Pi/180) * mPerDeg), 51 + y/mPerDeg
}

// square is a zone feature: the square x0..x0+side, y0..y0+side, with extra
// properties (`"category":"warning"`, …).
func square(id, props string, x0, y0, side float64) string {
	var pts []string
	for _, c := range [][2]float64{{x0, y0}, {x0 + side, y0}, {x0 + side, y0 + side}, {x0, y0 + side}, {x0, y0}} {
		lon, lat := ll(c[0], c[1])
		pts = append(pts, fmt.Sprintf("[%.10f,%.10f]", lon, lat))
	}
	if props != "" {
		props = "," + props
	}
	return fmt.Sprintf(`{"type":"Feature","properties":{"id":%q%s},"geometry":{"type":"Polygon","coordinates":[[%s]]}}`,
		id, props, strings.Join(pts, ","))
}

func circle(id string, x, y, r float64) string {
	lon, lat := ll(x, y)
	return fmt.Sprintf(`{"type":"Feature","properties":{"id":%q,"radius_m":%g},"geometry":{"type":"Point","coordinates":[%.10f,%.10f]}}`,
		id, r, lon, lat)
}

func zonesOf(t *testing.T, features ...string) []Zone {
	t.Helper()
	path := filepath.Join(t.TempDir(), "z.geojson")
	body := `{"type":"FeatureCollection","features":[` + strings.Join(features, ",") + `]}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	zs, err := LoadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	return zs
}

// fix is drone d's position seq at s seconds (ts and receive time), x, y.
func fix(seq int64, s, x, y float64) Rec {
	lon, lat := ll(x, y)
	return Rec{Pos: telemetry.Position{DroneID: "d", Seq: seq, TS: sec(s), Lon: lon, Lat: lat}, At: sec(s)}
}

// east is the drone flying east along y = 250 at vx m/s: position i (seq i,
// at i s) at x0 + vx·i, for i in from..to.
func east(from, to int, x0, vx float64) []Rec {
	var rs []Rec
	for i := from; i <= to; i++ {
		rs = append(rs, fix(int64(i), float64(i), x0+vx*float64(i), 250))
	}
	return rs
}

// reported sets every position's reported speed and heading.
func reported(rs []Rec, speed, heading float64) []Rec {
	for i := range rs {
		rs[i].Pos.SpeedMPS, rs[i].Pos.HeadingDeg = &speed, &heading
	}
	return rs
}

func at(rs []Rec, alt float64) []Rec {
	for i := range rs {
		rs[i].Pos.AltM = &alt
	}
	return rs
}

func approaching(zone string, seq int64) Event {
	return Event{AlarmID: ApproachID("d", zone, seq, 0), Type: "approaching", DroneID: "d", ZoneID: zone, Seq: seq}
}

func approachEnded(zone string, openSeq, seq int64, reason string) Event {
	return Event{AlarmID: ApproachID("d", zone, openSeq, 0), Type: "approach_ended", DroneID: "d", ZoneID: zone, Seq: seq, Reason: reason}
}

func identities(es []Event) []Event {
	out := []Event{}
	for _, e := range es {
		out = append(out, e.Identity())
	}
	return out
}

// TestApproaching: the square S is x 0..500, y 0..500; the straight flight
// at it (east, y = 250, 10 m/s from x = -1005) is at x = -1005 + 10·i at
// i s, so its time to entry at position i is 100.5 - i s: with a 30 s
// horizon it first qualifies at 71, opens at 72, and raises at 101 (x = 5).
func TestApproaching(t *testing.T) {
	S := square("S", "", 0, 0, 500)
	thirty := ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}, BufferM: 50}
	type tc struct {
		name     string
		zones    []string
		sets     [][]string // zone sets when switched (then zones is unused)
		switchAt []int
		s        ApproachSettings
		auths    []Auth
		recs     []Rec
		want     []Event
		eta      [2]float64 // the approaching event's ETA within, when set
		own      bool       // a zone has approach_before_s: warned without settings too
	}
	cases := []tc{
		{
			// Raised, then silent: the raise ended the episode, so the
			// silence loses the alarm's signal and ends no episode.
			name: "straight at the square", zones: []string{S}, s: thirty,
			recs: recs(east(0, 105, -1005, 10), ticks(106, 140, 1)),
			want: []Event{approaching("S", 72), raised("d", "S", 101, ""),
				{AlarmID: AlarmID("d", "S", 101, 0), Type: "signal_lost", DroneID: "d", ZoneID: "S", Seq: 105, N: 1}},
			eta: [2]float64{28.4, 28.6},
		},
		{
			name: "straight at a circle", zones: []string{circle("C", 250, 250, 250)}, s: thirty,
			recs: east(0, 105, -1005, 10),
			want: []Event{approaching("C", 72), raised("d", "C", 101, "")},
			eta:  [2]float64{28.4, 28.6},
		},
		{
			// Reverses at 75 (x = -255): at 76 the smoothed velocity is 5 m/s
			// east, 265 m away: eta 53 s > 45 s, distance > 75 m: outside
			// the hold band from 76, ended at 86.
			name: "turns away", zones: []string{S}, s: thirty,
			recs: recs(east(0, 75, -1005, 10), east(76, 90, -255+750, -10)),
			want: []Event{approaching("S", 72), approachEnded("S", 72, 86, "turned_away")},
		},
		{
			name: "parallel outside the buffer", zones: []string{S}, s: thirty,
			recs: func() []Rec {
				var rs []Rec
				for i := 0; i <= 250; i++ {
					rs = append(rs, fix(int64(i), float64(i), -100, -1000+10*float64(i)))
				}
				return rs
			}(),
		},
		{
			// 1.2 m/s: no prediction (50 m at 1.2 m/s is 42 s, beyond
			// the 30 s horizon); 50 m away at i = 8.3, closing by 1.2 m
			// a second > 0.5: qualifies at 9, opens at 10, holds.
			name: "near and closing, slow", zones: []string{S}, s: thirty,
			recs: east(0, 40, -60, 1.2),
			want: []Event{approaching("S", 10)},
			eta:  [2]float64{-1, -1},
		},
		{
			// GNSS jitter of 1.5 m beside the zone: closing every other fix.
			name: "hovering beside the zone", zones: []string{S}, s: thirty,
			recs: func() []Rec {
				var rs []Rec
				for i := 0; i <= 60; i++ {
					rs = append(rs, fix(int64(i), float64(i), -20-1.5*float64(i%2), 250))
				}
				return rs
			}(),
		},
		{
			// Closing by 0.3 m/s, under the 0.5 m/s the rule asks for.
			name: "drifting slowly beside the zone", zones: []string{S}, s: thirty,
			recs: east(0, 40, -40, 0.3),
		},
		{
			// No buffer: 20 m away at 0.8 m/s (eta 25 s) is too slow to
			// predict; at 1.2 m/s it qualifies from 1 (the first velocity).
			name: "under 1 m/s: no prediction", zones: []string{S},
			s:    ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}},
			recs: east(0, 10, -20, 0.8),
		},
		{
			name: "1.2 m/s: predicted", zones: []string{S},
			s:    ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}},
			recs: east(0, 5, -20, 1.2),
			want: []Event{approaching("S", 2)},
			eta:  [2]float64{14.6, 14.7},
		},
		{
			name: "hovering still beside the zone", zones: []string{S}, s: thirty,
			recs: east(0, 60, -20, 0),
		},
		{
			// Standing still at 200 m but reporting 10 m/s east: eta 20 s
			// from the first position on.
			name: "reported speed and heading", zones: []string{S}, s: thirty,
			recs: reported(east(1, 4, -200, 0), 10, 90),
			want: []Event{approaching("S", 2)},
			eta:  [2]float64{19.9, 20.1},
		},
		{
			name: "reported heading away", zones: []string{S}, s: thirty,
			recs: reported(east(1, 4, -200, 0), 10, 270),
		},
		{
			// Qualifies once at 71; 15 s of silence, so 72 (at 86 s) has no
			// velocity and does not qualify; 73 qualifies, 74 opens.
			name: "a 15 s gap forgets the velocity", zones: []string{S}, s: thirty,
			recs: recs(east(0, 71, -1005, 10), []Rec{fix(72, 86, -145, 250), fix(73, 87, -135, 250), fix(74, 88, -125, 250), fix(75, 89, -115, 250)}),
			want: []Event{approaching("S", 74)},
		},
		{
			name: "signal lost ends it", zones: []string{S}, s: thirty,
			recs: recs(east(0, 73, -1005, 10), ticks(74, 110, 1)),
			want: []Event{approaching("S", 72), approachEnded("S", 72, 73, "signal_lost")},
		},
		{
			name: "zone removed", sets: [][]string{{S}, {}}, switchAt: []int{75}, s: thirty,
			recs: east(0, 80, -1005, 10),
			want: []Event{approaching("S", 72), approachEnded("S", 72, 75, "zone_removed")},
		},
		{
			name: "authorised: not warned", zones: []string{S}, s: thirty, auths: []Auth{au("a1", "d", 0, 1000, "S")},
			recs: east(0, 105, -1005, 10),
			want: []Event{raised("d", "S", 101, "a1")},
		},
		{
			name: "authorised for another zone: warned", zones: []string{S}, s: thirty, auths: []Auth{au("a1", "d", 0, 1000, "X")},
			recs: east(0, 105, -1005, 10),
			want: []Event{approaching("S", 72), raised("d", "S", 101, "")},
		},
		{
			name: "above the ceiling", zones: []string{square("S", `"ceiling_m":100`, 0, 0, 500)}, s: thirty,
			recs: at(east(0, 105, -1005, 10), 150),
		},
		{
			name: "category * default", zones: []string{square("S", `"category":"warning"`, 0, 0, 500)},
			s:    ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second, "restricted": time.Minute}},
			recs: east(0, 105, -1005, 10),
			want: []Event{approaching("S", 72), raised("d", "S", 101, "")},
		},
		{
			// 60 s: first qualifies at 41 (eta 59.5 s), opens at 42.
			name: "category's horizon", zones: []string{S},
			s:    ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second, "restricted": time.Minute}},
			recs: east(0, 105, -1005, 10),
			want: []Event{approaching("S", 42), raised("d", "S", 101, "")},
		},
		{
			name: "zone's approach_before_s overrides", zones: []string{square("S", `"approach_before_s":60`, 0, 0, 500)}, s: thirty, own: true,
			recs: east(0, 105, -1005, 10),
			want: []Event{approaching("S", 42), raised("d", "S", 101, "")},
		},
		{
			name: "zone's approach_before_s 0: off", zones: []string{square("S", `"approach_before_s":0`, 0, 0, 500)}, s: thirty,
			recs: east(0, 105, -1005, 10),
			want: []Event{raised("d", "S", 101, "")},
		},
		{
			name: "category off", zones: []string{S},
			s:    ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second, "restricted": 0}, BufferM: 50},
			recs: east(0, 105, -1005, 10),
			want: []Event{raised("d", "S", 101, "")},
		},
		{
			name: "no settings", zones: []string{S},
			recs: east(0, 105, -1005, 10),
			want: []Event{raised("d", "S", 101, "")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sets := [][]Zone{zonesOf(t, c.zones...)}
			if c.sets != nil {
				sets = nil
				for _, fs := range c.sets {
					sets = append(sets, zonesOf(t, fs...))
				}
			}
			in := Input{Sets: sets, SwitchAt: c.switchAt, Recs: c.recs, Partitions: 1, Approach: c.s}
			if c.auths != nil {
				in.AuthSets = [][]Auth{c.auths}
			}
			got := Run(in)
			if !reflect.DeepEqual(identities(got), identities(c.want)) {
				t.Fatalf("events\n got %v\nwant %v", got, c.want)
			}
			for _, e := range got {
				if e.Type == "approaching" && c.eta != [2]float64{} && (e.ETA < c.eta[0] || e.ETA > c.eta[1]) {
					t.Errorf("%v: eta %.3f s, want %.1f..%.1f", e, e.ETA, c.eta[0], c.eta[1])
				}
			}
			if _, err := Compare(got, nil); err != nil {
				t.Fatalf("an event twice: %v", err)
			}
			// Without settings: the same run, minus the approaching events.
			if c.own {
				return
			}
			in.Approach = ApproachSettings{}
			var plain []Event
			for _, e := range c.want {
				if e.Type != "approaching" && e.Type != "approach_ended" {
					plain = append(plain, e)
				}
			}
			if got := Run(in); !reflect.DeepEqual(identities(got), identities(plain)) {
				t.Fatalf("without settings\n got %v\nwant %v", got, plain)
			}
		})
	}
}

// TestVelocity: reported speed and heading, else smoothed with a 4 s time
// constant, forgotten after more than 10 s or dt <= 0.
func TestVelocity(t *testing.T) {
	p := func(s, x float64) *telemetry.Position { r := fix(1, s, x, 0); return &r.Pos }
	near := func(v *[2]float64, e, n float64) bool {
		return v != nil && math.Abs(v[0]-e) < 1e-3 && math.Abs(v[1]-n) < 1e-3
	}
	prev := &[2]float64{2, 0}
	if v := velocity(p(1, 10), p(0, 0), nil); !near(v, 10, 0) {
		t.Errorf("first: %v", v)
	}
	if v := velocity(p(1, 10), p(0, 0), prev); !near(v, 2+0.25*8, 0) {
		t.Errorf("dt 1 s: %v", v)
	}
	if v := velocity(p(8, 80), p(0, 0), prev); !near(v, 10, 0) {
		t.Errorf("dt 8 s: %v", v)
	}
	if v := velocity(p(10, 100), p(0, 0), prev); !near(v, 10, 0) {
		t.Errorf("dt 10 s: %v", v)
	}
	if v := velocity(p(10.5, 105), p(0, 0), prev); v != nil {
		t.Errorf("dt 10.5 s: %v, want forgotten", v)
	}
	if v := velocity(p(0, 5), p(0, 0), prev); v != nil {
		t.Errorf("dt 0: %v, want forgotten", v)
	}
	if v := velocity(p(1, 10), nil, prev); v != nil {
		t.Errorf("no previous: %v", v)
	}
	r := p(100, 0)
	speed, heading := 4.0, 180.0
	r.SpeedMPS, r.HeadingDeg = &speed, &heading
	if v := velocity(r, p(0, 0), prev); !near(v, 0, -4) {
		t.Errorf("reported: %v", v)
	}
}

func TestParseEventsApproach(t *testing.T) {
	lines := []string{
		`{"event_id":"p:approaching","alarm_id":"p","type":"approaching","drone_id":"d","zone_id":"z","seq":4,"eta_s":12.5,"distance_m":130,"entry":{"lat":51,"lon":0}}`,
		`{"event_id":"q:approaching","alarm_id":"q","type":"approaching","drone_id":"d","zone_id":"y","seq":4,"eta_s":null,"distance_m":40,"entry":null}`,
		`{"event_id":"p:approach_ended","alarm_id":"p","type":"approach_ended","drone_id":"d","zone_id":"z","seq":9,"reason":"turned_away"}`,
	}
	var bs [][]byte
	for _, l := range lines {
		bs = append(bs, []byte(l))
	}
	es, err := ParseEvents(bs)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{AlarmID: "p", Type: "approaching", DroneID: "d", ZoneID: "z", Seq: 4, ETA: 12.5},
		{AlarmID: "q", Type: "approaching", DroneID: "d", ZoneID: "y", Seq: 4, ETA: -1},
		{AlarmID: "p", Type: "approach_ended", DroneID: "d", ZoneID: "z", Seq: 9, Reason: "turned_away"},
	}
	if !reflect.DeepEqual(es, want) {
		t.Fatalf("got %v\nwant %v", es, want)
	}
	// Compared by identity: another eta is the same event.
	other := want[0]
	other.ETA = 11
	if d, err := Compare(want, []Event{other, want[1], want[2]}); err != nil || !d.OK() {
		t.Fatalf("eta compared: %v %v", d, err)
	}
	bad := `{"event_id":"p:approaching:1","alarm_id":"p","type":"approaching","drone_id":"d","zone_id":"z","seq":4}`
	if _, err := ParseEvents([][]byte{[]byte(bad)}); err == nil {
		t.Fatal("an approaching event id with :n must be an error")
	}
	if ApproachID("d", "z", 4, 0) == ApproachID("d", "z", 4, 1) || ApproachID("d", "z", 4, 0) == AlarmID("d", "z", 4, 0) {
		t.Fatal("approach ids collide")
	}
}
