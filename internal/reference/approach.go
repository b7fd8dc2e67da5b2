package reference

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// ApproachSettings are the alerter's approaching settings (docs/design.md,
// "Approaching warnings"): Before is the horizon by zone category, "*" for
// every other category; a category absent (with no "*") or 0 is off. A
// zone's own approach_before_s overrides its category's. BufferM is the
// distance at which a drone closing on a zone is warned whatever its
// predicted time (0: never). The zero value warns of nothing, except for
// zones that carry approach_before_s themselves.
type ApproachSettings struct {
	Before  map[string]time.Duration
	BufferM float64
}

// horizon is the zone's horizon in seconds (0: off).
func (s ApproachSettings) horizon(z *Zone) float64 {
	if z.hasApproach {
		return z.approachS
	}
	if h, ok := s.Before[z.category]; ok {
		return h.Seconds()
	}
	return s.Before["*"].Seconds()
}

// ApproachID is the contract's approach id: the first 16 bytes of
// SHA-256("approach" NUL drone NUL zone NUL seq), hex, of the position that
// opened the episode; after the drone's seq went back r > 0 times, of
// SHA-256("approach" NUL drone NUL zone NUL seq NUL r).
func ApproachID(drone, zone string, seq int64, resets int) string {
	in := "approach\x00" + drone + "\x00" + zone + "\x00" + strconv.FormatInt(seq, 10)
	if resets > 0 {
		in += "\x00" + strconv.Itoa(resets)
	}
	return hashHex(in)
}

// episode is an open approach of a drone to a zone.
type episode struct {
	id           string
	outside      bool      // outside the hold band since outsideSince
	outsideSince time.Time // the drone's ts at the first position outside
}

// mPerDeg is metres per degree on the contract's sphere.
const mPerDeg = 6378137 * math.Pi / 180

// flat is a local flat frame around a point: x metres east, y metres
// north. It is an affine map of (lon, lat), so straight lines and
// point-in-polygon are the same in both.
type flat struct{ lon0, lat0, cos float64 }

func flatAt(lon, lat float64) flat { return flat{lon, lat, math.Cos(lat * math.Pi / 180)} }

func (f flat) xy(lon, lat float64) [2]float64 {
	return [2]float64{(lon - f.lon0) * f.cos * mPerDeg, (lat - f.lat0) * mPerDeg}
}

func (f flat) lonLat(x, y float64) (lon, lat float64) {
	return f.lon0 + x/(f.cos*mPerDeg), f.lat0 + y/mPerDeg
}

func cross(a, b [2]float64) float64 { return a[0]*b[1] - a[1]*b[0] }

// velocity is the design's velocity of the drone at p, its previous
// applied position prev (nil: none) and its velocity there v (nil: none):
// the reported speed and heading, else the displacement since prev smoothed
// with a 4 s time constant; nil after a gap over 10 s, dt <= 0, or with
// nothing to go by.
func velocity(p, prev *telemetry.Position, v *[2]float64) *[2]float64 {
	if p.SpeedMPS != nil && p.HeadingDeg != nil {
		h := *p.HeadingDeg * math.Pi / 180
		return &[2]float64{*p.SpeedMPS * math.Sin(h), *p.SpeedMPS * math.Cos(h)}
	}
	if prev == nil {
		return nil
	}
	dt := p.TS.Sub(prev.TS).Seconds()
	if dt <= 0 || dt > 10 {
		return nil
	}
	d := flatAt(prev.Lon, prev.Lat).xy(p.Lon, p.Lat)
	raw := [2]float64{d[0] / dt, d[1] / dt}
	if v == nil {
		return &raw
	}
	a := math.Min(1, dt/4)
	return &[2]float64{v[0] + a*(raw[0]-v[0]), v[1] + a*(raw[1]-v[1])}
}

// insideArea: horizontally inside the zone (no buffer, no heights, no time).
func (z *Zone) insideArea(lon, lat float64) bool {
	if z.circle != nil {
		return haversineM(lon, lat, z.circle[0], z.circle[1]) <= z.circle[2]
	}
	for _, poly := range z.polys {
		if evenOdd(poly, lon, lat) {
			return true
		}
	}
	return false
}

