// Package scenario generates deterministic drone traffic for the alerter's
// proofs and benchmarks: drones flying between waypoints over the zones of
// testdata/scenarios/zones.geojson, with altitude changes, records without
// a height, duplicated records, stale ones (an older record re-sent later),
// wild seqs and counters that start again.
// The same Config (seed included) always gives the same records in the
// same order.
package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// ZonesFile is the zone set the scenario flies over, relative to the
// repository root.
const ZonesFile = "testdata/scenarios/zones.geojson"

// Config says what to generate. Zero fields take DefaultConfig's values.
type Config struct {
	Seed      uint64
	Drones    int
	Positions int     // per drone
	DupRate   float64 // probability that a record is sent again later (same content)
	StaleRate float64 // probability that, after a record, an older record of the same drone is re-sent
	// WildRate is the probability that a fix carries a wild seq (near the
	// largest int64) instead of the drone's counter, which goes on after it
	// as if nothing happened; RestartRate the probability that a drone's
	// counter starts again from near 0 before a fix (a feed restarted).
	WildRate    float64
	RestartRate float64
	// SilentRate is the probability that, before a fix, a drone falls
	// silent for 40 to 120 s (it flies on, sending nothing): the log's
	// clock then declares its alarms' signal lost, and its next fix
	// regains it.
	SilentRate float64
	Start      time.Time
	Interval   time.Duration // between two fixes of a drone
}

// DefaultConfig is the reference proof's scenario: 100 drones × 500
// positions, 4% duplicates, 1% stale records, 0.1% wild seqs, 0.1% counter
// restarts and 0.2% silences, from 10:00Z on 2026-12-02 every 2 s (so the
// TIME zone, active 10:05-10:12, switches on and off).
func DefaultConfig() Config {
	return Config{Seed: 1, Drones: 100, Positions: 500, DupRate: 0.04, StaleRate: 0.01, WildRate: 0.001, RestartRate: 0.001,
		SilentRate: 0.002, Start: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Interval: 2 * time.Second}
}

// Scenario is a generated stream of records, in the order they are sent.
type Scenario struct {
	Records []telemetry.Position
	// Received is when each record is received, the log's clock (its Kafka
	// timestamp): the time of the step it is sent in — a fix's own ts, a
	// re-send's later step.
	Received   []time.Time
	Unique     int // distinct (drone, seq)
	Duplicates int // exact re-sends
	Stale      int // re-sends of an older record after a newer one
	Wild       int // fixes with a wild seq (counted in Unique)
	Restarts   int // counters started again (the fix after it counted in Unique)
	Silences   int // drones that fell silent for a while
	Unsent     int // fixes not sent while silent (Unique + Unsent = Drones × Positions)
}

// The area the drones fly in and the waypoints they aim at (zone centres
// and edges in testdata/scenarios/zones.geojson).
const (
	minLat, maxLat = 51.40, 51.54
	minLon, maxLon = -0.57, -0.33
	groundAMSL     = 25.0 // the ground's height, for agl_m
)

var waypoints = [][2]float64{ // lon, lat
	{-0.47, 51.47}, {-0.49, 51.49}, {-0.40, 51.445}, {-0.41, 51.435}, {-0.40, 51.50}, {-0.385, 51.51},
	{-0.52, 51.435}, {-0.44, 51.505}, {-0.365, 51.49}, {-0.445, 51.48}, {-0.54, 51.51}, {-0.43, 51.47},
}

type drone struct {
	id       string
	lat, lon float64
	alt      float64
	speed    float64 // m/s
	target   [2]float64
	hasAGL   bool
	seq      int64
	silent   int // the step up to which the drone sends nothing
}

