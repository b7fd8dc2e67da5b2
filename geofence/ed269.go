package geofence

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

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

// authorityName is the name of the first entry of a zoneAuthority list
// (ED-269 and ED-318 alike) that has one.
func authorityName(a any) string {
	for _, e := range asList(a) {
		if ao, ok := asObj(e); ok {
			if n, ok := ao.get("name"); ok {
				return treeText(n)
			}
		}
	}
	return ""
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
		z.Name = treeText(v)
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
	geoms := asList(g)
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
	return v, parseED269Projection(hp, field+".horizontalProjection", &v, f)
}

// parseED269Projection reads an ED-269 horizontal projection: a GeoJSON-like
// Polygon or MultiPolygon, or {"type": "Circle", "center": [lon, lat],
// "radius": m}.
func parseED269Projection(hv any, field string, v *Volume, f *feat) bool {
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
