package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/dronestore/dronetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// dronesEnv is the whole API (auth included) over a test's own keys on the
// real Redis, 2 partitions, drones flown through the real engine and batch
// script: A (p0, outside), B (p1, inside POLY with an active alarm), C (p0
// then p1: repartitioned, seq 9 on p1 wins), L (p1: a state written before
// states kept a position), and T (p0, 55 track samples, one per batch).
type dronesEnv struct {
	*authEnv
	base   time.Time
	bAlarm alerts.Event
	// fly commits positions of a partition as the alerter does.
	fly func(p int, ps ...telemetry.Position) []alerts.Event
	ds  *dedup.Redis
	zs  alerts.Zones
}

func newDronesEnv(t *testing.T) *dronesEnv {
	t.Helper()
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, "api-drones")
	e := &dronesEnv{authEnv: newAuthEnv(t, func(o *Options) { o.Prefix, o.Partitions = prefix, 2 }),
		base: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	ds, err := dedup.NewRedis(testenv.RedisClient(t), dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := dronetest.Zones()
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return e.base.Add(time.Duration(s) * time.Second) }
	fly := func(p int, ps ...telemetry.Position) []alerts.Event {
		t.Helper()
		evs, err := dronetest.Fly(ctx, ds, zs, p, ps...)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	fly(0, dronetest.Pos("A", 1, at(0), dronetest.OutsideLat, dronetest.OutsideLon),
		dronetest.Pos("C", 5, at(0), dronetest.InsideLat, dronetest.InsideLon))
	evs := fly(1, dronetest.Pos("B", 1, at(30), dronetest.InsideLat, dronetest.InsideLon))
	if len(evs) != 1 {
		t.Fatalf("B's events: %+v", evs)
	}
	e.bAlarm = evs[0]
	fly(1, dronetest.Pos("C", 9, at(40), dronetest.OutsideLat, dronetest.OutsideLon))
	for i := range 55 {
		fly(0, dronetest.Pos("T", int64(i+1), at(10*i), dronetest.OutsideLat, dronetest.OutsideLon+float64(i)*1e-3))
	}
	if err := dronetest.Legacy(ctx, ds, 1, map[string]string{"L": `{"seq":7}`}); err != nil {
		t.Fatal(err)
	}
	e.fly, e.ds, e.zs = fly, ds, zs
	return e
}

// get answers GET path as the viewer, decoding the body into v.
func (e *dronesEnv) get(t *testing.T, path string, v any) authAnswer {
	t.Helper()
	a := e.do(t, "GET", path, testTokens["viewer"], "")
	if a.code == 200 {
		if err := json.Unmarshal([]byte(a.raw), v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, a.raw)
		}
	}
	return a
}

type droneListAnswer struct {
	Drones []struct {
		DroneID      string           `json:"drone_id"`
		Partition    int              `json:"partition"`
		Seq          int64            `json:"seq"`
		TS           *time.Time       `json:"ts"`
		Lat          *float64         `json:"lat"`
		AltRef       *string          `json:"alt_ref"`
		ActiveAlarms []map[string]any `json:"active_alarms"`
	} `json:"drones"`
	NextCursor *string `json:"next_cursor"`
}

