package benchcompare

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nofly-dev/nofly/internal/fleet"
	"github.com/nofly-dev/nofly/telemetry"
)

// The end-to-end benchmark's traffic: the simulated fleet (internal/fleet,
// straight passes across airports, a few stray alarms) and togglers, drones
// of its own that hop in and out of one zone of the default zone set
// (testdata/zones/airports.geojson) every few fixes, so that a known share
// of positions raises or clears an alarm, spread evenly over the run: the
// records whose 202 → alerts.events latency is measured.

// Toggler positions: 3 km south of Frankfurt's aerodrome reference point
// (inside EDDF-ATZ, a 5 km circle without height limits, and south of the
// EDDF-RPZ runway polygon) and 8 km south (beyond the ATZ and its 100 m
// clear buffer, in no zone). TestTogglersCrossOneZone holds them to the
// zone file.
const (
	togglerZone   = "EDDF-ATZ"
	togglerLon    = 8.5622
	togglerInLat  = 50.0109
	togglerOutLat = 49.9660
	togglerAltM   = 120
)

// togglers are n drones TGL-0001… that each fly inside togglerZone for
// every fixes, then outside for every fixes, and so on; drone j's cycle is
// shifted by j fixes, so about n/every of them cross the boundary at each
// step.
type togglers struct {
	n, every int
	seq      int64
}

// step returns one fix of each toggler at ts.
func (t *togglers) step(ts time.Time) []telemetry.Position {
	t.seq++
	out := make([]telemetry.Position, t.n)
	for j := range t.n {
		lat := togglerOutLat
		if t.inside(j, t.seq) {
			lat = togglerInLat
		}
		out[j] = telemetry.Position{DroneID: fmt.Sprintf("TGL-%04d", j+1), Seq: t.seq, TS: ts,
			Lat: lat, Lon: togglerLon, AltM: telemetry.Float(togglerAltM)}
	}
	return out
}

// inside says whether toggler j's fix of seq is in the zone.
func (t *togglers) inside(j int, seq int64) bool {
	return ((seq-1+int64(j))/int64(t.every))%2 == 1
}

// traffic is the benchmark's drones, stepped together: one fix of every
// drone a tick (and the fleet's re-sends), split over the clients by
// drone, each drone always on the same client so its records reach ingest
// in seq order.
type traffic struct {
	fleet   *fleet.Fleet
	tog     *togglers
	rng     *rand.Rand
	dupRate float64
	clients int
}

func newTraffic(drones, togglerCount, every, clients int, dupRate float64, seed uint64) *traffic {
	return &traffic{
		fleet: fleet.New(drones-togglerCount, seed, time.Now().UTC(), fleet.Options{}),
		tog:   &togglers{n: togglerCount, every: max(1, every)},
		rng:   rand.New(rand.NewPCG(seed, 1)), dupRate: dupRate, clients: clients,
	}
}

// batch is one request body and the records in it, in order.
type batch struct {
	body []byte
	recs []recordKey
}

type recordKey struct {
	drone string
	seq   int64
}

// tick steps every drone once, stamps the fixes with ts (records are live:
// the fleet's own clock runs one second a step, faster or slower than the
// benchmark's ticks) and returns each client's batch; limit > 0 keeps only
// the first limit records. n is the records in all batches.
func (t *traffic) tick(ts time.Time, limit int) (bs []batch, n int) {
	ps := t.fleet.Step(t.rng, t.dupRate)
	if t.tog.n > 0 {
		ps = append(ps, t.tog.step(ts)...)
	}
	if limit > 0 && len(ps) > limit {
		ps = ps[:limit]
	}
	bs = make([]batch, t.clients)
	for i := range ps {
		p := &ps[i]
		p.TS = ts
		c := clientOf(p.DroneID, t.clients)
		bs[c].body = append(p.AppendJSON(bs[c].body), '\n')
		bs[c].recs = append(bs[c].recs, recordKey{p.DroneID, p.Seq})
	}
	return bs, len(ps)
}

// acceptLog is when each record was accepted (ingest's 202 of its
// request), by drone and seq, in nanoseconds since the run's start.
// A drone's seqs are kept in a slice from its first seq on (the fleet's and
// the togglers' count up by one a fix); one below the first goes to a map.
type acceptLog struct {
	drones map[string]*acceptTimes
}

type acceptTimes struct {
	first int64
	at    []int64 // at[seq-first]; 0: not accepted
	below map[int64]int64
}

func newAcceptLog() *acceptLog { return &acceptLog{drones: map[string]*acceptTimes{}} }

// add notes that (drone, seq) was accepted at ns; a re-send keeps the
// first time.
func (l *acceptLog) add(drone string, seq, ns int64) {
	ns = max(ns, 1) // 0 means not accepted
	d := l.drones[drone]
	if d == nil {
		d = &acceptTimes{first: seq}
		l.drones[drone] = d
	}
	if seq < d.first {
		if d.below == nil {
			d.below = map[int64]int64{}
		}
		if d.below[seq] == 0 {
			d.below[seq] = ns
		}
		return
	}
	i := seq - d.first
	for int64(len(d.at)) <= i {
		d.at = append(d.at, 0)
	}
	if d.at[i] == 0 {
		d.at[i] = ns
	}
}

// at returns when (drone, seq) was accepted.
func (l *acceptLog) at(drone string, seq int64) (ns int64, ok bool) {
	d := l.drones[drone]
	if d == nil {
		return 0, false
	}
	if seq < d.first {
		ns = d.below[seq]
		return ns, ns != 0
	}
	if i := seq - d.first; i < int64(len(d.at)) && d.at[i] != 0 {
		return d.at[i], true
	}
	return 0, false
}

// merge adds o's drones (the clients' logs hold disjoint drones).
func (l *acceptLog) merge(o *acceptLog) {
	for k, v := range o.drones {
		l.drones[k] = v
	}
}
