package telemetry

import (
	"testing"
	"time"
)

func TestTick(t *testing.T) {
	at := time.Date(2026, 12, 6, 1, 30, 0, 123000000, time.UTC)
	tk := Tick{At: at, From: "ingest-\"a\""}
	b := tk.AppendJSON(nil)
	if string(b) != `{"tick":"2026-12-06T01:30:00.123Z","from":"ingest-\"a\""}` {
		t.Fatalf("%s", b)
	}
	tests := []struct {
		in   string
		want bool
	}{
		{string(b), true},
		{`{"tick":"2026-12-06T01:30:00.123Z"}`, true},
		{` { "from":"x", "tick":"2026-12-06T02:30:00.123+01:00" } `, true},
		{`{"tick":"2026-12-06T01:30:00.123Z","drone_id":"D"}`, false}, // a position's field: never a tick
		{`{"tick":12}`, false},
		{`{"tick":"yesterday"}`, false},
		{`{"drone_id":"D","seq":1,"ts":"2026-12-06T01:30:00Z","lat":1,"lon":2}`, false},
		{`{"tick":"2026-12-06T01:30:00Z"`, false},
		{``, false},
	}
	for _, tc := range tests {
		got, ok := ParseTick([]byte(tc.in))
		if ok != tc.want || ok && !got.Equal(at) {
			t.Errorf("ParseTick(%s) = %v, %v; want a tick %v", tc.in, got, ok, tc.want)
		}
		if tc.want {
			if _, err := Decode([]byte(tc.in)); err == nil {
				t.Errorf("Decode took the tick %s for a position", tc.in)
			}
		}
	}
}
