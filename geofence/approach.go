package geofence

import (
	"math"
	"slices"
	"time"
)

// Approach is a zone a drone is heading into or is near.
type Approach struct {
	Zone               *Zone
	EtaS               float64 // seconds until the straight path p + v·t first enters the zone's area, t in [0, horizonS]; -1 when it does not within the horizon
	DistM              float64 // the horizontal distance from p to the zone's area now (metres)
	EntryLat, EntryLon float64 // the predicted entry point when EtaS >= 0
}

// Approaches appends to dst[:0] the zones that a drone at p flying at vE, vN
// m/s (east, north) enters within horizonS seconds on a straight path, or
// whose area is at most bufferM metres from p: one Approach per zone, in
// the zone set's order (as Query's hits), with the earliest entry over the
// zone's volumes (EtaS -1 when none) and the smallest distance.
//
// Only volumes whose vertical limits p's heights are within count (an
// unknown height counts as within, as in Query); heights are taken to stay
// as they are. A zone whose area, in such a volume, contains p already is
// left out: it is Query's. A path entry counts when the zone is active at
// p.Time + EtaS, a buffer-only approach when it is active at p.Time. Zero
// velocity or horizon: buffer approaches only.
//
// The path is straight in a local equirectangular projection around p
// (longitude and latitude change at constant rates, what a fix's velocity
// says over a short horizon), the projection distM measures polygon
// distances in. Polygon entries are exact in it, as polygon edges are
// straight in longitude/latitude; circle entries are found on the haversine
// test Query uses. A path across the antimeridian is followed; near the
// poles (within metres) the projection degenerates and only buffer
// approaches are found, and over long paths at high latitude the path
// bends away from a great circle.
//
// It does not allocate when dst has room for one entry per zone met: dst
// is the scratch the zones are gathered in.
func (ix *Index) Approaches(p Point, vE, vN, horizonS, bufferM float64, dst []Approach) []Approach {
	dst = dst[:0]
	if ix == nil || len(ix.parts) == 0 {
		return dst
	}
	x, y := normLon(p.Lon), p.Lat
	if !finite(x) || !(y >= -90 && y <= 90) {
		return dst
	}
	if !(bufferM >= 0) || math.IsInf(bufferM, 1) {
		bufferM = 0
	}
	g := pathGeom{x: x, y: y, kx: math.Cos(y*deg) * earthRadius * deg, ky: earthRadius * deg}
	if speed := math.Hypot(vE, vN); speed > 0 && finite(speed) && horizonS > 0 && finite(horizonS) && g.kx > 1e-6*earthRadius*deg {
		g.vE, g.vN, g.h = vE, vN, horizonS
		g.tEps = 1e-7 / speed // 0.1 µm along the path: crossings closer are one
		g.tTol = 1e-4 / speed // 0.1 mm: circle entries are found to this
	}

	// The box searched: the path's bound widened by the buffer (plus a
	// margin for the first-order degree conversions).
	buf := bufferM*1.01 + 1
	ylo := y + (min(0, g.vN*g.h)-buf)/g.ky
	yhi := y + (max(0, g.vN*g.h)+buf)/g.ky
	ylo, yhi = max(ylo, -90), min(yhi, 90)
	// The buffer in longitude at the box's most poleward latitude, where a
	// degree is shortest: cos falls by at most the angle added (no second
	// cosine needed).
	cmin := g.kx/(earthRadius*deg) - (max(math.Abs(ylo), math.Abs(yhi))-math.Abs(y))*deg
	dl := math.Inf(1) // at a pole: every longitude
	if cmin > 1e-9 {
		dl = buf / (cmin * earthRadius * deg)
	}
	xlo, xhi := x-dl, x+dl
	if g.h > 0 {
		xlo += min(0, g.vE*g.h) / g.kx
		xhi += max(0, g.vE*g.h) / g.kx
	}
	// Up to two longitude intervals within [-180, 180], west first: the box
	// may run over the antimeridian.
	var ivs [2][2]float64
	niv := 0
	if !(xhi-xlo < 360) {
		ivs[0], niv = [2]float64{-180, 180}, 1
	} else {
		for k := -1.0; k <= 1; k++ {
			lo, hi := max(xlo+360*k, -180), min(xhi+360*k, 180)
			if lo <= hi && niv < 2 {
				ivs[niv] = [2]float64{lo, hi}
				niv++
			}
		}
	}
	var cols [2][2]int
	for i := 0; i < niv; i++ {
		cols[i] = [2]int{ix.cellX(ivs[i][0]), ix.cellX(ivs[i][1])}
	}
	ncol := niv
	if ncol == 2 && cols[1][0] <= cols[0][1]+1 {
		cols[0][1], ncol = max(cols[0][1], cols[1][1]), 1
	}
	cy0, cy1 := ix.cellY(ylo), ix.cellY(yhi)
	// A part listed in several of the cells searched is taken in the first
	// of them only (its reference cell), so that it is computed once
	// without a visited set.
	multi := ncol > 1 || cols[0][0] != cols[0][1] || cy0 != cy1

	for cy := cy0; cy <= cy1; cy++ {
		for ci := 0; ci < ncol; ci++ {
			for cx := cols[ci][0]; cx <= cols[ci][1]; cx++ {
				c := cy*ix.nx + cx
				cells := ix.cells[ix.cellStart[c]:ix.cellStart[c+1]]
				for i := range cells {
					ce := &cells[i]
					if float64(ce.maxY) < ylo || float64(ce.minY) > yhi {
						continue
					}
					x0, x1 := float64(ce.minX), float64(ce.maxX)
					if !(x1 >= ivs[0][0] && x0 <= ivs[0][1]) && !(niv == 2 && x1 >= ivs[1][0] && x0 <= ivs[1][1]) {
						continue
					}
					pt := &ix.parts[ce.part]
					if multi {
						px0, py0, px1, _ := ix.cellRange(pt)
						if cy != max(cy0, py0) {
							continue
						}
						ref := max(cols[0][0], px0)
						if ncol == 2 && !(px0 <= cols[0][1] && px1 >= cols[0][0]) {
							ref = max(cols[1][0], px0)
						}
						if cx != ref {
							continue
						}
					}
					dst = ix.approachPart(&g, pt, &p, bufferM, dst)
				}
			}
		}
	}

	// dst holds one entry per zone met, sorted by zone, with the zone's
	// index in EntryLat and, in EntryLon, 1 for a zone that contains p.
	out := 0
	for i := range dst {
		a := dst[i]
		zi := int32(a.EntryLat)
		if a.EntryLon != 0 {
			continue
		}
		if a.EtaS < 0 && !(a.DistM <= bufferM && (ix.always[zi] || a.Zone.Active(p.Time))) {
			continue
		}
		if a.DistM > bufferM && ix.zparts[zi+1]-ix.zparts[zi] > 1 {
			// A nearer volume of the zone may lie outside the box searched.
			a.DistM = ix.zoneDist(&g, zi, &p.Heights, a.DistM)
		}
		a.EntryLat, a.EntryLon = 0, 0
		if a.EtaS >= 0 {
			lon, lat := g.at(a.EtaS)
			a.EntryLat, a.EntryLon = lat, normLon(lon)
		}
		dst[out] = a
		out++
	}
	return dst[:out]
}