// edges calls fn with every edge of every ring of the zone's polygons, in
// the flat frame f.
func (z *Zone) edges(f flat, fn func(a, b [2]float64)) {
	for _, poly := range z.polys {
		for _, ring := range poly {
			for i := range ring {
				j := (i + 1) % len(ring)
				fn(f.xy(ring[i][0], ring[i][1]), f.xy(ring[j][0], ring[j][1]))
			}
		}
	}
}

// entry is the first time t >= 0 (s) at which the straight path from p at
// velocity v (m/s east, north) is inside the zone's area, when it is at
// most within: 0 when p is inside; for a circle the smaller root of
// |v·t − c| = r in the flat frame around p; for polygons the first
// crossing of an edge after which the path is inside.
func (z *Zone) entry(p *telemetry.Position, v [2]float64, within float64) (float64, bool) {
	if z.insideArea(p.Lon, p.Lat) {
		return 0, true
	}
	f := flatAt(p.Lon, p.Lat)
	if z.circle != nil {
		c := f.xy(z.circle[0], z.circle[1])
		r := z.circle[2]
		a := v[0]*v[0] + v[1]*v[1]
		b := -2 * (v[0]*c[0] + v[1]*c[1])
		cc := c[0]*c[0] + c[1]*c[1] - r*r
		disc := b*b - 4*a*cc
		if a == 0 || disc < 0 {
			return 0, false
		}
		t1, t2 := (-b-math.Sqrt(disc))/(2*a), (-b+math.Sqrt(disc))/(2*a)
		if t2 < 0 {
			return 0, false
		}
		t := math.Max(t1, 0)
		return t, t <= within
	}
	var ts []float64
	z.edges(f, func(a, b [2]float64) {
		// v·t = a + s·(b − a), 0 <= s <= 1.
		d := [2]float64{b[0] - a[0], b[1] - a[1]}
		den := cross(v, d)
		if den == 0 {
			return // parallel: the edges next to it are crossed instead
		}
		t, s := cross(a, d)/den, cross(a, v)/den
		if s >= 0 && s <= 1 && t >= 0 && t <= within {
			ts = append(ts, t)
		}
	})
	sort.Float64s(ts)
	const after = 1e-4 // s: just past the crossing (at most 3 cm at 300 m/s)
	for _, t := range ts {
		if z.insideArea(f.lonLat(v[0]*(t+after), v[1]*(t+after))) {
			return t, true
		}
	}
	return 0, false
}

// distance is the distance (m) from p to the zone's area: 0 inside; for a
// circle the haversine distance to its centre less the radius; for
// polygons the nearest edge in the flat frame around p.
func (z *Zone) distance(p *telemetry.Position) float64 {
	if z.circle != nil {
		return math.Max(0, haversineM(p.Lon, p.Lat, z.circle[0], z.circle[1])-z.circle[2])
	}
	if z.insideArea(p.Lon, p.Lat) {
		return 0
	}
	best := math.Inf(1)
	z.edges(flatAt(p.Lon, p.Lat), func(a, b [2]float64) {
		d := [2]float64{b[0] - a[0], b[1] - a[1]}
		s := 0.0
		if l := d[0]*d[0] + d[1]*d[1]; l > 0 {
			s = math.Max(0, math.Min(1, -(a[0]*d[0]+a[1]*d[1])/l))
		}
		best = math.Min(best, math.Hypot(a[0]+s*d[0], a[1]+s*d[1]))
	})
	return best
}

