package remoteid

import (
	"fmt"
	"math"
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
		{"unknown time", "[" + odidMsg("A", "2026-12-03T09:00:01Z", loc("1")) + "," + odidMsg("A", "2026-12-03T09:00:01Z", loc("65535")) + "]", "[1].location.TimeStamp", "unknown"},
		{"no location", `{"uas_id":"A"}`, "[0].location", "required"},
		{"latitude out of range", odidMsg("A", "2026-12-03T09:00:01Z", `"Latitude":-91,"Longitude":1,"TimeStamp":1`), "[0].location.Latitude", "between"},
		{"bad received_at", odidMsg("A", "now", loc("1")), "[0].received_at", "RFC 3339"},
		{"wrong type", `{"uas_id":"A","location":{"Latitude":"x"}}`, "[0].location.Latitude", "JSON string"},
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
