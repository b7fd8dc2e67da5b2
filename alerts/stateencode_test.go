package alerts_test

import (
	"bytes"
	"encoding/json"
	"testing"

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

func TestDroneStateEncodeEqualsMarshal(t *testing.T) {
	alarm := alerts.ActiveAlarm{Zone: "LHR-1", Alarm: "3f0c0123456789abcdef0123456789ab", FP: "sha256:9a1b", RaisedSeq: 1100, Name: "Heathrow", Category: "restricted"}
	tests := map[string]alerts.DroneState{
		"new":          alerts.NewDroneState(),
		"no alarm":     {Seq: 1187},
		"empty in":     {Seq: 5, Alarms: []alerts.ActiveAlarm{}},
		"one":          {Seq: 1187, Alarms: []alerts.ActiveAlarm{alarm}},
		"two, no name": {Seq: 9, Alarms: []alerts.ActiveAlarm{alarm, {Zone: "Z2", Alarm: "a", FP: "f", RaisedSeq: -3}}},
		"escapes":      {Seq: 1, Alarms: []alerts.ActiveAlarm{{Zone: "a\"<b>&\\\n\u2028é\xff", Alarm: "x", FP: "y", Name: "\x01", Category: "<c>"}}},
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) { checkStateEncode(t, s) })
	}
}

func FuzzDroneStateEncode(f *testing.F) {
	f.Add(int64(7), "Z", "alarm", "fp", int64(3), "Zone \"x\"", "restricted")
	f.Add(int64(-1), "", "\xff<>&", "", int64(-9), "", "")
	f.Fuzz(func(t *testing.T, seq int64, zone, alarm, fp string, rseq int64, name, cat string) {
		checkStateEncode(t, alerts.DroneState{Seq: seq, Alarms: []alerts.ActiveAlarm{{Zone: zone, Alarm: alarm, FP: fp, RaisedSeq: rseq, Name: name, Category: cat}}})
	})
}