// approach applies the approaching rules to the drone's applied position p
// (prev: its previous applied position, nil when none), after the
// position's raises and clears: velocity, then for each zone without an
// active alarm, in zone id order, whether it qualifies and whether it is
// within the hold band; episodes open, hold and end.
func (pr *partitionRun) approach(d *refDrone, zones []Zone, auths []Auth, T time.Time, p, prev *telemetry.Position, out []Event) []Event {
	d.v = velocity(p, prev, d.v)
	if d.episodes == nil {
		d.episodes, d.pending = map[string]*episode{}, map[string]bool{}
	}
	// Episodes of zones that left the set end at this position.
	for _, zid := range sortedKeys(d.episodes) {
		if zoneByID(zones, zid) == nil {
			out = append(out, Event{AlarmID: d.episodes[zid].id, Type: "approach_ended", DroneID: p.DroneID, ZoneID: zid, Seq: p.Seq, Reason: "zone_removed"})
			delete(d.episodes, zid)
		}
	}
	for zid := range d.pending {
		if zoneByID(zones, zid) == nil {
			delete(d.pending, zid)
		}
	}
	order := make([]*Zone, 0, len(zones))
	for i := range zones {
		order = append(order, &zones[i])
	}
	sort.Slice(order, func(i, j int) bool { return order[i].id < order[j].id })
	B := pr.approachS.BufferM
	for _, z := range order {
		if _, alarmed := d.alarms[z.id]; alarmed {
			delete(d.episodes, z.id)
			delete(d.pending, z.id)
			continue
		}
		H := pr.approachS.horizon(z)
		if H <= 0 && d.episodes[z.id] == nil && !d.pending[z.id] {
			continue // off, and nothing to end
		}
		// What the position sees of the zone. Its heights held as a raise
		// tests them; active at ts + eta for a prediction, at ts when near.
		heights := z.heightsHold(p, 0)
		eta, predicted := -1.0, false
		if H > 0 && heights && d.v != nil && math.Hypot(d.v[0], d.v[1]) >= 1 {
			if t, ok := z.entry(p, *d.v, 1.5*H); ok && z.activeAt(p.TS.Add(time.Duration(t*float64(time.Second)))) {
				eta, predicted = t, true
			}
		}
		nearOn := H > 0 && B > 0 && heights && z.activeAt(p.TS)
		dist := math.Inf(1)
		if nearOn {
			dist = z.distance(p)
		}
		band := predicted && eta <= 1.5*H || nearOn && dist <= 1.5*B
		// Closing: the area more than 0.5 m nearer one second along the
		// (smoothed) velocity than here.
		closing := false
		if nearOn && dist <= B && d.v != nil && math.Hypot(d.v[0], d.v[1]) >= 1 {
			ahead := *p
			ahead.Lat = p.Lat + d.v[1]/(6378137*math.Pi/180)
			ahead.Lon = p.Lon + d.v[0]/(6378137*math.Pi/180*math.Cos(p.Lat*math.Pi/180))
			closing = z.distance(&ahead) < dist-0.5
		}
		qualifies := (predicted && eta <= H || closing) && Covering(auths, p.DroneID, z.id, z.category, T) == nil

		if ep := d.episodes[z.id]; ep != nil {
			switch {
			case band:
				ep.outside = false
			case !ep.outside:
				ep.outside, ep.outsideSince = true, p.TS
			}
			if ep.outside && p.TS.Sub(ep.outsideSince) >= 10*time.Second {
				out = append(out, Event{AlarmID: ep.id, Type: "approach_ended", DroneID: p.DroneID, ZoneID: z.id, Seq: p.Seq, Reason: "turned_away"})
				delete(d.episodes, z.id)
			}
			continue
		}
		switch {
		case !qualifies:
			delete(d.pending, z.id)
		case !d.pending[z.id]:
			d.pending[z.id] = true
		default:
			delete(d.pending, z.id)
			id := ApproachID(p.DroneID, z.id, p.Seq, d.last.resets)
			d.episodes[z.id] = &episode{id: id}
			if !predicted || eta > H {
				eta = -1 // warned because near: no time to entry
			}
			out = append(out, Event{AlarmID: id, Type: "approaching", DroneID: p.DroneID, ZoneID: z.id, Seq: p.Seq, ETA: eta})
		}
	}
	return out
}

// raisedApproach: the zone raised, so the drone's episode for it ends
// without an event of its own, and a first qualifying position is
// forgotten.
func (d *refDrone) raisedApproach(zone string) {
	delete(d.episodes, zone)
	delete(d.pending, zone)
}

// loseApproaches ends each of the drone's episodes: its signal is lost.
func (pr *partitionRun) loseApproaches(d *refDrone, id string, out []Event) []Event {
	for _, zid := range sortedKeys(d.episodes) {
		out = append(out, Event{AlarmID: d.episodes[zid].id, Type: "approach_ended", DroneID: id, ZoneID: zid, Seq: d.last.seq, Reason: "signal_lost"})
		delete(d.episodes, zid)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