// approachPart adds what part pt says of its zone to dst's entry for the
// zone (see the end of Approaches for the entries' scratch form).
func (ix *Index) approachPart(g *pathGeom, pt *part, p *Point, bufferM float64, dst []Approach) []Approach {
	if ok, _ := pt.vertical(&p.Heights, 0); !ok {
		return dst
	}
	zi := pt.zone
	i := 0
	for i < len(dst) && int32(dst[i].EntryLat) < zi {
		i++
	}
	found := i < len(dst) && int32(dst[i].EntryLat) == zi
	if found && dst[i].EntryLon != 0 {
		return dst // contains p: nothing more to learn
	}
	var contains bool
	var eta, dist float64
	if pt.kind == kindCircle {
		contains, eta, dist = g.circle(pt)
	} else {
		contains, eta, dist = ix.polygonApproach(g, pt)
	}
	if contains {
		if !found {
			dst = slices.Insert(dst, i, Approach{Zone: ix.zones[zi], EntryLat: float64(zi)})
		}
		dst[i].EntryLon = 1
		return dst
	}
	if eta >= 0 && !ix.always[zi] && !ix.zones[zi].Active(p.Time.Add(time.Duration(eta*float64(time.Second)))) {
		eta = -1
	}
	if !found {
		if eta < 0 && !(dist <= bufferM) {
			return dst
		}
		return slices.Insert(dst, i, Approach{Zone: ix.zones[zi], EtaS: eta, DistM: dist, EntryLat: float64(zi)})
	}
	a := &dst[i]
	if eta >= 0 && (a.EtaS < 0 || eta < a.EtaS) {
		a.EtaS = eta
	}
	a.DistM = min(a.DistM, dist)
	return dst
}

