package geofence

import (
	"container/heap"
	"math"

	"github.com/paulmach/orb"
)

// Outward simplification, for drawing a zone at a map scale (the
// dashboard's viewport answer, api/mapview_viewport.go). A drawn zone may be
// larger than the real one, never smaller: an operator must not see a
// drone outside a zone that holds it. Douglas-Peucker and Visvalingam cut
// corners both ways, so they are not used.
//
// Every step replaces a piece of a ring by a path whose difference with it
// is a triangle wound counter-clockwise, the zone's side: removing a vertex
// that dents the zone (the triangle u, w, v with v left of u→w), or
// replacing an edge v→w between two convex corners by the point where its
// neighbours' lines meet. Rings are oriented so that the zone lies left of
// every edge (outer rings counter-clockwise, holes clockwise); a step then
// adds 1 to the winding number inside its triangle and changes it nowhere
// else. Winding numbers only grow, so every point of the zone (winding 1)
// is still covered (winding ≥ 1) under the nonzero fill rule, whatever the
// steps cross: no topology check is needed, and holes can only shrink or,
// below the tolerance, go. Each edge carries a bound of how far it lies
// outside the original boundary; a step that would take it past the
// tolerance is not taken, so a drawn zone is at most tol larger.

// SimplifyOutward returns mp simplified with tolerance tol, in degrees of
// longitude at the equator as a Web Mercator map measures them (one pixel
// at zoom z is 360/256/2^z): each polygon is worked in a plane where a
// degree of longitude is cos(latitude of its middle) of a degree of
// latitude, which is the map's at that latitude. The result covers every
// point of mp under the nonzero winding rule (draw it with fill-rule
// nonzero), lies within tol of mp's boundary, has its outer rings
// counter-clockwise and its holes clockwise, and drops holes narrower than
// 2 tol. mp is not modified; tol ≤ 0 only orients and drops nothing.
func SimplifyOutward(mp orb.MultiPolygon, tol float64) orb.MultiPolygon {
	out := make(orb.MultiPolygon, 0, len(mp))
	for _, p := range mp {
		if len(p) == 0 {
			continue
		}
		b := ringBound(p[0])
		k := math.Max(math.Cos((b.Min[1]+b.Max[1])/2*deg), 0.01)
		t := tol * k
		np := make(orb.Polygon, 0, len(p))
		for i, r := range p {
			hole := i > 0
			if hole && tol > 0 {
				hb := ringBound(r)
				if (hb.Max[0]-hb.Min[0])*k <= 2*t || hb.Max[1]-hb.Min[1] <= 2*t {
					continue // too narrow to see: drawn filled, which is larger
				}
			}
			s := simplifyRing(r, k, t, hole)
			if len(s) >= 4 {
				np = append(np, s)
			} else if !hole {
				np = append(np, orientRing(r, k, hole)) // degenerate: kept as it is
			}
		}
		if len(np) > 0 {
			out = append(out, np)
		}
	}
	return out
}

// ringVerts is r's distinct consecutive vertices in the working plane
// (longitude times k), without the closing point, and as given.
func ringVerts(r orb.Ring, k float64) ([][2]float64, []orb.Point) {
	v := make([][2]float64, 0, len(r))
	o := make([]orb.Point, 0, len(r))
	for _, p := range r {
		if len(o) > 0 && o[len(o)-1] == p {
			continue
		}
		v = append(v, [2]float64{p[0] * k, p[1]})
		o = append(o, p)
	}
	for len(o) > 1 && o[len(o)-1] == o[0] {
		v, o = v[:len(v)-1], o[:len(o)-1]
	}
	return v, o
}

// signedArea2 is twice the signed area (positive: counter-clockwise).
func signedArea2(v [][2]float64) float64 {
	var a float64
	for i := range v {
		j := (i + 1) % len(v)
		a += v[i][0]*v[j][1] - v[j][0]*v[i][1]
	}
	return a
}

// orientRing is r closed and oriented with the zone on its left, as it is.
func orientRing(r orb.Ring, k float64, hole bool) orb.Ring {
	v, o := ringVerts(r, k)
	ccw := signedArea2(v) >= 0
	out := make(orb.Ring, 0, len(r)+1)
	for i := range o {
		j := i
		if ccw == hole {
			j = len(o) - 1 - i
		}
		out = append(out, o[j])
	}
	if len(out) > 0 {
		out = append(out, out[0])
	}
	return out
}

// Candidate steps.
const (
	stepRemove   = iota // remove vertex i
	stepCollapse        // replace edge i→next(i) by the meeting point of its neighbours
)

type step struct {
	cost  float64 // the triangle's height: how much further out the new edges lie
	i     int32
	kind  uint8
	stamp uint32
}

type stepHeap []step

