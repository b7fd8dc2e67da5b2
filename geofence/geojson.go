package geofence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
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
	return b, nil
}

// fileProblem wraps a whole-file error (bad JSON, wrong layout).
func fileProblem(field, msg string) error {
	return &ValidationError{Problems: []Problem{{Feature: -1, Field: field, Msg: msg}}}
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
// DESIGN.md (see the package doc). The set is returned whole, or not at all
// with a *ValidationError listing every problem.
func ParseGeoJSON(r io.Reader) (*ZoneSet, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, err
	}
	return parseGeoJSON(b)
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

func parseGeoJSON(b []byte) (*ZoneSet, error) {
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
	var ps problems
	set := &ZoneSet{Zones: make([]*Zone, 0, len(fc.Features))}
	seen := make(map[string]int, len(fc.Features))
	for i, raw := range fc.Features {
		z := parseGeoFeature(i, raw, &ps)
		if z == nil {
			continue
		}
		checkUnique(seen, i, z.ID, "properties.id", &ps)
		set.Zones = append(set.Zones, z)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	finish(set, fc.Version)
	return set, nil
}

// finish sets fingerprints and the version.
func finish(set *ZoneSet, version json.RawMessage) {
	for _, z := range set.Zones {
		z.Fingerprint = z.ComputeFingerprint()
	}
	var v any
	if len(version) > 0 && json.Unmarshal(version, &v) == nil {
		switch v := v.(type) {
		case string:
			set.Version = v
		case float64:
			set.Version = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	if set.Version == "" {
		set.Version = contentVersion(set.Zones)
	}
}

var geoNames = fieldNames{
	id:       "properties.id",
	category: "properties.category",
	ring: func(v, p, r int) string {
		return idx(idx("geometry.coordinates", p), r)
	},
	center:  func(int) string { return "geometry.coordinates" },
	radius:  func(int) string { return "properties.radius_m" },
	floor:   func(int) string { return "properties.floor_m" },
	ceiling: func(int) string { return "properties.ceiling_m" },
	buffer:  "properties.clear_buffer_m",
	from:    "properties.active_from",
	until:   "properties.active_until",
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
	add := func(field, msg string) { ps.add(i, id, field, msg) }
	pr.add = add
	if f.Type != "Feature" {
		add("type", fmt.Sprintf("must be \"Feature\", not %q", f.Type))
	}
	z := &Zone{ID: id, Category: Restricted}
	z.Name, _ = pr.str("name")
	if c, ok := pr.str("category"); ok {
		z.Category = Category(strings.ToLower(c))
	}
	var v Volume
	v.Floor = pr.limit("floor_m", "floor_ref")
	v.Ceiling = pr.limit("ceiling_m", "ceiling_ref")
	z.ClearBufferM, _ = pr.num("clear_buffer_m")
	z.ActiveFrom, _ = pr.time("active_from")
	z.ActiveUntil, _ = pr.time("active_until")
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
	m      map[string]json.RawMessage
	prefix string
	add    func(field, msg string)
}

func (p props) report(field, msg string) {
	if p.add != nil {
		p.add(p.prefix+field, msg)
	}
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
	if err := json.Unmarshal(b, &v); err != nil {
		p.report(key, "must be a number")
		return 0, false
	}
	return v, true
}

func (p props) time(key string) (time.Time, bool) {
	s, ok := p.str(key)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.report(key, fmt.Sprintf("must be an RFC 3339 time, not %q", s))
		return time.Time{}, false
	}
	return t, true
}

func (p props) limit(key, refKey string) *Limit {
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
