package soak

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/zonegen"
	"github.com/nofly-dev/nofly/telemetry"
)

// The soak's fleet: every drone sends one fix a tick with seq = tick + 1,
// so a (drone, seq) of an event names the tick, and the tick and the
// drone's client name the request whose 202 it follows: the accept log is
// one time per client and tick, not one per record.
//
// Wanderers fly straight lines at a set speed from a random point of one
// of the set's sites (where its zones are) and turn back towards the site
// when they leave it: the zone index is asked where zones are dense.
// Togglers hop between a point inside a zone and one outside every zone
// every few fixes, their cycles shifted, so a steady share of positions
// raises or clears an alarm whatever the wanderers do.

const metresPerDegLat = 111_320

type drone struct {
	lon, lat float64 // degrees
	vE, vN   float64 // m/s
	site     int
}

// fleet is the drones, stepped once a tick by the generator goroutine.
type fleet struct {
	sites   []zonegen.Site
	drones  []drone
	ids     []string
	stride  int // every stride-th drone is a toggler; 0: none
	every   int
	in, out [2]float64 // toggler points (lon, lat)
	altAGL  float64
	togAlt  float64
	clients int
}

func newFleet(set *zonegen.Set, n int, c Config, in, out [2]float64) *fleet {
	f := &fleet{sites: set.Sites, drones: make([]drone, n), ids: make([]string, n), stride: c.togglerStride(), every: c.ToggleEvery,
		in: in, out: out, altAGL: c.AltAGLM, togAlt: 120, clients: c.Clients}
	r := rand.New(rand.NewPCG(c.Seed, 0x534f414b))
	starts := set.Positions(c.Seed, n)
	for i := range f.drones {
		a := r.Float64() * 2 * math.Pi
		sp := c.SpeedMPS * (0.5 + r.Float64())
		f.drones[i] = drone{lon: starts[i][0], lat: starts[i][1], vE: sp * math.Cos(a), vN: sp * math.Sin(a), site: nearest(set.Sites, starts[i])}
		f.ids[i] = f.droneID(i)
	}
	return f
}

func nearest(sites []zonegen.Site, p [2]float64) int {
	best, bd := 0, math.Inf(1)
	for i, s := range sites {
		if d := distM(s.Lon, s.Lat, p[0], p[1]); d < bd {
			best, bd = i, d
		}
	}
	return best
}

func distM(lon1, lat1, lon2, lat2 float64) float64 {
	x := (lon2 - lon1) * math.Cos((lat1+lat2)/2*math.Pi/180) * metresPerDegLat
	y := (lat2 - lat1) * metresPerDegLat
	return math.Hypot(x, y)
}

// droneID names drone i: togglers TGL-, wanderers SOAK-.
func (f *fleet) droneID(i int) string {
	if f.isToggler(i) {
		return fmt.Sprintf("TGL-%06d", i)
	}
	return fmt.Sprintf("SOAK-%06d", i)
}

func (f *fleet) isToggler(i int) bool { return f.stride > 0 && i%f.stride == 0 }

