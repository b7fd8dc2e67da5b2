package remoteid

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestResolveSecondsPastHour(t *testing.T) {
	at := func(h, m int, s float64) time.Time {
		return time.Date(2026, 12, 3, h, m, 0, 0, time.UTC).Add(time.Duration(math.Round(s*1000)) * time.Millisecond)
	}
	tests := []struct {
		name string
		s    float64
		recv time.Time
		want time.Time
	}{
		{"same hour", 754.3, at(8, 12, 35), at(8, 12, 34.3)},
		{"fix just before the hour, heard just after", 3599.9, at(9, 0, 0.2), at(8, 59, 59.9)},
		{"fix just after the hour, heard just before (clock 0.7 s fast)", 0.5, at(8, 59, 59.8), at(9, 0, 0.5)},
		{"fix exactly on the hour, heard on the hour", 0, at(9, 0, 0), at(9, 0, 0)},
		{"drone clock fast by the whole tolerance: still this hour", 10, at(8, 0, 0), at(8, 0, 10)},
		{"fast by more than the tolerance: the hour before", 10.1, at(8, 0, 0), at(7, 0, 10.1)},
		{"fix heard late, within the hour", 1800, at(8, 59, 0), at(8, 30, 0)},
		{"across midnight", 3599.5, at(0, 0, 1), time.Date(2026, 12, 2, 23, 59, 59, 5e8, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ResolveSecondsPastHour(tc.s, tc.recv, MaxODIDAhead)
			if !got.Equal(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if got.After(tc.recv.Add(MaxODIDAhead)) || tc.recv.Sub(got) >= time.Hour+MaxODIDAhead {
				t.Fatalf("%v is not within [recv-1h, recv+%v]", got, MaxODIDAhead)
			}
		})
	}
}

func odidMsg(id, recv, loc string) string {
	return `{"basic_id":{"IDType":1,"UAType":2,"UASID":"` + id + `"},"received_at":"` + recv + `","location":{` + loc + `}}`
}

func TestODID(t *testing.T) {
	recv := time.Date(2026, 12, 3, 9, 0, 1, 0, time.UTC)
	f64 := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	tests := []struct {
		name string
		body string
		want string // drone ts alt agl heading speed hacc vacc
	}{
		{"AGL height, accuracy, direction",
			odidMsg("1596F35A", "2026-12-03T09:00:00.5Z", `"Status":2,"Direction":90,"SpeedHorizontal":7.25,"Latitude":51.47,"Longitude":-0.46,"AltitudeGeo":130,"HeightType":1,"Height":60,"HorizAccuracy":10,"VertAccuracy":4,"TimeStamp":3599.9`),
			"1596F35A 08:59:59.9 130 60 90 7.25 30 25"},
		{"takeoff height is not AGL; unknown direction, speed, altitude, accuracy",
			odidMsg("1596F35A", "2026-12-03T09:00:00.5Z", `"Direction":361,"SpeedHorizontal":255,"Latitude":51.47,"Longitude":-0.46,"AltitudeGeo":-1000,"HeightType":0,"Height":60,"HorizAccuracy":0,"VertAccuracy":1,"TimeStamp":0.2`),
			"1596F35A 09:00:00.2 - - - - - -"},
		{"uas_id instead of basic_id; no received_at: the server's receive time",
			`{"uas_id":"ABC","location":{"Latitude":51.47,"Longitude":-0.46,"TimeStamp":0.5}}`,
			"ABC 09:00:00.5 - - - - - -"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ODID([]byte(tc.body), recv)
			if len(res.Errors) > 0 || len(res.Fixes) != 1 {
				t.Fatalf("errors %v, %d fixes", res.Errors, len(res.Fixes))
			}
			x := res.Fixes[0]
			p := x.Pos
			got := fmt.Sprintf("%s %s %s %s %s %s %s %s", p.DroneID, p.TS.Format("15:04:05.0"), f64(p.AltM), f64(p.AGLM), f64(p.HeadingDeg), f64(p.SpeedMPS), f64(x.Pos.HAccuracyM), f64(x.Pos.VAccuracyM))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if p.Seq != p.TS.UnixMilli() {
				t.Fatalf("seq %d, ts %d ms", p.Seq, p.TS.UnixMilli())
			}
			if p.AltM != nil && p.AltRef != "WGS84" {
				t.Fatalf("alt_ref %q", p.AltRef)
			}
		})
	}
}

