package geofence

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/paulmach/orb"
)

// winding is the winding number of ring r around p (planar lon/lat).
func simplifyWinding(p orb.Point, r orb.Ring) int {
	w := 0
	for i := 0; i+1 < len(r); i++ {
		a, b := r[i], r[i+1]
		c := (b[0]-a[0])*(p[1]-a[1]) - (p[0]-a[0])*(b[1]-a[1])
		if a[1] <= p[1] {
			if b[1] > p[1] && c > 0 {
				w++
			}
		} else if b[1] <= p[1] && c < 0 {
			w--
		}
	}
	return w
}

// segDistPt is the distance from p to segment a-b, longitude scaled by k.
func segDistPt(p, a, b orb.Point, k float64) float64 {
	px, ax, bx := p[0]*k, a[0]*k, b[0]*k
	dx, dy := bx-ax, b[1]-a[1]
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = math.Max(0, math.Min(1, ((px-ax)*dx+(p[1]-a[1])*dy)/l))
	}
	return math.Hypot(px-ax-t*dx, p[1]-a[1]-t*dy)
}

// boundaryDist is the distance from p to mp's rings.
func boundaryDist(p orb.Point, mp orb.MultiPolygon, k float64) float64 {
	d := math.Inf(1)
	for _, poly := range mp {
		for _, r := range poly {
			for i := 0; i+1 < len(r); i++ {
				d = math.Min(d, segDistPt(p, r[i], r[i+1], k))
			}
		}
	}
	return d
}

// coveredNonzero: p is inside mp under the nonzero rule, or on it.
func coveredNonzero(p orb.Point, mp orb.MultiPolygon, k float64) bool {
	w := 0
	for _, poly := range mp {
		for _, r := range poly {
			w += simplifyWinding(p, r)
		}
	}
	return w != 0 || boundaryDist(p, mp, k) <= 1e-9
}

// insideEvenOdd: p is in the zone as the engine reads it (even-odd per
// polygon: in the outer ring, in no hole).
func insideEvenOdd(p orb.Point, mp orb.MultiPolygon) bool {
	for _, poly := range mp {
		in := false
		for _, r := range poly {
			if simplifyWinding(p, r) != 0 {
				in = !in
			}
		}
		if in {
			return true
		}
	}
	return false
}

// simplifyStar is a random star-shaped (so simple) ring of n vertices around
// c, radii in [r0, r1] degrees of latitude, longitudes scaled by 1/k.
func simplifyStar(rnd *rand.Rand, c orb.Point, n int, r0, r1, k float64, ccw bool) orb.Ring {
	ring := make(orb.Ring, 0, n+1)
	for i := range n {
		a := 2 * math.Pi * (float64(i) + 0.8*rnd.Float64()) / float64(n)
		if !ccw {
			a = -a
		}
		r := r0 + (r1-r0)*rnd.Float64()
		ring = append(ring, orb.Point{c[0] + r*math.Cos(a)/k, c[1] + r*math.Sin(a)})
	}
	return append(ring, ring[0])
}

