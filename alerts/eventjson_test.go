package alerts_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
)

func checkEventJSON(t *testing.T, e alerts.Event) {
	t.Helper()
	want, err := json.Marshal(&e)
	if err != nil {
		return // NaN/Inf: not an event the engine can make
	}
	if got := e.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
	}
}

func TestEventAppendJSONEqualsMarshal(t *testing.T) {
	alt := 85.25
	tiny := 1e-7
	huge := 1e22
	base := alerts.Event{EventID: "a:raised", AlarmID: "a", Type: "raised", DroneID: "UAV-1", ZoneID: "Z", ZoneName: "Zone",
		Category: "restricted", Seq: 7, TS: time.Date(2026, 12, 2, 10, 0, 3, 250_000_000, time.UTC), Lat: 51.4706, Lon: -0.4619,
		AltM: &alt, AltRef: "AMSL", HeightAssumed: true, Partition: 3, Offset: 1234}
	tests := map[string]func(e *alerts.Event){
		"full":    func(e *alerts.Event) {},
		"minimal": func(e *alerts.Event) { e.AltM, e.AltRef, e.HeightAssumed = nil, "", false },
		"cleared": func(e *alerts.Event) { e.Type, e.Reason = "cleared", "zone_removed" },
		"approaching": func(e *alerts.Event) {
			eta, dist := 12.25, 480.5
			e.Type, e.EtaS, e.DistanceM, e.Entry = "approaching", &eta, &dist, &alerts.LatLon{Lat: 51.5, Lon: -0.125}
		},
		"approach ended": func(e *alerts.Event) { e.Type, e.Reason = "approach_ended", "turned_away" },
		"unauthorized": func(e *alerts.Event) {
			e.Type, e.Reason = "unauthorized", "revoked"
			e.Authorization = &alerts.AuthRef{ID: "a<1>", Reference: "PERMIT \"7\"", Until: time.Date(2026, 12, 6, 9, 30, 0, 1500, time.FixedZone("x", 3600))}
		},
		"escapes":           func(e *alerts.Event) { e.ZoneName = "a \"quoted\" <name> & \\ \n tab\t é ☃ \u2028 \x01 \xff" },
		"tiny and huge":     func(e *alerts.Event) { e.Lat, e.Lon, e.AltM = tiny, -huge, &tiny },
		"zero":              func(e *alerts.Event) { e.Lat, e.Lon, e.Seq, e.Offset = 0, math.Copysign(0, -1), 0, 0 },
		"whole numbers":     func(e *alerts.Event) { e.Lat, e.Lon = 51, -1 },
		"nanosecond time":   func(e *alerts.Event) { e.TS = time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC) },
		"whole second time": func(e *alerts.Event) { e.TS = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
		"zone version":      func(e *alerts.Event) { e.ZoneVersion = 42 },
		"acked":             func(e *alerts.Event) { e.Type, e.By, e.Note = "acked", "ops-desk", "seen <on> \"camera\" 3" },
		"signal lost": func(e *alerts.Event) {
			seen, age := time.Date(2026, 12, 2, 10, 0, 3, 999_000_000, time.UTC), 30.5
			e.Type, e.LastSeen, e.AgeS = "signal_lost", &seen, &age
		},
		"raised by the clock": func(e *alerts.Event) {
			seen, age := time.Date(2026, 12, 2, 10, 0, 3, 0, time.UTC), 0.0
			e.Reason, e.LastSeen, e.AgeS = "zone_activated", &seen, &age
		},
		"operator": func(e *alerts.Event) {
			e.Operator = &alerts.OperatorFix{Lat: 51.4612, Lon: -0.47, AltM: &alt, Type: "live", TS: e.TS}
		},
		"operator, bare": func(e *alerts.Event) {
			e.Operator = &alerts.OperatorFix{Lat: tiny, Lon: -huge, Type: "<\"t\">", TS: time.Date(2026, 1, 1, 0, 0, 0, 1, time.FixedZone("y", -1800))}
		},
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			e := base
			mod(&e)
			checkEventJSON(t, e)
		})
	}
}

func FuzzEventAppendJSON(f *testing.F) {
	f.Add("UAV-1", "Zone \"x\"", 51.47, -0.46, 85.0, int64(7), int64(1_700_000_000), true)
	f.Add("", "\xff<>&", 1e-9, 1e300, -0.0, int64(-1), int64(0), false)
	f.Fuzz(func(t *testing.T, drone, name string, lat, lon, alt float64, seq, unix int64, assumed bool) {
		e := alerts.Event{EventID: drone + ":raised", AlarmID: drone, Type: "raised", DroneID: drone, ZoneID: name, ZoneName: name,
			Seq: seq, TS: time.Unix(unix%(1<<36), 0).UTC(), Lat: lat, Lon: lon, AltM: &alt, HeightAssumed: assumed}
		checkEventJSON(t, e)
		e.Operator = &alerts.OperatorFix{Lat: lon, Lon: lat, AltM: &alt, Type: name, TS: e.TS}
		checkEventJSON(t, e)
		e.Operator.AltM = nil
		checkEventJSON(t, e)
		seen := time.UnixMilli(seq % (1 << 45)).UTC()
		e.Type, e.LastSeen, e.AgeS = "signal_lost", &seen, &lat
		checkEventJSON(t, e)
	})
}
