package remoteid

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// opString prints an operator for comparison: "-" for none.
func opString(o *telemetry.Operator) string {
	if o == nil {
		return "-"
	}
	alt := "-"
	if o.AltM != nil {
		alt = fmt.Sprint(*o.AltM)
	}
	return fmt.Sprintf("%v %v %s %q", o.Lat, o.Lon, alt, o.Type)
}

// TestFlightsOperatorPublicSample: the InterUSS sample's flights carry the
// pilot's position in their details (F3411-19's LatLngPoint form, as the
// injection API states it); every position of the flight gets it.
func TestFlightsOperatorPublicSample(t *testing.T) {
	flights := sampleFlights(t)
	var opLocs []any
	for _, f := range flights {
		opLocs = append(opLocs, f["flight_details"].(map[string]any)["operator_location"])
	}
	var answer map[string]any
	if err := json.Unmarshal(answerFromSample(t, flights), &answer); err != nil {
		t.Fatal(err)
	}
	for i, f := range answer["flights"].([]any) {
		f.(map[string]any)["details"].(map[string]any)["operator_location"] = opLocs[i]
	}
	body, _ := json.Marshal(answer)
	res := Flights(body)
	if len(res.Errors) > 0 || len(res.Notes) > 0 {
		t.Fatalf("errors %v, notes %+v", res.Errors, res.Notes)
	}
	want := map[string]string{}
	for i, f := range flights {
		serial := f["flight_details"].(map[string]any)["serial_number"].(string)
		loc := opLocs[i].(map[string]any)
		want[serial] = opString(&telemetry.Operator{Lat: loc["lat"].(float64), Lon: loc["lng"].(float64)})
	}
	if len(want) != 2 || len(res.Fixes) == 0 {
		t.Fatalf("sample: %d flights with an operator_location, %d fixes", len(want), len(res.Fixes))
	}
	for _, x := range res.Fixes {
		if got := opString(x.Pos.Operator); got != want[x.Pos.DroneID] {
			t.Errorf("%s: operator %s, want %s", x.Path, got, want[x.Pos.DroneID])
		}
	}
	// Each position has its own copy.
	if res.Fixes[0].Pos.Operator == res.Fixes[1].Pos.Operator {
		t.Error("two positions share one Operator")
	}
}

