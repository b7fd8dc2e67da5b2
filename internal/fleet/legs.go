package fleet

import "math"

// A mission is a chain of legs, each starting where the last one ended:
// on the ground, straight up or down, a straight line, an arc. Every leg
// that moves starts and ends at rest and follows a trapezoidal speed
// profile (accelerate, cruise, decelerate), so speeds, climb rates and the
// distance between two fixes follow from one another.
type legKind uint8

const (
	legGround legKind = iota
	legVertical
	legLine
	legArc
)

type leg struct {
	kind   legKind
	dur    float64 // seconds
	prof   profile
	a, b   vec     // line: from a to b; ground and vertical legs: at a
	h0, h1 float64 // metres above the site's ground at the start and the end
	// Arc: centre, radius, the start's angle from east (anticlockwise,
	// radians) and the signed angle swept.
	c            vec
	r, th0, turn float64
}

// at returns the leg's position, height and horizontal velocity (m/s) t
// seconds into it.
func (l *leg) at(t float64) (pos vec, h float64, vel vec) {
	s, v := l.prof.at(t)
	switch l.kind {
	case legVertical:
		if l.h1 < l.h0 {
			s = -s
		}
		return l.a, l.h0 + s, vec{}
	case legLine:
		u := l.b.sub(l.a).scale(1 / l.prof.dist)
		return l.a.add(u.scale(s)), l.h0, u.scale(v)
	case legArc:
		dir := math.Copysign(1, l.turn)
		th := l.th0 + dir*s/l.r
		sin, cos := math.Sincos(th)
		return l.c.add(vec{l.r * cos, l.r * sin}), l.h0, vec{-sin, cos}.scale(dir * v)
	}
	return l.a, l.h0, vec{}
}

// distTo is the shortest horizontal distance from p to the leg's path.
func (l *leg) distTo(p vec) float64 {
	switch l.kind {
	case legLine:
		return segDist(p, l.a, l.b)
	case legArc:
		return math.Abs(p.dist(l.c) - l.r)
	}
	return p.dist(l.a)
}

// profile is a trapezoidal speed profile over dist metres: accelerate at
// acc to vmax (or as far as dist allows), cruise, decelerate to rest.
type profile struct {
	dist, vmax, acc float64
	ta, tc          float64 // seconds accelerating (and decelerating), cruising
}

func newProfile(dist, vmax, acc float64) profile {
	p := profile{dist: dist, vmax: vmax, acc: acc}
	if dist >= vmax*vmax/acc {
		p.ta = vmax / acc
		p.tc = (dist - vmax*vmax/acc) / vmax
	} else {
		p.vmax = math.Sqrt(dist * acc)
		p.ta = p.vmax / acc
	}
	return p
}

func (p profile) dur() float64 { return 2*p.ta + p.tc }

// at returns the distance covered and the speed t seconds in.
func (p profile) at(t float64) (s, v float64) {
	switch {
	case p.dist == 0 || t <= 0:
		return 0, 0
	case t < p.ta:
		return p.acc * t * t / 2, p.acc * t
	case t < p.ta+p.tc:
		return p.vmax*p.ta/2 + p.vmax*(t-p.ta), p.vmax
	case t < p.dur():
		r := p.dur() - t
		return p.dist - p.acc*r*r/2, p.acc * r
	}
	return p.dist, 0
}

// builder chains legs from a position and height.
type builder struct {
	pos  vec
	h    float64
	legs []leg
}

func (b *builder) ground(secs float64) {
	b.legs = append(b.legs, leg{kind: legGround, dur: secs, a: b.pos})
}

func (b *builder) vertical(h, rate, acc float64) {
	if math.Abs(h-b.h) < 0.1 {
		return
	}
	p := newProfile(math.Abs(h-b.h), rate, acc)
	b.legs = append(b.legs, leg{kind: legVertical, dur: p.dur(), prof: p, a: b.pos, h0: b.h, h1: h})
	b.h = h
}

func (b *builder) line(to vec, v, acc float64) {
	d := b.pos.dist(to)
	if d < 1 {
		return
	}
	p := newProfile(d, v, acc)
	b.legs = append(b.legs, leg{kind: legLine, dur: p.dur(), prof: p, a: b.pos, b: to, h0: b.h, h1: b.h})
	b.pos = to
}

// arc circles c from the current position, turn radians (positive
// anticlockwise), and ends where the turn takes it.
func (b *builder) arc(c vec, turn, v, acc float64) {
	rel := b.pos.sub(c)
	r := rel.len()
	p := newProfile(r*math.Abs(turn), v, acc)
	l := leg{kind: legArc, dur: p.dur(), prof: p, a: b.pos, h0: b.h, h1: b.h, c: c, r: r, th0: math.Atan2(rel.y, rel.x), turn: turn}
	b.legs = append(b.legs, l)
	b.pos, _, _ = l.at(l.dur)
}

// vec is a point or a direction in an airport's local plane: metres east
// (x) and north (y) of its reference point.
type vec struct{ x, y float64 }

func (a vec) add(b vec) vec        { return vec{a.x + b.x, a.y + b.y} }
func (a vec) sub(b vec) vec        { return vec{a.x - b.x, a.y - b.y} }
func (a vec) scale(k float64) vec  { return vec{a.x * k, a.y * k} }
func (a vec) len() float64         { return math.Hypot(a.x, a.y) }
func (a vec) dist(b vec) float64   { return a.sub(b).len() }
func (a vec) bearing() float64     { return math.Atan2(a.x, a.y) } // radians clockwise from north
func dot(a, b vec) float64         { return a.x*b.x + a.y*b.y }
func polar(r, bearing float64) vec { return vec{r * math.Sin(bearing), r * math.Cos(bearing)} }

// segDist is the distance from p to the segment ab.
func segDist(p, a, b vec) float64 {
	ab := b.sub(a)
	t := 0.0
	if l2 := dot(ab, ab); l2 > 0 {
		t = math.Max(0, math.Min(1, dot(p.sub(a), ab)/l2))
	}
	return p.dist(a.add(ab.scale(t)))
}