func TestODIDArrayOrderAndErrors(t *testing.T) {
	recv := time.Date(2026, 12, 3, 9, 0, 1, 0, time.UTC)
	loc := func(ts string) string { return `"Latitude":51.47,"Longitude":-0.46,"TimeStamp":` + ts }
	body := "[" + odidMsg("A", "2026-12-03T09:00:01Z", loc("0.8")) + "," + odidMsg("A", "2026-12-03T09:00:01Z", loc("3599.6")) + "," +
		odidMsg("A", "2026-12-03T09:00:01Z", loc("0.8")) + "]"
	res := ODID([]byte(body), recv)
	if len(res.Errors) > 0 || len(res.Fixes) != 2 || res.Fixes[0].Pos.TS.Minute() != 59 || res.Fixes[1].Pos.TS.Minute() != 0 {
		t.Fatalf("%v %+v", res.Errors, res.Fixes)
	}
	tests := []struct{ name, body, path, contains string }{
		{"no id", `{"location":{` + loc("1") + `}}`, "[0].basic_id.UASID", "required"},
		{"time beyond the hour", "[" + odidMsg("A", "2026-12-03T09:00:01Z", loc("1")) + "," + odidMsg("A", "2026-12-03T09:00:01Z", loc("3600")) + "]", "[1].location.TimeStamp", "[0, 3600)"},
		{"no time at all", `{"uas_id":"A","location":{"Latitude":1,"Longitude":1}}`, "[0].location.TimeStamp", "required"},
		{"no location", `{"uas_id":"A"}`, "[0].location", "required"},
		{"latitude out of range", odidMsg("A", "2026-12-03T09:00:01Z", `"Latitude":-91,"Longitude":1,"TimeStamp":1`), "[0].location.Latitude", "between"},
		{"bad received_at", odidMsg("A", "now", loc("1")), "[0].received_at", "RFC 3339"},
		{"received_at before 1970", odidMsg("A", "0000-01-01T00:00:00Z", loc("1")), "[0].received_at", "before 1970"},
		{"time past the hour before 1970", odidMsg("A", "1970-01-01T00:00:01Z", loc("3599")), "[0].location.TimeStamp", "before 1970"},
		{"wrong type", `{"uas_id":"A","location":{"Latitude":"x"}}`, "[0].location.Latitude", "must be a number"},
		{"librid pack without a Basic ID", `{"messages":[{"message_type":1,"latitude":1,"longitude":1,"timestamp":5}]}`, "[0].messages", "Basic ID"},
		{"librid timestamp beyond the hour", `{"messages":[{"message_type":0,"uas_id":"X"},{"message_type":1,"latitude":1,"longitude":1,"timestamp":36000}]}`, "[0].messages[1].timestamp", "tenths"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ODID([]byte(tc.body), recv)
			if len(res.Errors) == 0 {
				t.Fatalf("accepted %+v", res.Fixes)
			}
			if e := res.Errors[0]; e.Path != tc.path || !strings.Contains(e.Err, tc.contains) {
				t.Fatalf("error %q: %q; want %q containing %q", e.Path, e.Err, tc.path, tc.contains)
			}
		})
	}
}

