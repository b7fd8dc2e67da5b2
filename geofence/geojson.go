package geofence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/paulmach/orb"
)

// maxFileSize bounds what a parser reads: a zone file is at most this big.
const maxFileSize = 256 << 20

func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("zone file larger than %d bytes", maxFileSize)
	}
	if err := CheckText(b); err != nil {
		return nil, err
	}
	return b, nil
}

// fileProblem wraps a whole-file error (bad JSON, wrong layout).
func fileProblem(field, msg string) error {
	return &ValidationError{Problems: []Problem{{Field: field, Msg: msg}}}
}

func jsonMsg(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case asErr(err, &te):
		f := te.Field
		if f == "" {
			return fmt.Sprintf("expected %v, found JSON %s", te.Type, te.Value)
		}
		return fmt.Sprintf("%s: expected %v, found JSON %s", f, te.Type, te.Value)
	}
	return err.Error()
}

// ParseGeoJSON reads a GeoJSON FeatureCollection of zones as described in
// docs/design.md (see the package doc). The set is returned whole, or not at all
// with a *ValidationError listing every problem.
func ParseGeoJSON(r io.Reader) (*ZoneSet, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, err
	}
	set, err := parseGeoJSON(skipBOM(b), &problems{})
	if set != nil {
		set.Report.Format = FormatGeoJSON
	}
	return set, err
}

type geoFC struct {
	Type     string            `json:"type"`
	Version  json.RawMessage   `json:"version"`
	Features []json.RawMessage `json:"features"`
}

type geoFeature struct {
	Type       string                     `json:"type"`
	ID         json.RawMessage            `json:"id"`
	Geometry   *geoGeometry               `json:"geometry"`
	Properties map[string]json.RawMessage `json:"properties"`
}

type geoGeometry struct {
	Type        string            `json:"type"`
	Coordinates json.RawMessage   `json:"coordinates"`
	Geometries  []json.RawMessage `json:"geometries"`
	Extent      json.RawMessage   `json:"extent"` // ED-318
	Layer       json.RawMessage   `json:"layer"`  // ED-318
}