func TestDronesList(t *testing.T) {
	e := newDronesEnv(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{"all", "", []string{"A", "B", "C", "L", "T"}},
		{"bbox around POLY (C's newer state is outside)", "bbox=-0.5,51.46,-0.48,51.5", []string{"B"}},
		{"bbox with leading zeros", "bbox=-000.5,051.46,-0.480,51.5", []string{"B"}},
		{"bbox of the world: L's position is unknown", "bbox=-180,-90,180,90", []string{"A", "B", "C", "T"}},
		{"active_since", "active_since=" + e.base.Add(40*time.Second).Format(time.RFC3339), []string{"C", "T"}},
		{"active_since with offset", "active_since=" + url.QueryEscape("2026-12-02T10:00:30+01:00"), []string{"B", "C", "T"}},
		{"both", "bbox=-1,51,0,52&active_since=2026-12-02T09:00:30Z", []string{"B", "C", "T"}},
		{"limit", "limit=2", []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m droneListAnswer
			if a := e.get(t, "/v1/drones?"+tt.query, &m); a.code != 200 {
				t.Fatalf("%d %s", a.code, a.raw)
			}
			var got []string
			for _, d := range m.Drones {
				got = append(got, d.DroneID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("drones %q, want %q", got, tt.want)
			}
		})
	}

	// The fields, and null position fields for L.
	var m droneListAnswer
	e.get(t, "/v1/drones", &m)
	raw := e.do(t, "GET", "/v1/drones", testTokens["viewer"], "").raw
	for _, f := range []string{`"drone_id":"L","partition":1,"seq":7,"ts":null,"lat":null,"lon":null,"alt_m":null,"alt_ref":null,"dropped":[],"seq_resets":0,"last_seen":null,"stale":false,"active_alarms":[]`,
		`"next_cursor":null`} {
		if !strings.Contains(raw, f) {
			t.Errorf("answer lacks %s: %s", f, raw)
		}
	}
	b := m.Drones[1]
	if b.DroneID != "B" || b.Partition != 1 || b.Seq != 1 || b.TS == nil || !b.TS.Equal(e.base.Add(30*time.Second)) ||
		*b.Lat != dronetest.InsideLat || b.AltRef == nil || *b.AltRef != telemetry.RefAGL || len(b.ActiveAlarms) != 1 {
		t.Fatalf("B = %+v", b)
	}
	want := map[string]any{"alarm_id": e.bAlarm.AlarmID, "zone_id": "POLY", "zone_name": e.bAlarm.ZoneName, "category": "restricted",
		"raised_seq": 1.0, "since": "2026-12-02T09:00:30Z"}
	for k, v := range want {
		if b.ActiveAlarms[0][k] != v {
			t.Errorf("B's alarm %s = %v, want %v", k, b.ActiveAlarms[0][k], v)
		}
	}
	if c := m.Drones[2]; c.Partition != 1 || c.Seq != 9 {
		t.Errorf("C = %+v, want partition 1's state (seq 9)", c)
	}
}