// droneIndex is the i of a droneID; false for another id.
func droneIndex(id string) (int, bool) {
	_, n, ok := strings.Cut(id, "-")
	if !ok || !(strings.HasPrefix(id, "TGL-") || strings.HasPrefix(id, "SOAK-")) {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil && i >= 0
}

// clientOf is the client that posts drone i's positions.
func clientOf(i, clients int) int { return i % clients }

// inside says whether toggler i's fix of seq is in the zone: in for every
// fixes, then out, its cycle shifted by its index.
func togglerInside(i int, seq int64, every int) bool {
	return ((seq-1+int64(i))/int64(every))%2 == 1
}

// tick steps the first active drones by dt and returns each client's
// NDJSON body for tick k (seq k+1), stamped ts.
func (f *fleet) tick(k int64, active int, dt float64, ts time.Time) [][]byte {
	bodies := make([][]byte, f.clients)
	seq := k + 1
	var p telemetry.Position
	for i := range min(active, len(f.drones)) {
		d := &f.drones[i]
		alt := f.altAGL
		if f.isToggler(i) {
			pt := f.out
			if togglerInside(i, seq, f.every) {
				pt = f.in
			}
			d.lon, d.lat, alt = pt[0], pt[1], f.togAlt
		} else {
			f.move(d, dt)
		}
		p = telemetry.Position{DroneID: f.ids[i], Seq: seq, TS: ts, Lat: round6(d.lat), Lon: round6(d.lon),
			AltM: &alt, AltRef: "AGL"}
		c := clientOf(i, f.clients)
		bodies[c] = append(p.AppendJSON(bodies[c]), '\n')
	}
	return bodies
}

// move flies d dt seconds on; past its site's edge it turns to head back
// to the site's centre.
func (f *fleet) move(d *drone, dt float64) {
	cos := math.Cos(d.lat * math.Pi / 180)
	d.lat += d.vN * dt / metresPerDegLat
	d.lon += d.vE * dt / (metresPerDegLat * cos)
	s := f.sites[d.site]
	if distM(s.Lon, s.Lat, d.lon, d.lat) > s.RadiusM {
		sp := math.Hypot(d.vE, d.vN)
		x, y := (s.Lon-d.lon)*cos*metresPerDegLat, (s.Lat-d.lat)*metresPerDegLat
		h := math.Hypot(x, y)
		d.vE, d.vN = sp*x/h, sp*y/h
	}
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// togglerPoints finds where togglers fly: in, a site's point inside a zone
// that alarms at the togglers' 120 m AGL; out, a point beyond the sites'
// areas in no zone, with 200 m around it in none either (the clear
// buffers). The site is the first that has both.
func togglerPoints(set *zonegen.Set, ix *geofence.Index, now time.Time) (in, out [2]float64, site zonegen.Site, err error) {
	h := geofence.Heights{AGL: 120, HasAGL: true}
	var hits []geofence.Hit
	hitsAt := func(lon, lat float64) int {
		hits = ix.Query(geofence.Point{Lat: lat, Lon: lon, Time: now, Heights: h}, hits)
		return len(hits)
	}
	clear := func(lon, lat float64) bool {
		for _, d := range [][2]float64{{0, 0}, {200, 0}, {-200, 0}, {0, 200}, {0, -200}} {
			if hitsAt(lon+d[0]/(metresPerDegLat*math.Cos(lat*math.Pi/180)), lat+d[1]/metresPerDegLat) > 0 {
				return false
			}
		}
		return true
	}
	for _, s := range set.Sites {
		if hitsAt(s.Lon, s.Lat) == 0 {
			continue
		}
		for _, a := range []float64{90, 0, 180, 270} {
			rad := a * math.Pi / 180
			d := s.RadiusM + 3000
			lat := s.Lat + d*math.Sin(rad)/metresPerDegLat
			lon := s.Lon + d*math.Cos(rad)/(metresPerDegLat*math.Cos(s.Lat*math.Pi/180))
			if clear(lon, lat) {
				return [2]float64{s.Lon, s.Lat}, [2]float64{lon, lat}, s, nil
			}
		}
	}
	return in, out, site, errors.New("soak: no site with a zone at its centre and a clear point beside it")
}

// acceptLog is when each client's request of each tick had its 202, in
// ns since the start; 0: not (yet) accepted.
type acceptLog struct {
	mu sync.Mutex
	at [][]int64 // [client][tick]
}

func newAcceptLog(clients int) *acceptLog { return &acceptLog{at: make([][]int64, clients)} }

func (l *acceptLog) add(client int, k int64, ns int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for int64(len(l.at[client])) <= k {
		l.at[client] = append(l.at[client], 0)
	}
	l.at[client][k] = max(ns, 1)
}

// of is when the request carrying drone i's fix seq had its 202.
func (l *acceptLog) of(i int, seq int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, k := clientOf(i, len(l.at)), seq-1
	if k < 0 || k >= int64(len(l.at[c])) || l.at[c][k] == 0 {
		return 0, false
	}
	return l.at[c][k], true
}
