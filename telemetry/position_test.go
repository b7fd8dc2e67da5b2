package telemetry

import (
	"errors"
	"math"
	"reflect"
	"strings"
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
		{"lat null", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":null,"lon":2}`, "lat"},
		{"lat as string", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":"1","lon":2}`, "lat"},
		{"required wrong even with a bad optional", `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"heading_deg":"x"}`, "lon"},
		{"BOM inside a record", "\ufeff{" + ok + "}", ""},
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

// TestDecodeOptionalFields: an optional field follows the published
// conventions, or is dropped with a warning naming it; the position is kept.
func TestDecodeOptionalFields(t *testing.T) {
	const req = `"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2`
	base := Position{DroneID: "D", Seq: 1, TS: time.Date(2026, 12, 2, 10, 15, 3, 0, time.UTC), Lat: 1, Lon: 2}
	with := func(f func(*Position)) Position { p := base; f(&p); return p }
	tests := []struct {
		name      string
		fields    string
		want      Position
		wantWarns []string // fields warned about, in order
	}{
		{"heading 360 is north", `"heading_deg":360`, with(func(p *Position) { p.HeadingDeg = Float(0) }), nil},
		{"heading 360.0 is north", `"heading_deg":360.0`, with(func(p *Position) { p.HeadingDeg = Float(0) }), nil},
		{"heading just below 360 kept", `"heading_deg":359.99`, with(func(p *Position) { p.HeadingDeg = Float(359.99) }), nil},
		{"negative track turned", `"heading_deg":-90.5`, with(func(p *Position) { p.HeadingDeg = Float(269.5) }), nil},
		{"ASTM minimum track", `"heading_deg":-359.99`, with(func(p *Position) { p.HeadingDeg = Float(0.01) }), nil},
		{"-360 is north", `"heading_deg":-360`, with(func(p *Position) { p.HeadingDeg = Float(0) }), nil},
		{"-0 is 0", `"heading_deg":-0`, with(func(p *Position) { p.HeadingDeg = Float(0) }), nil},
		{"Remote ID unknown track", `"heading_deg":361`, base, nil},
		{"MAVLink unknown heading", `"heading_deg":655.35`, base, nil},
		{"heading beyond every convention", `"heading_deg":1000`, base, []string{"heading_deg"}},
		{"heading just above 360", `"heading_deg":360.5`, base, []string{"heading_deg"}},
		{"heading just below -360", `"heading_deg":-360.01`, base, []string{"heading_deg"}},
		{"heading null", `"heading_deg":null`, base, nil},
		{"heading a string", `"heading_deg":"north"`, base, []string{"heading_deg"}},
		{"heading an object", `"heading_deg":{"v":1}`, base, []string{"heading_deg"}},
		{"heading beyond float64", `"heading_deg":1e400`, base, []string{"heading_deg"}},
		{"negative speed", `"speed_mps":-5`, base, []string{"speed_mps"}},
		{"Remote ID unknown speed", `"speed_mps":255`, base, nil},
		{"Remote ID top speed kept", `"speed_mps":254.25`, with(func(p *Position) { p.SpeedMPS = Float(254.25) }), nil},
		{"MAVLink unknown speed", `"speed_mps":655.35`, base, nil},
		{"speed true", `"speed_mps":true`, base, []string{"speed_mps"}},
		{"Remote ID unknown altitude", `"alt_m":-1000,"agl_m":-1000`, base, nil},
		{"altitude -999 kept", `"alt_m":-999`, with(func(p *Position) { p.AltM = Float(-999) }), nil},
		{"alt_m a string", `"alt_m":"high","speed_mps":3`, with(func(p *Position) { p.SpeedMPS = Float(3) }), []string{"alt_m"}},
		{"MSL is AMSL", `"alt_m":80,"alt_ref":"MSL"`, with(func(p *Position) { p.AltM, p.AltRef = Float(80), RefAMSL }), nil},
		{"reference in lower case", `"alt_m":30,"alt_ref":"agl"`, with(func(p *Position) { p.AltM, p.AltRef = Float(30), RefAGL }), nil},
		{"reference escaped", `"alt_m":30,"alt_ref":"\u0041GL"`, with(func(p *Position) { p.AltM, p.AltRef = Float(30), RefAGL }), nil},
		{"alt_ref null", `"alt_m":30,"alt_ref":null`, with(func(p *Position) { p.AltM = Float(30) }), nil},
		// An unknown reference takes alt_m with it: read as AMSL it would be
		// the permissive reading. agl_m does not depend on alt_ref.
		{"unknown alt_ref drops alt_m", `"alt_m":30,"alt_ref":"XYZ","agl_m":30`, with(func(p *Position) { p.AGLM = Float(30) }), []string{"alt_ref", "alt_m"}},
		{"unknown alt_ref alone", `"alt_ref":"XYZ"`, base, []string{"alt_ref"}},
		{"alt_ref a number", `"alt_m":30,"alt_ref":5`, base, []string{"alt_ref", "alt_m"}},
		{"AGL conflict drops both heights", `"alt_m":10,"alt_ref":"AGL","agl_m":12,"speed_mps":1`,
			with(func(p *Position) { p.AltRef, p.SpeedMPS = RefAGL, Float(1) }), []string{"alt_m", "agl_m"}},
		{"every optional bad", `"alt_m":[1],"alt_ref":"?","agl_m":false,"speed_mps":-1,"heading_deg":999`, base,
			[]string{"alt_m", "alt_ref", "agl_m", "speed_mps", "heading_deg"}},
		// Physical ranges: a value no aircraft can have is dropped, so the
		// height is unknown, which is inside every vertical limit.
		{"alt_m -1e300 dropped", `"alt_m":-1e300,"speed_mps":3`, with(func(p *Position) { p.SpeedMPS = Float(3) }), []string{"alt_m"}},
		{"alt_m 1e300 dropped", `"alt_m":1e300`, base, []string{"alt_m"}},
		{"agl_m 1e300 dropped", `"alt_m":80,"agl_m":1e300`, with(func(p *Position) { p.AltM = Float(80) }), []string{"agl_m"}},
		{"agl_m -101 dropped", `"agl_m":-101`, base, []string{"agl_m"}},
		{"agl_m -100 kept", `"agl_m":-100`, with(func(p *Position) { p.AGLM = Float(-100) }), nil},
		{"alt_m AMSL -1000.5 dropped", `"alt_m":-1000.5`, base, []string{"alt_m"}},
		{"alt_m 30000 kept", `"alt_m":30000,"alt_ref":"WGS84"`, with(func(p *Position) { p.AltM, p.AltRef = Float(30000), RefWGS84 }), nil},
		{"alt_m 30000.1 dropped", `"alt_m":30000.1,"alt_ref":"WGS84"`, with(func(p *Position) { p.AltRef = RefWGS84 }), []string{"alt_m"}},
		{"alt_m AGL -500 dropped", `"alt_m":-500,"alt_ref":"AGL"`, with(func(p *Position) { p.AltRef = RefAGL }), []string{"alt_m"}},
		{"alt_m AGL out of range leaves agl_m", `"alt_m":-500,"alt_ref":"AGL","agl_m":40`, with(func(p *Position) { p.AltRef, p.AGLM = RefAGL, Float(40) }), []string{"alt_m"}},
		{"speed 300 kept", `"speed_mps":300`, with(func(p *Position) { p.SpeedMPS = Float(300) }), nil},
		{"speed 1e9 dropped", `"speed_mps":1e9`, base, []string{"speed_mps"}},
		// "dropped" is ingest's note: kept in its canonical form, else ignored.
		{"dropped canonical", `"dropped":"alt_m,agl_m"`, with(func(p *Position) { p.Dropped = "alt_m,agl_m" }), nil},
		{"dropped reordered", `"dropped":"agl_m,alt_m"`, with(func(p *Position) { p.Dropped = "alt_m,agl_m" }), nil},
		{"dropped unknown name ignored", `"dropped":"alt_m,nonsense"`, base, nil},
		{"dropped repeated ignored", `"dropped":"alt_m,alt_m"`, base, nil},
		{"dropped trailing comma ignored", `"dropped":"alt_m,"`, base, nil},
		{"dropped not a string ignored", `"dropped":["alt_m"]`, base, nil},
		{"dropped empty", `"dropped":""`, base, nil},
		{"dropped operator canonical", `"dropped":"operator,alt_m"`, with(func(p *Position) { p.Dropped = "alt_m,operator" }), nil},
		// The pilot's position: shown, never deciding an alarm, so a bad one
		// is dropped and the drone's position kept.
		{"operator", `"operator":{"lat":51.469,"lon":-0.452,"alt_m":95.5,"type":"live"}`,
			with(func(p *Position) {
				p.Operator = &Operator{Lat: 51.469, Lon: -0.452, AltM: Float(95.5), Type: OperatorLive}
			}), nil},
		{"operator without alt_m and type", `"operator":{"lon":-0.452,"lat":51.469}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 51.469, Lon: -0.452} }), nil},
		{"operator type in any case, unknown members ignored", `"operator":{"lat":1.5,"lon":2.5,"TYPE":"TakeOff","x":[{}]}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 1.5, Lon: 2.5, Type: OperatorTakeoff} }), nil},
		{"operator null", `"operator":null`, base, nil},
		{"operator at 0, 0 is unknown", `"operator":{"lat":0,"lon":0,"type":"takeoff"}`, base, nil},
		{"operator alt_m -1000 is unknown", `"operator":{"lat":1.5,"lon":2.5,"alt_m":-1000}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 1.5, Lon: 2.5} }), nil},
		{"operator not an object", `"operator":"51.469,-0.452"`, base, []string{"operator"}},
		{"operator an array", `"operator":[51.469,-0.452]`, base, []string{"operator"}},
		{"operator lat missing", `"operator":{"lon":2.5}`, base, []string{"operator.lat"}},
		{"operator lon missing", `"operator":{"lat":2.5,"lon":null}`, base, []string{"operator.lon"}},
		{"operator lat out of range", `"operator":{"lat":91,"lon":2.5}`, base, []string{"operator.lat"}},
		{"operator lon out of range", `"operator":{"lat":1,"lon":-180.5}`, base, []string{"operator.lon"}},
		{"operator lat a string", `"operator":{"lat":"1","lon":2}`, base, []string{"operator.lat"}},
		{"operator lon beyond float64", `"operator":{"lat":1,"lon":1e400}`, base, []string{"operator.lon"}},
		{"operator alt_m out of range dropped alone", `"operator":{"lat":1,"lon":2,"alt_m":40000,"type":"fixed"}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 1, Lon: 2, Type: OperatorFixed} }), []string{"operator.alt_m"}},
		{"operator alt_m a string dropped alone", `"operator":{"lat":1,"lon":2,"alt_m":"high"}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 1, Lon: 2} }), []string{"operator.alt_m"}},
		{"operator unknown type dropped alone", `"operator":{"lat":1,"lon":2,"type":"dynamic"}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 1, Lon: 2} }), []string{"operator.type"}},
		{"operator type a number dropped alone", `"operator":{"lat":1,"lon":2,"type":1}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 1, Lon: 2} }), []string{"operator.type"}},
		{"operator last one wins", `"operator":{"lat":1,"lon":2},"Operator":{"lat":3,"lon":4,"lat":5}`,
			with(func(p *Position) { p.Operator = &Operator{Lat: 5, Lon: 4} }), nil},
		{"operator null after one", `"operator":{"lat":1,"lon":2},"operator":null`, base, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(`{` + req + `,` + tc.fields + `}`)
			got, warns, err := DecodeWarn(in, nil)
			if err != nil {
				t.Fatalf("%v: the position was lost over an optional field", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %s\nwant %s", got.AppendJSON(nil), tc.want.AppendJSON(nil))
			}
			var fields []string
			for _, w := range warns {
				fields = append(fields, w.Field)
				if w.Warning == "" || !strings.Contains(w.Warning, "dropped") {
					t.Errorf("warning %+v does not say the value was dropped", w)
				}
			}
			if !reflect.DeepEqual(fields, tc.wantWarns) {
				t.Errorf("warnings %+v, want fields %v", warns, tc.wantWarns)
			}
			// Decode keeps the same record and drops the warnings.
			p, err := Decode(in)
			if err != nil || !reflect.DeepEqual(p, got) {
				t.Errorf("Decode: %+v, %v", p, err)
			}
			checkInRange(t, got)
		})
	}
}

// TestDecodeWarnKeepsCallerSlice: warnings are appended to the slice passed
// in, and a rejected record leaves it as it was.
func TestDecodeWarnKeepsCallerSlice(t *testing.T) {
	prev := []FieldWarning{{"x", "earlier"}}
	_, ws, err := DecodeWarn([]byte(`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":999}`), prev)
	if err != nil || len(ws) != 2 || ws[0] != prev[0] || ws[1].Field != "heading_deg" {
		t.Fatalf("got %+v, %v", ws, err)
	}
	_, ws, err = DecodeWarn([]byte(`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"heading_deg":999}`), prev)
	if err == nil || len(ws) != 1 {
		t.Fatalf("a rejected record: %+v, %v", ws, err)
	}
}