// TestFlightsOperator: F3411-22a's OperatorLocation, and what is dropped
// (with a note, the positions kept) or read as unknown.
func TestFlightsOperator(t *testing.T) {
	tests := []struct {
		name, loc string
		want      string // opString of every position's operator
		notes     []string
	}{
		{"F3411-22a with altitude and type", `{"position":{"lat":51.469,"lng":-0.452},"altitude":{"value":95,"reference":"W84","units":"M"},"altitude_type":"Dynamic"}`,
			`51.469 -0.452 95 "live"`, nil},
		{"Takeoff", `{"position":{"lat":51.469,"lng":-0.452},"altitude_type":"Takeoff"}`, `51.469 -0.452 - "takeoff"`, nil},
		{"Fixed", `{"position":{"lat":51.469,"lng":-0.452},"altitude_type":"Fixed"}`, `51.469 -0.452 - "fixed"`, nil},
		{"F3411-19 LatLngPoint", `{"lat":51.469,"lng":-0.452}`, `51.469 -0.452 - ""`, nil},
		{"absent", `null`, "-", nil},
		{"0, 0 is unknown", `{"position":{"lat":0,"lng":0},"altitude_type":"Takeoff"}`, "-", nil},
		{"altitude -1000 is unknown", `{"position":{"lat":1,"lng":2},"altitude":{"value":-1000,"reference":"W84","units":"M"}}`, `1 2 - ""`, nil},
		{"not an object", `"51.469,-0.452"`, "-", []string{"flights[0].details.operator_location"}},
		{"lat a string", `{"position":{"lat":"51.469","lng":-0.452}}`, "-", []string{"flights[0].details.operator_location.position.lat"}},
		{"lng missing", `{"position":{"lat":51.469}}`, "-", []string{"flights[0].details.operator_location.position.lng"}},
		{"unknown altitude_type", `{"position":{"lat":1,"lng":2},"altitude_type":"Moving"}`, `1 2 - ""`, []string{"flights[0].details.operator_location.altitude_type"}},
		{"altitude not W84", `{"position":{"lat":1,"lng":2},"altitude":{"value":95,"reference":"SFC","units":"M"}}`, `1 2 - ""`, []string{"flights[0].details.operator_location.altitude.reference"}},
		{"altitude in feet", `{"position":{"lat":1,"lng":2},"altitude":{"value":95,"reference":"W84","units":"FT"}}`, `1 2 - ""`, []string{"flights[0].details.operator_location.altitude.units"}},
		// Out of range is for telemetry to drop, naming the source (see
		// ingest's TestRIDRouteOperator).
		{"lat out of range passed on", `{"position":{"lat":95,"lng":2}}`, `95 2 - ""`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flight := `{"id":"f1","details":{"uas_id":{"serial_number":"1AKGAAN8G70R7JS"},"operator_location":` + tc.loc + `},` +
				`"current_state":` + state("2026-12-03T08:00:01Z", "") + `,"recent_positions":[{"time":{"value":"2026-12-03T08:00:00Z","format":"RFC3339"},"position":{"lat":51.46,"lng":-0.45}}]}`
			res := Flights(flightsBody(flight))
			if len(res.Errors) > 0 || len(res.Fixes) != 2 {
				t.Fatalf("errors %v, %d fixes: the positions were lost over the pilot's", res.Errors, len(res.Fixes))
			}
			for _, x := range res.Fixes {
				if got := opString(x.Pos.Operator); got != tc.want {
					t.Errorf("%s: operator %s, want %s", x.Path, got, tc.want)
				}
				if x.Pos.Operator != nil && x.SourceField("operator.lat") != "flights[0].details.operator_location" {
					t.Errorf("source of operator.lat: %q", x.SourceField("operator.lat"))
				}
			}
			var notes []string
			for _, n := range res.Notes {
				notes = append(notes, n.Path)
			}
			if fmt.Sprint(notes) != fmt.Sprint(tc.notes) {
				t.Errorf("notes %+v, want paths %v", res.Notes, tc.notes)
			}
		})
	}
}

// TestODIDSystemSample: librid's message pack with a System message
// (testdata/feeds/librid/system_pack.json): the pack's Location gets the
// pilot's take-off position and altitude.
func TestODIDSystemSample(t *testing.T) {
	pack, err := os.ReadFile("../../testdata/feeds/librid/system_pack.json")
	if err != nil {
		t.Fatal(err)
	}
	res := ODID(pack, time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC))
	if len(res.Errors) > 0 || len(res.Fixes) != 1 {
		t.Fatalf("%+v", res)
	}
	x := res.Fixes[0]
	if got, want := opString(x.Pos.Operator), `60.287032 24.539719 50 "takeoff"`; got != want {
		t.Fatalf("operator %s, want %s", got, want)
	}
	if got := x.SourceField("operator.lat"); got != "[0].messages[2]" {
		t.Errorf("source of operator.lat: %q", got)
	}
	// Without the System message (the published pack) there is none.
	pack, err = os.ReadFile("../../testdata/feeds/librid/message_pack.json")
	if err != nil {
		t.Fatal(err)
	}
	if res := ODID(pack, time.Now()); len(res.Fixes) != 1 || res.Fixes[0].Pos.Operator != nil {
		t.Fatalf("%+v", res)
	}
}

