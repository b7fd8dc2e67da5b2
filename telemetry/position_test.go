package telemetry

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestDecodeValid(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 15, 3, 250e6, time.UTC)
	tests := []struct {
		name string
		in   string
		want Position
	}{
		{"contract example",
			`{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85.0,"speed_mps":12.5,"heading_deg":270}`,
			Position{DroneID: "UAV-0042", Seq: 1187, TS: ts, Lat: 51.4706, Lon: -0.4619, AltM: Float(85), SpeedMPS: Float(12.5), HeadingDeg: Float(270)}},
		{"offset converted to UTC, unknown fields ignored",
			`{"drone_id":"a.b:c_d","seq":0,"ts":"2026-12-02T11:15:03.25+01:00","lat":-90,"lon":180,"extra":{"x":1}}`,
			Position{DroneID: "a.b:c_d", Seq: 0, TS: ts, Lat: -90, Lon: 180}},
		{"AGL reference and agl_m",
			`{"drone_id":"D","seq":5,"ts":"2026-12-02T10:15:03.25Z","lat":1,"lon":2,"alt_m":30,"alt_ref":"AGL","agl_m":30}`,
			Position{DroneID: "D", Seq: 5, TS: ts, Lat: 1, Lon: 2, AltM: Float(30), AltRef: RefAGL, AGLM: Float(30)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			// The canonical encoding decodes back to the same record.
			again, err := Decode(got.AppendJSON(nil))
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		})
	}
}

func TestDecodeInvalidNamesField(t *testing.T) {
	const ok = `"drone_id":"D1","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2`
	tests := []struct{ name, in, field string }{
		{"not json", `{"drone_id":`, ""},
		{"not an object", `[1]`, ""},
		{"missing drone_id", `{"seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`, "drone_id"},
		{"bad drone_id char", `{"drone_id":"a b","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`, "drone_id"},
		{"drone_id too long", `{"drone_id":"` + string(make65()) + `","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`, "drone_id"},
		{"seq as string", `{"drone_id":"D","seq":"1","ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`, "seq"},
		{"seq fractional", `{"drone_id":"D","seq":1.5,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`, "seq"},
		{"seq negative", `{"drone_id":"D","seq":-1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`, "seq"},
		{"missing ts", `{"drone_id":"D","seq":1,"lat":1,"lon":2}`, "ts"},
		{"relative ts", `{"drone_id":"D","seq":1,"ts":"12.5","lat":1,"lon":2}`, "ts"},
		{"ts without zone", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03","lat":1,"lon":2}`, "ts"},
		{"lat out of range", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":91,"lon":2}`, "lat"},
		{"missing lon", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1}`, "lon"},
		{"lon out of range", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":-180.5}`, "lon"},
		{"bad alt_ref", `{` + ok + `,"alt_ref":"MSL"}`, "alt_ref"},
		{"alt_m string", `{` + ok + `,"alt_m":"high"}`, "alt_m"},
		{"agl conflict", `{` + ok + `,"alt_m":10,"alt_ref":"AGL","agl_m":12}`, "agl_m"},
		{"negative speed", `{` + ok + `,"speed_mps":-1}`, "speed_mps"},
		{"heading 360", `{` + ok + `,"heading_deg":360}`, "heading_deg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("field %q (%v), want %q", fe.Field, err, tc.field)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatal("not ErrInvalid")
			}
		})
	}
}

func make65() []byte {
	b := make([]byte, 65)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

func TestDecodeAll(t *testing.T) {
	good := `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`
	ps, errs := DecodeAll([]byte(" [" + good + "," + `{"drone_id":"D"}` + "," + good + "]"))
	if len(ps) != 2 || len(errs) != 1 || errs[0].Index != 1 || errs[0].Err.Field != "seq" {
		t.Fatalf("got %d records, errors %+v", len(ps), errs)
	}
	ps, errs = DecodeAll([]byte(good))
	if len(ps) != 1 || errs != nil {
		t.Fatalf("single object: %d records, %v", len(ps), errs)
	}
}

func TestHeight(t *testing.T) {
	p := Position{AltM: Float(100), AGLM: Float(40)}
	tests := []struct {
		ref    string
		want   float64
		wantOK bool
	}{{RefAMSL, 100, true}, {RefWGS84, 0, false}, {RefAGL, 40, true}}
	for _, tc := range tests {
		got, ok := p.Height(tc.ref)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: got %v %v", tc.ref, got, ok)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	in := []byte(`{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85.0,"speed_mps":12.5,"heading_deg":270}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	p, _ := Decode([]byte(`{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85.0,"speed_mps":12.5,"heading_deg":270}`))
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = p.AppendJSON(buf[:0])
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85.0}`))
	f.Add([]byte(`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"alt_ref":"AGL","agl_m":3}`))
	f.Add([]byte(`[{}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		// A valid record re-encodes to something that decodes to itself.
		again, err := Decode(p.AppendJSON(nil))
		if err != nil {
			t.Fatalf("re-decode of %s: %v", p.AppendJSON(nil), err)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip changed %+v into %+v", p, again)
		}
	})
}
