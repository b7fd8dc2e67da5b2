// Applicability: when a zone is active. ED-269's applicability and
// ED-318's limitedApplicability share one shape (periods bounded by
// start/end date-times, with optional weekly schedules of daily periods),
// so both parsers read it here into Windows.

package geofence

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseApplicability reads ED-269 applicability (or ED-318
// limitedApplicability): a list of periods, or one object. A period that is
// permanent and has no bounds or schedule makes the zone always active,
// which is returned as no windows.
func parseApplicability(v any, field string, fe *feat) []Window {
	add := fe.add
	var ws []Window
	always := false
	for ai, av := range asList(v) {
		f := field
		if _, isList := v.([]any); isList {
			f = idx(field, ai)
		}
		a, ok := asObj(av)
		if !ok {
			add(f, "must be an object")
			continue
		}
		var w Window
		if s, ok := a.get("startDateTime"); ok {
			w.From = treeTime(s, false, f+".startDateTime", fe)
		}
		if s, ok := a.get("endDateTime"); ok {
			w.Until = treeTime(s, true, f+".endDateTime", fe)
		}
		for _, key := range []string{"schedule", "dailyPeriod"} {
			sv, ok := a.get(key)
			if !ok {
				continue
			}
			for si, pv := range asList(sv) {
				ivs, ok := parseDailyPeriod(pv, idx(f+"."+key, si), fe)
				if ok {
					w.Weekly = append(w.Weekly, ivs...)
				}
			}
		}
		if w.From.IsZero() && w.Until.IsZero() && len(w.Weekly) == 0 {
			// Permanent ("permanent": "YES"), or a period with nothing
			// to bound it: always active.
			always = true
			continue
		}
		ws = append(ws, w)
	}
	if always {
		return nil
	}
	return ws
}

var dayIndex = map[string]int{"MON": 0, "TUE": 1, "WED": 2, "THU": 3, "FRI": 4, "SAT": 5, "SUN": 6}

// parseDailyPeriod reads {day: [..], startTime, endTime} into weekly
// intervals in UTC. Days default to every day; a start time defaults to
// 00:00 and an end time to 24:00; an end at or before the start runs into
// the next day; an end of 23:59 or 23:59:59 means the end of the day.
func parseDailyPeriod(v any, field string, f *feat) ([]WeeklyInterval, bool) {
	add := f.add
	p, ok := asObj(v)
	if !ok {
		add(field, "must be an object")
		return nil, false
	}
	var days []int
	if dv, ok := p.get("day"); ok {
		for _, d := range asList(dv) {
			s, _ := d.(string)
			s = upperASCII(s)
			if s == "ANY" {
				days = []int{0, 1, 2, 3, 4, 5, 6}
				break
			}
			di, ok := dayIndex[s]
			if !ok {
				add(field+".day", fmt.Sprintf("must be MON..SUN or ANY, not %v", d))
				return nil, false
			}
			days = append(days, di)
		}
	} else {
		days = []int{0, 1, 2, 3, 4, 5, 6}
	}
	// widen is how much earlier the start and later the end may be when a
	// time has no offset and is read conservatively.
	start, end, widenStart, widenEnd := 0, 86400, 0, 0
	timeOf := func(key, example string) (t, off, widen int, ok bool) {
		tv, present := p.get(key)
		if !present {
			return 0, 0, 0, false
		}
		t, off, hasOff, good := parseTimeOfDay(tv)
		if !good {
			add(field+"."+key, fmt.Sprintf("must be a time of day like %s, not %v", example, tv))
			return 0, 0, 0, false
		}
		if !hasOff {
			if !f.conservative() {
				add(field+"."+key, fmt.Sprintf("%q %s; add the offset, or load conservatively to widen the period to every instant it could mean", tv, noOffsetMsg))
				return 0, 0, 0, false
			}
			w := int(maxWestOffset / time.Second)
			if key == "startTime" {
				w = int(maxEastOffset / time.Second)
			}
			f.warn(field+"."+key, fmt.Sprintf("%q %s; read conservatively, the period widened by %dh", tv, noOffsetMsg, w/3600))
			return t, 0, w, true
		}
		return t, off, 0, true
	}
	if _, present := p.get("startTime"); present {
		s, off, w, ok := timeOf("startTime", "08:00:00Z")
		if !ok {
			return nil, false
		}
		start, widenStart = s-off, w
	}
	if _, present := p.get("endTime"); present {
		e, off, w, ok := timeOf("endTime", "18:00:00Z")
		if !ok {
			return nil, false
		}
		if e == 86400-1 || e == 86400-60 {
			e = 86400 // 23:59:59 (or 23:59) local means midnight
		}
		end, widenEnd = e-off, w
	}
	dur := end - start
	if dur <= 0 {
		dur += 86400
	}
	start -= widenStart
	dur = min(dur+widenStart+widenEnd, week)
	var out []WeeklyInterval
	for _, d := range days {
		s := posMod(d*86400+start, week)
		e := s + dur
		if e <= week {
			out = append(out, WeeklyInterval{int32(s), int32(e)})
		} else {
			out = append(out, WeeklyInterval{int32(s), week}, WeeklyInterval{0, int32(e - week)})
		}
	}
	return out, true
}

// posMod is a mod m in [0, m), also for a negative a (a start moved
// before Monday 00:00 wraps to the end of the week).
func posMod(a, m int) int {
	a %= m
	if a < 0 {
		a += m
	}
	return a
}

// parseTimeOfDay reads HH:MM[:SS[.frac]][Z|±HH:MM] into seconds since
// local midnight and the offset from UTC in seconds; hasOff is false when
// the time has neither Z nor an offset.
func parseTimeOfDay(v any) (t, off int, hasOff, ok bool) {
	s, isStr := v.(string)
	if !isStr || len(s) < 5 {
		return 0, 0, false, false
	}
	hasOff = true
	switch {
	case strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "z"):
		s = s[:len(s)-1]
	case len(s) > 6 && (s[len(s)-6] == '+' || s[len(s)-6] == '-') && s[len(s)-3] == ':':
		oh, err1 := strconv.Atoi(s[len(s)-5 : len(s)-3])
		om, err2 := strconv.Atoi(s[len(s)-2:])
		if err1 != nil || err2 != nil || oh > 14 || om > 59 {
			return 0, 0, false, false
		}
		off = oh*3600 + om*60
		if s[len(s)-6] == '-' {
			off = -off
		}
		s = s[:len(s)-6]
	default:
		hasOff = false
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, false, false
	}
	h, err := strconv.Atoi(parts[0])
	if err != nil || h < 0 || h > 24 || len(parts[0]) != 2 {
		return 0, 0, false, false
	}
	m, err := strconv.Atoi(parts[1])
	if err != nil || m < 0 || m > 59 || len(parts[1]) != 2 {
		return 0, 0, false, false
	}
	sec := 0.0
	if len(parts) == 3 {
		sec, err = strconv.ParseFloat(parts[2], 64)
		if err != nil || sec < 0 || sec >= 60 || len(parts[2]) < 2 || parts[2][0] == '+' || parts[2][0] == '-' {
			return 0, 0, false, false
		}
	}
	t = h*3600 + m*60 + int(math.Floor(sec))
	if t > 86400 {
		return 0, 0, false, false
	}
	return t, off, hasOff, true
}