func parseGeoJSON(b []byte, ps *problems) (*ZoneSet, error) {
	var fc geoFC
	if err := json.Unmarshal(b, &fc); err != nil {
		return nil, fileProblem("", jsonMsg(err))
	}
	if fc.Type != "FeatureCollection" {
		return nil, fileProblem("type", fmt.Sprintf("must be \"FeatureCollection\", not %q", fc.Type))
	}
	if fc.Features == nil {
		// Missing or null, not an empty array: a misspelt member must not
		// load as a set without zones.
		return nil, fileProblem("features", "required (an array, possibly empty)")
	}
	set := &ZoneSet{Zones: make([]*Zone, 0, len(fc.Features))}
	seen := make(map[string]int, len(fc.Features))
	for i, raw := range fc.Features {
		z := parseGeoFeature(i, raw, ps)
		if z == nil {
			continue
		}
		checkUnique(seen, i, z.ID, "properties.id", ps)
		set.Zones = append(set.Zones, z)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	finish(set, fc.Version, ps)
	return set, nil
}

var geoNames = fieldNames{
	id:       "properties.id",
	category: "properties.category",
	ring: func(v, p, r int) string {
		return idx(idx("geometry.coordinates", p), r)
	},
	center:   func(int) string { return "geometry.coordinates" },
	radius:   func(int) string { return "properties.radius_m" },
	floor:    func(int) string { return "properties.floor_m" },
	ceiling:  func(int) string { return "properties.ceiling_m" },
	buffer:   "properties.clear_buffer_m",
	approach: "properties.approach_before_s",
	from:     "properties.active_from",
	until:    "properties.active_until",
}

// geoProps are the properties of docs/design.md's GeoJSON zones.
var geoProps = map[string]bool{
	"id": true, "name": true, "category": true, "floor_m": true, "ceiling_m": true, "floor_ref": true, "ceiling_ref": true,
	"active_from": true, "active_until": true, "clear_buffer_m": true, "radius_m": true,
	"approach_before_s": true,
}

// geoAliases maps the names other published formats give our properties:
// Flight Blender's geofences (openutm/flight-blender: GeoJSON properties
// name, upper_limit, lower_limit in metres without a reference,
// start_time, end_time; no id).
var geoAliases = map[string]string{
	"upper_limit": "ceiling_m",
	"lower_limit": "floor_m",
	"start_time":  "active_from",
	"end_time":    "active_until",
}

func parseGeoFeature(i int, raw json.RawMessage, ps *problems) *Zone {
	var f geoFeature
	if err := json.Unmarshal(raw, &f); err != nil {
		ps.add(i, "", "", jsonMsg(err))
		return nil
	}
	pr := props{m: f.Properties, prefix: "properties."}
	id, _ := pr.str("id")
	if id == "" && len(f.ID) > 0 {
		var s string
		if json.Unmarshal(f.ID, &s) == nil {
			id = s
		}
	}
	fe := &feat{ps: ps, i: i, id: id}
	pr.add, pr.warn = fe.add, fe.warn
	pr.resolveAliases(ps.opt.Strict)
	if id == "" && len(pr.aliased) > 0 {
		// Flight Blender's geofences have a name and no id.
		if name, ok := pr.str("name"); ok && name != "" {
			id = name
			fe.id = id
			fe.warn("properties.id", "missing; the feature uses Flight Blender's properties, so its name is its id")
		}
	}
	add := fe.add
	if f.Type != "Feature" {
		add("type", fmt.Sprintf("must be \"Feature\", not %q", f.Type))
	}
	z := &Zone{ID: id, Category: Restricted}
	z.Name, _ = pr.str("name")
	if c, ok := pr.str("category"); ok {
		z.Category = Category(strings.ToLower(c))
	}
	var v Volume
	v.Floor = pr.limit("floor_m", "floor_ref", fe)
	v.Ceiling = pr.limit("ceiling_m", "ceiling_ref", fe)
	z.ClearBufferM, _ = pr.num("clear_buffer_m")
	z.ApproachBefore = pr.seconds("approach_before_s", MaxApproachBefore)
	z.ActiveFrom, _ = pr.time("active_from", false, fe)
	z.ActiveUntil, _ = pr.time("active_until", true, fe)
	radius, hasRadius := pr.num("radius_m")

	n := geoNames
	switch {
	case f.Geometry == nil:
		add("geometry", "required")
	case f.Geometry.Type == "Point":
		c, ok := parsePosition(f.Geometry.Coordinates, "geometry.coordinates", add)
		if !hasRadius {
			add("properties.radius_m", "required for a Point geometry (a circle)")
		} else if ok {
			v.Circle = &Circle{Center: c, RadiusM: radius}
		}
	case f.Geometry.Type == "Polygon":
		if hasRadius {
			add("properties.radius_m", "only allowed with a Point geometry")
		}
		if p, ok := parsePolygon(f.Geometry.Coordinates, "geometry.coordinates", add); ok {
			v.Area = orb.MultiPolygon{p}
			n.ring = func(_, _, r int) string { return idx("geometry.coordinates", r) }
		}
	case f.Geometry.Type == "MultiPolygon":
		if hasRadius {
			add("properties.radius_m", "only allowed with a Point geometry")
		}
		if mp, ok := parseMultiPolygon(f.Geometry.Coordinates, "geometry.coordinates", add); ok {
			v.Area = mp
		}
	default:
		add("geometry.type", fmt.Sprintf("must be Polygon, MultiPolygon or Point (with radius_m), not %q", f.Geometry.Type))
	}
	if v.Circle == nil && len(v.Area) == 0 {
		// Geometry problems were reported above; still check the rest.
		z.Volumes = nil
		checkZoneNoGeometry(z, v, &n, add)
		return z
	}
	z.Volumes = []Volume{v}
	checkZone(z, &n, add)
	checkPast(z, "properties.active_until", fe)
	return z
}

// checkZoneNoGeometry checks the non-geometry fields of a zone whose
// geometry could not be read.
func checkZoneNoGeometry(z *Zone, v Volume, n *fieldNames, add func(field, msg string)) {
	v.Circle = &Circle{Center: orb.Point{0, 0}, RadiusM: 1}
	z.Volumes = []Volume{v}
	checkZone(z, n, add)
	z.Volumes = nil
}

// props reads typed values out of a JSON object, reporting problems.
type props struct {
	m         map[string]json.RawMessage
	prefix    string
	add, warn func(field, msg string)
	// aliased maps a property read under another format's name to that
	// name, which problems then use.
	aliased map[string]string
}

// name is the property's name as the file spells it.
func (p props) name(key string) string {
	if a, ok := p.aliased[key]; ok {
		return p.prefix + a
	}
	return p.prefix + key
}

func (p props) report(key, msg string) {
	if p.add != nil {
		p.add(p.name(key), msg)
	}
}

func (p props) warning(key, msg string) {
	if p.warn != nil {
		p.warn(p.name(key), msg)
	}
}

// resolveAliases renames aliased properties to ours and reports unknown
// ones: warnings, or errors when strict.
func (p *props) resolveAliases(strict bool) {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if geoProps[k] {
			continue
		}
		if ours, ok := geoAliases[k]; ok {
			if _, both := p.m[ours]; both {
				p.add(p.prefix+k, fmt.Sprintf("Flight Blender's name for %s%s, which is given too: which one holds?", p.prefix, ours))
				continue
			}
			if p.aliased == nil {
				p.aliased = make(map[string]string, 4)
			}
			p.m[ours] = p.m[k]
			delete(p.m, k)
			p.aliased[ours] = k
			p.warn(p.prefix+k, fmt.Sprintf("read as %s%s (Flight Blender's name)", p.prefix, ours))
			continue
		}
		msg := "unknown property"
		if strict {
			p.add(p.prefix+k, msg+fmt.Sprintf(" (known: %s)", knownProps()))
			continue
		}
		p.warn(p.prefix+k, msg+", ignored: a misspelt limit, reference or time would be lost with it")
	}
}