// pathGeom is a drone's path in the local equirectangular projection
// around its position (x, y): X = (lon - x)·kx metres east, Y = (lat -
// y)·ky metres north, the drone at (vE·t, vN·t).
type pathGeom struct {
	x, y, kx, ky float64
	vE, vN, h    float64 // h: the horizon in seconds, 0 for no path
	tEps, tTol   float64
}

// at returns the path's position at t (longitude not normalised).
func (g *pathGeom) at(t float64) (lon, lat float64) {
	return g.x + g.vE*t/g.kx, g.y + g.vN*t/g.ky
}

// circle returns whether the circle part contains p, the path's entry time
// (-1 for none within the horizon) and the distance from p to it.
func (g *pathGeom) circle(pt *part) (contains bool, eta, dist float64) {
	f0 := g.havOut(pt, 0)
	if f0 <= 0 {
		return true, -1, 0
	}
	dist = max(0, havDist(g.x, g.y, pt.s0, pt.s1)-pt.radius)
	if g.h == 0 {
		return false, -1, dist
	}
	// The plane's closest approach brackets the entry; the root is then
	// found on the exact test, so the entry agrees with Query's.
	cx, cy := wrap180(pt.s0-g.x)*g.kx, (pt.s1-g.y)*g.ky
	vv := g.vE*g.vE + g.vN*g.vN
	vc := g.vE*cx + g.vN*cy
	if vc <= 0 {
		return false, -1, dist // heading away from the centre
	}
	tc := min(vc/vv, g.h)
	fc := g.havOut(pt, tc)
	if fc > 0 {
		return false, -1, dist
	}
	lo, flo, hi, fhi := 0.0, f0, tc, fc
	t := (lo + hi) / 2
	if d := vc*vc - vv*(cx*cx+cy*cy-pt.radius*pt.radius); d >= 0 {
		if r := (vc - math.Sqrt(d)) / vv; r > lo && r < hi {
			t = r // the plane's entry: close, so few steps follow
		}
	}
	side := 0
	for n := 0; n < 100 && hi-lo > g.tTol; n++ {
		// False position, Illinois variant: an end kept twice has its value
		// halved, so both ends close in.
		if ft := g.havOut(pt, t); ft <= 0 {
			hi, fhi = t, ft
			if side < 0 {
				flo /= 2
			}
			side = -1
		} else {
			lo, flo = t, ft
			if side > 0 {
				fhi /= 2
			}
			side = 1
		}
		t = (lo*fhi - hi*flo) / (fhi - flo)
		if !(t > lo && t < hi) {
			t = lo + (hi-lo)/2
		}
	}
	return false, hi, dist // hi is inside: Query agrees there
}

// havOut is containsXY's circle test at the path's position at t: <= 0
// inside.
func (g *pathGeom) havOut(pt *part, t float64) float64 {
	lon, lat := g.at(t)
	s1 := math.Sin((lat - pt.s1) * (deg / 2))
	s2 := math.Sin((lon - pt.s0) * (deg / 2))
	return s1*s1 + pt.s2*math.Cos(lat*deg)*s2*s2 - pt.s3
}

// partShift returns the multiple of 360° (0 or ±360) that brings the part's
// bound nearest to longitude x: a part across the antimeridian from x is
// measured the short way, every vertex alike (wrapping each vertex alone
// would fold an edge that spans the whole parallel to a point).
func partShift(pt *part, x float64) float64 {
	switch {
	case x < pt.minX && pt.minX-x > x+360-pt.maxX:
		return -360
	case x > pt.maxX && x-pt.maxX > pt.minX+360-x:
		return 360
	}
	return 0
}

