package geofence

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geo"
	"github.com/paulmach/orb/planar"
)

// bruteForce is the reference: every zone, every volume, orb's planar
// containment and haversine distance, no index. The only thing it shares
// with the index is framePolygon, which turns antimeridian-crossing and
// polar rings into planar pieces (tested on its own with known points).
type bruteForce struct {
	zones  []*Zone
	pieces [][][]orb.Polygon // zone, volume -> pieces
	bounds [][][]orb.Bound
}

func newBruteForce(set *ZoneSet) *bruteForce {
	b := &bruteForce{zones: set.Zones}
	for _, z := range set.Zones {
		var zp [][]orb.Polygon
		var zb [][]orb.Bound
		for _, v := range z.Volumes {
			var vp []orb.Polygon
			var vb []orb.Bound
			for _, poly := range v.Area {
				ps, err := framePolygon(poly)
				if err != nil {
					panic(err)
				}
				for _, p := range ps {
					vp = append(vp, p)
					vb = append(vb, p.Bound())
				}
			}
			zp = append(zp, vp)
			zb = append(zb, vb)
		}
		b.pieces = append(b.pieces, zp)
		b.bounds = append(b.bounds, zb)
	}
	return b
}

// refVertical: floor <= h <= ceiling in the limit's reference; unknown
// height = within, noted.
func refVertical(v *Volume, h Heights, buf float64) (ok, assumed bool) {
	for i, l := range []*Limit{v.Floor, v.Ceiling} {
		if l == nil {
			continue
		}
		if l.Ref == RefUnknown {
			// Any reference it might be in: met if one is unknown or met.
			met := !h.HasAMSL || !h.HasWGS84 || !h.HasAGL
			for _, val := range []float64{h.AMSL, h.WGS84, h.AGL} {
				met = met || (i == 0 && val >= l.M-buf) || (i == 1 && val <= l.M+buf)
			}
			if !met {
				return false, false
			}
			assumed = true
			continue
		}
		val, known := h.Get(l.Ref)
		if !known {
			assumed = true
			continue
		}
		if i == 0 && val < l.M-buf {
			return false, false
		}
		if i == 1 && val > l.M+buf {
			return false, false
		}
	}
	return true, assumed
}

func (b *bruteForce) horizontal(zi, vi int, p Point) bool {
	v := &b.zones[zi].Volumes[vi]
	pt := orb.Point{normLon(p.Lon), p.Lat}
	if v.Circle != nil {
		return geo.DistanceHaversine(v.Circle.Center, pt) <= v.Circle.RadiusM
	}
	for i, piece := range b.pieces[zi][vi] {
		if b.bounds[zi][vi][i].Contains(pt) && planar.PolygonContains(piece, pt) {
			return true
		}
	}
	return false
}

func (b *bruteForce) Query(p Point, dst []Hit) []Hit {
	dst = dst[:0]
	for zi, z := range b.zones {
		if !z.Active(p.Time) {
			continue
		}
		matched, allAssumed := false, true
		for vi := range z.Volumes {
			ok, assumed := refVertical(&z.Volumes[vi], p.Heights, 0)
			if !ok || !b.horizontal(zi, vi, p) {
				continue
			}
			matched = true
			allAssumed = allAssumed && assumed
		}
		if matched {
			dst = append(dst, Hit{Zone: z, HeightAssumed: allAssumed})
		}
	}
	return dst
}

// distM is the reference horizontal distance from p to volume vi of zone
// zi: haversine for circles; for polygons, orb's planar distance in the
// same local equirectangular projection the index documents.
func (b *bruteForce) distM(zi, vi int, p Point) float64 {
	v := &b.zones[zi].Volumes[vi]
	if v.Circle != nil {
		return math.Max(0, geo.DistanceHaversine(v.Circle.Center, orb.Point{p.Lon, p.Lat})-v.Circle.RadiusM)
	}
	if b.horizontal(zi, vi, p) {
		return 0
	}
	kx := math.Cos(p.Lat*math.Pi/180) * orb.EarthRadius * math.Pi / 180
	ky := orb.EarthRadius * math.Pi / 180
	best := math.Inf(1)
	for _, piece := range b.pieces[zi][vi] {
		proj := make(orb.Polygon, len(piece))
		for ri, r := range piece {
			pr := make(orb.Ring, len(r))
			for i, q := range r {
				pr[i] = orb.Point{wrap180(q[0]-p.Lon) * kx, (q[1] - p.Lat) * ky}
			}
			proj[ri] = pr
		}
		best = math.Min(best, planar.DistanceFrom(proj, orb.Point{}))
	}
	return best
}