// TestSimplifyOutward: for random polygons, with and without holes, either
// orientation, at several tolerances: every vertex and sampled point of the
// zone is covered by the drawing (holes shrink, never grow into the zone),
// and no drawn vertex lies more than the tolerance outside the zone.
func TestSimplifyOutward(t *testing.T) {
	rnd := rand.New(rand.NewPCG(29, 3))
	for _, tt := range []struct {
		name          string
		n, holes      int
		r0, r1        float64
		tol           float64
		ccw, holesCCW bool
	}{
		{"jagged star", 60, 0, 0.005, 0.02, 0.001, true, false},
		{"jagged star clockwise", 60, 0, 0.005, 0.02, 0.001, false, false},
		{"near circle", 400, 0, 0.0199, 0.02, 0.0005, true, false},
		{"star with holes", 80, 3, 0.01, 0.02, 0.0008, true, false},
		{"holes wound like the outer ring", 80, 3, 0.01, 0.02, 0.0008, true, true},
		{"coarse", 200, 2, 0.008, 0.02, 0.01, true, false},
		{"tolerance zero orients only", 30, 1, 0.01, 0.02, 0, false, false},
		{"tiny zone, large tolerance", 12, 1, 0.0001, 0.0003, 0.05, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for trial := range 40 {
				lat := -70 + 140*rnd.Float64()
				c := orb.Point{-179 + 358*rnd.Float64(), lat}
				k := math.Cos(lat * math.Pi / 180)
				poly := orb.Polygon{simplifyStar(rnd, c, tt.n, tt.r0, tt.r1, k, tt.ccw)}
				for h := range tt.holes {
					a := 2 * math.Pi * float64(h) / float64(max(tt.holes, 1))
					hc := orb.Point{c[0] + 0.5*tt.r0*math.Cos(a)/k, c[1] + 0.5*tt.r0*math.Sin(a)}
					poly = append(poly, simplifyStar(rnd, hc, 10+rnd.IntN(20), 0.1*tt.r0, 0.3*tt.r0, k, tt.holesCCW))
				}
				mp := orb.MultiPolygon{poly}
				got := SimplifyOutward(mp, tt.tol)
				tolK := tt.tol * k
				for _, r := range poly {
					for _, p := range r {
						if !coveredNonzero(p, got, k) {
							t.Fatalf("trial %d: vertex %v of the zone is not covered by the drawing", trial, p)
						}
					}
				}
				b := poly.Bound()
				for range 2000 {
					p := orb.Point{b.Min[0] + (b.Max[0]-b.Min[0])*rnd.Float64(), b.Min[1] + (b.Max[1]-b.Min[1])*rnd.Float64()}
					if insideEvenOdd(p, mp) && !coveredNonzero(p, got, k) {
						t.Fatalf("trial %d: point %v of the zone is not covered by the drawing", trial, p)
					}
				}
				for _, gp := range got {
					for _, r := range gp {
						for _, p := range r {
							if !insideEvenOdd(p, mp) && boundaryDist(p, mp, k) > tolK*(1+1e-9)+1e-12 {
								t.Fatalf("trial %d: drawn vertex %v is %.3g outside the zone, tolerance %.3g", trial, p, boundaryDist(p, mp, k), tolK)
							}
						}
					}
					if len(gp) > 0 && simplifySignedArea(gp[0]) <= 0 {
						t.Fatalf("trial %d: outer ring not counter-clockwise", trial)
					}
					for _, h := range gp[1:] {
						if simplifySignedArea(h) >= 0 {
							t.Fatalf("trial %d: hole not clockwise", trial)
						}
					}
				}
			}
		})
	}
}

func simplifySignedArea(r orb.Ring) float64 {
	var a float64
	for i := 0; i+1 < len(r); i++ {
		a += r[i][0]*r[i+1][1] - r[i+1][0]*r[i][1]
	}
	return a / 2
}

// TestSimplifyOutwardReduces: what it is for: a 720-vertex circle drawn at
// a pixel of zoom 10 keeps a few dozen vertices; a zone smaller than the
// tolerance keeps 3 or 4; a square stays a square.
func TestSimplifyOutwardReduces(t *testing.T) {
	k := math.Cos(51.5 * math.Pi / 180)
	var circle orb.Ring
	for i := range 720 {
		a := 2 * math.Pi * float64(i) / 720
		circle = append(circle, orb.Point{-0.45 + 0.05*math.Cos(a)/k, 51.47 + 0.05*math.Sin(a)})
	}
	circle = append(circle, circle[0])
	square := orb.Ring{{0, 51}, {0.01, 51}, {0.01, 51.01}, {0, 51.01}, {0, 51}}
	px10 := 360.0 / 256 / 1024
	for _, tt := range []struct {
		name     string
		r        orb.Ring
		tol      float64
		min, max int
	}{
		{"circle, zoom 10", circle, px10, 8, 60},
		{"circle, zoom 16", circle, px10 / 64, 60, 400},
		{"circle, zoom 2", circle, px10 * 256, 3, 4},
		{"square, zoom 2", square, px10 * 256, 4, 4},
	} {
		got := SimplifyOutward(orb.MultiPolygon{{tt.r}}, tt.tol)
		n := len(got[0][0]) - 1
		if n < tt.min || n > tt.max {
			t.Errorf("%s: %d vertices, want %d to %d", tt.name, n, tt.min, tt.max)
		}
		for _, p := range tt.r {
			if !coveredNonzero(p, got, k) {
				t.Errorf("%s: vertex %v not covered", tt.name, p)
			}
		}
	}
}

func BenchmarkSimplifyOutward(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	mp := orb.MultiPolygon{{simplifyStar(rnd, orb.Point{0, 51}, 2000, 0.09, 0.1, 0.63, true)}}
	b.ReportAllocs()
	for b.Loop() {
		SimplifyOutward(mp, 360.0/256/1024)
	}
}