func TestDronesPages(t *testing.T) {
	e := newDronesEnv(t)
	var got []string
	q := url.Values{"limit": {"2"}}
	for range 10 {
		var m droneListAnswer
		if a := e.get(t, "/v1/drones?"+q.Encode(), &m); a.code != 200 {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		for _, d := range m.Drones {
			got = append(got, d.DroneID)
		}
		if m.NextCursor == nil {
			break
		}
		q.Set("cursor", *m.NextCursor)
	}
	if want := []string{"A", "B", "C", "L", "T"}; !slices.Equal(got, want) {
		t.Errorf("pages gave %q, want %q", got, want)
	}
}

func TestDroneGet(t *testing.T) {
	e := newDronesEnv(t)
	type point struct {
		TS  time.Time `json:"ts"`
		Lon float64   `json:"lon"`
	}
	var d struct {
		DroneID      string           `json:"drone_id"`
		Seq          int64            `json:"seq"`
		Lon          *float64         `json:"lon"`
		ActiveAlarms []map[string]any `json:"active_alarms"`
		Track        []point          `json:"track"`
	}
	if a := e.get(t, "/v1/drones/T", &d); a.code != 200 {
		t.Fatalf("%d %s", a.code, a.raw)
	}
	if d.DroneID != "T" || d.Seq != 55 || len(d.Track) != 50 || d.ActiveAlarms == nil {
		t.Fatalf("T = seq %d, %d track points, alarms %v; want seq 55, 50 points", d.Seq, len(d.Track), d.ActiveAlarms)
	}
	if first, last := d.Track[0], d.Track[49]; !first.TS.Equal(e.base.Add(50*time.Second)) || !last.TS.Equal(e.base.Add(540*time.Second)) || last.Lon != *d.Lon {
		t.Errorf("track from %+v to %+v, want ts 50 s to 540 s, oldest first, ending at the last position", first, last)
	}
	if a := e.get(t, "/v1/drones/B", &d); a.code != 200 || len(d.ActiveAlarms) != 1 || d.ActiveAlarms[0]["alarm_id"] != e.bAlarm.AlarmID || len(d.Track) != 1 {
		t.Errorf("B: %d %s", a.code, a.raw)
	}
	if a := e.do(t, "GET", "/v1/drones/L", testTokens["viewer"], ""); a.code != 200 || !strings.Contains(a.raw, `"seq":7,"ts":null`) || !strings.Contains(a.raw, `"track":[]`) {
		t.Errorf("L: %d %s", a.code, a.raw)
	}
}

// TestDronesErrors: auth failures, an unknown drone and bad input, each
// the error body, a 400 naming the field.
func TestDronesErrors(t *testing.T) {
	e := newDronesEnv(t)
	tests := []struct {
		name, path, token string
		code              int
		errCode, field    string
	}{
		{"no token", "/v1/drones", "", 401, "missing_token", ""},
		{"no token, one drone", "/v1/drones/A", "", 401, "missing_token", ""},
		{"unknown token", "/v1/drones", "nope", 401, "invalid_token", ""},
		{"viewer allowed", "/v1/drones", testTokens["viewer"], 200, "", ""},
		{"admin allowed", "/v1/drones/A", testTokens["admin"], 200, "", ""},
		{"unknown drone", "/v1/drones/NOPE", testTokens["viewer"], 404, "not_found", ""},
		{"too long a drone id", "/v1/drones/" + strings.Repeat("x", 65), testTokens["viewer"], 400, "bad_request", "drone_id"},
		{"bbox of 3 numbers", "/v1/drones?bbox=1,2,3", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox of 5 numbers", "/v1/drones?bbox=1,2,3,4,5", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox not numbers", "/v1/drones?bbox=a,b,c,d", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox NaN", "/v1/drones?bbox=NaN,0,1,1", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox Inf", "/v1/drones?bbox=0,0,Inf,1", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox longitude out of range", "/v1/drones?bbox=-181,0,0,1", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox latitude out of range", "/v1/drones?bbox=0,0,1,91", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox minLat above maxLat", "/v1/drones?bbox=-0.6,51.6,-0.3,51.4", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox minLon above maxLon", "/v1/drones?bbox=1,0,0,1", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox with spaces", "/v1/drones?bbox=" + url.QueryEscape("-0.5, 51.46, -0.48, 51.5"), testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox with an exponent", "/v1/drones?bbox=-5e-1,51,0,52", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"bbox empty", "/v1/drones?bbox=", testTokens["viewer"], 400, "bad_request", "bbox"},
		{"active_since not a time", "/v1/drones?active_since=yesterday", testTokens["viewer"], 400, "bad_request", "active_since"},
		{"active_since without zone", "/v1/drones?active_since=2026-12-02T09:00:00", testTokens["viewer"], 400, "bad_request", "active_since"},
		{"active_since empty", "/v1/drones?active_since=", testTokens["viewer"], 400, "bad_request", "active_since"},
		{"limit 0", "/v1/drones?limit=0", testTokens["viewer"], 400, "bad_request", "limit"},
		{"limit 1001", "/v1/drones?limit=1001", testTokens["viewer"], 400, "bad_request", "limit"},
		{"limit not a number", "/v1/drones?limit=ten", testTokens["viewer"], 400, "bad_request", "limit"},
		{"limit 1000", "/v1/drones?limit=1000", testTokens["viewer"], 200, "", ""},
		{"bad cursor", "/v1/drones?cursor=!!", testTokens["viewer"], 400, "bad_request", "cursor"},
		{"an alarm list's cursor", "/v1/drones?cursor=MTc2NDY2OTYwMDAwMCAwMTIz", testTokens["viewer"], 400, "bad_request", "cursor"},
		{"empty cursor", "/v1/drones?cursor=", testTokens["viewer"], 400, "bad_request", "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.do(t, "GET", tt.path, tt.token, "")
			if a.code != tt.code || a.body.Code != tt.errCode {
				t.Fatalf("%d %q, want %d %q: %s", a.code, a.body.Code, tt.code, tt.errCode, a.raw)
			}
			if tt.field != "" && a.body.Details["field"] != tt.field {
				t.Errorf("details %v, want field %s", a.body.Details, tt.field)
			}
			if tt.code == 404 && a.body.Details["drone_id"] == nil {
				t.Errorf("404 details %v, want drone_id", a.body.Details)
			}
		})
	}
}

