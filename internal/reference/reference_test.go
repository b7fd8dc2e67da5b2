package reference

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

const zonesJSON = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"SQ"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]],[[0.4,0.4],[0.6,0.4],[0.6,0.6],[0.4,0.6],[0.4,0.4]]]}},
{"type":"Feature","properties":{"id":"CI","radius_m":1000,"clear_buffer_m":100},"geometry":{"type":"Point","coordinates":[10,10]}}]}`

func TestEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.geojson")
	if err := os.WriteFile(path, []byte(zonesJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	zs, err := LoadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pos := func(seq int64, lon, lat float64) telemetry.Position {
		return telemetry.Position{DroneID: "d", Seq: seq, TS: t0.Add(time.Duration(seq) * time.Second), Lon: lon, Lat: lat}
	}
	recs := []telemetry.Position{
		pos(1, 5, 5),        // outside both
		pos(2, 0.2, 0.2),    // enters SQ
		pos(2, 5, 5),        // duplicate seq: ignored
		pos(3, 0.5, 0.5),    // in SQ's hole: clears
		pos(4, 10, 10.0095), // ~1056 m from CI's centre: outside
		pos(5, 10, 10.0085), // ~945 m: enters CI
		pos(6, 10, 10.0095), // ~1056 m: within the 100 m clear buffer, stays
		pos(7, 10, 10.0105), // ~1168 m: clears
		pos(1, 0.2, 0.2),    // stale: ignored
	}
	got := Events(zs, recs)
	want := []Event{
		{AlarmID: AlarmID("d", "SQ", 2, 0), Type: "raised", DroneID: "d", ZoneID: "SQ", Seq: 2},
		{AlarmID: AlarmID("d", "SQ", 2, 0), Type: "cleared", DroneID: "d", ZoneID: "SQ", Seq: 3},
		{AlarmID: AlarmID("d", "CI", 5, 0), Type: "raised", DroneID: "d", ZoneID: "CI", Seq: 5},
		{AlarmID: AlarmID("d", "CI", 5, 0), Type: "cleared", DroneID: "d", ZoneID: "CI", Seq: 7},
	}
	d, err := Compare(want, got)
	if err != nil || !d.OK() || len(got) != len(want) {
		t.Fatalf("events %v: %v (err %v)", got, d, err)
	}
}

// TestEventsOrder: the reference orders a drone's records by ts, then seq;
// a wild seq holds nothing back, a restarted counter is heard, and a seq
// used again after the counter went back raises under the id naming the
// run.
func TestEventsOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.geojson")
	if err := os.WriteFile(path, []byte(zonesJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	zs, err := LoadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(seq int64, sec int, lon, lat float64) telemetry.Position {
		return telemetry.Position{DroneID: "d", Seq: seq, TS: t0.Add(time.Duration(sec) * time.Second), Lon: lon, Lat: lat}
	}
	const wild = int64(1<<63 - 1)
	recs := []telemetry.Position{
		at(10, 1, 5, 5),       // outside
		at(wild, 2, 5, 5),     // a wild seq
		at(11, 3, 0.2, 0.2),   // enters SQ: heard, run 1
		at(wild, 2, 0.2, 0.2), // the wild record again: stale
		at(12, 4, 5, 5),       // clears
		at(11, 100, 0.2, 0.2), // the counter went back: run 2, enters again with seq 11
		at(12, 4, 0.2, 0.2),   // a re-send from before: stale
		at(12, 101, 5, 5),     // clears
	}
	got := Events(zs, recs)
	want := []Event{
		{AlarmID: AlarmID("d", "SQ", 11, 1), Type: "raised", DroneID: "d", ZoneID: "SQ", Seq: 11},
		{AlarmID: AlarmID("d", "SQ", 11, 1), Type: "cleared", DroneID: "d", ZoneID: "SQ", Seq: 12},
		{AlarmID: AlarmID("d", "SQ", 11, 2), Type: "raised", DroneID: "d", ZoneID: "SQ", Seq: 11},
		{AlarmID: AlarmID("d", "SQ", 11, 2), Type: "cleared", DroneID: "d", ZoneID: "SQ", Seq: 12},
	}
	d, err := Compare(want, got)
	if err != nil || !d.OK() || len(got) != len(want) {
		t.Fatalf("events %v: %v (err %v)", got, d, err)
	}
	if AlarmID("d", "SQ", 11, 1) == AlarmID("d", "SQ", 11, 2) || AlarmID("d", "SQ", 11, 0) == AlarmID("d", "SQ", 11, 1) {
		t.Fatal("runs share an alarm id")
	}
}

func TestCompare(t *testing.T) {
	a := Event{AlarmID: "a1", Type: "raised", DroneID: "d", ZoneID: "z", Seq: 1}
	b := Event{AlarmID: "b1", Type: "raised", DroneID: "d", ZoneID: "z", Seq: 2}
	c := Event{AlarmID: "c1", Type: "raised", DroneID: "d", ZoneID: "z", Seq: 3}
	d, err := Compare([]Event{a, b}, []Event{a, a, c})
	if err != nil {
		t.Fatal(err)
	}
	if d.OK() || d.NMissing != 1 || d.NExtra != 1 || d.NDuplicated != 1 || d.Missing[0] != b || d.Extra[0] != c || d.Duplicated[0] != a {
		t.Fatalf("diff %+v", d)
	}
	if _, err := Compare([]Event{a, a}, nil); err == nil {
		t.Fatal("a reference with a duplicate must be an error")
	}
}

func TestParseEvents(t *testing.T) {
	ok := `{"event_id":"x:raised","alarm_id":"x","type":"raised","drone_id":"d","zone_id":"z","seq":4}`
	es, err := ParseEvents([][]byte{[]byte(ok)})
	if err != nil || len(es) != 1 || es[0] != (Event{AlarmID: "x", Type: "raised", DroneID: "d", ZoneID: "z", Seq: 4}) {
		t.Fatalf("%v %v", es, err)
	}
	acked := `{"event_id":"x:acked","alarm_id":"x","type":"acked","drone_id":"d","zone_id":"z","seq":4,"by":"ops"}`
	if es, err := ParseEvents([][]byte{[]byte(ok), []byte(acked)}); err != nil || len(es) != 1 || es[0].Type != "raised" {
		t.Fatalf("with an acked event: %v %v, want the raise alone", es, err)
	}
	bad := strings.Replace(ok, "x:raised", "x:cleared", 1)
	if _, err := ParseEvents([][]byte{[]byte(bad)}); err == nil || !strings.Contains(err.Error(), "not alarm_id:type") {
		t.Fatalf("err = %v", err)
	}
}
