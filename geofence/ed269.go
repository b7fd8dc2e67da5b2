package geofence

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/paulmach/orb"
)

// ParseED269 reads UAS geographical zones in EUROCAE ED-269's JSON
// encoding, in any of the layouts authorities publish it in (see the
// package doc). The set is returned whole, or not at all with a
// *ValidationError listing every problem.
func ParseED269(r io.Reader) (*ZoneSet, error) {
	_, root, err := decodeTree(r)
	if err != nil {
		return nil, err
	}
	return parseED269Tree(root)
}

// decodeTree reads a whole zone file and decodes it into a generic JSON
// tree, which the ED-269 and ED-318 parsers and format detection walk.
func decodeTree(r io.Reader) ([]byte, any, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, nil, err
	}
	var root any
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, nil, fileProblem("", jsonMsg(err))
	}
	return b, root, nil
}

// authorityName is the name of the first entry of a zoneAuthority list
// (ED-269 and ED-318 alike) that has one.
func authorityName(a any) string {
	for _, e := range list(a) {
		if ao, ok := asObj(e); ok {
			if n, ok := ao.get("name"); ok {
				return text(n)
			}
		}
	}
	return ""
}

// obj is a decoded JSON object whose keys are matched loosely: case and
// underscores do not matter ("horizontal_projection" finds
// "horizontalProjection").
type obj map[string]any

func normKey(k string) string {
	return strings.ToLower(strings.ReplaceAll(k, "_", ""))
}

func (o obj) get(key string) (any, bool) {
	if v, ok := o[key]; ok {
		return v, v != nil
	}
	nk := normKey(key)
	for k, v := range o {
		if normKey(k) == nk {
			return v, v != nil
		}
	}
	return nil, false
}

func asObj(v any) (obj, bool) {
	m, ok := v.(map[string]any)
	return obj(m), ok
}

// list returns v as a list; a single object is a list of one (EUROCONTROL's
// layout writes single objects where ED-269 has arrays).
func list(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case nil:
		return nil
	}
	return []any{v}
}

// ed269Zones finds the list of zones in any of the layouts.
func ed269Zones(root any) ([]any, string, error) {
	if l, ok := root.([]any); ok {
		return l, "", nil
	}
	o, ok := asObj(root)
	if !ok {
		return nil, "", fileProblem("", "an ED-269 file is a JSON object or array")
	}
	for _, k := range []string{"features", "UASZoneList", "uas_zones", "UASZones", "zones"} {
		if v, ok := o.get(k); ok {
			l, ok := v.([]any)
			if !ok {
				return nil, k, fileProblem(k, "must be an array of zones")
			}
			return l, k, nil
		}
	}
	if _, ok := o.get("identifier"); ok {
		return []any{root}, "", nil // a single zone
	}
	return nil, "", fileProblem("", "no zone list found (expected features, UASZoneList or uas_zones)")
}

func parseED269Tree(root any) (*ZoneSet, error) {
	zones, listKey, err := ed269Zones(root)
	if err != nil {
		return nil, err
	}
	var ps problems
	set := &ZoneSet{Zones: make([]*Zone, 0, len(zones))}
	seen := make(map[string]int, len(zones))
	for i, zv := range zones {
		z, skip := parseED269Zone(i, zv, &ps)
		if z == nil || skip {
			continue
		}
		checkUnique(seen, i, z.ID, "identifier", &ps)
		set.Zones = append(set.Zones, z)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	var version json.RawMessage
	if o, ok := asObj(root); ok && listKey != "" {
		if v, ok := o.get("version"); ok {
			version, _ = json.Marshal(v)
		}
	}
	finish(set, version)
	return set, nil
}

var ed269Names = fieldNames{
	id:       "identifier",
	category: "restriction",
	ring: func(v, p, r int) string {
		if p == 0 {
			return idx(idx("geometry", v)+".horizontalProjection.coordinates", r)
		}
		return idx(idx(idx("geometry", v)+".horizontalProjection.coordinates", p), r)
	},
	center:  func(v int) string { return idx("geometry", v) + ".horizontalProjection.center" },
	radius:  func(v int) string { return idx("geometry", v) + ".horizontalProjection.radius" },
	floor:   func(v int) string { return idx("geometry", v) + ".lowerLimit" },
	ceiling: func(v int) string { return idx("geometry", v) + ".upperLimit" },
	buffer:  "clear_buffer_m",
	from:    "applicability.startDateTime",
	until:   "applicability.endDateTime",
}

// restrictionCategory maps ED-269/ED-318 restrictions; skip is true for
// NO_RESTRICTION, which defines no no-fly zone.
func restrictionCategory(s string) (c Category, skip, ok bool) {
	switch upperASCII(s) {
	case "PROHIBITED":
		return Restricted, false, true
	case "REQ_AUTHORISATION", "REQ_AUTHORIZATION", "CONDITIONAL":
		return Warning, false, true
	case "NO_RESTRICTION":
		return "", true, true
	}
	return "", false, false
}

// text reads a string, or the first text of an ED-318 style list of
// {text, lang}.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		for _, e := range v {
			if s := text(e); s != "" {
				return s
			}
		}
	case map[string]any:
		if t, ok := obj(v).get("text"); ok {
			return text(t)
		}
		if t, ok := obj(v).get("name"); ok {
			return text(t)
		}
	}
	return ""
}

