package geofence

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/paulmach/orb"
)

// fieldNames names a zone's fields the way its file format spells them, so
// that a problem points at the right place.
type fieldNames struct {
	id       string
	category string
	ring     func(v, p, r int) string // ring r of polygon p of volume v
	center   func(v int) string
	radius   func(v int) string
	floor    func(v int) string
	ceiling  func(v int) string
	buffer   string
	approach string
	from     string
	until    string
}

func idx(s string, i int) string { return s + "[" + strconv.Itoa(i) + "]" }

// genericNames names fields after the Zone struct, for zone sets built in
// code.
var genericNames = fieldNames{
	id:       "ID",
	category: "Category",
	ring: func(v, p, r int) string {
		return idx(idx(idx("Volumes", v)+".Area", p), r)
	},
	center:   func(v int) string { return idx("Volumes", v) + ".Circle.Center" },
	radius:   func(v int) string { return idx("Volumes", v) + ".Circle.RadiusM" },
	floor:    func(v int) string { return idx("Volumes", v) + ".Floor" },
	ceiling:  func(v int) string { return idx("Volumes", v) + ".Ceiling" },
	buffer:   "ClearBufferM",
	approach: "ApproachBefore",
	from:     "ActiveFrom",
	until:    "ActiveUntil",
}

// checkZone adds a problem for everything wrong with z.
func checkZone(z *Zone, n *fieldNames, add func(field, msg string)) {
	if msg := CheckID(z.ID); msg != "" {
		add(n.id, msg)
	}
	if z.Category != Restricted && z.Category != Warning {
		add(n.category, fmt.Sprintf("must be %q or %q, not %q", Restricted, Warning, z.Category))
	}
	if len(z.Volumes) == 0 {
		add("geometry", "zone has no area")
	}
	for vi := range z.Volumes {
		v := &z.Volumes[vi]
		switch {
		case v.Circle != nil && len(v.Area) > 0:
			add(n.radius(vi), "a volume is either a circle or polygons, not both")
		case v.Circle != nil:
			checkPosition(v.Circle.Center, n.center(vi), add)
			if !finite(v.Circle.RadiusM) || v.Circle.RadiusM <= 0 {
				add(n.radius(vi), fmt.Sprintf("must be a number > 0, not %v", v.Circle.RadiusM))
			} else if v.Circle.RadiusM > 5000e3 {
				add(n.radius(vi), fmt.Sprintf("%v m is larger than 5000 km", v.Circle.RadiusM))
			}
		case len(v.Area) == 0:
			add(n.ring(vi, 0, 0), "no polygon")
		default:
			for pi, poly := range v.Area {
				checkPolygon(poly, func(r int) string { return n.ring(vi, pi, r) }, add)
			}
		}
		checkLimit(v.Floor, n.floor(vi), add)
		checkLimit(v.Ceiling, n.ceiling(vi), add)
		if v.Floor != nil && v.Ceiling != nil && finite(v.Floor.M) && finite(v.Ceiling.M) &&
			v.Floor.Ref == v.Ceiling.Ref && v.Floor.Ref != RefUnknown && !(v.Floor.M < v.Ceiling.M) {
			add(n.floor(vi), fmt.Sprintf("must be below %s (%v >= %v %s)", n.ceiling(vi), v.Floor.M, v.Ceiling.M, v.Ceiling.Ref))
		}
	}
	if !finite(z.ClearBufferM) || z.ClearBufferM < 0 {
		add(n.buffer, fmt.Sprintf("must be a number >= 0, not %v", z.ClearBufferM))
	}
	if z.ApproachBefore < 0 || z.ApproachBefore > MaxApproachBefore {
		add(n.approach, fmt.Sprintf("must be > 0 and <= %v (0: unset), not %v", MaxApproachBefore, z.ApproachBefore))
	}
	if !z.ActiveFrom.IsZero() && !z.ActiveUntil.IsZero() && !z.ActiveFrom.Before(z.ActiveUntil) {
		add(n.from, "must be before "+n.until)
	}
	for wi, w := range z.Windows {
		if !w.From.IsZero() && !w.Until.IsZero() && !w.From.Before(w.Until) {
			add(idx("applicability", wi), "start must be before end")
		}
		for _, iv := range w.Weekly {
			if iv.Start < 0 || iv.End > week || iv.Start >= iv.End {
				add(idx("applicability", wi), fmt.Sprintf("bad weekly interval [%d, %d)", iv.Start, iv.End))
			}
		}
	}
}

