package geofence

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/paulmach/orb"
)

// earthRadius is the sphere radius used for great-circle distances, the
// same as orb's geo package.
const earthRadius = orb.EarthRadius

const deg = math.Pi / 180

var errPoleAmbiguous = errors.New("ring goes around a pole along the equator: cannot tell which pole it encloses")
var errWinding = errors.New("ring winds around a pole more than once")

// unwrapRing makes a closed ring's longitudes continuous: an edge whose
// longitudes differ by more than 180° (and less than 360°) is taken to cross
// the antimeridian the short way. It returns the unwrapped ring and its net
// winding in turns (0 for an ordinary ring, ±1 for a ring that goes once
// around a pole).
func unwrapRing(r orb.Ring) (orb.Ring, int) {
	if _, crosses := unwrapCrosses(r); !crosses {
		return r, 0 // nothing to unwrap: share the ring
	}
	out := make(orb.Ring, len(r))
	if len(r) == 0 {
		return out, 0
	}
	out[0] = r[0]
	for i := 1; i < len(r); i++ {
		d := r[i][0] - r[i-1][0]
		if d > 180 && d < 360 {
			d -= 360
		} else if d < -180 && d > -360 {
			d += 360
		}
		out[i] = orb.Point{out[i-1][0] + d, r[i][1]}
	}
	w := out[len(out)-1][0] - out[0][0]
	turns := int(math.Round(w / 360))
	// Make the closing point exactly the first one again.
	out[len(out)-1] = orb.Point{out[0][0] + float64(turns)*360, out[0][1]}
	return out, turns
}

// unwrapCrosses reports whether some edge of r crosses the antimeridian
// (longitudes more than 180° and less than 360° apart), and where.
func unwrapCrosses(r orb.Ring) (int, bool) {
	for i := 1; i < len(r); i++ {
		if d := r[i][0] - r[i-1][0]; (d > 180 && d < 360) || (d < -180 && d > -360) {
			return i, true
		}
	}
	return 0, false
}

// ringBound is the bounding box of a ring (orb's Bound, faster).
func ringBound(r orb.Ring) orb.Bound {
	if len(r) == 0 {
		return orb.Bound{}
	}
	x0, y0 := r[0][0], r[0][1]
	x1, y1 := x0, y0
	for _, p := range r[1:] {
		if p[0] < x0 {
			x0 = p[0]
		} else if p[0] > x1 {
			x1 = p[0]
		}
		if p[1] < y0 {
			y0 = p[1]
		} else if p[1] > y1 {
			y1 = p[1]
		}
	}
	return orb.Bound{Min: orb.Point{x0, y0}, Max: orb.Point{x1, y1}}
}

// frameRing returns the pieces of a ring, each within longitudes
// [-180, 180], that together cover the same area of the globe as the ring
// read as a planar lon/lat polygon with antimeridian crossings taken the
// short way. A ring that goes once around a pole bounds the cap of the pole
// on the side of its mean latitude.
func frameRing(r orb.Ring) ([]orb.Ring, error) {
	u, turns := unwrapRing(r)
	switch turns {
	case 0:
		return splitWindows(u), nil
	case 1, -1:
		return []orb.Ring{polarCap(u, turns)}, nil
	}
	return nil, errWinding
}

// polarSide returns +1 for the north pole, -1 for the south pole.
func polarSide(u orb.Ring) int {
	var s float64
	for _, p := range u[:len(u)-1] {
		s += p[1]
	}
	switch {
	case s > 0:
		return 1
	case s < 0:
		return -1
	}
	return 0
}

// polarCap turns an unwrapped ring that goes once around a pole into a
// planar ring covering longitudes [-180, 180]: the ring's line repeated
// three times (so that it spans more than the whole frame), closed along
// the pole, then clipped to the frame.
func polarCap(u orb.Ring, turns int) orb.Ring {
	if turns < 0 {
		rev := make(orb.Ring, len(u))
		for i := range u {
			rev[i] = u[len(u)-1-i]
		}
		u = rev
	}
	pole := 90.0
	if polarSide(u) < 0 {
		pole = -90
	}
	n := len(u) - 1 // u[n] == u[0] + 360
	line := make(orb.Ring, 0, 3*n+4)
	for k := -1; k <= 1; k++ {
		off := float64(k) * 360
		for _, p := range u[:n] {
			line = append(line, orb.Point{p[0] + off, p[1]})
		}
	}
	last := orb.Point{u[0][0] + 720, u[0][1]}
	line = append(line, last, orb.Point{last[0], pole}, orb.Point{u[0][0] - 360, pole}, line[0])
	return clipX(line, -180, 180)
}

