// Package fleet simulates drones flying straight passes across real
// airports: deterministic from a seed, with a share of records re-sent as a
// retrying feed would. The demo, the simulate command and load tests use it.
package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// Airports are aerodrome reference points (public facts) the fleet flies
// across; the zone set in testdata/zones covers them.
var Airports = []struct {
	ICAO     string
	Lat, Lon float64
}{
	{"EGLL", 51.4700, -0.4543}, {"EGKK", 51.1537, -0.1821}, {"LFPG", 49.0097, 2.5479},
	{"EHAM", 52.3105, 4.7683}, {"EDDF", 50.0379, 8.5622}, {"LSZH", 47.4582, 8.5555},
	{"LEMD", 40.4983, -3.5676}, {"LIRF", 41.8003, 12.2389}, {"EIDW", 53.4264, -6.2499},
	{"EKCH", 55.6180, 12.6508}, {"KJFK", 40.6413, -73.7781}, {"KLAX", 33.9416, -118.4085},
}

// Fleet is a set of simulated drones; Step advances every drone by one fix.
type Fleet struct {
	drones []*drone
	now    time.Time
	// approach is the distance in metres from which a pass starts, drawn
	// from [approach, 1.66*approach].
	approach float64
}

// Now is the simulated time of the last Step.
func (f *Fleet) Now() time.Time { return f.now }

type drone struct {
	id               string
	seq              int64
	lat, lon         float64
	dLat, dLon       float64 // degrees per step
	alt              float64
	heading, speed   float64
	stepsLeft, total int
}

// New places n drones around the airports, deterministically from seed;
// each pass starts approachM metres or a little more from an airport
// (6000 when 0).
func New(n int, seed uint64, start time.Time, approachM float64) *Fleet {
	if approachM <= 0 {
		approachM = 6000
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	f := &Fleet{now: start, approach: approachM}
	for i := range n {
		d := &drone{id: fmt.Sprintf("SIM-%04d", i+1)}
		d.retarget(rng, approachM)
		f.drones = append(f.drones, d)
	}
	return f
}

// retarget starts a straight pass across a random airport, from approach to
// 1.66*approach out on one side to as far out on the other, at 10-25 m/s and
// 40-400 m AMSL.
func (d *drone) retarget(rng *rand.Rand, approach float64) {
	ap := Airports[rng.IntN(len(Airports))]
	bearing := rng.Float64() * 2 * math.Pi
	dist := approach * (1 + rng.Float64()*0.66)
	d.speed = 10 + rng.Float64()*15
	d.alt = 40 + rng.Float64()*360
	d.heading = math.Mod(bearing*180/math.Pi+180, 360)
	mPerDegLat := 111_320.0
	mPerDegLon := 111_320.0 * math.Cos(ap.Lat*math.Pi/180)
	d.lat = ap.Lat + dist*math.Cos(bearing)/mPerDegLat
	d.lon = ap.Lon + dist*math.Sin(bearing)/mPerDegLon
	d.total = int(2 * dist / d.speed)
	d.stepsLeft = d.total
	d.dLat = -d.speed * math.Cos(bearing) / mPerDegLat
	d.dLon = -d.speed * math.Sin(bearing) / mPerDegLon
}

// Step moves every drone one second on and returns their fixes; a share
// dupRate of them is appended a second time, as a retrying feed would.
func (f *Fleet) Step(rng *rand.Rand, dupRate float64) []telemetry.Position {
	f.now = f.now.Add(time.Second)
	out := make([]telemetry.Position, 0, len(f.drones))
	for _, d := range f.drones {
		if d.stepsLeft == 0 {
			d.retarget(rng, f.approach)
		}
		d.stepsLeft--
		d.seq++
		d.lat += d.dLat
		d.lon += d.dLon
		p := telemetry.Position{
			DroneID: d.id, Seq: d.seq, TS: f.now,
			Lat: round(d.lat, 7), Lon: round(d.lon, 7),
			AltM:       telemetry.Float(round(d.alt+rng.NormFloat64()*2, 1)),
			SpeedMPS:   telemetry.Float(round(d.speed, 1)),
			HeadingDeg: telemetry.Float(round(d.heading, 1)),
		}
		out = append(out, p)
		if rng.Float64() < dupRate {
			out = append(out, p)
		}
	}
	return out
}

func round(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}
