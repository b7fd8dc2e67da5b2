package api

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/dronestore/dronetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

type pilotAnswer struct {
	Lat        float64   `json:"lat"`
	Lon        float64   `json:"lon"`
	AltM       *float64  `json:"alt_m"`
	Type       string    `json:"type"`
	TS         time.Time `json:"ts"`
	RangeM     *float64  `json:"range_m"`
	BearingDeg *float64  `json:"bearing_deg"`
}

// TestPilotOnTheAPI: drone P raises with its pilot (take-off point) in
// the raising record, then reports a live pilot elsewhere and a position
// without one. GET /v1/alarms and /v1/alarms/{id} show the pilot as known
// at the raise with range and bearing from the raising position, and the
// latest from the drone's state; GET /v1/drones/{id} and the list show
// the latest, its ts the ts of the position that reported it; a drone
// without a pilot has null.
func TestPilotOnTheAPI(t *testing.T) {
	e := newDronesEnv(t)
	at := func(s int) time.Time { return e.base.Add(time.Duration(s) * time.Second) }
	p1 := dronetest.Pos("P", 1, at(100), dronetest.InsideLat, dronetest.InsideLon)
	p1.Operator = &telemetry.Operator{Lat: dronetest.InsideLat - 0.01, Lon: dronetest.InsideLon, Type: telemetry.OperatorTakeoff}
	evs := e.fly(0, p1)
	if len(evs) != 1 || evs[0].Type != alerts.Raised || evs[0].Operator == nil {
		t.Fatalf("P's raise: %+v", evs)
	}
	p2 := dronetest.Pos("P", 2, at(105), dronetest.InsideLat+0.001, dronetest.InsideLon)
	p2.Operator = &telemetry.Operator{Lat: dronetest.InsideLat + 0.001, Lon: dronetest.InsideLon + 0.01, AltM: telemetry.Float(35),
		Type: telemetry.OperatorLive}
	p3 := dronetest.Pos("P", 3, at(110), dronetest.InsideLat+0.001, dronetest.InsideLon)
	e.fly(0, p2, p3)

	near := func(what string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 0.5 {
			t.Errorf("%s %v, want %.1f", what, got, want)
		}
	}
	check := func(where string, raise, latest *pilotAnswer) {
		t.Helper()
		if raise == nil || raise.Type != "takeoff" || raise.Lat != p1.Operator.Lat || !raise.TS.Equal(at(100)) || raise.AltM != nil {
			t.Errorf("%s: operator %+v", where, raise)
		} else {
			near(where+": operator range_m", raise.RangeM, 1111.9) // 0.01° of latitude due south
			near(where+": operator bearing_deg", raise.BearingDeg, 180)
		}
		if latest == nil || latest.Type != "live" || latest.Lon != p2.Operator.Lon || !latest.TS.Equal(at(105)) || latest.AltM == nil || *latest.AltM != 35 {
			t.Errorf("%s: operator_latest %+v", where, latest)
		} else {
			near(where+": operator_latest range_m", latest.RangeM, 692.3) // 0.01° of longitude due east at 51.471°
			near(where+": operator_latest bearing_deg", latest.BearingDeg, 90)
		}
	}
	var list struct {
		Alarms []struct {
			AlarmID        string       `json:"alarm_id"`
			Operator       *pilotAnswer `json:"operator"`
			OperatorLatest *pilotAnswer `json:"operator_latest"`
		} `json:"alarms"`
	}
	if a := e.get(t, "/v1/alarms?drone=P", &list); a.code != 200 || len(list.Alarms) != 1 {
		t.Fatalf("alarms of P: %d %s", a.code, a.raw)
	}
	check("GET /v1/alarms", list.Alarms[0].Operator, list.Alarms[0].OperatorLatest)
	var one struct {
		Operator       *pilotAnswer `json:"operator"`
		OperatorLatest *pilotAnswer `json:"operator_latest"`
	}
	if a := e.get(t, "/v1/alarms/"+evs[0].AlarmID, &one); a.code != 200 {
		t.Fatalf("alarm of P: %d %s", a.code, a.raw)
	}
	check("GET /v1/alarms/{id}", one.Operator, one.OperatorLatest)

	var dr struct {
		Operator *pilotAnswer `json:"operator"`
	}
	if a := e.get(t, "/v1/drones/P", &dr); a.code != 200 {
		t.Fatalf("drone P: %d %s", a.code, a.raw)
	}
	check("GET /v1/drones/P", one.Operator, dr.Operator)
	// B raised without a pilot: null both ways.
	var b struct {
		Operator       *pilotAnswer `json:"operator"`
		OperatorLatest *pilotAnswer `json:"operator_latest"`
	}
	if a := e.get(t, "/v1/alarms/"+e.bAlarm.AlarmID, &b); a.code != 200 || b.Operator != nil || b.OperatorLatest != nil {
		t.Errorf("B's alarm: %d, operator %+v, operator_latest %+v", a.code, b.Operator, b.OperatorLatest)
	}
	if a := e.get(t, "/v1/drones/B", &dr); a.code != 200 || dr.Operator != nil {
		t.Errorf("drone B: %d, operator %+v", a.code, dr.Operator)
	}
}

// TestMapPositionsPilot: the positions stream's drones carry their pilot
// compactly (lat, lon to 6 decimals, type, ts of the reporting position)
// so the page can draw it; a drone that never reported one has no
// "operator" at all.
func TestMapPositionsPilot(t *testing.T) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, "api-map-pilot")
	rdb := testenv.RedisClient(t)
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := dronetest.Zones()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := dronetest.Pos("P", 1, now.Add(-2*time.Second), dronetest.InsideLat, dronetest.InsideLon)
	p.Operator = &telemetry.Operator{Lat: 51.4612345678, Lon: -0.4812345678, Type: telemetry.OperatorLive}
	if _, err := dronetest.Fly(ctx, ds, zs, 0, p, dronetest.Pos("P", 2, now.Add(-time.Second), dronetest.InsideLat, dronetest.InsideLon),
		dronetest.Pos("A", 1, now.Add(-time.Second), dronetest.OutsideLat, dronetest.OutsideLon)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"/v1/map/positions", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var f struct {
			Drones []map[string]json.RawMessage `json:"drones"`
		}
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatal(err)
		}
		if len(f.Drones) != 2 {
			t.Fatalf("first frame: %s", data)
		}
		want := `{"lat":51.461235,"lon":-0.481235,"type":"live","ts":"` + now.Add(-2*time.Second).Format(time.RFC3339Nano) + `"}`
		for _, d := range f.Drones {
			switch string(d["drone_id"]) {
			case `"P"`:
				if string(d["operator"]) != want {
					t.Errorf("P's operator %s, want %s (the last known, from seq 1)", d["operator"], want)
				}
			case `"A"`:
				if _, has := d["operator"]; has {
					t.Errorf("A has an operator: %s", d["operator"])
				}
			}
		}
		return
	}
}