// splitWindows cuts an unwrapped ring at the antimeridian and shifts each
// piece into [-180, 180].
func splitWindows(u orb.Ring) []orb.Ring {
	b := ringBound(u)
	if b.Min[0] >= -180 && b.Max[0] <= 180 {
		return []orb.Ring{u}
	}
	var out []orb.Ring
	for k := -2; k <= 2; k++ {
		lo, hi := -180+float64(k)*360, 180+float64(k)*360
		if b.Max[0] <= lo || b.Min[0] >= hi {
			continue
		}
		c := clipX(u, lo, hi)
		if len(c) < 4 {
			continue
		}
		for i := range c {
			c[i][0] -= float64(k) * 360
		}
		out = append(out, c)
	}
	return out
}

// clipX clips a closed ring to lo <= x <= hi (Sutherland–Hodgman). The
// result is closed; it may have degenerate edges along the clip lines,
// which do not change which points are inside.
func clipX(r orb.Ring, lo, hi float64) orb.Ring {
	out := clipHalf(r, lo, false)
	out = clipHalf(out, hi, true)
	if len(out) > 0 && out[0] != out[len(out)-1] {
		out = append(out, out[0])
	}
	return out
}

func clipHalf(r orb.Ring, x float64, keepBelow bool) orb.Ring {
	if len(r) == 0 {
		return nil
	}
	in := func(p orb.Point) bool {
		if keepBelow {
			return p[0] <= x
		}
		return p[0] >= x
	}
	pts := r
	if pts[0] == pts[len(pts)-1] {
		pts = pts[:len(pts)-1]
	}
	var out orb.Ring
	for i := range pts {
		cur, prev := pts[i], pts[(i+len(pts)-1)%len(pts)]
		ci, pi := in(cur), in(prev)
		if ci != pi {
			t := (x - prev[0]) / (cur[0] - prev[0])
			out = append(out, orb.Point{x, prev[1] + t*(cur[1]-prev[1])})
		}
		if ci {
			out = append(out, cur)
		}
	}
	return out
}

// framePolygon returns the polygon as pieces in the [-180, 180] frame: each
// piece is an outer ring followed by every hole piece whose bound meets it.
func framePolygon(p orb.Polygon) ([]orb.Polygon, error) {
	if len(p) == 0 {
		return nil, nil
	}
	crossing := false
	for _, r := range p {
		if _, c := unwrapCrosses(r); c {
			crossing = true
			break
		}
	}
	if !crossing {
		// Rings within [-180, 180] that do not cross the antimeridian
		// (nor go around a pole) are their own single piece.
		return []orb.Polygon{p}, nil
	}
	outers, err := frameRing(p[0])
	if err != nil {
		return nil, err
	}
	var holes []orb.Ring
	for _, h := range p[1:] {
		hs, err := frameRing(h)
		if err != nil {
			return nil, err
		}
		holes = append(holes, hs...)
	}
	out := make([]orb.Polygon, 0, len(outers))
	for _, o := range outers {
		piece := orb.Polygon{o}
		ob := ringBound(o)
		for _, h := range holes {
			if ringBound(h).Intersects(ob) {
				piece = append(piece, h)
			}
		}
		out = append(out, piece)
	}
	return out, nil
}