func (b *bruteForce) StillInside(zoneID string, p Point) bool {
	for zi, z := range b.zones {
		if z.ID != zoneID {
			continue
		}
		if !z.Active(p.Time) {
			return false
		}
		for vi := range z.Volumes {
			if ok, _ := refVertical(&z.Volumes[vi], p.Heights, z.ClearBufferM); ok && b.distM(zi, vi, p) <= z.ClearBufferM {
				return true
			}
		}
		return false
	}
	return false
}

// genConfig describes a random zone set.
type genConfig struct {
	minLon, maxLon, minLat, maxLat float64 // where zone centres go
	minSize, maxSize               float64 // zone radius, degrees of latitude
	altitudes, times               bool
}

var europe = genConfig{minLon: -10, maxLon: 30, minLat: 36, maxLat: 60, minSize: 0.005, maxSize: 0.08, altitudes: true, times: true}

var baseTime = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// starRing returns a closed star-shaped ring around (cx, cy): sorted angles
// and radii in [rmin, rmax] make it simple. Longitudes are stretched by
// 1/cos(lat) so zones look round; they are not wrapped (the caller wraps).
func starRing(rng *rand.Rand, cx, cy, rmin, rmax float64, n int, ccw bool) orb.Ring {
	angles := make([]float64, n)
	for i := range angles {
		angles[i] = (float64(i) + 0.1 + 0.8*rng.Float64()) / float64(n) * 2 * math.Pi
	}
	stretch := 1 / math.Max(math.Cos(cy*math.Pi/180), 0.05)
	r := make(orb.Ring, 0, n+1)
	for i := 0; i < n; i++ {
		a := angles[i]
		if !ccw {
			a = -a
		}
		rad := rmin + (rmax-rmin)*rng.Float64()
		r = append(r, orb.Point{cx + rad*math.Cos(a)*stretch, cy + rad*math.Sin(a)})
	}
	return append(r, r[0])
}

// wrapRing brings longitudes into [-180, 180] (a ring may then cross the
// antimeridian) and clamps latitudes.
func wrapRing(r orb.Ring) orb.Ring {
	for i := range r {
		r[i][0] = wrap180(r[i][0])
		r[i][1] = math.Max(-89.99, math.Min(89.99, r[i][1]))
	}
	r[len(r)-1] = r[0]
	return r
}

func randomPolygon(rng *rand.Rand, cx, cy, size float64) orb.Polygon {
	n := 5 + rng.IntN(40)
	outer := starRing(rng, cx, cy, size*0.6, size, n, true)
	p := orb.Polygon{wrapRing(outer)}
	if rng.IntN(3) == 0 {
		p = append(p, wrapRing(starRing(rng, cx, cy, size*0.1, size*0.5, 4+rng.IntN(10), false)))
	}
	return p
}

func randomLimit(rng *rand.Rand, lo, hi float64) *Limit {
	return &Limit{M: lo + (hi-lo)*rng.Float64(), Ref: Ref(rng.IntN(4))} // RefUnknown too
}

func randomZone(rng *rand.Rand, i int, c genConfig) *Zone {
	cx := c.minLon + (c.maxLon-c.minLon)*rng.Float64()
	cy := c.minLat + (c.maxLat-c.minLat)*rng.Float64()
	size := c.minSize + (c.maxSize-c.minSize)*rng.Float64()
	z := &Zone{ID: "Z" + strconv.Itoa(i), Name: "zone " + strconv.Itoa(i), Category: Restricted, ClearBufferM: float64(rng.IntN(3) * 100)}
	if rng.IntN(4) == 0 {
		z.Category = Warning
	}
	nv := 1
	if rng.IntN(5) == 0 {
		nv = 2 + rng.IntN(2) // stacked volumes, as in ED-269
	}
	for v := 0; v < nv; v++ {
		var vol Volume
		switch k := rng.IntN(10); {
		case k < 4:
			rm := size * 111e3 * (0.3 + 0.7*rng.Float64())
			vol.Circle = &Circle{Center: orb.Point{wrap180(cx), math.Max(-90, math.Min(90, cy))}, RadiusM: rm}
		case k < 8:
			vol.Area = orb.MultiPolygon{randomPolygon(rng, cx, cy, size*(1+0.5*float64(v)))}
		default:
			for j := 0; j < 2+rng.IntN(2); j++ {
				// Parts far enough apart not to overlap.
				vol.Area = append(vol.Area, randomPolygon(rng, cx+float64(j)*3*size, cy, size*0.9))
			}
		}
		if c.altitudes && rng.IntN(2) == 0 {
			switch rng.IntN(3) {
			case 0:
				vol.Floor = randomLimit(rng, 0, 100)
			case 1:
				vol.Ceiling = randomLimit(rng, 50, 300)
			default:
				vol.Floor = randomLimit(rng, 0, 100)
				vol.Ceiling = &Limit{M: vol.Floor.M + 20 + 200*rng.Float64(), Ref: vol.Floor.Ref}
			}
		}
		z.Volumes = append(z.Volumes, vol)
	}
	if c.times {
		switch rng.IntN(6) {
		case 0:
			z.ActiveFrom = baseTime.Add(time.Duration(rng.IntN(240)) * time.Hour)
			z.ActiveUntil = z.ActiveFrom.Add(time.Duration(1+rng.IntN(240)) * time.Hour)
		case 1:
			z.ActiveUntil = baseTime.Add(time.Duration(rng.IntN(480)) * time.Hour)
		case 2:
			w := Window{From: baseTime.Add(time.Duration(rng.IntN(100)) * time.Hour)}
			s := int32(rng.IntN(week - 3600))
			w.Weekly = []WeeklyInterval{{s, s + int32(3600+rng.IntN(40000))}}
			if w.Weekly[0].End > week {
				w.Weekly[0].End = week
			}
			z.Windows = []Window{w}
		}
	}
	return z
}