// TestBBoxAsDescribed: a bbox the description's pattern allows is accepted
// when each min is not above its max (what the pattern cannot say), and one
// it does not allow is refused with 400 naming bbox.
func TestBBoxAsDescribed(t *testing.T) {
	e := newDronesEnv(t)
	schema := described(t, "GET", "/v1/drones", "query", "bbox")
	values := []string{
		"-0.6,51.4,-0.3,51.6", "-180,-90,180,90", "-180.000,-90.0,180.0,90.00", "0,0,0,0", "-0,-0,0,0",
		"007,08,0180,090", "179.999999,89.9999,180,90", "1.5,2.25,3.125,4.0625",
		"-180.1,0,0,1", "0,0,180.0001,1", "0,-90.5,1,1", "0,0,1,91", "0,0,1,1000",
		"1e0,0,2,1", "+1,0,2,1", "0x1p0,0,2,1", ".5,0,1,1", "1.,0,2,1", "1_0,0,20,1",
		" 1,0,2,1", "1,0,2,1 ", "1,,2,1", "1,0,2", "1,0,2,1,5", "NaN,0,1,1", "Inf,0,1,1", "١,0,2,1",
	}
	for _, v := range values {
		a := e.do(t, "GET", "/v1/drones?bbox="+url.QueryEscape(v), testTokens["viewer"], "")
		desc := conforms(t, schema, v, false)
		if desc != (a.code == 200) {
			t.Errorf("bbox=%q: the description allows it: %v, the server: %d %s", v, desc, a.code, a.raw)
		}
		if a.code != 200 && (a.code != 400 || a.body.Details["field"] != "bbox") {
			t.Errorf("bbox=%q: %d %s, want 400 naming bbox", v, a.code, a.raw)
		}
	}
}

// TestDronesShowDroppedFieldsAndSeqResets: a drone whose feed sent a height
// no aircraft can have (dropped by ingest, which says so in the record) and
// a wild seq shows both on /v1/drones, and still raised its alarm.
func TestDronesShowDroppedFieldsAndSeqResets(t *testing.T) {
	e := newDronesEnv(t)
	w1 := dronetest.Pos("W", 1<<63-1, e.base, dronetest.OutsideLat, dronetest.OutsideLon)
	w2 := dronetest.Pos("W", 2, e.base.Add(time.Second), dronetest.InsideLat, dronetest.InsideLon)
	w2.AltM, w2.AltRef, w2.Dropped = nil, "", "alt_m,agl_m"
	evs := e.fly(0, w1, w2)
	if len(evs) != 1 || evs[0].Type != alerts.Raised || evs[0].AlarmID != alerts.AlarmIDAt("W", evs[0].ZoneID, 2, 1) {
		t.Fatalf("W's events %+v: want one raise at seq 2 in run 1", evs)
	}
	var d struct {
		Seq       int64    `json:"seq"`
		SeqResets int64    `json:"seq_resets"`
		Dropped   []string `json:"dropped"`
		AltM      *float64 `json:"alt_m"`
		Active    []struct {
			AlarmID string `json:"alarm_id"`
		} `json:"active_alarms"`
	}
	if a := e.get(t, "/v1/drones/W", &d); a.code != 200 {
		t.Fatalf("%d %s", a.code, a.raw)
	}
	if d.Seq != 2 || d.SeqResets != 1 || !slices.Equal(d.Dropped, []string{"alt_m", "agl_m"}) || d.AltM != nil ||
		len(d.Active) != 1 || d.Active[0].AlarmID != evs[0].AlarmID {
		t.Errorf("W = %+v", d)
	}
}

