// Package fleet simulates drones flying missions from sites a few
// kilometres from real airports, again and again: take-off, climb, cruise to
// waypoints, loiter (circle), return, descend, land, pause on the ground.
// Drones never jump: every fix follows from the last at 5-25 m/s
// horizontally and 1-4 m/s vertically, 30-110 m above the site's ground
// (140-250 m for strays over a ceiling), with correlated GNSS noise of a
// few metres. Fixes carry alt_m (AMSL) and agl_m, so that zones limited
// above ground are tested against a known height rather than assumed.
//
// A share of the drones, the strays, fly missions whose path enters a zone
// of testdata/zones/airports.geojson and leaves it again; some of them fly
// over a zone's footprint above its ceiling, where that zone must not
// alarm. The others never enter any zone, whenever they fly (time-limited
// zones included). The fleet plans against its own coarse model of that
// zone set (the constants below); the package's tests check every path
// against the real file with the geofence package and the alerts engine.
//
// Everything is deterministic from the seed passed to New; Step's rng only
// decides which records are sent twice, as a retrying feed would. The demo,
// the simulate command and load tests use it.
package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// Airport is an aerodrome the fleet's sites are near.
type Airport struct {
	ICAO     string
	Lat, Lon float64 // aerodrome reference point: the centre of its zones in testdata/zones
	ElevM    float64 // aerodrome elevation, metres AMSL

	ctr     bool // a control zone (below 120 m AGL) and a terminal-area band (300-1500 m AMSL) around the airport
	tmaNear bool // a terminal-area band (floor 300 m AMSL) lies over some of the sites' area
}

// Airports are the aerodromes the fleet flies near (reference points and
// elevations are public facts); testdata/zones/airports.geojson draws each
// one's zones around the same reference point.
var Airports = []Airport{
	{"EGLL", 51.4700, -0.4543, 25, true, true},
	{"EGKK", 51.1481, -0.1903, 62, false, true}, // under Heathrow's band to the north
	{"LFPG", 49.0097, 2.5479, 119, false, true}, // under Orly's band to the south
	{"EHAM", 52.3105, 4.7683, -3, true, true},
	{"EDDF", 50.0379, 8.5622, 111, false, false},
	{"LSZH", 47.4647, 8.5492, 432, false, false},
	{"LEMD", 40.4983, -3.5676, 610, false, false},
	{"LIRF", 41.8003, 12.2389, 4, true, true},
	{"EIDW", 53.4213, -6.2701, 74, false, false},
	{"EKCH", 55.6180, 12.6508, 5, true, true},
	{"KJFK", 40.6413, -73.7781, 4, false, false},
	{"KLAX", 33.9416, -118.4085, 38, false, false},
}

// The zones testdata/zones/airports.geojson draws around every airport, in
// metres from its reference point, and the other zones near them.
const (
	atzR       = 5000  // ATZ: circle, ground to sky
	rpzR       = 6083  // RPZ (12 × 2 km along the runway, up to 600 m AMSL): its farthest corner
	rpzInR     = 1000  // RPZ: its nearest edge
	rpzCeilM   = 600   // RPZ ceiling, AMSL
	ctrInR     = 13843 // CTR-LOW octagon (below 120 m AGL): its nearest edge
	ctrR       = 14983 // CTR-LOW: its farthest corner
	ctrCeilM   = 120   // CTR-LOW ceiling, AGL
	tmaFloorM  = 300   // TMA band floor, AMSL
	marginM    = 700   // kept from every zone a path must not enter: noise, projection error, clear buffers
	maxHighAGL = 250   // the highest a stray flies over a ceiling
)

// others are the zones of testdata/zones/airports.geojson within 45 km of
// an airport that are neither its own nor another's of Airports, kept clear
// of at any time (the TFRs are time-limited). Orly's terminal-area band,
// 9 km south of LFPG, is left to LFPG's tmaNear.
var others = []struct{ lat, lon, r float64 }{
	{51.5560, -0.2796, 2000}, // TFR-WEMBLEY-2026-12-05
	{51.5033, -0.1276, 1500}, // TFR-WESTMINSTER-OPEN
	{48.9245, 2.3602, 2500},  // TFR-STADE-DE-FRANCE-2026-12-12
	{41.9022, 12.4568, 3000}, // TFR-VATICAN-2026-12-24
	{48.7233, 2.3794, ctrR},  // LFPO's control zone
	{51.4960, 0.0900, 500},   // PRISON-HMP-BELMARSH
	{48.7590, 2.3240, 500},   // PRISON-FRESNES
}

