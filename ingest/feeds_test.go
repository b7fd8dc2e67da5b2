package ingest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// postFeed posts body to route from a loopback client.
func postFeed(t *testing.T, s *Server, route, ctype, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+route, strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Content-Type", ctype)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%d %s: %v", w.Code, b, err)
	}
	return w.Code, m
}

func ridFlight(id, ts string, lat float64) string {
	b, _ := json.Marshal(map[string]any{"id": id, "aircraft_type": "Helicopter", "current_state": map[string]any{
		"timestamp": map[string]any{"value": ts, "format": "RFC3339"}, "speed_accuracy": "SA3mps", "track": 361, "speed": 4,
		"position": map[string]any{"lat": lat, "lng": -0.46, "alt": 130, "accuracy_h": "HA3m", "accuracy_v": "VA10m",
			"height": map[string]any{"distance": 55, "reference": "GroundLevel"}}}})
	return string(b)
}

func TestRIDRoute(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	ts := now.Add(-2 * time.Second).Format(time.RFC3339Nano)
	fp := &fakeProducer{}
	s := newTestServer(t, fp, Limits{MaxRecords: 3})
	body := `{"timestamp":{"value":"` + ts + `"},"flights":[` + ridFlight("flight-1", ts, 51.47) + `,` + ridFlight("flight 2", ts, 51.48) + `]}`
	code, m := postFeed(t, s, RouteRID, "application/json", body)
	if code != http.StatusAccepted || m["accepted"] != 2.0 {
		t.Fatalf("%d %v", code, m)
	}
	recs := fp.produced()
	if len(recs) != 2 || string(recs[0].Key) != "flight-1" || !strings.HasPrefix(string(recs[1].Key), "flight_2.") {
		t.Fatalf("records %v", recs)
	}
	p, err := telemetry.Decode(recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if p.Seq != now.Add(-2*time.Second).UnixMilli() || *p.AltM != 130 || p.AltRef != "WGS84" || *p.AGLM != 55 || p.HeadingDeg != nil || *p.SpeedMPS != 4 ||
		p.HAccuracyM == nil || *p.HAccuracyM != 3 || p.VAccuracyM == nil || *p.VAccuracyM != 10 {
		t.Fatalf("record %s", recs[0].Value)
	}

	t.Run("400 names the flight and the field as sent", func(t *testing.T) {
		body := `{"flights":[` + ridFlight("a", ts, 51.47) + `,` + ridFlight("b", ts, 95) + `]}`
		code, m := postFeed(t, s, RouteRID, "application/json", body)
		errs, _ := m["errors"].([]any)
		if code != http.StatusBadRequest || len(errs) != 1 {
			t.Fatalf("%d %v", code, m)
		}
		e := errs[0].(map[string]any)
		if e["line"] != 2.0 || e["field"] != "flights[1].current_state.position.lat" {
			t.Fatalf("error %v", e)
		}
		if msg, _ := m["error"].(string); !strings.HasPrefix(msg, "1 of 2 ") {
			t.Fatalf("message %q", m["error"])
		}
	})
	t.Run("an error found by the common validation is renamed too", func(t *testing.T) {
		future := now.Add(3 * time.Hour).Format(time.RFC3339Nano)
		code, m := postFeed(t, s, RouteRID, "application/json", `{"flights":[`+ridFlight("a", future, 51.47)+`]}`)
		errs, _ := m["errors"].([]any)
		if code != http.StatusBadRequest || len(errs) != 1 || errs[0].(map[string]any)["field"] != "flights[0].current_state.timestamp" {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("the record limit counts converted positions", func(t *testing.T) {
		var fl []string
		for i := range 4 {
			fl = append(fl, ridFlight("d"+string(rune('a'+i)), ts, 51.47))
		}
		code, m := postFeed(t, s, RouteRID, "application/json", `{"flights":[`+strings.Join(fl, ",")+`]}`)
		if code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("a position at 0,0 is left out with a warning", func(t *testing.T) {
		code, m := postFeed(t, s, RouteRID, "application/json", `{"flights":[`+ridFlight("a", ts, 51.47)+`,`+strings.Replace(ridFlight("b", ts, 0), `"lng":-0.46`, `"lng":0`, 1)+`]}`)
		ws, _ := m["warnings"].([]any)
		if code != http.StatusAccepted || m["accepted"] != 1.0 || len(ws) != 1 || ws[0].(map[string]any)["field"] != "flights[1].current_state" {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("heights outside every physical range are dropped and named, the position kept", func(t *testing.T) {
		fl := strings.Replace(strings.Replace(ridFlight("wild-h", ts, 51.47), `"alt":130`, `"alt":-1e300`, 1), `"distance":55`, `"distance":1e300`, 1)
		before := len(fp.produced())
		code, m := postFeed(t, s, RouteRID, "application/json", `{"flights":[`+fl+`]}`)
		ws, _ := m["warnings"].([]any)
		if code != http.StatusAccepted || m["accepted"] != 1.0 || len(ws) != 2 ||
			ws[0].(map[string]any)["field"] != "flights[0].current_state.position.alt" ||
			ws[1].(map[string]any)["field"] != "flights[0].current_state.position.height.distance" {
			t.Fatalf("%d %v", code, m)
		}
		recs := fp.produced()[before:]
		p, err := telemetry.Decode(recs[0].Value)
		if err != nil || p.AltM != nil || p.AGLM != nil || p.Dropped != "alt_m,agl_m" {
			t.Fatalf("record %s (%v): want no height and dropped alt_m,agl_m", recs[0].Value, err)
		}
	})
	t.Run("NDJSON is not a flights answer", func(t *testing.T) {
		if code, m := postFeed(t, s, RouteRID, "application/x-ndjson", body); code != http.StatusUnsupportedMediaType {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("a telemetry record posted to the RID route is refused", func(t *testing.T) {
		if code, m := postFeed(t, s, RouteRID, "application/json", rec("d1", 1)); code != http.StatusBadRequest {
			t.Fatalf("%d %v", code, m)
		}
	})
}

func TestODIDRoute(t *testing.T) {
	fp := &fakeProducer{}
	s := newTestServer(t, fp, Limits{})
	recv := time.Now().UTC().Add(-time.Second)
	sph := float64(recv.Sub(recv.Truncate(time.Hour))) / float64(time.Second)
	b, _ := json.Marshal([]map[string]any{{
		"basic_id":    map[string]any{"UASID": "1596F35A"},
		"received_at": recv.Format(time.RFC3339Nano),
		"location": map[string]any{"Latitude": 51.47, "Longitude": -0.46, "AltitudeGeo": 130, "HeightType": 0, "Height": 40,
			"Direction": 361, "SpeedHorizontal": 255, "TimeStamp": float64(int(sph*10)) / 10},
	}})
	code, m := postFeed(t, s, RouteODID, "application/json", string(b))
	if code != http.StatusAccepted || m["accepted"] != 1.0 {
		t.Fatalf("%d %v", code, m)
	}
	p, err := telemetry.Decode(fp.produced()[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if p.DroneID != "1596F35A" || recv.Sub(p.TS) < 0 || recv.Sub(p.TS) > 100*time.Millisecond || p.AGLM != nil || p.HeadingDeg != nil || p.SpeedMPS != nil {
		t.Fatalf("record %s (received %v)", fp.produced()[0].Value, recv)
	}
	code, m = postFeed(t, s, RouteODID, "application/json", `{"uas_id":"A","location":{"Latitude":1,"Longitude":1,"TimeStamp":4000}}`)
	errs, _ := m["errors"].([]any)
	if code != http.StatusBadRequest || len(errs) != 1 || errs[0].(map[string]any)["field"] != "[0].location.TimeStamp" {
		t.Fatalf("%d %v", code, m)
	}

	// librid's published message pack: its Location's timestamp is null,
	// so the receive time is used and the 202 says so.
	pack, err := os.ReadFile("../testdata/feeds/librid/message_pack.json")
	if err != nil {
		t.Fatal(err)
	}
	code, m = postFeed(t, s, RouteODID, "application/json", string(pack))
	ws, _ := m["warnings"].([]any)
	if code != http.StatusAccepted || m["accepted"] != 1.0 || len(ws) != 1 || ws[0].(map[string]any)["field"] != "[0].messages[1].timestamp" {
		t.Fatalf("%d %v", code, m)
	}
}

// TestFeedRoutesOperator: the pilot's position of a Remote ID feed reaches
// the Kafka value; one out of range is dropped by the record's validation,
// the warning naming the feed's own field, and the position produced.
func TestFeedRoutesOperator(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	ts := now.Add(-2 * time.Second).Format(time.RFC3339Nano)
	flight := func(id, loc string) string {
		f := ridFlight(id, ts, 51.47)
		return f[:len(f)-1] + `,"details":{"operator_location":` + loc + `}}`
	}
	fp := &fakeProducer{}
	s := newTestServer(t, fp, Limits{})
	body := `{"flights":[` + flight("f1", `{"position":{"lat":51.469,"lng":-0.452},"altitude":{"value":95,"reference":"W84","units":"M"},"altitude_type":"Dynamic"}`) +
		`,` + flight("f2", `{"position":{"lat":95,"lng":-0.452}}`) + `]}`
	code, m := postFeed(t, s, RouteRID, "application/json", body)
	ws, _ := m["warnings"].([]any)
	if code != http.StatusAccepted || m["accepted"] != 2.0 || len(ws) != 1 ||
		ws[0].(map[string]any)["field"] != "flights[1].details.operator_location" || ws[0].(map[string]any)["line"] != 2.0 {
		t.Fatalf("%d %v", code, m)
	}
	recs := fp.produced()
	if !strings.HasSuffix(string(recs[0].Value), `,"operator":{"lat":51.469,"lon":-0.452,"alt_m":95,"type":"live"}}`) ||
		!strings.HasSuffix(string(recs[1].Value), `,"dropped":"operator"}`) {
		t.Fatalf("records\n%s\n%s", recs[0].Value, recs[1].Value)
	}

	fp = &fakeProducer{}
	s = newTestServer(t, fp, Limits{})
	pack, err := os.ReadFile("../testdata/feeds/librid/system_pack.json")
	if err != nil {
		t.Fatal(err)
	}
	if code, m := postFeed(t, s, RouteODID, "application/json", string(pack)); code != http.StatusAccepted || m["accepted"] != 1.0 {
		t.Fatalf("%d %v", code, m)
	}
	p, err := telemetry.Decode(fp.produced()[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if o := p.Operator; o == nil || o.Lat != 60.287032 || o.Lon != 24.539719 || o.AltM == nil || *o.AltM != 50 || o.Type != telemetry.OperatorTakeoff {
		t.Fatalf("record %s", fp.produced()[0].Value)
	}
}