// TestSignalLostOnTheAPI: a drone silent inside a zone for 30 s of its
// partition's log clock (ticks) is stale on /v1/drones with its last_seen,
// its alarm carries signal_lost_since and /v1/events the signal_lost; its
// next position regains it and clears all three.
func TestSignalLostOnTheAPI(t *testing.T) {
	e := newDronesEnv(t)
	ctx := context.Background()
	heard := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(s int) time.Time { return heard.Add(time.Duration(s) * time.Second) }
	pos := func(seq int64, s int) alerts.Record {
		p := dronetest.Pos("SIL", seq, at(s), dronetest.InsideLat, dronetest.InsideLon)
		return alerts.Record{Time: at(s), Value: p.AppendJSON(nil)}
	}
	tick := func(s int) alerts.Record {
		return alerts.Record{Time: at(s), Value: (&telemetry.Tick{At: at(s)}).AppendJSON(nil)}
	}
	recs := []alerts.Record{pos(1, 0)}
	for s := 1; s <= 31; s++ {
		recs = append(recs, tick(s))
	}
	evs, err := dronetest.FlyRecords(ctx, e.ds, e.zs, 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	var sil []alerts.Event // the env's other drones have alarms of their own
	for _, ev := range evs {
		if ev.DroneID == "SIL" {
			sil = append(sil, ev)
		}
	}
	evs = sil
	if len(evs) != 2 || evs[0].Type != alerts.Raised || evs[1].Type != alerts.SignalLost {
		t.Fatalf("events %+v: want raised, then signal_lost", evs)
	}
	alarmID := evs[0].AlarmID
	type droneAnswer struct {
		LastSeen *time.Time `json:"last_seen"`
		Stale    bool       `json:"stale"`
	}
	type alarmAnswer struct {
		SignalLostSince *time.Time `json:"signal_lost_since"`
		State           string     `json:"state"`
	}
	var d droneAnswer
	var a alarmAnswer
	if r := e.get(t, "/v1/drones/SIL", &d); r.code != 200 || !d.Stale || d.LastSeen == nil || !d.LastSeen.Equal(heard) {
		t.Errorf("silent: %d %s", r.code, r.raw)
	}
	if r := e.get(t, "/v1/alarms/"+alarmID, &a); r.code != 200 || a.State != "active" || a.SignalLostSince == nil || !a.SignalLostSince.Equal(heard) {
		t.Errorf("silent alarm: %d %s", r.code, r.raw)
	}
	testenv.CheckFor(t, 5*time.Second, func() error {
		if r := e.do(t, "GET", "/v1/events", testTokens["viewer"], ""); r.code != 200 || !strings.Contains(r.raw, `"event_id":"`+alarmID+`:signal_lost:1"`) {
			return fmt.Errorf("events: %d, no signal_lost of %s: %s", r.code, alarmID, r.raw)
		}
		return nil
	})

	if _, err := dronetest.FlyRecords(ctx, e.ds, e.zs, 0, []alerts.Record{pos(2, 40)}); err != nil {
		t.Fatal(err)
	}
	d, a = droneAnswer{}, alarmAnswer{}
	if r := e.get(t, "/v1/drones/SIL", &d); r.code != 200 || d.Stale || d.LastSeen == nil || !d.LastSeen.Equal(at(40)) {
		t.Errorf("heard again: %d %s", r.code, r.raw)
	}
	if r := e.get(t, "/v1/alarms/"+alarmID, &a); r.code != 200 || a.State != "active" || a.SignalLostSince != nil {
		t.Errorf("regained alarm: %d %s", r.code, r.raw)
	}
	// The history holds back the millisecond Redis is in: ask until it has passed.
	testenv.CheckFor(t, 5*time.Second, func() error {
		if r := e.do(t, "GET", "/v1/events", testTokens["viewer"], ""); !strings.Contains(r.raw, `"event_id":"`+alarmID+`:signal_regained:1"`) {
			return fmt.Errorf("events: no signal_regained: %s", r.raw)
		}
		return nil
	})
}