func randomSet(seed uint64, n int, c genConfig) *ZoneSet {
	rng := rand.New(rand.NewPCG(seed, 1))
	set := &ZoneSet{Version: "random-" + strconv.FormatUint(seed, 10)}
	for i := 0; i < n; i++ {
		set.Zones = append(set.Zones, randomZone(rng, i, c))
	}
	return set
}

// randomPoint draws a position over the set's extent (margin included),
// with random heights in random references and a random time.
func randomPoint(rng *rand.Rand, c genConfig) Point {
	m := c.maxSize * 2
	p := Point{
		Lon:  wrap180(c.minLon - m + (c.maxLon-c.minLon+2*m)*rng.Float64()),
		Lat:  math.Max(-90, math.Min(90, c.minLat-m+(c.maxLat-c.minLat+2*m)*rng.Float64())),
		Time: baseTime.Add(time.Duration(rng.Int64N(int64(600 * time.Hour)))),
	}
	for r := AMSL; r <= WGS84; r++ {
		if rng.IntN(4) != 0 {
			p.Heights = p.Heights.Set(r, -20+400*rng.Float64())
		}
	}
	return p
}

// polarZones are hand-made zones at the poles: a cap written as a ring
// around the pole, a cap written as a lon/lat box, a circle over the south
// pole, an annulus (cap with a polar-cap hole).
func polarZones() []*Zone {
	around := func(lat float64, ccw bool) orb.Ring {
		var r orb.Ring
		for i := 0; i <= 12; i++ {
			lon := wrap180(float64(i) * 30)
			if !ccw {
				lon = wrap180(-float64(i) * 30)
			}
			r = append(r, orb.Point{lon, lat})
		}
		r[len(r)-1] = r[0]
		return r
	}
	return []*Zone{
		{ID: "CAP-N-RING", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{around(89.5, true)}}}}},
		{ID: "CAP-N-BOX", Category: Warning, Volumes: []Volume{{Area: orb.MultiPolygon{{{{-180, 89.7}, {180, 89.7}, {180, 90}, {-180, 90}, {-180, 89.7}}}}}}},
		{ID: "ANNULUS-N", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{around(88.2, false), around(88.8, true)}}}}},
		{ID: "CIRCLE-S", Category: Restricted, Volumes: []Volume{{Circle: &Circle{Center: orb.Point{10, -89.8}, RadiusM: 60e3}}}},
		{ID: "CIRCLE-N", Category: Restricted, Volumes: []Volume{{Circle: &Circle{Center: orb.Point{170, 89.9}, RadiusM: 30e3}}}},
	}
}

// antimeridianZones cross 180°: an unsplit ring, a ring split into a
// MultiPolygon at the antimeridian, a circle centred on it.
func antimeridianZones() []*Zone {
	return []*Zone{
		{ID: "AM-RING", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{{{179, -1}, {-179, -1}, {-179, 1}, {179, 1}, {179, -1}}}}}}},
		{ID: "AM-SPLIT", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{
			{{{178, 5}, {180, 5}, {180, 7}, {178, 7}, {178, 5}}},
			{{{-180, 5}, {-178, 5}, {-178, 7}, {-180, 7}, {-180, 5}}},
		}}}},
		{ID: "AM-CIRCLE", Category: Warning, Volumes: []Volume{{Circle: &Circle{Center: orb.Point{180, -10}, RadiusM: 100e3}}}},
		{ID: "AM-HOLE", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{
			{{175, 10}, {-175, 10}, {-175, 20}, {175, 20}, {175, 10}},
			{{179, 14}, {179, 16}, {-179, 16}, {-179, 14}, {179, 14}},
		}}}}},
	}
}