// circleBound returns the bounding box of a circle in degrees. Longitudes
// may extend beyond ±180 when the circle crosses the antimeridian; a circle
// that covers a pole spans all longitudes.
func circleBound(c Circle) (minLon, minLat, maxLon, maxLat float64) {
	r := c.RadiusM / earthRadius / deg // angular radius, degrees
	lat, lon := c.Center[1], c.Center[0]
	minLat, maxLat = lat-r, lat+r
	// A small margin keeps the box conservative against rounding; the exact
	// test decides.
	const m = 1e-7 // about a centimetre
	if maxLat >= 90-m || minLat <= -90+m || r >= 90 {
		return -180, math.Max(minLat-m, -90), 180, math.Min(maxLat+m, 90)
	}
	dl := math.Asin(math.Min(1, math.Sin(r*deg)/math.Cos(lat*deg))) / deg
	return lon - dl - m, minLat - m, lon + dl + m, maxLat + m
}

// havDist returns the great-circle distance in metres between two lon/lat
// points.
func havDist(lon1, lat1, lon2, lat2 float64) float64 {
	s1 := math.Sin((lat2 - lat1) * deg / 2)
	s2 := math.Sin((lon2 - lon1) * deg / 2)
	a := s1*s1 + math.Cos(lat1*deg)*math.Cos(lat2*deg)*s2*s2
	return 2 * earthRadius * math.Atan2(math.Sqrt(a), math.Sqrt(1-a))
}

// wrap180 brings a longitude difference into [-180, 180).
func wrap180(d float64) float64 {
	if d >= -180 && d < 180 {
		return d
	}
	d = math.Mod(d+180, 360)
	if d < 0 {
		d += 360
	}
	return d - 180
}

// normLon brings a longitude into [-180, 180).
func normLon(lon float64) float64 { return wrap180(lon) }

// segDistM returns the distance in metres from the point (0, 0) to the
// segment a-b given in local metres.
func segDistM(ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	l2 := dx*dx + dy*dy
	t := 0.0
	if l2 > 0 {
		t = -(ax*dx + ay*dy) / l2
		if t < 0 {
			t = 0
		} else if t > 1 {
			t = 1
		}
	}
	x, y := ax+t*dx, ay+t*dy
	return math.Hypot(x, y)
}

// ringSelfIntersects reports whether two non-adjacent edges of a closed ring
// touch or cross, or two adjacent ones fold back onto each other.
func ringSelfIntersects(r orb.Ring) bool {
	_, bad := ringCrossing(r)
	return bad
}

// crossing is where a ring meets itself: edges a and b, each named by the
// indices of its two positions in the ring, at a point.
type crossing struct {
	a, b [2]int
	at   orb.Point
	how  string // "crosses", "touches" or "folds back onto"
}

// describe says where the ring crosses itself (ring index ri).
func (x crossing) describe(ri, _ int) string {
	return fmt.Sprintf("ring intersects itself: in ring %d, the edge from position %d to %d %s the edge from position %d to %d at (lon %v, lat %v)",
		ri, x.a[0], x.a[1], x.how, x.b[0], x.b[1], normLon(x.at[0]), x.at[1])
}

