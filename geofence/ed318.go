package geofence

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/paulmach/orb"
)

// ParseED318 reads UAS geographical zones in EUROCAE ED-318's GeoJSON
// encoding: a FeatureCollection whose geometries carry a "layer" (vertical
// limits) and whose circles are a Point with an "extent". The set is
// returned whole, or not at all with a *ValidationError listing every
// problem.
func ParseED318(r io.Reader) (*ZoneSet, error) {
	_, root, err := decodeTree(r)
	if err != nil {
		return nil, err
	}
	set, err := parseED318Tree(root, &problems{})
	if set != nil {
		set.Report.Format = FormatED318
	}
	return set, err
}

func parseED318Tree(root any, ps *problems) (*ZoneSet, error) {
	o, ok := asObj(root)
	if !ok {
		return nil, fileProblem("", "an ED-318 file is a GeoJSON FeatureCollection object")
	}
	if t, _ := o.get("type"); t != "FeatureCollection" {
		ps.add(-1, "", "type", fmt.Sprintf("must be \"FeatureCollection\", not %v", t))
	}
	if mv, ok := o.get("metadata"); ok {
		m, isObj := asObj(mv)
		if !isObj {
			ps.add(-1, "", "metadata", "must be an object")
		}
		for _, k := range []string{"validFrom", "validTo", "issued"} {
			if v, ok := m.get(k); ok {
				s, isStr := v.(string)
				if !isStr {
					ps.add(-1, "", "metadata."+k, fmt.Sprintf("must be a date-time string, found %s", jsonKind(v)))
					continue
				}
				if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
					ps.add(-1, "", "metadata."+k, fmt.Sprintf("must be an RFC 3339 date-time, not %q", s))
				}
			}
		}
	}
	fv, _ := o.get("features")
	features, isList := fv.([]any)
	if !isList {
		ps.add(-1, "", "features", "must be an array")
	}
	set := &ZoneSet{Zones: make([]*Zone, 0, len(features))}
	seen := make(map[string]int, len(features))
	for i, f := range features {
		z, skip := parseED318Feature(i, f, ps)
		if z == nil {
			continue
		}
		if skip {
			ps.drop(i, z.ID, DropNoRestriction)
			continue
		}
		checkUnique(seen, i, z.ID, "properties.identifier", ps)
		set.Zones = append(set.Zones, z)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	var version json.RawMessage
	if v, ok := o.get("version"); ok {
		version, _ = json.Marshal(v)
	}
	finish(set, version, ps)
	return set, nil
}