func knownProps() string {
	ks := make([]string, 0, len(geoProps))
	for k := range geoProps {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func isNull(b json.RawMessage) bool { return len(b) == 0 || string(bytes.TrimSpace(b)) == "null" }

func (p props) str(key string) (string, bool) {
	b, ok := p.m[key]
	if !ok || isNull(b) {
		return "", false
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		p.report(key, "must be a string")
		return "", false
	}
	return s, true
}

func (p props) num(key string) (float64, bool) {
	b, ok := p.m[key]
	if !ok || isNull(b) {
		return 0, false
	}
	var v float64
	if err := json.Unmarshal(b, &v); err == nil {
		return v, true
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		if v, ok := numString(s); ok {
			p.warning(key, fmt.Sprintf("a number written as a string (%q), read as %v", s, v))
			return v, true
		}
	}
	p.report(key, "must be a number")
	return 0, false
}

// seconds reads a duration in seconds, > 0 and <= most; absent or null is
// 0 (unset). An explicit 0 is refused like any value out of range: a file
// wanting the default leaves the property out.
func (p props) seconds(key string, most time.Duration) time.Duration {
	v, ok := p.num(key)
	if !ok {
		return 0
	}
	d := time.Duration(math.Round(v * float64(time.Second)))
	if !(v > 0) || d <= 0 || v > most.Seconds() {
		p.report(key, fmt.Sprintf("must be a number of seconds > 0 and <= %v, not %v", most.Seconds(), v))
		return 0
	}
	return d
}

func (p props) time(key string, end bool, f *feat) (time.Time, bool) {
	s, ok := p.str(key)
	if !ok {
		return time.Time{}, false
	}
	return dateTime(s, end, p.name(key), f)
}

// limit reads floor_m or ceiling_m with its reference: AMSL when none is
// given (docs/design.md's default) — except for a limit under another format's
// name, whose format defines no reference: that one is refused, or with
// Loader.Conservative read in an unknown reference (see the package doc).
func (p props) limit(key, refKey string, f *feat) *Limit {
	v, ok := p.num(key)
	rs, hasRef := p.str(refKey)
	ref := AMSL
	if hasRef {
		r, ok := ParseRef(rs)
		if !ok {
			p.report(refKey, fmt.Sprintf("must be AMSL, AGL or WGS84, not %q", rs))
		}
		ref = r
	}
	if !ok {
		if hasRef {
			p.report(refKey, "given without "+p.prefix+key)
		}
		return nil
	}
	if _, foreign := p.aliased[key]; foreign && !hasRef {
		if !f.conservative() {
			p.report(key, fmt.Sprintf("has no vertical reference (Flight Blender's format gives none): add %s%s (AMSL, AGL or WGS84), or load conservatively to count it met in any reference", p.prefix, refKey))
			return nil
		}
		p.warning(key, fmt.Sprintf("has no vertical reference (Flight Blender's format gives none); read conservatively: met when it is met in any reference the position has a height in, or the position lacks one (add %s%s to say which)", p.prefix, refKey))
		ref = RefUnknown
	}
	return &Limit{M: v, Ref: ref}
}

// parsePosition reads [lon, lat(, alt)].
func parsePosition(b json.RawMessage, field string, add func(field, msg string)) (orb.Point, bool) {
	var c []float64
	if err := json.Unmarshal(b, &c); err != nil {
		add(field, "a position must be an array of numbers [lon, lat]")
		return orb.Point{}, false
	}
	return position(c, field, add)
}

func position(c []float64, field string, add func(field, msg string)) (orb.Point, bool) {
	if len(c) < 2 || len(c) > 3 {
		add(field, fmt.Sprintf("a position has 2 or 3 numbers, not %d", len(c)))
		return orb.Point{}, false
	}
	return orb.Point{c[0], c[1]}, true
}

func parsePolygon(b json.RawMessage, field string, add func(field, msg string)) (orb.Polygon, bool) {
	var c [][][]float64
	if err := json.Unmarshal(b, &c); err != nil {
		add(field, "Polygon coordinates must be an array of rings of [lon, lat] positions")
		return nil, false
	}
	return polygon(c, field, add)
}

func polygon(c [][][]float64, field string, add func(field, msg string)) (orb.Polygon, bool) {
	if len(c) == 0 {
		add(field, "polygon has no ring")
		return nil, false
	}
	p := make(orb.Polygon, len(c))
	ok := true
	for ri, rc := range c {
		r := make(orb.Ring, len(rc))
		for pi, pc := range rc {
			pt, good := position(pc, idx(idx(field, ri), pi), add)
			if !good {
				ok = false
				break
			}
			r[pi] = pt
		}
		p[ri] = r
	}
	return p, ok
}

func parseMultiPolygon(b json.RawMessage, field string, add func(field, msg string)) (orb.MultiPolygon, bool) {
	var c [][][][]float64
	if err := json.Unmarshal(b, &c); err != nil {
		add(field, "MultiPolygon coordinates must be an array of polygons")
		return nil, false
	}
	if len(c) == 0 {
		add(field, "MultiPolygon has no polygon")
		return nil, false
	}
	mp := make(orb.MultiPolygon, len(c))
	ok := true
	for i, pc := range c {
		p, good := polygon(pc, idx(field, i), add)
		ok = ok && good
		mp[i] = p
	}
	return mp, ok
}
