package telemetry

import (
	"strings"
	"testing"
)

func TestAccuracyFields(t *testing.T) {
	const base = `{"drone_id":"d","seq":1,"ts":"2026-12-03T08:00:00Z","lat":51.47,"lon":-0.46`
	tests := []struct {
		name, extra, h, v, warn string
	}{
		{"absent", ``, "-", "-", ""},
		{"both", `,"h_accuracy_m":3,"v_accuracy_m":10`, "3", "10", ""},
		{"null is absent", `,"h_accuracy_m":null`, "-", "-", ""},
		{"negative dropped with a warning", `,"h_accuracy_m":-1,"v_accuracy_m":25`, "-", "25", "h_accuracy_m"},
		{"a string dropped with a warning", `,"v_accuracy_m":"x"`, "-", "-", "v_accuracy_m"},
	}
	str := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return formatFloat(*p)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ws, err := DecodeWarn([]byte(base+tc.extra+`}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			if str(p.HAccuracyM) != tc.h || str(p.VAccuracyM) != tc.v {
				t.Fatalf("h %s v %s, want %s %s", str(p.HAccuracyM), str(p.VAccuracyM), tc.h, tc.v)
			}
			if (tc.warn == "") != (len(ws) == 0) || (tc.warn != "" && ws[0].Field != tc.warn) {
				t.Fatalf("warnings %v, want one on %q", ws, tc.warn)
			}
			// The canonical encoding keeps them, and reads back the same.
			enc := string(p.AppendJSON(nil))
			if tc.h != "-" && !strings.Contains(enc, `"h_accuracy_m":`+tc.h) || tc.v != "-" && !strings.Contains(enc, `"v_accuracy_m":`+tc.v) {
				t.Fatalf("encoding %s", enc)
			}
			q, err := Decode([]byte(enc))
			if err != nil || str(q.HAccuracyM) != tc.h || str(q.VAccuracyM) != tc.v {
				t.Fatalf("round trip %s: %+v %v", enc, q, err)
			}
		})
	}
}