func TestTrimBOM(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\ufeff{}", "{}"}, {"{}", "{}"}, {"\ufeff", ""}, {"x\ufeff", "x\ufeff"}, {"\xef\xbb", "\xef\xbb"},
	} {
		if got := string(TrimBOM([]byte(tc.in))); got != tc.want {
			t.Errorf("TrimBOM(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	ps, errs := DecodeAll([]byte("\ufeff[" + `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}` + "]"))
	if len(ps) != 1 || errs != nil {
		t.Fatalf("DecodeAll with a BOM: %d records, %+v", len(ps), errs)
	}
}

// checkInRange fails when a kept record carries an optional value outside
// the ranges the contract promises downstream.
func checkInRange(t *testing.T, p Position) {
	t.Helper()
	if h := p.HeadingDeg; h != nil && (!finite(*h) || *h < 0 || *h >= 360 || math.Signbit(*h)) {
		t.Errorf("kept heading_deg %v", *h)
	}
	if s := p.SpeedMPS; s != nil && (!finite(*s) || *s < 0 || *s > MaxSpeedMPS || math.Signbit(*s) || *s == unknownSpeedRID || *s == unknownSpeedMAVLink) {
		t.Errorf("kept speed_mps %v", *s)
	}
	for name, v := range map[string]*float64{"h_accuracy_m": p.HAccuracyM, "v_accuracy_m": p.VAccuracyM} {
		if v != nil && (!finite(*v) || *v < 0 || *v > MaxAccuracyM) {
			t.Errorf("kept %s %v", name, *v)
		}
	}
	for name, v := range map[string]*float64{"alt_m": p.AltM, "agl_m": p.AGLM} {
		if v != nil && (!finite(*v) || *v == unknownHeightRID || *v > MaxHeightM || *v < MinHeightM) {
			t.Errorf("kept %s %v", name, *v)
		}
	}
	if v := p.AGLM; v != nil && *v < MinAGLM {
		t.Errorf("kept agl_m %v below %v", *v, MinAGLM)
	}
	if v := p.AltM; v != nil && p.AltRef == RefAGL && *v < MinAGLM {
		t.Errorf("kept alt_m AGL %v below %v", *v, MinAGLM)
	}
	if p.Dropped != "" && parseDropped(p.Dropped) != p.Dropped {
		t.Errorf("kept dropped %q, not canonical", p.Dropped)
	}
	switch p.AltRef {
	case "", RefAMSL, RefWGS84, RefAGL:
	default:
		t.Errorf("kept alt_ref %q", p.AltRef)
	}
	if p.AltRef == RefAGL && p.AltM != nil && p.AGLM != nil && *p.AltM != *p.AGLM {
		t.Errorf("kept alt_m %v AGL with agl_m %v", *p.AltM, *p.AGLM)
	}
	if o := p.Operator; o != nil {
		if !finite(o.Lat) || !finite(o.Lon) || o.Lat < -90 || o.Lat > 90 || o.Lon < -180 || o.Lon > 180 || o.Lat == 0 && o.Lon == 0 {
			t.Errorf("kept operator at %v, %v", o.Lat, o.Lon)
		}
		if v := o.AltM; v != nil && (!finite(*v) || *v == unknownHeightRID || *v > MaxHeightM || *v < MinHeightM) {
			t.Errorf("kept operator alt_m %v", *v)
		}
		switch o.Type {
		case "", OperatorTakeoff, OperatorLive, OperatorFixed:
		default:
			t.Errorf("kept operator type %q", o.Type)
		}
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
	f.Add([]byte(`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":-359.99,"speed_mps":255,"alt_m":-1000}`))
	f.Add([]byte(`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":1e400,"alt_ref":"xyz","alt_m":5}`))
	f.Add([]byte(`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":null,"speed_mps":"3","agl_m":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, warns, err := DecodeWarn(data, nil)
		if err != nil {
			if len(warns) != 0 {
				t.Fatalf("a rejected record came with warnings %+v", warns)
			}
			return
		}
		// A kept record never carries an out-of-range optional value.
		checkInRange(t, p)
		for _, w := range warns {
			if w.Field == "" || w.Warning == "" {
				t.Fatalf("warning %+v names no field or reason", w)
			}
		}
		// A valid record re-encodes to something that decodes to itself.
		again, rewarns, err := DecodeWarn(p.AppendJSON(nil), nil)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", p.AppendJSON(nil), err)
		}
		if len(rewarns) != 0 {
			t.Fatalf("the canonical encoding %s warns %+v", p.AppendJSON(nil), rewarns)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip changed %+v into %+v", p, again)
		}
	})
}