// Generate returns the scenario of cfg.
func Generate(cfg Config) *Scenario {
	def := DefaultConfig()
	if cfg.Drones == 0 {
		cfg.Drones = def.Drones
	}
	if cfg.Positions == 0 {
		cfg.Positions = def.Positions
	}
	if cfg.Start.IsZero() {
		cfg.Start = def.Start
	}
	if cfg.Interval == 0 {
		cfg.Interval = def.Interval
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e6f666c79))
	ds := make([]*drone, cfg.Drones)
	for i := range ds {
		d := &drone{
			id:     fmt.Sprintf("UAV-%04d", i),
			lat:    minLat + rng.Float64()*(maxLat-minLat),
			lon:    minLon + rng.Float64()*(maxLon-minLon),
			alt:    30 + rng.Float64()*150,
			speed:  10 + rng.Float64()*15,
			hasAGL: rng.IntN(2) == 0,
			seq:    int64(rng.IntN(1000)),
		}
		d.target = pick(rng)
		ds[i] = d
	}
	history := make(map[string][]telemetry.Position, cfg.Drones)
	sc := &Scenario{}
	scheduled := map[int][]telemetry.Position{}
	base := 0
	order := make([]int, cfg.Drones)
	for i := range order {
		order[i] = i
	}
	var ts time.Time
	emit := func(p telemetry.Position) {
		sc.Records = append(sc.Records, p)
		sc.Received = append(sc.Received, ts)
	}
	for step := 0; step < cfg.Positions; step++ {
		ts = cfg.Start.Add(time.Duration(step) * cfg.Interval)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, di := range order {
			d := ds[di]
			d.move(rng, cfg.Interval.Seconds())
			if cfg.SilentRate > 0 && step >= d.silent && rng.Float64() < cfg.SilentRate {
				d.silent = step + int((40*time.Second+time.Duration(rng.IntN(80))*time.Second)/cfg.Interval)
				sc.Silences++
			}
			if step < d.silent {
				d.seq++ // the counter goes on: the fix was made, not sent
				sc.Unsent++
				continue
			}
			if cfg.RestartRate > 0 && rng.Float64() < cfg.RestartRate {
				d.seq = int64(rng.IntN(10))
				sc.Restarts++
			}
			p := d.position(rng, ts)
			if cfg.WildRate > 0 && rng.Float64() < cfg.WildRate {
				p.Seq = math.MaxInt64 - int64(rng.IntN(1000))
				sc.Wild++
			}
			history[d.id] = append(history[d.id], p)
			for _, q := range scheduled[base] {
				emit(q)
			}
			delete(scheduled, base)
			emit(p)
			sc.Unique++
			if rng.Float64() < cfg.DupRate {
				at := base + 1 + rng.IntN(200)
				scheduled[at] = append(scheduled[at], p)
				sc.Duplicates++
			}
			if h := history[d.id]; len(h) > 25 && rng.Float64() < cfg.StaleRate {
				old := h[len(h)-2-rng.IntN(20)]
				at := base + 1 + rng.IntN(50)
				scheduled[at] = append(scheduled[at], old)
				sc.Stale++
			}
			base++
		}
	}
	for i := base; len(scheduled) > 0; i++ {
		for _, q := range scheduled[i] {
			emit(q)
		}
		delete(scheduled, i)
	}
	return sc
}

func pick(rng *rand.Rand) [2]float64 {
	if rng.IntN(10) < 7 {
		w := waypoints[rng.IntN(len(waypoints))]
		return [2]float64{w[0] + (rng.Float64()-0.5)*0.01, w[1] + (rng.Float64()-0.5)*0.01}
	}
	return [2]float64{minLon + rng.Float64()*(maxLon-minLon), minLat + rng.Float64()*(maxLat-minLat)}
}

const mPerDegLat = 111_195.0

func (d *drone) move(rng *rand.Rand, dt float64) {
	kx := mPerDegLat * math.Cos(d.lat*math.Pi/180)
	dx := (d.target[0] - d.lon) * kx
	dy := (d.target[1] - d.lat) * mPerDegLat
	dist := math.Hypot(dx, dy)
	if dist < 150 {
		d.target = pick(rng)
		return
	}
	heading := math.Atan2(dy, dx) + (rng.Float64()-0.5)*0.8
	step := math.Min(d.speed*dt, dist)
	d.lon += step * math.Cos(heading) / kx
	d.lat += step * math.Sin(heading) / mPerDegLat
	d.lon = math.Max(minLon, math.Min(maxLon, d.lon))
	d.lat = math.Max(minLat, math.Min(maxLat, d.lat))
	d.alt = math.Max(26, math.Min(220, d.alt+(rng.Float64()-0.5)*16))
}

func (d *drone) position(rng *rand.Rand, ts time.Time) telemetry.Position {
	d.seq++
	p := telemetry.Position{DroneID: d.id, Seq: d.seq, TS: ts,
		Lat: round(d.lat, 1e7), Lon: round(d.lon, 1e7), SpeedMPS: telemetry.Float(round(d.speed, 10))}
	if rng.IntN(100) != 0 { // 1% of fixes have no height at all
		p.AltM = telemetry.Float(round(d.alt, 10))
		if d.hasAGL {
			p.AGLM = telemetry.Float(round(d.alt-groundAMSL, 10))
		}
	}
	return p
}

func round(v, k float64) float64 { return math.Round(v*k) / k }

// NDJSON returns the records as the replay file format: one JSON record a
// line, in order, each with its receive time ("received"), the log's clock.
func (s *Scenario) NDJSON() []byte {
	var b []byte
	for i := range s.Records {
		b = s.Records[i].AppendJSON(b)
		if i < len(s.Received) {
			b = append(b[:len(b)-1], `,"received":"`...)
			b = s.Received[i].UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, `"}`...)
		}
		b = append(b, '\n')
	}
	return b
}