func (h stepHeap) Len() int { return len(h) }
func (h stepHeap) Less(a, b int) bool {
	if h[a].cost != h[b].cost {
		return h[a].cost < h[b].cost
	}
	if h[a].i != h[b].i {
		return h[a].i < h[b].i // deterministic
	}
	return h[a].kind < h[b].kind
}
func (h stepHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *stepHeap) Push(x any)   { *h = append(*h, x.(step)) }
func (h *stepHeap) Pop() any {
	o := *h
	x := o[len(o)-1]
	*h = o[:len(o)-1]
	return x
}

// ringWork is one ring being simplified: a circular list of vertices in
// the working plane, err[i] bounding how far edge i→next(i) lies outside
// the original boundary.
type ringWork struct {
	p          [][2]float64
	orig       []orb.Point // the vertex as given, written back while it has not moved
	moved      []bool
	prev, next []int32
	err        []float64
	stamp      []uint32 // bumped when a vertex or its neighbourhood changes
	alive      int
	k, tol     float64
	h          stepHeap
}

func sCross(o, a, b [2]float64) float64 {
	return (a[0]-o[0])*(b[1]-o[1]) - (a[1]-o[1])*(b[0]-o[0])
}

func sDist(a, b [2]float64) float64 { return math.Hypot(a[0]-b[0], a[1]-b[1]) }

// lineDist is the distance from p to the line through a and b.
func lineDist(p, a, b [2]float64) float64 {
	d := sDist(a, b)
	if d == 0 {
		return sDist(p, a)
	}
	return math.Abs(sCross(a, b, p)) / d
}

// segDist is the distance from p to the segment a-b.
func segDist(p, a, b [2]float64) float64 {
	dx, dy := b[0]-a[0], b[1]-a[1]
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = math.Max(0, math.Min(1, ((p[0]-a[0])*dx+(p[1]-a[1])*dy)/l))
	}
	return math.Hypot(p[0]-a[0]-t*dx, p[1]-a[1]-t*dy)
}

// removal is the cost of removing vertex v, ok when that adds a
// counter-clockwise triangle within the tolerance.
func (w *ringWork) removal(v int32) (float64, bool) {
	u, x := w.prev[v], w.next[v]
	if sCross(w.p[u], w.p[x], w.p[v]) < 0 { // v right of u→x: the step would cut the zone
		return 0, false
	}
	// Every point of u→x is within the triangle's height of u→v→x.
	h := lineDist(w.p[v], w.p[u], w.p[x])
	if math.Max(w.err[u], w.err[v])+h > w.tol {
		return 0, false
	}
	return h, true
}

// collapse is the meeting point X of the lines u→v and x→w beyond v and w
// (v→w the edge, u before it, x after it) and its cost, ok when the triangle
// v, X, w is counter-clockwise and the new edges stay within the tolerance.
func (w *ringWork) collapse(v int32) (pt [2]float64, q orb.Point, rounded bool, h, d float64, ok bool) {
	var none orb.Point
	wi := w.next[v]
	u, x := w.prev[v], w.next[wi]
	if u == wi || x == v {
		return [2]float64{}, none, false, 0, 0, false
	}
	pu, pv, pw, px := w.p[u], w.p[v], w.p[wi], w.p[x]
	d1 := [2]float64{pv[0] - pu[0], pv[1] - pu[1]}
	d2 := [2]float64{pw[0] - px[0], pw[1] - px[1]}
	den := d1[0]*d2[1] - d1[1]*d2[0]
	if den == 0 {
		return [2]float64{}, none, false, 0, 0, false
	}
	// pv + s·d1 = pw + r·d2
	e := [2]float64{pw[0] - pv[0], pw[1] - pv[1]}
	s := (e[0]*d2[1] - e[1]*d2[0]) / den
	r := (e[0]*d1[1] - e[1]*d1[0]) / den
	if !(s > 0) || !(r > 0) {
		return [2]float64{}, none, false, 0, 0, false
	}
	X := [2]float64{pv[0] + s*d1[0], pv[1] + s*d1[1]}
	if sCross(pv, X, pw) <= 0 {
		return [2]float64{}, none, false, 0, 0, false
	}
	// Every point of the triangle's new sides is within X's distance of
	// the segment v→w (a distance to a segment is convex).
	h = segDist(X, pv, pw)
	// X written with 7 decimals (1 cm), as zone files are, rather than
	// 17 digits: a grid corner next to it that still adds only
	// counter-clockwise triangles, (u, X, v), (v, X, w) and (w, X, x),
	// whose sum is the step's loop; the move is added to the error.
	lon, lat := X[0]/w.k, X[1]
	bestD := math.Inf(1)
	pt = X
	for _, fx := range [2]func(float64) float64{math.Floor, math.Ceil} {
		for _, fy := range [2]func(float64) float64{math.Floor, math.Ceil} {
			c := orb.Point{fx(lon*1e7) / 1e7, fy(lat*1e7) / 1e7}
			cw := [2]float64{c[0] * w.k, c[1]}
			if d := sDist(cw, X); d < bestD && sCross(pu, cw, pv) >= 0 && sCross(pv, cw, pw) > 0 && sCross(pw, cw, px) >= 0 {
				pt, q, rounded, bestD = cw, c, true, d
			}
		}
	}
	if rounded {
		// A point of u→X' is within |X'−X| of the point of u→X at the
		// same fraction, and so for X'→x.
		d = bestD
		h += d
	} // else none fits: X as computed, written from the working plane
	if w.err[v]+h > w.tol || math.Max(w.err[u], w.err[wi])+d > w.tol {
		return [2]float64{}, none, false, 0, 0, false
	}
	return pt, q, rounded, h, d, true
}

