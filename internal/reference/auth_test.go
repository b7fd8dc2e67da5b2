package reference

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// A restricted (no category given), W warning, Z restricted from 10 s on.
const authZonesJSON = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"A"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}},
{"type":"Feature","properties":{"id":"W","category":"warning"},"geometry":{"type":"Polygon","coordinates":[[[2,0],[3,0],[3,1],[2,1],[2,0]]]}},
{"type":"Feature","properties":{"id":"Z","active_from":"2026-01-01T00:00:10Z"},"geometry":{"type":"Polygon","coordinates":[[[4,0],[5,0],[5,1],[4,1],[4,0]]]}}]}`

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// au is an authorisation of drone from..until seconds; zones "all", an id,
// or "cat:<category>".
func au(id, drone string, from, until float64, zones ...string) Auth {
	a := Auth{ID: id, Drone: drone, From: sec(from), Until: sec(until), Reference: "permit-" + id}
	for _, z := range zones {
		switch c, isCat := strings.CutPrefix(z, "cat:"); {
		case z == "all":
			a.AllZones = true
		case isCat:
			a.Categories = append(a.Categories, c)
		default:
			a.ZoneIDs = append(a.ZoneIDs, z)
		}
	}
	return a
}

func revoked(a Auth, at float64) Auth { a.RevokedAt = sec(at); return a }

// Where a drone can be: inside A, W, Z, or outside all.
var spots = map[string][2]float64{"A": {0.5, 0.5}, "W": {2.5, 0.5}, "Z": {4.5, 0.5}, "out": {9, 9}}

// pos is drone's position seq at s seconds (ts and receive time), at spot.
func pos(drone string, seq int64, s float64, spot string) Rec {
	p := spots[spot]
	return Rec{Pos: telemetry.Position{DroneID: drone, Seq: seq, TS: sec(s), Lon: p[0], Lat: p[1]}, At: sec(s)}
}

func tick(s float64) Rec { return Rec{At: sec(s), Tick: true, Partition: -1} }

func ticks(from, to, step float64) []Rec {
	var rs []Rec
	for s := from; s <= to+1e-9; s += step {
		rs = append(rs, tick(s))
	}
	return rs
}

func recs(parts ...[]Rec) []Rec {
	var out []Rec
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func raised(drone, zone string, seq int64, auth string) Event {
	return Event{AlarmID: AlarmID(drone, zone, seq, 0), Type: "raised", DroneID: drone, ZoneID: zone, Seq: seq, Auth: auth}
}

func cleared(drone, zone string, raiseSeq, seq int64) Event {
	return Event{AlarmID: AlarmID(drone, zone, raiseSeq, 0), Type: "cleared", DroneID: drone, ZoneID: zone, Seq: seq}
}

func authEv(typ, drone, zone string, raiseSeq, seq int64, n int, auth, reason string) Event {
	return Event{AlarmID: AlarmID(drone, zone, raiseSeq, 0), Type: typ, DroneID: drone, ZoneID: zone, Seq: seq, N: n, Auth: auth, Reason: reason}
}

func TestAuthorisations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.geojson")
	if err := os.WriteFile(path, []byte(authZonesJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	zs, err := LoadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name     string
		sets     [][]Auth
		switchAt []int
		recs     []Rec
		want     []Event
	}
	one := func(as ...Auth) [][]Auth { return [][]Auth{as} }
	// A raise at 1 s in the spot, alone.
	raiseIn := func(drone, spot string) []Rec { return []Rec{pos(drone, 1, 1, spot)} }
	cases := []tc{
		{name: "covered by id", sets: one(au("a1", "d", 0, 100, "A")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "a1")}},
		{name: "another drone's", sets: one(au("a1", "e", 0, 100, "A")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "")}},
		{name: "covered by prefix", sets: one(au("a1", "po*", 0, 100, "A")), recs: raiseIn("police-7", "A"),
			want: []Event{raised("police-7", "A", 1, "a1")}},
		{name: "prefix not matching", sets: one(au("a1", "px*", 0, 100, "A")), recs: raiseIn("police-7", "A"),
			want: []Event{raised("police-7", "A", 1, "")}},
		{name: "another zone id", sets: one(au("a1", "d", 0, 100, "W")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "")}},
		{name: "covered by category", sets: one(au("a1", "d", 0, 100, "cat:warning")), recs: raiseIn("d", "W"),
			want: []Event{raised("d", "W", 1, "a1")}},
		{name: "category default restricted", sets: one(au("a1", "d", 0, 100, "cat:restricted")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "a1")}},
		{name: "another category", sets: one(au("a1", "d", 0, 100, "cat:warning")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "")}},
		{name: "all zones", sets: one(au("a1", "d", 0, 100, "all")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "a1")}},
		{name: "not yet from", sets: one(au("a1", "d", 2, 100, "A")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "")}},
		{name: "until excluded", sets: one(au("a1", "d", 0, 1, "A")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "")}},
		{name: "revoked before the raise", sets: one(revoked(au("a1", "d", 0, 100, "A"), 0.5)), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "")}},
		{name: "no clock: the position's ts", sets: one(au("a1", "d", 0, 100, "A")),
			recs: []Rec{{Pos: telemetry.Position{DroneID: "d", Seq: 1, TS: sec(1), Lon: 0.5, Lat: 0.5}}},
			want: []Event{raised("d", "A", 1, "a1")}},
		{name: "clock raise zone_activated", sets: one(au("a1", "d", 0, 100, "Z")),
			recs: recs([]Rec{pos("d", 1, 1, "Z")}, ticks(2, 11, 1)),
			want: []Event{{AlarmID: tickAlarmID("d", "Z", sec(10)), Type: "raised", DroneID: "d", ZoneID: "Z", Seq: 1, Auth: "a1"}}},
		{
			// Until 9.5 s: 9.4's scan still covers, 9.6 is past the end but
			// no new second, 10.2's scan is the first at or after the end.
			name: "expires while inside", sets: one(au("a1", "d", 0, 9.5, "A")),
			recs: recs([]Rec{pos("d", 1, 1, "A")}, ticks(2, 8, 1), []Rec{tick(9.4), tick(9.6), tick(10.2)}, ticks(11, 20, 1)),
			want: []Event{raised("d", "A", 1, "a1"), authEv("unauthorized", "d", "A", 1, 1, 1, "a1", "expired")},
		},
		{
			// Revoked at 7 in the set in force from index 8 (tick 8.5, no
			// new second): decided at that record.
			name: "revoked in a later set, at the switch", sets: [][]Auth{{au("a1", "d", 0, 100, "A")}, {revoked(au("a1", "d", 0, 100, "A"), 7)}},
			switchAt: []int{8}, recs: recs([]Rec{pos("d", 1, 1, "A")}, ticks(2, 8, 1), []Rec{tick(8.5)}, ticks(9, 12, 1)),
			want: []Event{raised("d", "A", 1, "a1"), authEv("unauthorized", "d", "A", 1, 1, 1, "a1", "revoked")},
		},
		{
			// Revoked at 9.2, switched in at 8.5: the scan at 10 decides.
			name: "revoked in a later set, later", sets: [][]Auth{{au("a1", "d", 0, 100, "A")}, {revoked(au("a1", "d", 0, 100, "A"), 9.2)}},
			switchAt: []int{8}, recs: recs([]Rec{pos("d", 1, 1, "A")}, ticks(2, 8, 1), []Rec{tick(8.5), tick(9.1), tick(9.6), tick(10)}, ticks(11, 12, 1)),
			want: []Event{raised("d", "A", 1, "a1"), authEv("unauthorized", "d", "A", 1, 1, 1, "a1", "revoked")},
		},
		{
			name: "removed from a later set", sets: [][]Auth{{au("a1", "d", 0, 100, "A")}, {}},
			switchAt: []int{8}, recs: recs([]Rec{pos("d", 1, 1, "A")}, ticks(2, 8, 1), []Rec{tick(8.5)}, ticks(9, 12, 1)),
			want: []Event{raised("d", "A", 1, "a1"), authEv("unauthorized", "d", "A", 1, 1, 1, "a1", "revoked")},
		},
		{
			// The drone's own positions: its record's scan looks at it too.
			name: "starts while inside", sets: one(au("a1", "d", 5, 100, "A")),
			recs: []Rec{pos("d", 1, 1, "A"), pos("d", 2, 2, "A"), pos("d", 3, 4.9, "A"), pos("d", 4, 5, "A"), pos("d", 5, 6, "A")},
			want: []Event{raised("d", "A", 1, ""), authEv("authorized", "d", "A", 1, 3, 1, "a1", "")},
		},
		{
			name: "authorised in a later set", sets: [][]Auth{{}, {au("a1", "d", 0, 100, "A")}},
			switchAt: []int{2}, recs: []Rec{pos("d", 1, 1, "A"), tick(1.5), tick(1.6)},
			want: []Event{raised("d", "A", 1, ""), authEv("authorized", "d", "A", 1, 1, 1, "a1", "")},
		},
		{name: "two cover: latest end", sets: one(au("a1", "d", 0, 50, "A"), au("a2", "d", 0, 60, "all")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "a2")}},
		{name: "two cover, same end: smallest id", sets: one(au("b", "d", 0, 60, "A"), au("a", "d*", 0, 60, "all")), recs: raiseIn("d", "A"),
			want: []Event{raised("d", "A", 1, "a")}},
		{
			// a1 until 10, a2 from 8 until 30: handed over at 8, ends at 30.
			name: "hand-over", sets: one(au("a1", "d", 0, 10, "A"), au("a2", "d", 8, 30, "A")),
			recs: recs([]Rec{pos("d", 1, 1, "A")}, ticks(2, 25, 1), []Rec{pos("d", 2, 26, "A")}, ticks(27, 32, 1)),
			want: []Event{
				raised("d", "A", 1, "a1"),
				authEv("authorized", "d", "A", 1, 1, 1, "a2", ""),
				authEv("unauthorized", "d", "A", 1, 2, 2, "a2", "expired"),
			},
		},
		{
			name: "leaves: cleared, no authorisation event", sets: one(au("a1", "d", 0, 5, "A")),
			recs: recs([]Rec{pos("d", 1, 1, "A"), pos("d", 2, 3, "out")}, ticks(4, 8, 1)),
			want: []Event{raised("d", "A", 1, "a1"), cleared("d", "A", 1, 2)},
		},
		{
			// Each drone's alarms looked at, in id order; one alarm's change
			// is not another's.
			name: "two drones, two zones", sets: one(au("a1", "d", 0, 5, "all"), au("w", "e", 0, 100, "W")),
			recs: recs([]Rec{pos("d", 1, 1, "A"), pos("e", 1, 1.5, "W")}, ticks(2, 7, 1)),
			want: []Event{raised("d", "A", 1, "a1"), raised("e", "W", 1, "w"), authEv("unauthorized", "d", "A", 1, 1, 1, "a1", "expired")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Run(Input{Sets: [][]Zone{zs}, AuthSets: c.sets, AuthSwitchAt: c.switchAt, Recs: c.recs, Partitions: 1})
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("events\n got %v\nwant %v", got, c.want)
			}
			if _, err := Compare(got, nil); err != nil {
				t.Fatalf("an event twice: %v", err)
			}
			// Without authorisations: the same run, minus what they add.
			var plain []Event
			for _, e := range c.want {
				if e.Type != "authorized" && e.Type != "unauthorized" {
					e.Auth = ""
					plain = append(plain, e)
				}
			}
			if got := Run(Input{Sets: [][]Zone{zs}, Recs: c.recs, Partitions: 1}); !reflect.DeepEqual(got, plain) {
				t.Fatalf("without authorisations\n got %v\nwant %v", got, plain)
			}
		})
	}
}

func TestParseAuths(t *testing.T) {
	in := `[{"id":"a1","drone":"police-*","zones":"all","from":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z",
	  "reason":"patrol","reference":"P-1","by":"ops","created_at":"2025-12-31T00:00:00Z"},
	 {"id":"a2","drone":"d","zones":{"ids":["A"],"categories":["warning"]},"from":"2026-01-01T00:00:00.250Z","until":"2026-01-02T00:00:00Z",
	  "reference":"P-2","revoked_at":"2026-01-01T12:00:00Z","revoked_by":"ops"}]`
	as, err := ParseAuths([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Auth{
		{ID: "a1", Drone: "police-*", AllZones: true, From: t0, Until: t0.Add(24 * time.Hour), Reference: "P-1"},
		{ID: "a2", Drone: "d", ZoneIDs: []string{"A"}, Categories: []string{"warning"}, From: t0.Add(250 * time.Millisecond),
			Until: t0.Add(24 * time.Hour), Reference: "P-2", RevokedAt: t0.Add(12 * time.Hour)},
	}
	if !reflect.DeepEqual(as, want) {
		t.Fatalf("got %+v\nwant %+v", as, want)
	}
	if e := as[1].End(); !e.Equal(t0.Add(12 * time.Hour)) {
		t.Fatalf("end %v, want the revocation", e)
	}
	if !as[1].Covers("d", "X", "warning", t0.Add(time.Hour)) || as[1].Covers("d", "X", "restricted", t0.Add(time.Hour)) ||
		as[1].Covers("d", "A", "restricted", t0.Add(12*time.Hour)) || as[1].Covers("d", "A", "restricted", t0) {
		t.Fatal("a2's cover")
	}
	for _, bad := range []string{
		`[{"id":"a","drone":"d","zones":"some","from":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z"}]`,
		`[{"id":"a","drone":"d","from":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z"}]`,
		`[{"id":"a","drone":"d","zones":"all","from":"2026-01-01","until":"2026-01-02T00:00:00Z"}]`,
		`[{"id":"a","drone":"d","zones":"all","from":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z","revoked_at":"x"}]`,
		`[{"drone":"d","zones":"all","from":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z"}]`,
		`{}`,
	} {
		if _, err := ParseAuths([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestParseEventsAuthorisation(t *testing.T) {
	lines := []string{
		`{"event_id":"x:raised","alarm_id":"x","type":"raised","drone_id":"d","zone_id":"z","seq":4,"authorization":{"id":"a1","reference":"P","until":"2026-01-02T00:00:00Z"}}`,
		`{"event_id":"y:raised","alarm_id":"y","type":"raised","drone_id":"d","zone_id":"z","seq":5,"authorization":null}`,
		`{"event_id":"x:authorized:1","alarm_id":"x","type":"authorized","drone_id":"d","zone_id":"z","seq":6,"authorization":{"id":"a2"}}`,
		`{"event_id":"x:unauthorized:2","alarm_id":"x","type":"unauthorized","drone_id":"d","zone_id":"z","seq":6,"reason":"revoked","authorization":{"id":"a2"}}`,
		`{"event_id":"x:cleared","alarm_id":"x","type":"cleared","drone_id":"d","zone_id":"z","seq":7,"reason":"exited"}`,
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
		{AlarmID: "x", Type: "raised", DroneID: "d", ZoneID: "z", Seq: 4, Auth: "a1"},
		{AlarmID: "y", Type: "raised", DroneID: "d", ZoneID: "z", Seq: 5},
		{AlarmID: "x", Type: "authorized", DroneID: "d", ZoneID: "z", Seq: 6, N: 1, Auth: "a2"},
		{AlarmID: "x", Type: "unauthorized", DroneID: "d", ZoneID: "z", Seq: 6, N: 2, Auth: "a2", Reason: "revoked"},
		{AlarmID: "x", Type: "cleared", DroneID: "d", ZoneID: "z", Seq: 7},
	}
	if !reflect.DeepEqual(es, want) {
		t.Fatalf("got %v\nwant %v", es, want)
	}
	bad := `{"event_id":"x:authorized","alarm_id":"x","type":"authorized","drone_id":"d","zone_id":"z","seq":6}`
	if _, err := ParseEvents([][]byte{[]byte(bad)}); err == nil || !strings.Contains(err.Error(), "alarm_id:type:n") {
		t.Fatalf("err = %v", err)
	}
}