// Kind is what a drone's missions do with the zones.
type Kind uint8

const (
	// Clear drones never enter a zone.
	Clear Kind = iota
	// Stray drones fly into a zone (an airport's ATZ, or its control zone
	// below the ceiling), loiter inside and leave again.
	Stray
	// HighStray drones fly over the footprint of a zone with a ceiling,
	// above the ceiling: over a control zone (120 m AGL), where nothing
	// alarms, or over a runway protection zone (600 m AMSL) where the
	// ground is high (LSZH, LEMD), inside the airport's ATZ, which does.
	HighStray
)

func (k Kind) String() string {
	switch k {
	case Clear:
		return "clear"
	case Stray:
		return "stray"
	case HighStray:
		return "high-stray"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Defaults of Options.
const (
	DefaultStrayShare = 0.3
	DefaultHighShare  = 0.3
)

// Options shape a fleet. The zero value is the default fleet.
type Options struct {
	// StrayShare is the share of drones that stray into zones (rounded to
	// a whole number of drones): 0 means DefaultStrayShare, a negative
	// value none, 1 or more all.
	StrayShare float64
	// HighShare is the share of the strays that fly above a zone's
	// ceiling (HighStray): 0 means DefaultHighShare, a negative value none.
	// Only airports with such a zone take them (EGLL, EHAM, LIRF, EKCH for
	// control zones, LSZH and LEMD for runway zones); without one among
	// Airports they stray below instead.
	HighShare float64
	// Airports restricts the sites to these ICAO codes of the package's
	// Airports; empty means all of them.
	Airports []string
	// Operators: each drone's pilot stands a few metres from its site
	// and every third record carries the pilot's position (type live), as
	// a Remote ID broadcaster sends its System message less often than
	// its Location message. The drones' paths do not change with it.
	Operators bool
}

func share(v, def float64) float64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return min(v, 1)
}

// DroneInfo describes one drone of a fleet.
type DroneInfo struct {
	ID       string
	Kind     Kind
	Airport  string  // ICAO code
	Lat, Lon float64 // the site, where each mission starts and ends
	ElevM    float64 // the site's ground, metres AMSL (alt_m - agl_m of every fix)
}

// Fleet is a set of simulated drones; Step advances every drone by one fix.
type Fleet struct {
	drones []*drone
	now    time.Time
}

// New places n drones at sites near Airports (or o.Airports),
// deterministically from seed, each some way into its first mission. It
// panics when o names an airport that is not in Airports.
func New(n int, seed uint64, start time.Time, o Options) *Fleet {
	var aps []*Airport
	for i := range Airports {
		if len(o.Airports) == 0 || slices.Contains(o.Airports, Airports[i].ICAO) {
			aps = append(aps, &Airports[i])
		}
	}
	for _, code := range o.Airports {
		if !slices.ContainsFunc(aps, func(a *Airport) bool { return a.ICAO == code }) {
			panic(fmt.Sprintf("fleet: unknown airport %q", code))
		}
	}
	var high []*Airport
	for _, a := range aps {
		if highBand(a, a.ElevM) != nil {
			high = append(high, a)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	nStray := int(math.Round(float64(n) * share(o.StrayShare, DefaultStrayShare)))
	nHigh := int(math.Round(float64(nStray) * share(o.HighShare, DefaultHighShare)))
	kinds := make([]Kind, n)
	for i, j := range rng.Perm(n) {
		switch {
		case i < nHigh:
			kinds[j] = HighStray
		case i < nStray:
			kinds[j] = Stray
		}
	}
	f := &Fleet{now: start}
	for i := range n {
		k := kinds[i]
		var ap *Airport
		if k == HighStray && len(high) > 0 {
			ap = high[rng.IntN(len(high))]
		} else {
			ap = aps[rng.IntN(len(aps))]
			if k == HighStray {
				k = Stray
			}
		}
		d := newDrone(fmt.Sprintf("SIM-%04d", i+1), k, ap, rand.New(rand.NewPCG(seed, uint64(i)+100)))
		if o.Operators {
			// Placed from the index, not the drone's rng: a fleet with
			// operators flies exactly as one without.
			a, r := float64(i)*137.5*math.Pi/180, 12+float64(i%7)*3
			lat, lon := ap.latLon(d.site.x+r*math.Sin(a), d.site.y+r*math.Cos(a))
			d.op = &telemetry.Operator{Lat: round(lat, 7), Lon: round(lon, 7), Type: telemetry.OperatorLive}
		}
		f.drones = append(f.drones, d)
	}
	return f
}

// Now is the simulated time of the last Step.
func (f *Fleet) Now() time.Time { return f.now }

// Drones describes the fleet's drones, in the order of their ids.
func (f *Fleet) Drones() []DroneInfo {
	out := make([]DroneInfo, len(f.drones))
	for i, d := range f.drones {
		lat, lon := d.ap.latLon(d.site.x, d.site.y)
		out[i] = DroneInfo{ID: d.id, Kind: d.kind, Airport: d.ap.ICAO, Lat: lat, Lon: lon, ElevM: d.elev}
	}
	return out
}

// Step moves every drone one second on and returns one fix of each; a
// share dupRate of them is appended a second time, right after the first,
// as a retrying feed would. rng decides only the duplicates.
func (f *Fleet) Step(rng *rand.Rand, dupRate float64) []telemetry.Position {
	f.now = f.now.Add(time.Second)
	out := make([]telemetry.Position, 0, len(f.drones)+int(float64(len(f.drones))*dupRate)+1)
	for _, d := range f.drones {
		p := d.step(f.now)
		out = append(out, p)
		if rng.Float64() < dupRate {
			out = append(out, p)
		}
	}
	return out
}

func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + r.Float64()*(hi-lo) }

// The local plane is equirectangular around the airport: well under 1% off
// the great-circle distances the geofence measures within 30 km, which the
// margins cover.
const earthR = 6378137.0 // orb.EarthRadius, as the geofence uses

func (a *Airport) latLon(x, y float64) (lat, lon float64) {
	lat = a.Lat + y/earthR*180/math.Pi
	lon = a.Lon + x/(earthR*math.Cos(a.Lat*math.Pi/180))*180/math.Pi
	return lat, lon
}

func (a *Airport) local(lat, lon float64) vec {
	return vec{(lon - a.Lon) * math.Pi / 180 * earthR * math.Cos(a.Lat*math.Pi/180), (lat - a.Lat) * math.Pi / 180 * earthR}
}

// keepOut is the distance from an airport's reference point inside which
// a clear drone would enter one of its zones at any height it flies.
func (a *Airport) keepOut() float64 {
	if a.ctr {
		return ctrR + marginM
	}
	return rpzR + marginM
}

// maxAMSL is the highest a drone flies near the airport: under a
// terminal-area band's floor where one is near.
func (a *Airport) maxAMSL() float64 {
	if a.tmaNear {
		return tmaFloorM - 20
	}
	return math.Inf(1)
}

// obstacle is a zone, as a circle in an airport's plane, that a path must
// keep marginM away from.
type obstacle struct {
	c vec
	r float64
}

// obstacles are the zones near the airport other than its own.
func (a *Airport) obstacles() []obstacle {
	var obs []obstacle
	add := func(lat, lon, r float64) {
		if c := a.local(lat, lon); c.len() < 80_000 {
			obs = append(obs, obstacle{c, r})
		}
	}
	for i := range Airports {
		if o := &Airports[i]; o != a {
			add(o.Lat, o.Lon, o.keepOut()-marginM)
		}
	}
	for _, o := range others {
		add(o.lat, o.lon, o.r)
	}
	return obs
}

// band is where a high stray flies over a zone with a ceiling: its loiter
// centre between rMin and rMax from the airport's reference point, at
// hMin-hMax metres above the site's ground; clearR is the distance from
// the reference point its path must keep (0: none, it may enter the ATZ).
type band struct {
	rMin, rMax, hMin, hMax, clearR float64
}

// highBand is the band above a ceiling a high stray from a site whose
// ground is elev metres AMSL can fly at the airport, nil if there is none
// below maxHighAGL.
func highBand(a *Airport, elev float64) *band {
	if a.ctr {
		// Over the control zone, outside the ATZ and RPZ (no ceiling low
		// enough) and inside the band's hole.
		b := &band{rMin: rpzR + marginM + 1500, rMax: ctrInR - 2000, hMin: ctrCeilM + 20,
			hMax: math.Min(maxHighAGL, a.maxAMSL()-elev), clearR: rpzR + marginM}
		if b.hMax < b.hMin+20 {
			return nil
		}
		return b
	}
	// Over the RPZ around the reference point: inside the ATZ, which alarms.
	b := &band{rMin: 0, rMax: 300, hMin: math.Max(60, rpzCeilM-elev+25), hMax: maxHighAGL}
	if b.hMax < b.hMin+20 {
		return nil
	}
	return b
}

// drone is one simulated drone: its site, its current mission as legs, and
// where it is in them.
type drone struct {
	id   string
	kind Kind
	ap   *Airport
	obs  []obstacle
	site vec
	elev float64 // the site's ground, metres AMSL
	rng  *rand.Rand

	legs    []leg
	li      int     // current leg
	t       float64 // seconds into it
	bearing float64 // strays: from the airport to the site, where their incursions aim

	seq        int64
	heading    float64             // degrees, kept while hovering or on the ground
	nx, ny, nz float64             // GNSS error: east, north, up (metres)
	op         *telemetry.Operator // the pilot (Options.Operators), nil: not sent
}

// GNSS error: a first-order Gauss-Markov process per axis (a random walk
// pulled back to zero), as receivers' errors drift rather than jump.
const (
	sigmaH = 1.5  // metres per horizontal axis: ~3.7 m horizontal at 95%
	tauH   = 20.0 // seconds
	sigmaV = 1.0  // metres
	tauV   = 30.0 // seconds
)

var (
	phiH = math.Exp(-1 / tauH)
	phiV = math.Exp(-1 / tauV)
)

func newDrone(id string, k Kind, ap *Airport, rng *rand.Rand) *drone {
	d := &drone{id: id, kind: k, ap: ap, obs: ap.obstacles(), rng: rng}
	// Draw sites until one takes a valid mission; the first cycle's plan
	// is that mission.
	for try := 0; ; try++ {
		d.place()
		if legs, ok := d.plan(); ok {
			d.legs = legs
			break
		}
		if try == 1000 {
			panic(fmt.Sprintf("fleet: no site for %s near %s", id, ap.ICAO))
		}
	}
	d.nx, d.ny, d.nz = sigmaH*rng.NormFloat64(), sigmaH*rng.NormFloat64(), sigmaV*rng.NormFloat64()
	d.heading = rng.Float64() * 360
	// Start some way into the first mission, so that a fleet is busy from
	// its first second.
	var total float64
	for _, l := range d.legs {
		total += l.dur
	}
	d.advance(rng.Float64() * total)
	return d
}

// place draws the drone's site: clear drones far enough out for their
// whole mission to keep off the airport's zones, strays just outside them.
func (d *drone) place() {
	ko := d.ap.keepOut()
	var r float64
	if d.kind == Clear {
		r = ko + clearRadius + uniform(d.rng, 200, 2500)
	} else {
		r = ko + uniform(d.rng, 1000, 2500)
	}
	d.bearing = d.rng.Float64() * 2 * math.Pi
	d.site = polar(r, d.bearing)
	d.elev = math.Round((d.ap.ElevM+uniform(d.rng, -3, 12))*10) / 10
}

// Mission shapes.
const (
	clearRadius = 2500 // a clear mission stays within this of its site
	nearRadius  = 800  // a stray's waypoints near its site
)

// plan draws one mission from the site and back, and reports whether its
// path keeps to the drone's kind.
func (d *drone) plan() ([]leg, bool) {
	r := d.rng
	b := builder{pos: d.site}
	accel := uniform(r, 1.5, 3)
	loiterR := uniform(r, 80, 250)
	var h, v float64
	var wps []vec
	loiterAt := -1
	var centre vec
	switch d.kind {
	case Clear:
		h = math.Min(uniform(r, 30, 110), d.ap.maxAMSL()-d.elev)
		v = uniform(r, 6, 16)
		n := 2 + r.IntN(3)
		loiterAt = r.IntN(n)
		for range n {
			wps = append(wps, d.site.add(polar(uniform(r, 300, clearRadius-loiterR), r.Float64()*2*math.Pi)))
		}
	default:
		v = uniform(r, 12, 22)
		aim := d.bearing + uniform(r, -0.25, 0.25)
		var dist float64
		if d.kind == HighStray {
			hb := highBand(d.ap, d.elev)
			dist = uniform(r, hb.rMin, hb.rMax)
			h = uniform(r, hb.hMin, hb.hMax)
			if hb.rMax <= rpzInR {
				loiterR = uniform(r, 100, rpzInR-hb.rMax-300) // all of it over the RPZ
			}
		} else {
			h = math.Min(uniform(r, 30, 110), d.ap.maxAMSL()-d.elev)
			if d.ap.ctr && r.Float64() < 0.6 {
				dist = uniform(r, rpzR+marginM+1500, ctrInR-2000) // in the control zone, below its ceiling
			} else {
				dist = uniform(r, 1500, atzR-1500) // in the ATZ
			}
		}
		centre = polar(dist, aim)
		if r.Float64() < 0.5 {
			wps = append(wps, d.site.add(polar(uniform(r, 200, nearRadius), r.Float64()*2*math.Pi)))
		}
		loiterAt = len(wps)
		wps = append(wps, centre)
		if r.Float64() < 0.5 {
			wps = append(wps, d.site.add(polar(uniform(r, 200, nearRadius), r.Float64()*2*math.Pi)))
		}
	}
	b.ground(uniform(r, 20, 150))
	b.vertical(h, uniform(r, 1.5, 4), 0.8)
	for i, w := range wps {
		if i != loiterAt {
			b.line(w, v, accel)
			continue
		}
		// Circle around w: fly to the circle's nearest point, go round and
		// leave from there.
		centre = w
		entry := centre.add(polar(loiterR, b.pos.sub(centre).bearing()))
		b.line(entry, v, accel)
		dir := 1.0
		if r.IntN(2) == 0 {
			dir = -1
		}
		// At most 30 s a turn: a stray's incursion stays short.
		vl := uniform(r, math.Max(5, loiterR/30), 12)
		turns := 1 + r.IntN(3)
		if d.kind != Clear {
			turns = 1 + r.IntN(2)
		}
		b.arc(centre, dir*float64(turns)*2*math.Pi, vl, math.Min(accel, 1.5))
	}
	b.line(d.site, v, accel)
	b.vertical(0, uniform(r, 1, 3), 0.8)
	return b.legs, d.valid(b.legs)
}

// valid reports whether a mission's path keeps marginM off the zones the
// drone's kind must not enter.
func (d *drone) valid(legs []leg) bool {
	clearR := 0.0
	switch d.kind {
	case Clear:
		clearR = d.ap.keepOut()
	case HighStray:
		clearR = highBand(d.ap, d.elev).clearR
	}
	for i := range legs {
		l := &legs[i]
		for _, o := range d.obs {
			if l.distTo(o.c) < o.r+marginM {
				return false
			}
		}
		if clearR > 0 && l.distTo(vec{}) < clearR {
			return false
		}
	}
	return true
}

// advance moves the drone dt seconds on along its missions, planning the
// next one when one ends.
func (d *drone) advance(dt float64) {
	d.t += dt
	for d.t >= d.legs[d.li].dur {
		d.t -= d.legs[d.li].dur
		d.li++
		if d.li == len(d.legs) {
			d.next()
		}
	}
}

// next plans the next mission from the same site; after many invalid
// draws it flies the last one again.
func (d *drone) next() {
	d.li = 0
	for range 50 {
		if legs, ok := d.plan(); ok {
			d.legs = legs
			return
		}
	}
}

// step advances the drone one second and returns its fix at ts.
func (d *drone) step(ts time.Time) telemetry.Position {
	d.advance(1)
	l := &d.legs[d.li]
	pos, h, vel := l.at(d.t)
	r := d.rng
	d.nx = phiH*d.nx + sigmaH*math.Sqrt(1-phiH*phiH)*r.NormFloat64()
	d.ny = phiH*d.ny + sigmaH*math.Sqrt(1-phiH*phiH)*r.NormFloat64()
	d.nz = phiV*d.nz + sigmaV*math.Sqrt(1-phiV*phiV)*r.NormFloat64()
	// Height comes from the barometer, zeroed on the ground at take-off and
	// drifting with height: on the ground it is 0, near it nearly exact.
	hr := 0.0
	if h > 0 {
		hr = math.Max(0, round(h+d.nz*math.Min(1, h/10), 1))
	}
	speed := round(vel.len(), 1)
	if speed > 0 {
		d.heading = math.Mod(vel.bearing()*180/math.Pi+360, 360)
	}
	heading := round(d.heading, 1)
	if heading >= 360 {
		heading = 0
	}
	lat, lon := d.ap.latLon(pos.x+d.nx, pos.y+d.ny)
	d.seq++
	v := &[4]float64{round(d.elev+hr, 1), hr, speed, heading} // one allocation for the four fields
	p := telemetry.Position{
		DroneID: d.id, Seq: d.seq, TS: ts,
		Lat: round(lat, 7), Lon: round(lon, 7),
		AltM: &v[0], AGLM: &v[1], SpeedMPS: &v[2], HeadingDeg: &v[3],
	}
	if d.op != nil && d.seq%3 == 1 {
		p.Operator = d.op
	}
	return p
}

func round(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}