func FuzzODID(f *testing.F) {
	f.Add([]byte(odidMsg("1596F35A", "2026-12-03T09:00:00.5Z", `"Direction":361,"SpeedHorizontal":255,"Latitude":51.47,"Longitude":-0.46,"AltitudeGeo":130,"HeightType":1,"Height":60,"TimeStamp":3599.9`)))
	f.Add([]byte(`[{"uas_id":"a b","location":{"Latitude":1,"Longitude":2,"TimeStamp":0}}]`))
	f.Add([]byte(`{"received_at":"2026-12-03T08:20:35Z","messages":[{"message_type":0,"uas_id":"X"},{"message_type":1,"latitude":1,"longitude":2,"timestamp":12345,"track_direction":null}]}`))
	for _, name := range []string{"message_pack.json", "system_pack.json"} {
		if b, err := os.ReadFile("../../testdata/feeds/librid/" + name); err == nil {
			f.Add(b)
		}
	}
	recv := time.Date(2026, 12, 3, 9, 0, 1, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		res := ODID(b, recv)
		checkResult(t, res)
		for _, x := range res.Fixes {
			if _, err := time.Parse(time.RFC3339Nano, x.Pos.TS.Format(time.RFC3339Nano)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestODIDUnknownTimeTakesReceiveTime(t *testing.T) {
	recv := time.Date(2026, 12, 3, 9, 0, 1, 0, time.UTC)
	res := ODID([]byte(odidMsg("A", "2026-12-03T09:00:00.7Z", `"Latitude":51.47,"Longitude":-0.46,"TimeStamp":65535`)), recv)
	if len(res.Errors) > 0 || len(res.Fixes) != 1 || !res.Fixes[0].Pos.TS.Equal(time.Date(2026, 12, 3, 9, 0, 0, 7e8, time.UTC)) {
		t.Fatalf("%+v", res)
	}
	if len(res.Notes) != 1 || res.Notes[0].Path != "[0].location.TimeStamp" || !strings.Contains(res.Notes[0].Why, "receive time") {
		t.Fatalf("notes %+v", res.Notes)
	}
}

// TestLibridSamples reads librid's published JSON (testdata/feeds/librid).
func TestLibridSamples(t *testing.T) {
	recv := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	pack, err := os.ReadFile("../../testdata/feeds/librid/message_pack.json")
	if err != nil {
		t.Fatal(err)
	}
	res := ODID(pack, recv)
	if len(res.Errors) > 0 || len(res.Fixes) != 1 {
		t.Fatalf("%+v", res)
	}
	p := res.Fixes[0].Pos
	// Its timestamp and track are null: the receive time, no heading; its
	// height is above ground (height_type 1); accuracy 0 is unknown.
	if p.DroneID != "1ABCD2345EF678XYZ" || p.Lat != 60.169857 || p.Lon != 24.938379 || *p.AltM != 25.5 || p.AltRef != "WGS84" ||
		*p.AGLM != 15 || *p.SpeedMPS != 5.25 || p.HeadingDeg != nil || p.HAccuracyM != nil || !p.TS.Equal(recv) || len(res.Notes) != 1 {
		t.Fatalf("%s (notes %+v)", p.AppendJSON(nil), res.Notes)
	}
	if got := res.Fixes[0].SourceField("lat"); got != "[0].messages[1].latitude" {
		t.Fatalf("source of lat: %q", got)
	}

	loc, err := os.ReadFile("../../testdata/feeds/librid/location.json")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"received_at":"2026-12-03T08:20:35Z","messages":[{"message_type":0,"uas_id":"1596F35A"},` + string(loc) + `]}`
	res = ODID([]byte(body), recv)
	if len(res.Errors) > 0 || len(res.Fixes) != 1 {
		t.Fatalf("%+v", res)
	}
	p = res.Fixes[0].Pos
	// timestamp 12345 is 1234.5 s past the hour: 08:20:34.5 heard at 08:20:35.
	if !p.TS.Equal(time.Date(2026, 12, 3, 8, 20, 34, 5e8, time.UTC)) || p.AGLM != nil || *p.HeadingDeg != 45 || *p.HAccuracyM != 30 || *p.VAccuracyM != 25 {
		t.Fatalf("%s", p.AppendJSON(nil))
	}
	// The same Location put under "location" is still read as librid's,
	// its timestamp in tenths, not as core-c's TimeStamp in seconds.
	res = ODID([]byte(`{"uas_id":"1596F35A","received_at":"2026-12-03T08:20:35Z","location":`+string(loc)+`}`), recv)
	if len(res.Errors) > 0 || len(res.Fixes) != 1 || !res.Fixes[0].Pos.TS.Equal(p.TS) {
		t.Fatalf("%+v", res)
	}
}
