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
	set, err := parseED269Tree(root, &problems{})
	if set != nil {
		set.Report.Format = FormatED269
	}
	return set, err
}

// decodeTree reads a whole zone file and decodes it into a generic JSON
// tree, which the ED-269 and ED-318 parsers and format detection walk.
func decodeTree(r io.Reader) ([]byte, any, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, nil, err
	}
	b = skipBOM(b)
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

func parseED269Tree(root any, ps *problems) (*ZoneSet, error) {
	zones, listKey, err := ed269Zones(root)
	if err != nil {
		return nil, err
	}
	set := &ZoneSet{Zones: make([]*Zone, 0, len(zones))}
	seen := make(map[string]int, len(zones))
	for i, zv := range zones {
		z, skip := parseED269Zone(i, zv, ps)
		if z == nil {
			continue
		}
		if skip {
			ps.drop(i, z.ID, DropNoRestriction)
			continue
		}
		checkUnique(seen, i, z.ID, "identifier", ps)
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
	finish(set, version, ps)
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
	f := &feat{ps: ps, i: i, id: id}
	add := f.add
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
		z.ClearBufferM, _ = treeNum(v, "clear_buffer_m", f)
	}
	if v, ok := o.get("applicability"); ok {
		z.Windows = parseApplicability(v, "applicability", f)
	}
	g, _ := o.get("geometry")
	geoms := list(g)
	if len(geoms) == 0 {
		add("geometry", "required")
	}
	for gi, gv := range geoms {
		v, ok := parseED269Volume(gv, idx("geometry", gi), f)
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
	checkPast(z, "applicability", f)
	return z, false
}

var ed269Limits = limitKeys{format: "ED-269", uom: "uomDimensions", lower: "lowerLimit", lowerRef: "lowerVerticalReference",
	upper: "upperLimit", upperRef: "upperVerticalReference", units: "M, FT or FL"}

func parseED269Volume(gv any, field string, f *feat) (Volume, bool) {
	var v Volume
	g, ok := asObj(gv)
	if !ok {
		f.add(field, "must be an object")
		return v, false
	}
	v.Floor, v.Ceiling = readLimits(g, ed269Limits, field+".", f)
	hp, ok := g.get("horizontalProjection")
	if !ok {
		f.add(field+".horizontalProjection", "required")
		return v, false
	}
	return v, parseProjection(hp, field+".horizontalProjection", &v, f)
}

// parseProjection reads an ED-269 horizontal projection: a GeoJSON-like
// Polygon or MultiPolygon, or {"type": "Circle", "center": [lon, lat],
// "radius": m}.
func parseProjection(hv any, field string, v *Volume, f *feat) bool {
	add := f.add
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
		if !hasR {
			add(field+".radius", "required for a Circle")
			return false
		}
		r, isNum := treeNum(rv, field+".radius", f)
		if !isNum {
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
func parseApplicability(v any, field string, fe *feat) []Window {
	add := fe.add
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
			for si, pv := range list(sv) {
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

func treeTime(v any, end bool, field string, f *feat) time.Time {
	s, ok := v.(string)
	if !ok {
		f.add(field, "must be a date-time string")
		return time.Time{}
	}
	t, _ := dateTime(s, end, field, f)
	return t
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