func checkPosition(p orb.Point, field string, add func(field, msg string)) bool {
	if msg := positionProblem(p); msg != "" {
		add(field, msg)
		return false
	}
	return true
}

// positionProblem returns what is wrong with a position, or "".
func positionProblem(p orb.Point) string {
	lon, lat := p[0], p[1]
	switch {
	case !finite(lon) || !finite(lat):
		return fmt.Sprintf("coordinate is not a finite number: [%v, %v]", lon, lat)
	case lat < -90 || lat > 90:
		return fmt.Sprintf("latitude %v out of range [-90, 90] (positions are [lon, lat])", lat)
	case lon < -180 || lon > 180:
		return fmt.Sprintf("longitude %v out of range [-180, 180]", lon)
	}
	return ""
}

// distinct counts the distinct positions of a closed ring (up to 3).
func distinct(r orb.Ring) int {
	var buf [3]orb.Point
	seen := buf[:0]
	for _, p := range r {
		if !slices.Contains(seen, p) {
			seen = append(seen, p)
			if len(seen) == 3 {
				break
			}
		}
	}
	return len(seen)
}

func checkLimit(l *Limit, field string, add func(field, msg string)) {
	if l == nil {
		return
	}
	if !finite(l.M) {
		add(field, fmt.Sprintf("must be a finite number, not %v", l.M))
	}
	if l.Ref > RefUnknown {
		add(field, "unknown vertical reference")
	}
}

func checkPolygon(p orb.Polygon, ring func(r int) string, add func(field, msg string)) {
	if len(p) == 0 {
		add(ring(0), "polygon has no ring")
		return
	}
	for ri, r := range p {
		if len(r) < 4 {
			add(ring(ri), fmt.Sprintf("a ring needs at least 4 positions, has %d", len(r)))
			continue
		}
		good := true
		for pi, pt := range r {
			if msg := positionProblem(pt); msg != "" {
				add(idx(ring(ri), pi), msg)
				good = false
				break
			}
		}
		if !good {
			continue
		}
		if r[0] != r[len(r)-1] {
			add(ring(ri), fmt.Sprintf("ring is not closed: first position %v differs from last %v", r[0], r[len(r)-1]))
			continue
		}
		if distinct(r) < 3 {
			add(ring(ri), "ring is degenerate: fewer than 3 distinct positions")
			continue
		}
		u, turns := unwrapRing(r)
		if turns < -1 || turns > 1 {
			add(ring(ri), errWinding.Error())
			continue
		}
		if turns != 0 && polarSide(u) == 0 {
			add(ring(ri), errPoleAmbiguous.Error())
			continue
		}
		if x, bad := ringCrossing(u); bad {
			add(ring(ri), x.describe(ri, len(r)-1))
		}
	}
}

// Validate checks every zone of the set and that ids are unique. It returns
// a *ValidationError listing every problem, or nil.
func (s *ZoneSet) Validate() error {
	var ps problems
	seen := make(map[string]int, len(s.Zones))
	for i, z := range s.Zones {
		if z == nil {
			ps.add(i, "", "", "nil zone")
			continue
		}
		checkZone(z, &genericNames, func(field, msg string) { ps.add(i, z.ID, field, msg) })
		checkUnique(seen, i, z.ID, genericNames.id, &ps)
	}
	return ps.err()
}

func checkUnique(seen map[string]int, i int, id, field string, ps *problems) {
	if id == "" {
		return
	}
	if first, dup := seen[id]; dup {
		ps.add(i, id, field, fmt.Sprintf("duplicate id, first used by feature %d", first+1))
		return
	}
	seen[id] = i
}