// polygonApproach is circle's counterpart for a polygon part.
func (ix *Index) polygonApproach(g *pathGeom, pt *part) (contains bool, eta, dist float64) {
	x, y := g.x, g.y
	if x >= pt.minX && x <= pt.maxX && y >= pt.minY && y <= pt.maxY && ix.containsXY(pt, x, y) {
		return true, -1, 0
	}
	ox := partShift(pt, x) - x // a vertex's X is (lon + ox)·kx
	edges := ix.edges[pt.edgeOff : pt.edgeOff+pt.nEdges]
	t1, t2, d2 := g.crossings(edges, ox, -1, true)
	dist = math.Sqrt(d2)
	// From outside, the first crossing enters the area of a valid polygon;
	// a path through a vertex it only touches, or along the overlapping
	// edges a cut at the antimeridian can leave, crosses without entering.
	// So each crossing is confirmed by the test between it and the next.
	for n := 0; t1 <= g.h; n++ {
		if math.IsInf(t2, 1) {
			return false, -1, dist // no crossing follows: outside for good
		}
		if n == 64 || ix.insideAt(g, pt, ox, (t1+t2)/2) {
			return false, t1, dist // (after 64 touches, take it: alarm more)
		}
		t1, t2, _ = g.crossings(edges, ox, t1, false)
	}
	return false, -1, dist
}

// crossings returns the two earliest distinct times t > after, t >= 0, at
// which the path's ray (t unbounded, so that the next crossing is known
// after the horizon too) crosses an edge, +Inf for none; with wantDist also
// the squared distance from p to the nearest edge.
func (g *pathGeom) crossings(edges []edge, ox, after float64, wantDist bool) (t1, t2, d2 float64) {
	const uEps = 1e-9 // a path through a vertex must hit one of its edges
	t1, t2, d2 = math.Inf(1), math.Inf(1), math.Inf(1)
	ray := g.h > 0
	for i := range edges {
		e := &edges[i]
		ax, ay := (e.x1+ox)*g.kx, (e.y1-g.y)*g.ky
		ex, ey := (e.x2+ox)*g.kx-ax, (e.y2-g.y)*g.ky-ay
		if wantDist {
			d2 = min(d2, segDist2(ax, ay, ex, ey))
		}
		if !ray {
			continue
		}
		den := g.vE*ey - g.vN*ex
		if den == 0 {
			continue // parallel: the edges at its ends decide
		}
		u := (g.vN*ax - g.vE*ay) / den
		if !(u >= -uEps && u <= 1+uEps) {
			continue
		}
		t := (ax*ey - ay*ex) / den
		if t < 0 {
			if t < -g.tEps {
				continue
			}
			t = 0
		}
		if t <= after+g.tEps {
			continue
		}
		if t < t1-g.tEps {
			t1, t2 = t, t1
		} else if t > t1+g.tEps && t < t2 {
			t2 = t
		}
	}
	return t1, t2, d2
}

// segDist2 returns the squared distance from the origin to the segment
// from a along e.
func segDist2(ax, ay, ex, ey float64) float64 {
	u := 0.0
	if l2 := ex*ex + ey*ey; l2 > 0 {
		u = max(0, min(1, -(ax*ex+ay*ey)/l2))
	}
	x, y := ax+u*ex, ay+u*ey
	return x*x + y*y
}

// insideAt reports whether the path's position at t is in the polygon
// part's area.
func (ix *Index) insideAt(g *pathGeom, pt *part, ox, t float64) bool {
	lon := g.vE*t/g.kx - ox // in the part's frame
	lat := g.y + g.vN*t/g.ky
	if lon < pt.minX || lon > pt.maxX || lat < pt.minY || lat > pt.maxY {
		return false
	}
	return ix.containsXY(pt, lon, lat)
}

// zoneDist returns the smallest of d and the distances from p to zone zi's
// parts within their vertical limits.
func (ix *Index) zoneDist(g *pathGeom, zi int32, h *Heights, d float64) float64 {
	for pi := ix.zparts[zi]; pi < ix.zparts[zi+1]; pi++ {
		pt := &ix.parts[pi]
		if ok, _ := pt.vertical(h, 0); !ok {
			continue
		}
		if pt.kind == kindCircle {
			d = min(d, max(0, havDist(g.x, g.y, pt.s0, pt.s1)-pt.radius))
			continue
		}
		ox := partShift(pt, g.x) - g.x
		// The bound's distance cannot exceed the area's: skip parts that
		// cannot be nearer.
		bx := max(0, max((pt.minX+ox)*g.kx, -(pt.maxX+ox)*g.kx))
		by := max(0, max((pt.minY-g.y)*g.ky, -(pt.maxY-g.y)*g.ky))
		if bx*bx+by*by >= d*d {
			continue
		}
		noPath := pathGeom{x: g.x, y: g.y, kx: g.kx, ky: g.ky}
		_, _, d2 := noPath.crossings(ix.edges[pt.edgeOff:pt.edgeOff+pt.nEdges], ox, -1, true)
		d = min(d, math.Sqrt(d2))
	}
	return d
}
