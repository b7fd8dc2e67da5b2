package geofence

import "testing"

func TestParseTimeOfDay(t *testing.T) {
	cases := []struct {
		in      string
		t, off  int
		hasOff  bool
		wantErr bool
	}{
		{"08:00", 8 * 3600, 0, false, false},
		{"08:00:30Z", 8*3600 + 30, 0, true, false},
		{"17:00:00.00Z", 17 * 3600, 0, true, false},
		{"12:00-05:30", 12 * 3600, -(5*3600 + 1800), true, false},
		{"23:59:59+01:00", 86399, 3600, true, false},
		{"24:00Z", 86400, 0, true, false},
		{"24:01", 0, 0, false, true},
		{"8:00", 0, 0, false, true},
		{"12:00:60", 0, 0, false, true},
		{"12:60", 0, 0, false, true},
		{"noon", 0, 0, false, true},
	}
	for _, c := range cases {
		tt, off, hasOff, ok := parseTimeOfDay(c.in)
		if ok == c.wantErr || (ok && (tt != c.t || off != c.off || hasOff != c.hasOff)) {
			t.Errorf("parseTimeOfDay(%q) = %d, %d, %v, %v", c.in, tt, off, hasOff, ok)
		}
	}
	// A daily period across midnight on Sunday wraps to Monday morning.
	f := &feat{ps: &problems{}}
	ivs, ok := parseDailyPeriod(map[string]any{"day": []any{"SUN"}, "startTime": "22:00Z", "endTime": "02:00Z"}, "p", f)
	if !ok || len(ivs) != 2 || ivs[0] != (WeeklyInterval{6*86400 + 22*3600, week}) || ivs[1] != (WeeklyInterval{0, 2 * 3600}) {
		t.Errorf("Sunday night: %v %v", ivs, ok)
	}
}