// TestODIDSystem: how a System message is tied to positions. In a pack it
// goes with every Location of the pack; across a request's items the
// latest one heard for a drone goes with that drone's later positions, and
// one saying the position is unknown forgets it.
func TestODIDSystem(t *testing.T) {
	recv := time.Date(2026, 12, 3, 9, 0, 1, 0, time.UTC)
	sysCoreC := func(typ int, lat, lon, alt float64) string {
		return fmt.Sprintf(`"system":{"OperatorLocationType":%d,"ClassificationType":0,"OperatorLatitude":%v,"OperatorLongitude":%v,"AreaCount":1,"AreaRadius":0,"AreaCeiling":-1000,"AreaFloor":-1000,"OperatorAltitudeGeo":%v,"Timestamp":0}`, typ, lat, lon, alt)
	}
	loc := func(ts float64) string {
		return fmt.Sprintf(`"location":{"Latitude":51.47,"Longitude":-0.46,"TimeStamp":%v}`, ts)
	}
	item := func(id string, parts ...string) string {
		return `{"basic_id":{"UASID":"` + id + `"},"received_at":"2026-12-03T09:00:01Z",` + strings.Join(parts, ",") + `}`
	}
	libridSys := `{"message_type":4,"operator_location_type":1,"operator_latitude":51.4691,"operator_longitude":-0.4521,"operator_altitude":null}`
	tests := []struct {
		name, body string
		want       []string // opString per fix, in order
		notes      []string
	}{
		{"core-c System beside the Location", `[` + item("A", loc(1), sysCoreC(1, 51.469, -0.452, 95.5)) + `]`,
			[]string{`51.469 -0.452 95.5 "live"`}, nil},
		{"fixed, altitude unknown", `[` + item("A", loc(1), sysCoreC(2, 51.469, -0.452, -1000)) + `]`,
			[]string{`51.469 -0.452 - "fixed"`}, nil},
		{"position unknown (0, 0)", `[` + item("A", loc(1), sysCoreC(0, 0, 0, 80)) + `]`, []string{"-"}, nil},
		{"later items of the drone keep it, others do not get it",
			`[` + item("A", loc(1), sysCoreC(0, 51.469, -0.452, 80)) + `,` + item("A", loc(2)) + `,` + item("B", loc(2)) + `]`,
			[]string{`51.469 -0.452 80 "takeoff"`, `51.469 -0.452 80 "takeoff"`, "-"}, nil},
		{"an earlier item does not get it", `[` + item("A", loc(1)) + `,` + item("A", loc(2), sysCoreC(0, 51.469, -0.452, 80)) + `]`,
			[]string{"-", `51.469 -0.452 80 "takeoff"`}, nil},
		{"unknown forgets it", `[` + item("A", loc(1), sysCoreC(0, 51.469, -0.452, 80)) + `,` + item("A", loc(2), sysCoreC(0, 0, 0, -1000)) + `,` + item("A", loc(3)) + `]`,
			[]string{`51.469 -0.452 80 "takeoff"`, "-", "-"}, nil},
		{"reserved type: position kept, type unknown", `[` + item("A", loc(1), sysCoreC(7, 51.469, -0.452, 80)) + `]`,
			[]string{`51.469 -0.452 80 ""`}, []string{"[0].system.OperatorLocationType"}},
		{"system not an object: noted, position kept", `[` + item("A", loc(1), `"system":[1]`) + `]`, []string{"-"}, []string{"[0].system"}},
		{"system latitude a string", `[` + item("A", loc(1), `"system":{"OperatorLatitude":"x","OperatorLongitude":2}`) + `]`,
			[]string{"-"}, []string{"[0].system.OperatorLatitude"}},
		{"librid pack: the System after the Location still goes with it",
			`{"received_at":"2026-12-03T09:00:01Z","messages":[{"message_type":0,"uas_id":"P"},{"message_type":1,"latitude":51.47,"longitude":-0.46,"timestamp":10},` + libridSys + `]}`,
			[]string{`51.4691 -0.4521 - "live"`}, nil},
		{"librid pack: null latitude is unknown",
			`{"received_at":"2026-12-03T09:00:01Z","messages":[{"message_type":0,"uas_id":"P"},{"message_type":4,"operator_location_type":0,"operator_latitude":null,"operator_longitude":null},{"message_type":1,"latitude":51.47,"longitude":-0.46,"timestamp":10}]}`,
			[]string{"-"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ODID([]byte(tc.body), recv)
			if len(res.Errors) > 0 {
				t.Fatalf("errors %v", res.Errors)
			}
			var got []string
			for _, x := range res.Fixes {
				got = append(got, opString(x.Pos.Operator))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("operators %q, want %q", got, tc.want)
			}
			var notes []string
			for _, n := range res.Notes {
				notes = append(notes, n.Path)
			}
			if fmt.Sprint(notes) != fmt.Sprint(tc.notes) {
				t.Errorf("notes %+v, want paths %v", res.Notes, tc.notes)
			}
		})
	}
}
