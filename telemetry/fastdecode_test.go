package telemetry

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// decodeSeeds are the inputs of every decoding test in this package, and
// the corners where a hand-written JSON reader could part from
// encoding/json: key case and folding, duplicates, null, numbers, escapes,
// invalid UTF-8, whitespace, nesting and trailing data.
func decodeSeeds() []string {
	const req = `"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2`
	full := []string{
		// TestDecodeValid
		`{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85.0,"speed_mps":12.5,"heading_deg":270}`,
		`{"drone_id":"a.b:c_d","seq":0,"ts":"2026-12-02T11:15:03.25+01:00","lat":-90,"lon":180,"extra":{"x":1}}`,
		`{"drone_id":"D","seq":5,"ts":"2026-12-02T10:15:03.25Z","lat":1,"lon":2,"alt_m":30,"alt_ref":"AGL","agl_m":30}`,
		// TestDecodeInvalidNamesField
		`{"drone_id":`,
		`[1]`,
		`{"seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"a b","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"` + strings.Repeat("x", 65) + `","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"` + strings.Repeat("x", 64) + `","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"D","seq":"1","ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"D","seq":1.5,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"D","seq":-1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_id":"D","seq":1,"lat":1,"lon":2}`,
		`{"drone_id":"D","seq":1,"ts":"12.5","lat":1,"lon":2}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03","lat":1,"lon":2}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":91,"lon":2}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":-180.5}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":null,"lon":2}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":"1","lon":2}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"heading_deg":"x"}`,
		"\ufeff{" + req + "}",
		// TestDecodeWarnKeepsCallerSlice, TestDecodeAll, FuzzDecode
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":999}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"heading_deg":999}`,
		`{"drone_id":"D"}`,
		`{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.250Z","lat":51.4706,"lon":-0.4619,"alt_m":85.0}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"alt_ref":"AGL","agl_m":3}`,
		`[{}]`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":-359.99,"speed_mps":255,"alt_m":-1000}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":1e400,"alt_ref":"xyz","alt_m":5}`,
		`{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"heading_deg":null,"speed_mps":"3","agl_m":{}}`,
		// TestAccuracyFields
		`{"drone_id":"d","seq":1,"ts":"2026-12-03T08:00:00Z","lat":51.47,"lon":-0.46}`,

		// Not a record object.
		``, ` `, `null`, ` null `, `nul`, `nullx`, `true`, `false`, `0`, `-0`, `1e5`, `"x"`, `""`, `[]`, `{}`, `{ }`,
		`{"drone_id":"D"} x`, `{"drone_id":"D"}{}`, `{"drone_id":"D"},`, "{" + req + "}\n", "\t\r\n {" + req + "} \n",
		`{` + req + `,}`, `{,` + req + `}`, `{` + req + `,"x":[1,]}`, `{` + req + `,"x":[,1]}`, `{` + req + `,"x":{"a":1,}}`,
		`{` + req + `,"x":{"a"}}`, `{` + req + `,"x":{1:2}}`, `{` + req + `,"x" 1}`, `{` + req + `,"x"::1}`, `{"drone_id":"D" "seq":1}`,
		// Type errors: the first in document order, and only when the whole input is JSON.
		`{"drone_id":5,"seq":"x"}`, `{"seq":"x","drone_id":5}`, `{"drone_id":true}`, `{"drone_id":{"a":1}}`, `{"drone_id":[1]}`,
		`{"ts":7}`, `{"seq":{}}`, `{"seq":[]}`, `{"seq":false}`, `{"lat":true}`, `{"lon":[]}`, `{"lat":{}}`,
		`{"seq":"x",` + req + `}`, `{"seq":"x"} x`, `{"seq":"x",}`, `{"seq":"x","lat":"y"}`,
		`{` + req + `,"seq":1e3}`, `{` + req + `,"seq":1E+2}`, `{` + req + `,"seq":-0}`, `{` + req + `,"seq":0.0}`,
		`{` + req + `,"seq":9223372036854775807}`, `{` + req + `,"seq":9223372036854775808}`, `{` + req + `,"seq":-9223372036854775808}`,
		`{` + req + `,"seq":99999999999999999999999}`, `{` + req + `,"lat":1e400}`, `{` + req + `,"lon":-1e400}`, `{` + req + `,"lat":1e-400}`,
		`{` + req + `,"lat":-0}`, `{` + req + `,"lat":-0.0,"lon":-0e5}`, `{` + req + `,"lat":90.0000000000000000001}`, `{` + req + `,"lat":"NaN"}`,
		`{` + req + `,"lon":"Infinity"}`, `{` + req + `,"lat":NaN}`, `{` + req + `,"lat":Infinity}`, `{` + req + `,"lat":+1}`,
		`{` + req + `,"lat":01}`, `{` + req + `,"lat":1.}`, `{` + req + `,"lat":.5}`, `{` + req + `,"lat":1e}`, `{` + req + `,"lat":1e+}`,
		`{` + req + `,"lat":-}`, `{` + req + `,"lat":0x10}`, `{` + req + `,"lat":1_0}`,
		`{` + req + `,"lat":12345678901234567890123456789012345678901234567890e-48}`,
		// Duplicates: the last wins; null clears a required field.
		`{` + req + `,"drone_id":"E"}`, `{` + req + `,"drone_id":null}`, `{` + req + `,"lat":null}`, `{` + req + `,"seq":null}`,
		`{` + req + `,"ts":null}`, `{` + req + `,"alt_m":5,"alt_m":null}`, `{` + req + `,"alt_ref":"AGL","alt_ref":null,"alt_m":3}`,
		`{` + req + `,"alt_ref":"XYZ","alt_ref":"AGL","alt_m":3}`, `{` + req + `,"drone_id":"a\u0042","drone_id":"C","alt_m":1}`,
		// Keys: case, folding, escapes.
		`{"DRONE_ID":"D","Seq":1,"TS":"2026-12-02T10:15:03Z","LAT":1,"Lon":2,"ALT_M":3,"Heading_Deg":4}`,
		`{"ſeq":1,"drone_id":"D","tſ":"2026-12-02T10:15:03Z","lat":1,"lon":2,"ſpeed_mpſ":3}`,
		`{"\u0073eq":1,"drone_id":"D","t\u0073":"2026-12-02T10:15:03Z","lat":1,"lon":2,"\u017fpeed_mps":3}`,
		`{"drone\u005fid":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2}`,
		`{"drone_i\u212a":"D"}`, "{\"drone_i\u212a\":\"D\"}", `{"seq\u0000":1}`, `{"se\xffq":1}`, "{\"se\xffq\":1}", "{\"\xff\":1," + req + "}", `{"lat ":1}`, `{"":1,` + req + `}`,
		`{"drone_id_":1,` + req + `}`, `{"drone_id":"D","seq":1,"ts":"2026-12-02T10:15:03Z","lat":1,"lon":2,"Alt_Ref":"agl","alt_m":5}`,
		`{"h_accuracy_m":1,"V_ACCURACY_M":2,` + req + `}`,
		// Strings: escapes, surrogates, invalid UTF-8, control characters.
		`{` + req + `,"drone_id":"\u0041"}`, `{` + req + `,"drone_id":"\/x"}`, `{` + req + `,"drone_id":"a\tb"}`,
		`{` + req + `,"drone_id":"a` + "\t" + `b"}`, `{` + req + `,"drone_id":"\x"}`, `{` + req + `,"drone_id":"\u00"}`,
		`{` + req + `,"drone_id":"\u00zz"}`, `{` + req + `,"drone_id":"\ud83d\ude00"}`, `{` + req + `,"drone_id":"\ud83d"}`,
		`{` + req + `,"drone_id":"\ude00x"}`, `{` + req + `,"drone_id":"\ud83d\u0041"}`, "{" + req + ",\"drone_id\":\"\xff\"}",
		"{" + req + `,"drone_id":"é"}`, "{" + req + ",\"drone_id\":\"\xed\xa0\x80\"}", "{" + req + ",\"x\":\"\xff\xfe\"}",
		`{` + req + `,"ts":"2026-12-02T10:15:03\u005a"}`, `{` + req + `,"ts":"2026-12-02T10:15:03.123456789+01:00"}`,
		`{` + req + `,"ts":"2026-12-02t10:15:03z"}`, `{` + req + `,"ts":"2026-12-02 10:15:03Z"}`, `{` + req + `,"ts":"2026-12-02T10:15:03,5Z"}`,
		`{` + req + `,"ts":"2026-12-02T24:00:00Z"}`, `{` + req + `,"ts":"0000-01-01T00:00:00Z"}`, `{` + req + `,"ts":"2026-12-02T10:15:03-00:00"}`,
		`{` + req + `,"ts":"2026-12-02T10:15:03+23:59"}`, `{` + req + `,"ts":"2026-12-02T10:15:03.Z"}`, `{` + req + `,"ts":""}`,
		`{` + req + `,"alt_m":1,"alt_ref":"\u0041MSL"}`, `{` + req + `,"alt_m":1,"alt_ref":"AMſL"}`, `{` + req + `,"alt_m":1,"alt_ref":"AM\u017fL"}`,
		`{` + req + `,"alt_m":1,"alt_ref":"wgs84"}`, `{` + req + `,"alt_m":1,"alt_ref":"msl"}`, "{" + req + ",\"alt_m\":1,\"alt_ref\":\"AG\xff\"}", "{" + req + ",\"alt_m\":1,\"alt_ref\":\"A\\u0047\xff\"}",
		`{` + req + `,"alt_m":1,"alt_ref":{"a": [1, 2]}}`, `{` + req + `,"alt_m":1,"alt_ref":[ ]}`, `{` + req + `,"alt_m":1,"alt_ref":true}`,
		`{` + req + `,"alt_m":1,"alt_ref":"` + strings.Repeat("y", 50) + `"}`, `{` + req + `,"alt_m":1,"alt_ref":-0.0e1}`,
		`{` + req + `,"alt_m":1,"alt_ref":""}`,
		// Optional numbers.
		`{` + req + `,"alt_m":1e400,"agl_m":-1e400}`, `{` + req + `,"speed_mps":-0}`, `{` + req + `,"speed_mps":0}`, `{` + req + `,"heading_deg":-0.0}`,
		`{` + req + `,"h_accuracy_m":-0,"v_accuracy_m":1e-400}`, `{` + req + `,"alt_m":[[[]]],"agl_m":{"a":{}}}`, `{` + req + `,"speed_mps":"\u0031"}`,
		`{` + req + `,"heading_deg":360.000000000000000001}`, `{` + req + `,"heading_deg":-1e-320}`, `{` + req + `,"alt_m":false}`,
		`{` + req + `,"alt_m":1,"alt_ref":"AGL","agl_m":1.0000000000000001}`,
		// Whitespace everywhere.
		" {\n \"drone_id\" :\t\"D\" ,\r\"seq\": 1 , \"ts\" : \"2026-12-02T10:15:03Z\", \"lat\" : 1 , \"lon\" : 2 , \"x\" : [ 1 , { } , [ ] ] }\n",
		"{" + req + ",\"x\":\f1}", "{" + req + ",\"x\":\u00a01}",
		// Nesting at and beyond encoding/json's limit.
		`{` + req + `,"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`,
		`{` + req + `,"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
		`{` + req + `,"x":` + strings.Repeat(`{"a":`, maxDepth-1) + `1` + strings.Repeat("}", maxDepth-1) + `}`,
		`{` + req + `,"x":` + strings.Repeat(`{"a":`, maxDepth) + `1` + strings.Repeat("}", maxDepth) + `}`,
		`{` + req + `,"alt_m":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
		// Inside the operator object: the record's, the operator's and the arrays' levels together.
		`{` + req + `,"operator":{"lat":1,"lon":2,"x":` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + `}}`,
		`{` + req + `,"operator":{"lat":1,"lon":2,"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}}`,
		`{` + req + `,"operator":{"lat":1,"lon":2,"type":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}}`,
		`{` + req + `,"operator":{"alt_m":` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + `,"lat":1,"lon":2}}`,
		`{` + req + `,"operator":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`,
		`{` + req + `,"operator":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	}
	// TestDecodeOptionalFields and TestAccuracyFields: each set of
	// optional fields after the required ones.
	for _, opt := range []string{
		`"heading_deg":360`, `"heading_deg":360.0`, `"heading_deg":359.99`, `"heading_deg":-90.5`, `"heading_deg":-359.99`,
		`"heading_deg":-360`, `"heading_deg":-0`, `"heading_deg":361`, `"heading_deg":655.35`, `"heading_deg":1000`,
		`"heading_deg":360.5`, `"heading_deg":-360.01`, `"heading_deg":null`, `"heading_deg":"north"`, `"heading_deg":{"v":1}`,
		`"heading_deg":1e400`, `"speed_mps":-5`, `"speed_mps":255`, `"speed_mps":254.25`, `"speed_mps":655.35`, `"speed_mps":true`,
		`"alt_m":-1000,"agl_m":-1000`, `"alt_m":-999`, `"alt_m":"high","speed_mps":3`, `"alt_m":80,"alt_ref":"MSL"`,
		`"alt_m":30,"alt_ref":"agl"`, `"alt_m":30,"alt_ref":"\u0041GL"`, `"alt_m":30,"alt_ref":null`, `"alt_m":30,"alt_ref":"XYZ","agl_m":30`,
		`"alt_ref":"XYZ"`, `"alt_m":30,"alt_ref":5`, `"alt_m":10,"alt_ref":"AGL","agl_m":12,"speed_mps":1`,
		`"alt_m":[1],"alt_ref":"?","agl_m":false,"speed_mps":-1,"heading_deg":999`,
		`"h_accuracy_m":3,"v_accuracy_m":10`, `"h_accuracy_m":null`, `"h_accuracy_m":-1,"v_accuracy_m":25`, `"v_accuracy_m":"x"`,
		`"alt_m":-1e300,"speed_mps":3`, `"alt_m":1e300`, `"alt_m":80,"agl_m":1e300`, `"agl_m":-101`, `"alt_m":-500,"alt_ref":"AGL","agl_m":40`,
		`"speed_mps":1e9`, `"h_accuracy_m":1e9`, `"dropped":"alt_m,agl_m"`, `"dropped":"agl_m,alt_m"`, `"dropped":"x"`,
		`"dropped":["alt_m"]`, `"dropped":null`, `"dropped":"alt_m","DROPPED":"speed_mps"`, `"dropped":"\u0061lt_m"`,
		`"dropped":"operator"`, `"dropped":"operator,alt_m"`,
		// The operator object: its members, types, case, escapes, duplicates, nesting.
		`"operator":{"lat":51.469,"lon":-0.452,"alt_m":95.5,"type":"live"}`, `"operator":{"lon":-0.452,"lat":51.469}`,
		`"operator":null`, `"operator":{}`, `"operator":{ }`, `"operator":"x"`, `"operator":1`, `"operator":-1e400`, `"operator":true`,
		`"operator":[1,2]`, `"operator":[]`, `"operator":{"lat":0,"lon":0}`, `"operator":{"lat":-0,"lon":0.0}`, `"operator":{"lat":-0.0,"lon":5}`,
		`"operator":{"lat":91,"lon":1}`, `"operator":{"lat":1,"lon":181}`, `"operator":{"lat":1}`, `"operator":{"lon":1}`,
		`"operator":{"lat":"1","lon":2}`, `"operator":{"lat":1,"lon":{}}`, `"operator":{"lat":1e400,"lon":2}`, `"operator":{"lat":null,"lon":2}`,
		`"operator":{"lat":1,"lon":2,"alt_m":-1000}`, `"operator":{"lat":1,"lon":2,"alt_m":-1000.5}`, `"operator":{"lat":1,"lon":2,"alt_m":[1]}`,
		`"operator":{"lat":1,"lon":2,"alt_m":1e400}`, `"operator":{"lat":1,"lon":2,"alt_m":null,"alt_m":7}`,
		`"operator":{"lat":1,"lon":2,"type":"takeoff"}`, `"operator":{"lat":1,"lon":2,"type":"FIXED"}`, `"operator":{"lat":1,"lon":2,"type":"\u006cive"}`,
		`"operator":{"lat":1,"lon":2,"type":"dynamic"}`, `"operator":{"lat":1,"lon":2,"type":1}`, `"operator":{"lat":1,"lon":2,"type":{"a":[1]}}`,
		`"operator":{"lat":1,"lon":2,"type":null}`, `"operator":{"lat":1,"lon":2,"type":""}`, "\"operator\":{\"lat\":1,\"lon\":2,\"type\":\"li\xffve\"}",
		`"operator":{"lat":1,"lon":2,"type":"` + strings.Repeat("z", 60) + `"}`, `"operator":{"lat":1,"lon":2,"type":"taKeoff"}`,
		`"operator":{"LAT":1,"Lon":2,"ALT_M":3,"Type":"live"}`, `"OPERATOR":{"lat":1,"lon":2}`, `"\u006fperator":{"l\u0061t":1,"lon":2}`,
		`"operator":{"lat":1,"lon":2},"operator":{"lat":3,"lon":4}`, `"operator":{"lat":1,"lon":2},"operator":null`,
		`"operator":{"lat":1,"lon":2,"lat":null}`, `"operator":{"lat":1,"lon":2,"x":{"y":[1,{"z":null}]},"":1}`,
		`"operator":{"lat":1,"lon":2,}`, `"operator":{"lat":1 "lon":2}`, `"operator":{"lat":1,"lon":2`, `"operator":{lat:1}`, `"operator":{"lat"}`,
		`"operator":{"lat":1,"lon":2,"x":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`,
		`"operator":{"lat":1,"lon":2},"seq":"x"`, `"operator":{"lat":"a","lon":2},"alt_m":"b"`,
	} {
		full = append(full, `{`+req+`,`+opt+`}`, `{`+opt+`,`+req+`}`)
	}
	return full
}

// checkMatchesJSON fails unless the hand-written decoder and DecodeWarn read
// data exactly as decodeJSON (encoding/json) does. decodeFast may only say
// "not JSON" (errSyntax) where encoding/json reports a syntax error, and
// DecodeWarn then returns that error itself.
func checkMatchesJSON(t *testing.T, data []byte) {
	t.Helper()
	prev := []FieldWarning{{"x", "earlier"}}
	wantP, wantW, wantErr := decodeJSON(data, prev[:1:1])
	gotP, gotW, gotErr := decodeFast(data, prev[:1:1])
	if gotErr == errSyntax {
		var fe *FieldError
		if !errors.As(wantErr, &fe) || fe.Field != "" || !strings.HasPrefix(fe.Err, "malformed JSON") {
			t.Fatalf("%q: the fast decoder says it is not JSON; encoding/json: %v", data, wantErr)
		}
	} else if d := resultDiff(gotP, gotW, gotErr, wantP, wantW, wantErr); d != "" {
		t.Fatalf("%q: fast decoder vs encoding/json: %s", data, d)
	}
	pubP, pubW, pubErr := DecodeWarn(data, prev[:1:1])
	if d := resultDiff(pubP, pubW, pubErr, wantP, wantW, wantErr); d != "" {
		t.Fatalf("%q: DecodeWarn vs encoding/json: %s", data, d)
	}
}

// resultDiff says how two decodings differ, "" when they do not: every
// value (numbers by their bits, so -0 is not 0), the warnings in order, and
// the error's type, field and text.
func resultDiff(p1 Position, w1 []FieldWarning, e1 error, p2 Position, w2 []FieldWarning, e2 error) string {
	if (e1 == nil) != (e2 == nil) {
		return fmt.Sprintf("error %v, want %v", e1, e2)
	}
	if e1 != nil {
		f1, ok1 := e1.(*FieldError)
		f2, ok2 := e2.(*FieldError)
		if !ok1 || !ok2 || *f1 != *f2 {
			return fmt.Sprintf("error %#v, want %#v", e1, e2)
		}
	}
	if !reflect.DeepEqual(w1, w2) {
		return fmt.Sprintf("warnings %+v, want %+v", w1, w2)
	}
	if p1.DroneID != p2.DroneID || p1.Seq != p2.Seq || p1.TS != p2.TS || p1.AltRef != p2.AltRef ||
		math.Float64bits(p1.Lat) != math.Float64bits(p2.Lat) || math.Float64bits(p1.Lon) != math.Float64bits(p2.Lon) {
		return fmt.Sprintf("position %+v, want %+v", p1, p2)
	}
	opt := func(p Position) [6]*float64 {
		return [6]*float64{p.AltM, p.AGLM, p.SpeedMPS, p.HeadingDeg, p.HAccuracyM, p.VAccuracyM}
	}
	o1, o2 := opt(p1), opt(p2)
	for i := range o1 {
		if (o1[i] == nil) != (o2[i] == nil) || o1[i] != nil && math.Float64bits(*o1[i]) != math.Float64bits(*o2[i]) {
			return fmt.Sprintf("optional field %d: %s, want %s", i, p1.AppendJSON(nil), p2.AppendJSON(nil))
		}
	}
	if p1.Dropped != p2.Dropped {
		return fmt.Sprintf("dropped %q, want %q", p1.Dropped, p2.Dropped)
	}
	if (p1.Operator == nil) != (p2.Operator == nil) {
		return fmt.Sprintf("operator %+v, want %+v", p1.Operator, p2.Operator)
	}
	if a, b := p1.Operator, p2.Operator; a != nil {
		if math.Float64bits(a.Lat) != math.Float64bits(b.Lat) || math.Float64bits(a.Lon) != math.Float64bits(b.Lon) || a.Type != b.Type ||
			(a.AltM == nil) != (b.AltM == nil) || a.AltM != nil && math.Float64bits(*a.AltM) != math.Float64bits(*b.AltM) {
			return fmt.Sprintf("operator: %s, want %s", p1.AppendJSON(nil), p2.AppendJSON(nil))
		}
	}
	return ""
}

// TestDecodeMatchesJSON runs the differential check on every seed, and on
// every prefix of the seeds and every seed with one byte left out, with
// every normal `go test`.
func TestDecodeMatchesJSON(t *testing.T) {
	for _, s := range decodeSeeds() {
		checkMatchesJSON(t, []byte(s))
		if len(s) > 300 {
			continue // the nesting seeds: their prefixes say nothing new
		}
		for i := range len(s) {
			checkMatchesJSON(t, []byte(s[:i]))
			checkMatchesJSON(t, []byte(s[:i]+s[i+1:]))
		}
	}
}

// FuzzDecodeMatchesJSON: the hand-written decoder accepts and refuses
// exactly the records encoding/json does, with the same values, warnings
// and errors (syntax errors: both refuse, and DecodeWarn reports
// encoding/json's own text).
func FuzzDecodeMatchesJSON(f *testing.F) {
	for _, s := range decodeSeeds() {
		if len(s) <= 1000 { // the nesting seeds stay in TestDecodeMatchesJSON: minimizing their mutations stalls the fuzzer
			f.Add([]byte(s))
		}
	}
	f.Fuzz(checkMatchesJSON)
}

// TestDecodeFastAllocs: one allocation a record, holding the drone id and
// the kept optional numbers, and one more for a pilot's position. (A warning's text costs its own.)
func TestDecodeFastAllocs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		max      float64
	}{
		{"required only", `{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.25Z","lat":51.4706,"lon":-0.4619}`, 1},
		{"contract example", benchContract, 1},
		{"optional fields", benchOptional, 1},
		// The operator is a second allocation, made only when there is one.
		{"with operator", benchOperator, 2},
	} {
		ws := make([]FieldWarning, 0, 4)
		in := []byte(tc.in)
		got := testing.AllocsPerRun(100, func() {
			if _, w, err := DecodeWarn(in, ws[:0]); err != nil || len(w) > cap(ws) {
				t.Fatal(err)
			}
		})
		if got > tc.max {
			t.Errorf("%s: %v allocations a record, want at most %v", tc.name, got, tc.max)
		}
	}
}

// The canonical record (ingest's AppendJSON of the contract example), and one
// with every optional field.
const (
	benchContract = `{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.25Z","lat":51.4706,"lon":-0.4619,"alt_m":85,"speed_mps":12.5,"heading_deg":270}`
	benchOptional = `{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.25Z","lat":51.4706,"lon":-0.4619,"alt_m":85,"alt_ref":"AGL","agl_m":85,"speed_mps":12.5,"heading_deg":270,"h_accuracy_m":3,"v_accuracy_m":10}`
	// benchOperator is benchContract with a pilot's position, as a Remote
	// ID feed's System message gives it.
	benchOperator = `{"drone_id":"UAV-0042","seq":1187,"ts":"2026-12-02T10:15:03.25Z","lat":51.4706,"lon":-0.4619,"alt_m":85,"speed_mps":12.5,"heading_deg":270,"operator":{"lat":51.469,"lon":-0.452,"alt_m":95.5,"type":"live"}}`
)

// BenchmarkDecode: encoding/json (decodeJSON, the reference) against the
// hand-written decoder (DecodeWarn), side by side. One op = one record;
// cpu-ns/op is the thread's CPU time (GC work on other threads excluded),
// which other processes' load on a shared machine does not inflate.
func BenchmarkDecode(b *testing.B) {
	for _, rec := range []struct{ name, in string }{
		{"canonical", benchContract},
		{"optional", benchOptional},
		{"operator", benchOperator},
	} {
		in := []byte(rec.in)
		for _, dec := range []struct {
			name string
			fn   func([]byte, []FieldWarning) (Position, []FieldWarning, error)
		}{{"json", decodeJSON}, {"fast", DecodeWarn}} {
			b.Run(rec.name+"/"+dec.name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				ws := make([]FieldWarning, 0, 4)
				b.ReportAllocs()
				cpu0, ok := threadCPU()
				for b.Loop() {
					if _, _, err := dec.fn(in, ws[:0]); err != nil {
						b.Fatal(err)
					}
				}
				if cpu1, ok1 := threadCPU(); ok && ok1 {
					b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