func parseED269Zone(i int, zv any, ps *problems) (z *Zone, skip bool) {
	o, ok := asObj(zv)
	if !ok {
		ps.add(i, "", "", "a zone must be a JSON object")
		return nil, false
	}
	id := ""
	if v, ok := o.get("identifier"); ok {
		id, _ = v.(string)
		if id == "" {
			if f, isNum := v.(float64); isNum {
				id = strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
	}
	add := func(field, msg string) { ps.add(i, id, field, msg) }
	z = &Zone{ID: id}
	if v, ok := o.get("name"); ok {
		z.Name = text(v)
	}
	rs, _ := o.get("restriction")
	rstr, _ := rs.(string)
	cat, skip, ok := restrictionCategory(rstr)
	if !ok {
		add("restriction", fmt.Sprintf("must be PROHIBITED, REQ_AUTHORISATION, CONDITIONAL or NO_RESTRICTION, not %q", rstr))
		cat = Restricted // reported; keep checkZone from reporting it again
	}
	z.Category, z.Restriction = cat, upperASCII(rstr)
	if a, ok := o.get("zoneAuthority"); ok {
		z.Authority = authorityName(a)
	}
	if v, ok := o.get("clear_buffer_m"); ok {
		f, isNum := v.(float64)
		if !isNum {
			add("clear_buffer_m", "must be a number")
		}
		z.ClearBufferM = f
	}
	if v, ok := o.get("applicability"); ok {
		z.Windows = parseApplicability(v, "applicability", add)
	}
	g, _ := o.get("geometry")
	geoms := list(g)
	if len(geoms) == 0 {
		add("geometry", "required")
	}
	for gi, gv := range geoms {
		v, ok := parseED269Volume(gv, idx("geometry", gi), add)
		if ok {
			z.Volumes = append(z.Volumes, v)
		}
	}
	if skip {
		return z, true
	}
	if len(z.Volumes) == len(geoms) && len(geoms) > 0 {
		checkZone(z, &ed269Names, add)
	}
	return z, false
}

func parseED269Volume(gv any, field string, add func(field, msg string)) (Volume, bool) {
	var v Volume
	g, ok := asObj(gv)
	if !ok {
		add(field, "must be an object")
		return v, false
	}
	scale := 1.0
	if u, ok := g.get("uomDimensions"); ok {
		us, _ := u.(string)
		s, ok := unitScale(us)
		if !ok {
			add(field+".uomDimensions", fmt.Sprintf("must be M, FT or FL, not %v", u))
		}
		scale = s
	}
	v.Floor = ed269Limit(g, "lowerLimit", "lowerVerticalReference", scale, field, add)
	v.Ceiling = ed269Limit(g, "upperLimit", "upperVerticalReference", scale, field, add)
	hp, ok := g.get("horizontalProjection")
	if !ok {
		add(field+".horizontalProjection", "required")
		return v, false
	}
	return v, parseProjection(hp, field+".horizontalProjection", &v, add)
}

func unitScale(u string) (float64, bool) {
	switch upperASCII(u) {
	case "M", "":
		return 1, true
	case "FT":
		return 0.3048, true
	case "FL":
		return 30.48, true // flight levels: hundreds of feet
	}
	return 1, false
}

func ed269Limit(g obj, key, refKey string, scale float64, field string, add func(field, msg string)) *Limit {
	lv, ok := g.get(key)
	if !ok {
		return nil
	}
	f, isNum := lv.(float64)
	if !isNum {
		add(field+"."+key, "must be a number or null")
		return nil
	}
	l := &Limit{M: f * scale, Ref: AMSL}
	if rv, ok := g.get(refKey); ok {
		rs, _ := rv.(string)
		r, ok := ParseRef(rs)
		if upperASCII(rs) == "STD" {
			// Pressure altitude (flight levels): compared as AMSL, which
			// it equals in the standard atmosphere.
			r, ok = AMSL, true
		}
		if !ok {
			add(field+"."+refKey, fmt.Sprintf("must be AGL, AMSL, WGS84 or STD, not %v", rv))
		}
		l.Ref = r
	}
	return l
}

// parseProjection reads an ED-269 horizontal projection: a GeoJSON-like
// Polygon or MultiPolygon, or {"type": "Circle", "center": [lon, lat],
// "radius": m}.
func parseProjection(hv any, field string, v *Volume, add func(field, msg string)) bool {
	h, ok := asObj(hv)
	if !ok {
		add(field, "must be an object")
		return false
	}
	tv, _ := h.get("type")
	t, _ := tv.(string)
	switch upperASCII(t) {
	case "CIRCLE":
		cv, _ := h.get("center")
		c, ok := treePosition(cv, field+".center", add)
		rv, hasR := h.get("radius")
		r, isNum := rv.(float64)
		if !hasR || !isNum {
			add(field+".radius", "must be a number")
			return false
		}
		if !ok {
			return false
		}
		v.Circle = &Circle{Center: c, RadiusM: r}
		return true
	case "POLYGON":
		cv, _ := h.get("coordinates")
		p, ok := treePolygon(cv, field+".coordinates", add)
		if ok {
			v.Area = orb.MultiPolygon{p}
		}
		return ok
	case "MULTIPOLYGON":
		cv, _ := h.get("coordinates")
		l, isList := cv.([]any)
		if !isList || len(l) == 0 {
			add(field+".coordinates", "must be an array of polygons")
			return false
		}
		good := true
		for pi, pv := range l {
			p, ok := treePolygon(pv, idx(field+".coordinates", pi), add)
			good = good && ok
			v.Area = append(v.Area, p)
		}
		return good
	}
	add(field+".type", fmt.Sprintf("must be Polygon, MultiPolygon or Circle, not %q", t))
	return false
}

func treePosition(v any, field string, add func(field, msg string)) (orb.Point, bool) {
	l, ok := v.([]any)
	if !ok {
		add(field, "a position must be an array [lon, lat]")
		return orb.Point{}, false
	}
	c := make([]float64, len(l))
	for i, e := range l {
		f, ok := e.(float64)
		if !ok {
			add(field, "a position must hold numbers")
			return orb.Point{}, false
		}
		c[i] = f
	}
	return position(c, field, add)
}

func treePolygon(v any, field string, add func(field, msg string)) (orb.Polygon, bool) {
	rings, ok := v.([]any)
	if !ok || len(rings) == 0 {
		add(field, "Polygon coordinates must be a non-empty array of rings")
		return nil, false
	}
	p := make(orb.Polygon, len(rings))
	for ri, rv := range rings {
		pts, ok := rv.([]any)
		if !ok {
			add(idx(field, ri), "a ring must be an array of positions")
			return nil, false
		}
		r := make(orb.Ring, len(pts))
		for pi, pv := range pts {
			pt, ok := treePosition(pv, idx(idx(field, ri), pi), add)
			if !ok {
				return nil, false
			}
			r[pi] = pt
		}
		p[ri] = r
	}
	return p, true
}

// parseApplicability reads ED-269 applicability (or ED-318
// limitedApplicability): a list of periods, or one object. A period that is
// permanent and has no bounds or schedule makes the zone always active,
// which is returned as no windows.
func parseApplicability(v any, field string, add func(field, msg string)) []Window {
	var ws []Window
	always := false
	for ai, av := range list(v) {
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
			w.From = treeTime(s, f+".startDateTime", add)
		}
		if s, ok := a.get("endDateTime"); ok {
			w.Until = treeTime(s, f+".endDateTime", add)
		}
		for _, key := range []string{"schedule", "dailyPeriod"} {
			sv, ok := a.get(key)
			if !ok {
				continue
			}
			for si, pv := range list(sv) {
				ivs, ok := parseDailyPeriod(pv, idx(f+"."+key, si), add)
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

func treeTime(v any, field string, add func(field, msg string)) time.Time {
	s, ok := v.(string)
	if !ok {
		add(field, "must be a date-time string")
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		add(field, fmt.Sprintf("must be an RFC 3339 date-time, not %q", s))
		return time.Time{}
	}
	return t
}

var dayIndex = map[string]int{"MON": 0, "TUE": 1, "WED": 2, "THU": 3, "FRI": 4, "SAT": 5, "SUN": 6}

// parseDailyPeriod reads {day: [..], startTime, endTime} into weekly
// intervals in UTC. Days default to every day; a start time defaults to
// 00:00 and an end time to 24:00; an end at or before the start runs into
// the next day; an end of 23:59 or 23:59:59 means the end of the day.
func parseDailyPeriod(v any, field string, add func(field, msg string)) ([]WeeklyInterval, bool) {
	p, ok := asObj(v)
	if !ok {
		add(field, "must be an object")
		return nil, false
	}
	var days []int
	if dv, ok := p.get("day"); ok {
		for _, d := range list(dv) {
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
	start, end := 0, 86400
	if sv, ok := p.get("startTime"); ok {
		s, off, ok := parseTimeOfDay(sv)
		if !ok {
			add(field+".startTime", fmt.Sprintf("must be a time of day like 08:00:00Z, not %v", sv))
			return nil, false
		}
		start = s - off
	}
	if ev, ok := p.get("endTime"); ok {
		e, off, ok := parseTimeOfDay(ev)
		if !ok {
			add(field+".endTime", fmt.Sprintf("must be a time of day like 18:00:00Z, not %v", ev))
			return nil, false
		}
		if e == 86400-1 || e == 86400-60 {
			e = 86400 // 23:59:59 (or 23:59) local means midnight
		}
		end = e - off
	}
	dur := end - start
	if dur <= 0 {
		dur += 86400
	}
	var out []WeeklyInterval
	for _, d := range days {
		s := mod(d*86400+start, week)
		e := s + dur
		if e <= week {
			out = append(out, WeeklyInterval{int32(s), int32(e)})
		} else {
			out = append(out, WeeklyInterval{int32(s), week}, WeeklyInterval{0, int32(e - week)})
		}
	}
	return out, true
}

func mod(a, m int) int {
	a %= m
	if a < 0 {
		a += m
	}
	return a
}

// parseTimeOfDay reads HH:MM[:SS[.frac]][Z|±HH:MM] into seconds since
// local midnight and the offset from UTC in seconds.
func parseTimeOfDay(v any) (t, off int, ok bool) {
	s, isStr := v.(string)
	if !isStr || len(s) < 5 {
		return 0, 0, false
	}
	switch {
	case strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "z"):
		s = s[:len(s)-1]
	case len(s) > 6 && (s[len(s)-6] == '+' || s[len(s)-6] == '-') && s[len(s)-3] == ':':
		oh, err1 := strconv.Atoi(s[len(s)-5 : len(s)-3])
		om, err2 := strconv.Atoi(s[len(s)-2:])
		if err1 != nil || err2 != nil || oh > 14 || om > 59 {
			return 0, 0, false
		}
		off = oh*3600 + om*60
		if s[len(s)-6] == '-' {
			off = -off
		}
		s = s[:len(s)-6]
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, false
	}
	h, err := strconv.Atoi(parts[0])
	if err != nil || h < 0 || h > 24 || len(parts[0]) != 2 {
		return 0, 0, false
	}
	m, err := strconv.Atoi(parts[1])
	if err != nil || m < 0 || m > 59 || len(parts[1]) != 2 {
		return 0, 0, false
	}
	sec := 0.0
	if len(parts) == 3 {
		sec, err = strconv.ParseFloat(parts[2], 64)
		if err != nil || sec < 0 || sec >= 60 || len(parts[2]) < 2 || parts[2][0] == '+' || parts[2][0] == '-' {
			return 0, 0, false
		}
	}
	t = h*3600 + m*60 + int(math.Floor(sec))
	if t > 86400 {
		return 0, 0, false
	}
	return t, off, true
}