func parseED318Feature(i int, fv any, ps *problems) (z *Zone, skip bool) {
	f, ok := asObj(fv)
	if !ok {
		ps.add(i, "", "", "a feature must be a JSON object")
		return nil, false
	}
	pv, _ := f.get("properties")
	p, _ := asObj(pv)
	id := ""
	if v, ok := p.get("identifier"); ok {
		id, _ = v.(string)
	}
	fe := &feat{ps: ps, i: i, id: id}
	add := fe.add
	if t, _ := f.get("type"); t != "Feature" {
		add("type", fmt.Sprintf("must be \"Feature\", not %v", t))
	}
	if p == nil {
		add("properties", "required")
		return nil, false
	}
	z = &Zone{ID: id}
	if v, ok := p.get("name"); ok {
		z.Name = treeText(v)
	}
	tv, _ := p.get("type")
	ts, _ := tv.(string)
	cat, skip, ok := restrictionCategory(ts)
	if !ok {
		add("properties.type", fmt.Sprintf("must be PROHIBITED, REQ_AUTHORIZATION, CONDITIONAL or NO_RESTRICTION, not %q", ts))
		cat = Restricted
	}
	z.Category, z.Restriction = cat, upperASCII(ts)
	if a, ok := p.get("zoneAuthority"); ok {
		z.Authority = authorityName(a)
	}
	if v, ok := p.get("limitedApplicability"); ok {
		z.Windows = parseApplicability(v, "properties.limitedApplicability", fe)
	}
	if v, ok := p.get("clear_buffer_m"); ok {
		z.ClearBufferM, _ = treeNum(v, "properties.clear_buffer_m", fe)
	}
	gv, _ := f.get("geometry")
	g, isObj := asObj(gv)
	if !isObj {
		add("geometry", "required")
		return z, skip
	}
	var paths []string
	good := true
	gt, _ := g.get("type")
	if gt == "GeometryCollection" {
		gs, _ := g.get("geometries")
		l, _ := gs.([]any)
		if len(l) == 0 {
			add("geometry.geometries", "must be a non-empty array")
			good = false
		}
		for gi, e := range l {
			path := idx("geometry.geometries", gi)
			eo, isObj := asObj(e)
			if !isObj {
				add(path, "must be an object")
				good = false
				continue
			}
			v, ok := parseED318Geometry(eo, p, path, fe)
			good = good && ok
			z.Volumes = append(z.Volumes, v)
			paths = append(paths, path)
		}
	} else {
		v, ok := parseED318Geometry(g, p, "geometry", fe)
		good = ok
		z.Volumes = append(z.Volumes, v)
		paths = append(paths, "geometry")
	}
	if skip || !good {
		return z, skip
	}
	n := fieldNames{
		id:       "properties.identifier",
		category: "properties.type",
		ring: func(v, pi, r int) string {
			if len(z.Volumes[v].Area) == 1 {
				return idx(paths[v]+".coordinates", r)
			}
			return idx(idx(paths[v]+".coordinates", pi), r)
		},
		center:  func(v int) string { return paths[v] + ".coordinates" },
		radius:  func(v int) string { return paths[v] + ".extent.radius" },
		floor:   func(v int) string { return paths[v] + ".layer.lower" },
		ceiling: func(v int) string { return paths[v] + ".layer.upper" },
		buffer:  "properties.clear_buffer_m",
		from:    "properties.limitedApplicability",
		until:   "properties.limitedApplicability",
	}
	checkZone(z, &n, add)
	checkPast(z, "properties.limitedApplicability", fe)
	return z, false
}

var ed318Limits = limitKeys{format: "ED-318", uom: "uom", lower: "lower", lowerRef: "lowerReference",
	upper: "upper", upperRef: "upperReference", units: "m, ft or FL"}

// parseED318Geometry reads one geometry with its layer (or the feature's).
func parseED318Geometry(g obj, props obj, path string, f *feat) (Volume, bool) {
	add := f.add
	var v Volume
	lv, ok := g.get("layer")
	lpath := path + ".layer"
	if !ok {
		lv, ok = props.get("layer")
		lpath = "properties.layer"
	}
	if ok {
		l, isObj := asObj(lv)
		if !isObj {
			add(lpath, "must be an object")
			return v, false
		}
		v.Floor, v.Ceiling = readLimits(l, ed318Limits, lpath+".", f)
	}
	tv, _ := g.get("type")
	t, _ := tv.(string)
	cv, _ := g.get("coordinates")
	switch t {
	case "Point":
		ev, _ := g.get("extent")
		e, isObj := asObj(ev)
		if !isObj {
			add(path+".extent", "a Point zone needs an extent (a circle)")
			return v, false
		}
		if st, _ := e.get("subType"); st != "Circle" {
			add(path+".extent.subType", fmt.Sprintf("must be \"Circle\", not %v", st))
			return v, false
		}
		rv, _ := e.get("radius")
		r, isNum := treeNum(rv, path+".extent.radius", f)
		if !isNum {
			return v, false
		}
		c, ok := treePosition(cv, path+".coordinates", add)
		if !ok {
			return v, false
		}
		v.Circle = &Circle{Center: c, RadiusM: r}
		return v, true
	case "Polygon":
		p, ok := treePolygon(cv, path+".coordinates", add)
		if ok {
			v.Area = orb.MultiPolygon{p}
		}
		return v, ok
	case "MultiPolygon":
		l, isList := cv.([]any)
		if !isList || len(l) == 0 {
			add(path+".coordinates", "must be an array of polygons")
			return v, false
		}
		good := true
		for pi, pv := range l {
			p, ok := treePolygon(pv, idx(path+".coordinates", pi), add)
			good = good && ok
			v.Area = append(v.Area, p)
		}
		return v, good
	}
	add(path+".type", fmt.Sprintf("must be Polygon, MultiPolygon, Point (with extent) or GeometryCollection, not %q", t))
	return v, false
}
