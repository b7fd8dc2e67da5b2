package alerts_test

import (
	"math"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
)

// TestRangeBearing against distances and bearings worked by hand on a
// flat frame (metres per degree 111,195, east scaled by the cosine of the
// latitude), which a great circle matches within 0.2% at these ranges.
func TestRangeBearing(t *testing.T) {
	tests := []struct {
		name                   string
		lat1, lon1, lat2, lon2 float64
		m, deg                 float64
	}{
		{"north 1 km", 51.47, -0.45, 51.47 + 1000.0/111195, -0.45, 1000, 0},
		{"south", 51.47, -0.45, 51.46, -0.45, 1112, 180},
		{"east", 51.47, -0.45, 51.47, -0.44, 692.3, 90},
		{"west", 51.47, -0.45, 51.47, -0.46, 692.3, 270},
		{"south-west", 51.47, -0.45, 51.462, -0.462, 1217.6, 223.06},
		{"same place", 51.47, -0.45, 51.47, -0.45, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, deg := alerts.RangeBearing(tc.lat1, tc.lon1, tc.lat2, tc.lon2)
			if math.Abs(m-tc.m) > 0.002*tc.m+0.5 || math.Abs(deg-tc.deg) > 0.2 {
				t.Errorf("%.1f m at %.2f°, want %.1f m at %.2f°", m, deg, tc.m, tc.deg)
			}
		})
	}
}

// TestPilotOf: none without a pilot; "unknown" for no type; range and
// bearing only when the drone's position is known, rounded to 0.1.
func TestPilotOf(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	if p := alerts.PilotOf(nil, 0, 0, true); p != nil {
		t.Errorf("nil pilot: %+v", p)
	}
	if p := alerts.PilotOf(&alerts.OperatorFix{}, 0, 0, true); p != nil {
		t.Errorf("zero pilot: %+v", p)
	}
	o := &alerts.OperatorFix{Lat: 51.46, Lon: -0.45, TS: ts}
	p := alerts.PilotOf(o, 51.47, -0.45, true)
	if p.Type != "unknown" || p.RangeM == nil || *p.RangeM != math.Round(*p.RangeM*10)/10 || *p.BearingDeg != 180 || !p.TS.Equal(ts) {
		t.Errorf("pilot %+v (range %v, bearing %v)", p, *p.RangeM, *p.BearingDeg)
	}
	if p := alerts.PilotOf(o, 0, 0, false); p.RangeM != nil || p.BearingDeg != nil {
		t.Errorf("range without the drone's position: %+v", p)
	}
}