// consider queues the steps of vertex v as they are now.
func (w *ringWork) consider(v int32) {
	if h, ok := w.removal(v); ok {
		heap.Push(&w.h, step{cost: h, i: v, kind: stepRemove, stamp: w.stamp[v]})
	}
	if _, _, _, h, _, ok := w.collapse(v); ok {
		heap.Push(&w.h, step{cost: h, i: v, kind: stepCollapse, stamp: w.stamp[v]})
	}
}

// touch invalidates the queued steps around v and queues theirs again.
func (w *ringWork) touch(v int32) {
	a := w.prev[w.prev[v]]
	for range 5 {
		w.stamp[a]++
		a = w.next[a]
	}
	a = w.prev[w.prev[v]]
	for range 5 {
		w.consider(a)
		a = w.next[a]
	}
}

// simplifyRing simplifies one ring (see SimplifyOutward), in the plane where
// longitude is scaled by k, with tolerance t there.
func simplifyRing(r orb.Ring, k, t float64, hole bool) orb.Ring {
	v, o := ringVerts(r, k)
	if len(v) < 3 {
		return nil
	}
	if (signedArea2(v) >= 0) == hole { // the zone must lie left of every edge
		for i, j := 0, len(v)-1; i < j; i, j = i+1, j-1 {
			v[i], v[j] = v[j], v[i]
			o[i], o[j] = o[j], o[i]
		}
	}
	n := len(v)
	w := &ringWork{p: v, orig: o, moved: make([]bool, n), prev: make([]int32, n), next: make([]int32, n), err: make([]float64, n),
		stamp: make([]uint32, n), alive: n, k: k, tol: t}
	for i := range n {
		w.prev[i] = int32((i + n - 1) % n)
		w.next[i] = int32((i + 1) % n)
	}
	if t > 0 {
		for i := range n {
			w.consider(int32(i))
		}
	}
	for w.h.Len() > 0 && w.alive > 3 {
		s := heap.Pop(&w.h).(step)
		if w.stamp[s.i] != s.stamp || w.prev[s.i] < 0 {
			continue
		}
		i := s.i
		switch s.kind {
		case stepRemove:
			h, ok := w.removal(i)
			if !ok {
				continue
			}
			u, x := w.prev[i], w.next[i]
			w.err[u] = math.Max(w.err[u], w.err[i]) + h
			w.next[u], w.prev[x] = x, u
			w.prev[i], w.next[i] = -1, -1
			w.alive--
			w.touch(u)
		case stepCollapse:
			X, q, rounded, h, d, ok := w.collapse(i)
			if !ok {
				continue
			}
			wi := w.next[i]
			u, x := w.prev[i], w.next[wi]
			// i becomes X: u→X holds u→i, X→x holds wi→x, both pushed out by
			// at most h beyond edge i→wi.
			w.err[u] = math.Max(w.err[u]+d, w.err[i]+h)
			w.err[i] = math.Max(w.err[wi]+d, w.err[i]+h)
			w.p[i] = X
			if rounded {
				w.orig[i], w.moved[i] = q, false // written as rounded
			} else {
				w.moved[i] = true // written from the working plane
			}
			w.next[i], w.prev[x] = x, i
			w.prev[wi], w.next[wi] = -1, -1
			w.alive--
			w.touch(i)
		}
	}
	out := make(orb.Ring, 0, w.alive+1)
	start := int32(-1)
	for i := range n {
		if w.prev[i] >= 0 {
			start = int32(i)
			break
		}
	}
	for i := start; ; {
		if w.moved[i] {
			out = append(out, orb.Point{w.p[i][0] / k, w.p[i][1]})
		} else {
			out = append(out, w.orig[i]) // exactly as given: k·x/k may differ in the last bit
		}
		i = w.next[i]
		if i == start {
			break
		}
	}
	return append(out, out[0])
}
