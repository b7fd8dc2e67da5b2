package remoteid

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// sampleFlights reads the InterUSS sample (testdata/feeds/interuss) as it
// is: generic JSON, not our types.
func sampleFlights(t testing.TB) []map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../testdata/feeds/interuss/zurich.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Flights []map[string]any `json:"flights"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Flights
}

// answerFromSample builds the F3411-22a flights answer a USS serving the
// sample's flights gives at the end of them: current_state the last state,
// recent_positions every state newest first, times as Time objects, the
// height inside the position, the UAS id in details.
func answerFromSample(t testing.TB, flights []map[string]any) []byte {
	t.Helper()
	timeObj := func(s any) map[string]any { return map[string]any{"value": s, "format": "RFC3339"} }
	var out []map[string]any
	for _, f := range flights {
		det := f["flight_details"].(map[string]any)
		states := f["states"].([]any)
		var recent []map[string]any
		for i := len(states) - 1; i >= 0; i-- {
			s := states[i].(map[string]any)
			recent = append(recent, map[string]any{"time": timeObj(s["timestamp"]), "position": s["position"]})
		}
		last := states[len(states)-1].(map[string]any)
		cur := map[string]any{}
		for k, v := range last {
			cur[k] = v
		}
		delete(cur, "height")
		cur["timestamp"] = timeObj(last["timestamp"])
		out = append(out, map[string]any{
			"id": det["id"], "aircraft_type": f["aircraft_type"], "simulated": true,
			"details":       map[string]any{"id": det["id"], "uas_id": map[string]any{"serial_number": det["serial_number"]}},
			"current_state": cur, "recent_positions": recent,
		})
	}
	b, err := json.Marshal(map[string]any{"timestamp": timeObj("2022-01-01T00:01:00Z"), "flights": out})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFlightsPublicSample(t *testing.T) {
	flights := sampleFlights(t)
	res := Flights(answerFromSample(t, flights))
	if len(res.Errors) > 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	// Expected straight from the sample: every state once (current_state
	// repeats the newest), in time order per drone.
	var want []string
	for _, f := range flights {
		serial := f["flight_details"].(map[string]any)["serial_number"].(string)
		for _, s := range f["states"].([]any) {
			st := s.(map[string]any)
			pos := st["position"].(map[string]any)
			ts, err := time.Parse(time.RFC3339, st["timestamp"].(string))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%s %d %s %.9f %.9f %.3f", serial, ts.UnixMilli(), ts.UTC().Format(time.RFC3339Nano), pos["lat"], pos["lng"], pos["alt"]))
		}
	}
	var got []string
	for _, f := range res.Fixes {
		p := f.Pos
		got = append(got, fmt.Sprintf("%s %d %s %.9f %.9f %.3f", p.DroneID, p.Seq, p.TS.Format(time.RFC3339Nano), p.Lat, p.Lon, *p.AltM))
		if p.AltRef != "WGS84" {
			t.Errorf("%s: alt_ref %q, want WGS84", f.Path, p.AltRef)
		}
		if p.AGLM != nil {
			t.Errorf("%s: a height above TakeoffLocation was read as agl_m %v", f.Path, *p.AGLM)
		}
		if f.Pos.HAccuracyM != nil || f.Pos.VAccuracyM != nil {
			t.Errorf("%s: HAUnknown/VAUnknown gave an accuracy", f.Path)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("positions\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The current state's track and speed survive the dedup: it is listed first.
	for _, f := range res.Fixes {
		if strings.HasSuffix(f.Path, "current_state") && (f.Pos.HeadingDeg == nil || f.Pos.SpeedMPS == nil) {
			t.Errorf("%s lost track or speed", f.Path)
		}
	}
}

func flightsBody(flights ...string) []byte {
	return []byte(`{"timestamp":{"value":"2026-12-03T08:00:00Z","format":"RFC3339"},"flights":[` + strings.Join(flights, ",") + `]}`)
}

func state(ts string, extra string) string {
	return `{"timestamp":{"value":"` + ts + `","format":"RFC3339"},"speed_accuracy":"SA3mps","position":{"lat":51.47,"lng":-0.46,"alt":120` + extra + `}}`
}

func TestFlightsFields(t *testing.T) {
	const ts = "2026-12-03T08:00:00.5Z"
	ms := time.Date(2026, 12, 3, 8, 0, 0, 5e8, time.UTC).UnixMilli()
	f64 := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	tests := []struct {
		name   string
		flight string
		want   string // drone seq alt ref agl heading speed hacc vacc
	}{
		{"ground-level height is AGL, accuracy classes in metres",
			`{"id":"f1","aircraft_type":"Helicopter","current_state":{"timestamp":{"value":"` + ts + `"},"track":-90,"speed":12.5,"speed_accuracy":"SA1mps","position":{"lat":51.47,"lng":-0.46,"alt":150,"accuracy_h":"HA3m","accuracy_v":"VA10m","height":{"distance":60,"reference":"GroundLevel"}}}}`,
			fmt.Sprintf("f1 %d 150 WGS84 60 270 12.5 3 10", ms)},
		{"takeoff-relative height is not AGL",
			`{"id":"f1","aircraft_type":"Helicopter","current_state":{"timestamp":{"value":"` + ts + `"},"speed_accuracy":"SA1mps","position":{"lat":51.47,"lng":-0.46,"alt":150,"height":{"distance":60,"reference":"TakeoffLocation"}}}}`,
			fmt.Sprintf("f1 %d 150 WGS84 - - - - -", ms)},
		{"F3411-19 form: string time, height on the state",
			`{"id":"f1","current_state":{"timestamp":"` + ts + `","position":{"lat":51.47,"lng":-0.46,"alt":150},"height":{"distance":45,"reference":"GroundLevel"},"track":360,"speed":3}}`,
			fmt.Sprintf("f1 %d 150 WGS84 45 0 3 - -", ms)},
		{"unknown sentinels: alt -1000, track 361, speed 255, height -1000, open-ended accuracy",
			`{"id":"f1","current_state":{"timestamp":{"value":"` + ts + `"},"track":361,"speed":255,"position":{"lat":51.47,"lng":-0.46,"alt":-1000,"accuracy_h":"HA10NMPlus","accuracy_v":"VA150mPlus","height":{"distance":-1000,"reference":"GroundLevel"}}}}`,
			fmt.Sprintf("f1 %d - - - - - - -", ms)},
		{"uas_id in details names the drone",
			`{"id":"f1","details":{"id":"f1","uas_id":{"registration_id":"CHE.87654"}},"current_state":{"timestamp":{"value":"` + ts + `"},"position":{"lat":51.47,"lng":-0.46}}}`,
			fmt.Sprintf("CHE.87654 %d - - - - - - -", ms)},
		{"flight-level uas_id, serial number first",
			`{"id":"f1","uas_id":{"serial_number":"1596F35A","utm_id":"u-1"},"current_state":{"timestamp":{"value":"` + ts + `"},"position":{"lat":51.47,"lng":-0.46}}}`,
			fmt.Sprintf("1596F35A %d - - - - - - -", ms)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Flights(flightsBody(tc.flight))
			if len(res.Errors) > 0 || len(res.Fixes) != 1 {
				t.Fatalf("errors %v, %d fixes", res.Errors, len(res.Fixes))
			}
			f := res.Fixes[0]
			p := f.Pos
			ref := p.AltRef
			if ref == "" {
				ref = "-"
			}
			got := fmt.Sprintf("%s %d %s %s %s %s %s %s %s", p.DroneID, p.Seq, f64(p.AltM), ref, f64(p.AGLM), f64(p.HeadingDeg), f64(p.SpeedMPS), f64(f.Pos.HAccuracyM), f64(f.Pos.VAccuracyM))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestFlightsOrderAndDedup(t *testing.T) {
	// recent_positions newest first, current_state repeating the newest: one
	// record per time, oldest first; two flights of one aircraft merge.
	body := flightsBody(
		`{"id":"a","uas_id":{"serial_number":"S1"},"current_state":`+state("2026-12-03T08:00:03Z", "")+`,"recent_positions":[`+
			`{"time":{"value":"2026-12-03T08:00:03Z"},"position":{"lat":51.1,"lng":-0.1}},`+
			`{"time":{"value":"2026-12-03T08:00:02Z"},"position":{"lat":51.2,"lng":-0.2}},`+
			`{"time":{"value":"2026-12-03T08:00:01Z"},"position":{"lat":0,"lng":0}}]}`,
		`{"id":"b","current_state":`+state("2026-12-03T08:00:02Z", "")+`}`,
		`{"id":"c","uas_id":{"serial_number":"S1"},"current_state":`+state("2026-12-03T08:00:01.5Z", "")+`}`,
	)
	res := Flights(body)
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	var got []string
	for _, f := range res.Fixes {
		got = append(got, fmt.Sprintf("%s@%s", f.Pos.DroneID, f.Pos.TS.Format("05.0")))
	}
	if want := "S1@01.5 S1@02.0 S1@03.0 b@02.0"; strings.Join(got, " ") != want {
		t.Fatalf("got %s, want %s", strings.Join(got, " "), want)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != "flights[0].recent_positions[2]" {
		t.Fatalf("skipped %+v, want the 0,0 position flights[0].recent_positions[2]", res.Skipped)
	}
	if res.Fixes[2].Pos.Lat != 51.47 {
		t.Fatalf("the current state should win the dedup at 03: %+v", res.Fixes[2])
	}
}

func TestFlightWithoutPositionLeftOut(t *testing.T) {
	res := Flights(flightsBody(`{"id":"a","aircraft_type":"Helicopter","operating_area":{"aircraft_count":1}}`,
		`{"id":"b","current_state":`+state("2026-12-03T08:00:00Z", "")+`}`))
	if len(res.Errors) > 0 || len(res.Fixes) != 1 || res.Fixes[0].Pos.DroneID != "b" || res.Items != 2 {
		t.Fatalf("%+v", res)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != "flights[0]" || !strings.Contains(res.Skipped[0].Why, "neither") {
		t.Fatalf("skipped %+v", res.Skipped)
	}
}

func TestFlightsErrors(t *testing.T) {
	tests := []struct {
		name, body, path, contains string
		item                       int
	}{
		{"not a flights answer", `{"records":[]}`, "flights", "required", 0},
		{"malformed", `{"flights":[`, "flights", "malformed JSON", 0},
		{"no id", string(flightsBody(`{"aircraft_type":"Helicopter","current_state":` + state("2026-12-03T08:00:00Z", "") + `}`)), "flights[0].id", "required", 0},
		{"lat out of range in the second flight", string(flightsBody(`{"id":"a","current_state":`+state("2026-12-03T08:00:00Z", "")+`}`,
			`{"id":"b","current_state":{"timestamp":{"value":"2026-12-03T08:00:00Z"},"position":{"lat":91,"lng":0}}}`)), "flights[1].current_state.position.lat", "between -90 and 90", 1},
		{"lng missing in a recent position", string(flightsBody(`{"id":"a","recent_positions":[{"time":{"value":"2026-12-03T08:00:00Z"},"position":{"lat":1}}]}`)), "flights[0].recent_positions[0].position.lng", "required", 0},
		{"bad time", string(flightsBody(`{"id":"a","current_state":{"timestamp":{"value":"yesterday"},"position":{"lat":1,"lng":1}}}`)), "flights[0].current_state.timestamp", "RFC 3339", 0},
		{"time in another format", string(flightsBody(`{"id":"a","current_state":{"timestamp":{"value":"2026-12-03T08:00:00Z","format":"ISO8601"},"position":{"lat":1,"lng":1}}}`)), "flights[0].current_state.timestamp", "RFC3339", 0},
		{"time before 1970 (seq would be negative)", string(flightsBody(`{"id":"a","current_state":{"timestamp":{"value":"0000-01-01T00:00:00Z"},"position":{"lat":1,"lng":1}}}`)), "flights[0].current_state.timestamp", "before 1970", 0},
		{"missing time", string(flightsBody(`{"id":"a","recent_positions":[{"position":{"lat":1,"lng":1}}]}`)), "flights[0].recent_positions[0].time", "required", 0},
		{"lat a string", string(flightsBody(`{"id":"a","current_state":{"timestamp":"2026-12-03T08:00:00Z","position":{"lat":"51","lng":1}}}`)), "flights[0].current_state.position.lat", "JSON string", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Flights([]byte(tc.body))
			if len(res.Errors) == 0 {
				t.Fatalf("accepted: %+v", res.Fixes)
			}
			e := res.Errors[0]
			if e.Path != tc.path || e.Item != tc.item || !strings.Contains(e.Err, tc.contains) {
				t.Fatalf("error %d %q: %q; want %d %q containing %q", e.Item, e.Path, e.Err, tc.item, tc.path, tc.contains)
			}
		})
	}
}

func TestDroneID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"d22a1cef-a3e0-437f-92b5-44c1453f4068", "d22a1cef-a3e0-437f-92b5-44c1453f4068"},
		{"CHE.87654", "CHE.87654"},
		{"a b", "a_b."},
		{strings.Repeat("x", 65), strings.Repeat("x", 47) + "."},
		{"flight#1/é", "flight_1___."}, // é is two bytes
	}
	seen := map[string]string{}
	for _, tc := range tests {
		got, ok := DroneID(tc.in)
		if !ok {
			t.Fatalf("%q: no id", tc.in)
		}
		if strings.HasSuffix(tc.want, ".") {
			if !strings.HasPrefix(got, tc.want) || len(got) != len(tc.want)+16 {
				t.Errorf("%q -> %q, want %q + 16 hex digits", tc.in, got, tc.want)
			}
		} else if got != tc.want {
			t.Errorf("%q -> %q, want %q", tc.in, got, tc.want)
		}
		if again, _ := DroneID(tc.in); again != got {
			t.Errorf("%q not deterministic: %q, %q", tc.in, got, again)
		}
		seen[got] = tc.in
	}
	// Differing only in a replaced character, or after the cut: still apart.
	a, _ := DroneID("a b")
	b, _ := DroneID("a#b")
	c, _ := DroneID(strings.Repeat("x", 65) + "1")
	d, _ := DroneID(strings.Repeat("x", 65) + "2")
	if a == b || c == d {
		t.Fatalf("collisions: %q %q / %q %q", a, b, c, d)
	}
	if _, ok := DroneID(""); ok {
		t.Fatal("empty id accepted")
	}
}

func FuzzFlights(f *testing.F) {
	f.Add(answerFromSample(f, sampleFlights(f)))
	f.Add(flightsBody(`{"id":"a b","current_state":` + state("2026-12-03T08:00:00Z", `,"height":{"distance":3,"reference":"GroundLevel"}`) + `}`))
	// Found by CI's fuzzing: an impossible speed passes the converter and
	// is the validator's to drop.
	f.Add(flightsBody(`{"id":"a","current_state":{"timestamp":{"value":"2026-12-03T08:00:00Z","format":"RFC3339"},"speed":1000,` +
		`"position":{"lat":51.47,"lng":-0.46,"alt":-5000,"height":{"distance":1e300,"reference":"GroundLevel"}}}}`))
	f.Add([]byte(`{"flights":[{"id":"x","recent_positions":[{"time":"2026-12-03T08:00:00Z","position":{"lat":1,"lng":2}}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkResult(t, Flights(b))
	})
}

// checkResult holds for every conversion: valid ids, positions in range,
// optional fields in range, each drone's seqs strictly increasing.
func checkResult(t *testing.T, res Result) {
	if len(res.Errors) > 0 {
		for _, e := range res.Errors {
			if (e.Path == "" && !strings.HasPrefix(e.Err, "malformed JSON")) || e.Err == "" {
				t.Fatalf("error without path or message: %+v", e)
			}
		}
		return
	}
	last := map[string]int64{}
	for _, x := range res.Fixes {
		p := x.Pos
		if id, _ := DroneID(p.DroneID); id != p.DroneID {
			t.Fatalf("drone_id %q is not in the alphabet", p.DroneID)
		}
		if p.Lat < -90 || p.Lat > 90 || p.Lon < -180 || p.Lon > 180 || (p.Lat == 0 && p.Lon == 0) {
			t.Fatalf("position %v,%v", p.Lat, p.Lon)
		}
		if s, ok := last[p.DroneID]; ok && p.Seq <= s {
			t.Fatalf("%s: seq %d after %d", p.DroneID, p.Seq, s)
		}
		last[p.DroneID] = p.Seq
		if h := p.HeadingDeg; h != nil && (*h < 0 || *h >= 360 || math.IsNaN(*h)) {
			t.Fatalf("heading %v", *h)
		}
		// The converter only drops the sentinels (255 m/s, -1000 m
		// unknown); the physical ranges belong to telemetry's validator,
		// which every converted fix goes through in ingest.
		if s := p.SpeedMPS; s != nil && (*s == 255 || !finite(*s)) {
			t.Fatalf("speed %v", *s)
		}
		if a := p.AltM; a != nil && (*a == -1000 || !finite(*a) || p.AltRef != "WGS84") {
			t.Fatalf("alt %v %s", *a, p.AltRef)
		}
		v, _, err := telemetry.DecodeWarn(p.AppendJSON(nil), nil)
		if err != nil {
			t.Fatalf("converted fix %s is not a valid record: %v", p.AppendJSON(nil), err)
		}
		if s := v.SpeedMPS; s != nil && (*s < 0 || *s > telemetry.MaxSpeedMPS) {
			t.Fatalf("validated speed %v", *s)
		}
		if a := v.AltM; a != nil && (*a < telemetry.MinHeightM || *a > telemetry.MaxHeightM) {
			t.Fatalf("validated alt %v", *a)
		}
		if a := v.AGLM; a != nil && (*a < telemetry.MinAGLM || *a > telemetry.MaxHeightM) {
			t.Fatalf("validated agl %v", *a)
		}
		if x.SourceField("lat") == "" || x.SourceField("drone_id") == "" {
			t.Fatalf("no source path for %+v", x)
		}
	}
}

// TestOptionalFieldsDroppedAlone: a bad optional value loses that field,
// with a note naming it, never the position.
func TestOptionalFieldsDroppedAlone(t *testing.T) {
	tests := []struct {
		name, body string
		odid       bool
		notes      []string
	}{
		{"RID", string(flightsBody(`{"id":"a","current_state":{"timestamp":"2026-12-03T08:00:00Z","track":"90","speed":[1],` +
			`"position":{"lat":51.47,"lng":-0.46,"alt":"120","accuracy_h":"HA2m","accuracy_v":7,"height":{"distance":60,"reference":"Sea"}}}},` +
			`{"id":"b","current_state":{"timestamp":"2026-12-03T08:00:00Z","position":{"lat":51.47,"lng":-0.46,"height":"60"}}}`)),
			false, []string{
				"flights[0].current_state.position.accuracy_h", "flights[0].current_state.position.accuracy_v",
				"flights[0].current_state.position.alt", "flights[0].current_state.position.height.reference",
				"flights[0].current_state.track", "flights[0].current_state.speed", "flights[1].current_state.position.height",
			}},
		{"ODID core-c", `{"uas_id":"A","location":{"Latitude":1,"Longitude":1,"TimeStamp":1,"AltitudeGeo":"x","HeightType":1.5,"Direction":{},"HorizAccuracy":"3"}}`,
			true, []string{"[0].location.AltitudeGeo", "[0].location.Direction", "[0].location.HeightType", "[0].location.HorizAccuracy"}},
		{"ODID librid", `{"messages":[{"message_type":0,"uas_id":"X"},{"message_type":1,"latitude":1,"longitude":1,"timestamp":5,"speed":"fast"}]}`,
			true, []string{"[0].messages[1].speed"}},
	}
	recv := time.Date(2026, 12, 3, 9, 0, 1, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var res Result
			if tc.odid {
				res = ODID([]byte(tc.body), recv)
			} else {
				res = Flights([]byte(tc.body))
			}
			if len(res.Errors) > 0 || len(res.Fixes) == 0 {
				t.Fatalf("errors %v, %d fixes", res.Errors, len(res.Fixes))
			}
			for _, x := range res.Fixes {
				p := x.Pos
				if p.AltM != nil || p.AGLM != nil || p.HeadingDeg != nil || p.SpeedMPS != nil || p.HAccuracyM != nil || p.VAccuracyM != nil {
					t.Fatalf("a bad value was kept: %s", p.AppendJSON(nil))
				}
			}
			var got []string
			for _, n := range res.Notes {
				got = append(got, n.Path)
			}
			sort.Strings(got)
			want := append([]string(nil), tc.notes...)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("notes on\n %v\nwant\n %v\n(%+v)", got, want, res.Notes)
			}
		})
	}
}