// ringCrossing finds two non-adjacent edges of a closed ring that touch or
// cross, or two adjacent ones that fold back onto each other (a sweep over
// edges sorted by their west end).
func ringCrossing(r orb.Ring) (crossing, bool) {
	// Drop repeated consecutive points: they are harmless. orig maps each
	// kept point to the index of its last repetition in r, so an edge
	// pts[k]-pts[k+1] is r's edge orig[k]-(orig[k]+1).
	pts := []orb.Point(r)
	var orig []int
	for i := 1; i < len(r); i++ {
		if r[i] == r[i-1] {
			pts = make([]orb.Point, 0, len(r))
			orig = make([]int, 0, len(r))
			for i, p := range r {
				if i > 0 && p == pts[len(pts)-1] {
					orig[len(orig)-1] = i
					continue
				}
				pts = append(pts, p)
				orig = append(orig, i)
			}
			break
		}
	}
	edgeAt := func(k int) [2]int {
		if orig == nil {
			return [2]int{k, k + 1}
		}
		return [2]int{orig[k], orig[k] + 1}
	}
	n := len(pts) - 1 // edges
	if n < 3 {
		// A ring of fewer than 3 distinct edges is degenerate.
		if n >= 1 {
			return crossing{a: edgeAt(0), b: edgeAt(n - 1), at: pts[0], how: "folds back onto"}, true
		}
		return crossing{}, false
	}
	type edge struct {
		i                      int
		minX, maxX, minY, maxY float64
	}
	es := make([]edge, n)
	for i := 0; i < n; i++ {
		a, b := pts[i], pts[i+1]
		es[i] = edge{i, math.Min(a[0], b[0]), math.Max(a[0], b[0]), math.Min(a[1], b[1]), math.Max(a[1], b[1])}
	}
	// Small rings: every pair, boxes first. Larger ones: a sweep over
	// edges sorted by their west end.
	sorted := n > 64
	if sorted {
		slices.SortFunc(es, func(a, b edge) int { return cmp.Compare(a.minX, b.minX) })
	}
	for a := 0; a < n; a++ {
		ea := &es[a]
		for b := a + 1; b < n; b++ {
			eb := &es[b]
			if eb.minX > ea.maxX {
				if sorted {
					break
				}
				continue
			}
			if eb.maxX < ea.minX || eb.minY > ea.maxY || eb.maxY < ea.minY {
				continue // boxes apart: cannot touch
			}
			i, j := ea.i, eb.i
			if i > j {
				i, j = j, i
			}
			if j == i+1 || (i == 0 && j == n-1) {
				// Adjacent edges share a vertex; they are invalid only when
				// they fold back onto each other.
				if foldsBack(pts, i, j, n) {
					at := pts[j]
					if j != i+1 {
						at = pts[0]
					}
					return crossing{a: edgeAt(i), b: edgeAt(j), at: at, how: "folds back onto"}, true
				}
				continue
			}
			if at, how, ok := segsMeet(pts[i], pts[i+1], pts[j], pts[j+1]); ok {
				return crossing{a: edgeAt(i), b: edgeAt(j), at: at, how: how}, true
			}
		}
	}
	return crossing{}, false
}

// foldsBack reports whether adjacent edges i and j are collinear and overlap
// beyond their shared vertex (a spike).
func foldsBack(pts []orb.Point, i, j, n int) bool {
	var a, s, b orb.Point // a-s then s-b
	if j == i+1 {
		a, s, b = pts[i], pts[j], pts[j+1]
	} else { // i == 0, j == n-1: edge n-1 then edge 0
		a, s, b = pts[n-1], pts[0], pts[1]
	}
	if orient(a, s, b) != 0 {
		return false
	}
	// Collinear: a spike when a and b are on the same side of s.
	return (a[0]-s[0])*(b[0]-s[0])+(a[1]-s[1])*(b[1]-s[1]) > 0
}

func orient(a, b, c orb.Point) int {
	v := (b[0]-a[0])*(c[1]-a[1]) - (b[1]-a[1])*(c[0]-a[0])
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func onSeg(a, b, p orb.Point) bool {
	return math.Min(a[0], b[0]) <= p[0] && p[0] <= math.Max(a[0], b[0]) &&
		math.Min(a[1], b[1]) <= p[1] && p[1] <= math.Max(a[1], b[1])
}

// segsMeet reports whether segments p1-p2 and q1-q2 share any point, one
// such point, and whether they cross or touch there.
func segsMeet(p1, p2, q1, q2 orb.Point) (orb.Point, string, bool) {
	o1, o2 := orient(p1, p2, q1), orient(p1, p2, q2)
	o3, o4 := orient(q1, q2, p1), orient(q1, q2, p2)
	if o1*o2 < 0 && o3*o4 < 0 {
		dx, dy := p2[0]-p1[0], p2[1]-p1[1]
		ex, ey := q2[0]-q1[0], q2[1]-q1[1]
		t := ((q1[0]-p1[0])*ey - (q1[1]-p1[1])*ex) / (dx*ey - dy*ex)
		return orb.Point{p1[0] + t*dx, p1[1] + t*dy}, "crosses", true
	}
	switch {
	case o1 == 0 && onSeg(p1, p2, q1):
		return q1, "touches", true
	case o2 == 0 && onSeg(p1, p2, q2):
		return q2, "touches", true
	case o3 == 0 && onSeg(q1, q2, p1):
		return p1, "touches", true
	case o4 == 0 && onSeg(q1, q2, p2):
		return p2, "touches", true
	}
	return orb.Point{}, "", false
}
