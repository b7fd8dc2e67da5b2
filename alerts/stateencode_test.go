package alerts_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
)

func checkStateEncode(t *testing.T, s alerts.DroneState) {
	t.Helper()
	want, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Encode(); !bytes.Equal(got, want) {
		t.Errorf("Encode:\n got %s\nwant %s", got, want)
	}
	if _, err := alerts.DecodeDroneState(s.Encode()); err != nil {
		t.Fatal(err)
	}
}

var big = 1e21

var fix = alerts.Fix{TS: time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC), Lat: 51.4700001, Lon: -0.49, AltM: telemetryFloat(80.5), AltRef: "agl"}

func telemetryFloat(f float64) *float64 { return &f }

func TestDroneStateEncodeEqualsMarshal(t *testing.T) {
	alarm := alerts.ActiveAlarm{Zone: "LHR-1", Alarm: "3f0c0123456789abcdef0123456789ab", FP: "sha256:9a1b", RaisedSeq: 1100, Name: "Heathrow", Category: "restricted"}
	tests := map[string]alerts.DroneState{
		"new":               alerts.NewDroneState(),
		"no alarm":          {Seq: 1187},
		"empty in":          {Seq: 5, Alarms: []alerts.ActiveAlarm{}},
		"one":               {Seq: 1187, Alarms: []alerts.ActiveAlarm{alarm}},
		"two, no name":      {Seq: 9, Alarms: []alerts.ActiveAlarm{alarm, {Zone: "Z2", Alarm: "a", FP: "f", RaisedSeq: -3}}},
		"escapes":           {Seq: 1, Alarms: []alerts.ActiveAlarm{{Zone: "a\"<b>&\\\n\u2028é\xff", Alarm: "x", FP: "y", Name: "\x01", Category: "<c>"}}},
		"position":          {Seq: 3, Alarms: []alerts.ActiveAlarm{alarm}, Pos: fix, TrackMS: fix.TS.UnixMilli()},
		"position, no alt":  {Seq: 3, Pos: alerts.Fix{TS: fix.TS, Lat: -0.0, Lon: 1e-7}},
		"negative zero lat": {Seq: 3, Pos: alerts.Fix{Lat: math.Copysign(0, -1)}},
		"only tk":           {Seq: 3, TrackMS: -5},
		"offset zone, big":  {Seq: 3, Pos: alerts.Fix{TS: fix.TS.In(time.FixedZone("x", 3600)), Lat: 89.999999999, Lon: -179.5, AltM: &big, AltRef: "a<gl"}},
		"resets, dropped":   {Seq: 0, Pos: alerts.Fix{TS: fix.TS, Lat: 1, Lon: 2, Drop: "alt_m,agl_m"}, Resets: 3},
		"dropped, escapes":  {Seq: 2, Pos: alerts.Fix{TS: fix.TS, Drop: "<\"\xff"}, Resets: -1},
		"clock":             {Seq: 2, Alarms: []alerts.ActiveAlarm{{Zone: "Z", Alarm: "a", FP: "f", Lost: 1764669600123, Losses: 2}}, Seen: 1764669630123, LastRaise: -4},
		"authorised": {Seq: 2, Alarms: []alerts.ActiveAlarm{{Zone: "Z", Alarm: "a", FP: "f", Auth: "police-<1>", AuthRef: "PERMIT \"7\"", AuthUntil: 1764669600123, AuthN: 3},
			{Zone: "Y", Alarm: "b", FP: "g", AuthN: 2}}},
		"approaching": {Seq: 4, VE: -3.25, VN: 1e-7, VK: true, Approaches: []alerts.ApproachState{
			{Zone: "A<1>", ID: "abc", N: 3, Away: 1764669600123, EtaS: ptr(7.5), EntryLat: 51.1, EntryLon: -0.2},
			{Zone: "B", N: 1}}},
		"operator":               {Seq: 5, Pos: fix, Op: alerts.OperatorFix{Lat: 51.4712345, Lon: -0.5, AltM: telemetryFloat(31.5), Type: "live", TS: fix.TS}},
		"operator, bare":         {Seq: 5, Op: alerts.OperatorFix{Lat: math.Copysign(0, -1), Lon: 1e-7, TS: fix.TS.In(time.FixedZone("x", 3600))}},
		"operator, type escapes": {Seq: 5, Op: alerts.OperatorFix{Type: "<fixed\"\xff>"}},
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) { checkStateEncode(t, s) })
	}
}

func FuzzDroneStateEncode(f *testing.F) {
	f.Add(int64(7), "Z", "alarm", "fp", int64(3), "Zone \"x\"", "restricted", int64(1764669600123456789), 51.47, -0.49, 80.0, true, "agl", int64(1764669600123))
	f.Add(int64(-1), "", "\xff<>&", "", int64(-9), "", "", int64(0), 0.0, 0.0, 0.0, false, "", int64(0))
	f.Fuzz(func(t *testing.T, seq int64, zone, alarm, fp string, rseq int64, name, cat string, tsNano int64, lat, lon, alt float64, hasAlt bool, ref string, tk int64) {
		// Resets and Drop from the inputs at hand: the corpus keeps its
		// shape.
		resets, drop, seen, lost := tk%5, fp, tk/3, rseq/7
		// json.Marshal refuses NaN and infinities, and validated telemetry
		// never holds them: such an input is checked with 0 in their place.
		finite := func(x float64) float64 {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return 0
			}
			return x
		}
		lat, lon, alt = finite(lat), finite(lon), finite(alt)
		s := alerts.DroneState{Seq: seq, Seen: seen, LastRaise: -seen, Alarms: []alerts.ActiveAlarm{{Zone: zone, Alarm: alarm, FP: fp, RaisedSeq: rseq, Name: name, Category: cat, Lost: lost, Losses: lost % 3}},
			Pos: alerts.Fix{Lat: lat, Lon: lon, AltRef: ref, Drop: drop}, TrackMS: tk, Resets: resets}
		if tsNano != 0 {
			s.Pos.TS = time.Unix(0, tsNano).UTC()
		}
		if hasAlt {
			s.Pos.AltM = &alt
		}
		checkStateEncode(t, s)
		// The pilot from the same inputs: lon and lat swapped, alt and the
		// reference as its height and type.
		s.Op = alerts.OperatorFix{Lat: lon, Lon: lat, Type: ref, TS: s.Pos.TS}
		if hasAlt {
			s.Op.AltM = &alt
		}
		checkStateEncode(t, s)
		if len(s.Alarms) > 0 {
			s.Alarms = nil
			checkStateEncode(t, s)
		}
	})
}

// TestDroneStateDecodesOlderStates: states written before positions were
// kept (no "pos", no "tk") still decode, as a state with no position.
func TestDroneStateDecodesOlderStates(t *testing.T) {
	s, err := alerts.DecodeDroneState([]byte(`{"seq":1187,"in":[{"zone":"LHR-1","alarm":"3f0c","fp":"9a1b","rseq":1100,"name":"Heathrow","cat":"restricted"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq != 1187 || len(s.Alarms) != 1 || !s.Pos.IsZero() || s.TrackMS != 0 {
		t.Errorf("decoded %+v", s)
	}
	// and a new state decodes to itself.
	in := alerts.DroneState{Seq: 3, Pos: fix, TrackMS: 17}
	out, err := alerts.DecodeDroneState(in.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !out.Pos.TS.Equal(in.Pos.TS) || *out.Pos.AltM != *in.Pos.AltM {
		t.Errorf("round trip: %+v", out)
	}
	out.Pos.TS, out.Pos.AltM, in.Pos.TS, in.Pos.AltM = time.Time{}, nil, time.Time{}, nil
	if !reflect.DeepEqual(out, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

func TestFixJSONEqualsMarshal(t *testing.T) {
	for name, f := range map[string]alerts.Fix{"full": fix, "no alt": {TS: fix.TS, Lat: 1, Lon: 2}, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.AppendJSON(nil); !bytes.Equal(got, want) {
				t.Errorf("got %s, want %s", got, want)
			}
			back, err := alerts.DecodeFix(want)
			if err != nil || !back.TS.Equal(f.TS) || back.Lat != f.Lat {
				t.Errorf("decode: %+v, %v", back, err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkDroneStateEncode: the batch's encoding of one state, a drone
// with one alarm and a position, without and with its pilot.
func BenchmarkDroneStateEncode(b *testing.B) {
	alarm := alerts.ActiveAlarm{Zone: "LHR-1", Alarm: "3f0c0123456789abcdef0123456789ab", FP: "sha256:9a1b", RaisedSeq: 1100, Name: "Heathrow", Category: "restricted"}
	for _, tc := range []struct {
		name string
		op   alerts.OperatorFix
	}{
		{"no-pilot", alerts.OperatorFix{}},
		{"pilot", alerts.OperatorFix{Lat: 51.4651234, Lon: -0.4701234, AltM: telemetryFloat(31.5), Type: "live", TS: fix.TS}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := alerts.DroneState{Seq: 1187, Alarms: []alerts.ActiveAlarm{alarm}, Pos: fix, TrackMS: fix.TS.UnixMilli(), Seen: 1764669630123, Op: tc.op}
			buf := s.AppendEncode(nil)
			b.ReportAllocs()
			for b.Loop() {
				buf = s.AppendEncode(buf[:0])
			}
			b.ReportMetric(float64(len(buf)), "bytes/state")
		})
	}
}
