package geofence

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchConfig spreads n zones (radius 0.5–5 km) over an area that grows
// with n, so that the density of zones — and the share of points inside
// one — stays about the same at every size.
func benchConfig(n int) genConfig {
	side := math.Sqrt(float64(n)) * 0.12 // degrees
	return genConfig{
		minLon: 10 - side*0.75, maxLon: 10 + side*0.75,
		minLat: math.Max(-70, 20-side/2), maxLat: math.Min(75, 20+side/2),
		minSize: 0.005, maxSize: 0.05, altitudes: true, times: true,
	}
}

type querier interface {
	Query(p Point, dst []Hit) []Hit
}

func benchPoints(c genConfig) []Point {
	rng := rand.New(rand.NewPCG(42, 43))
	pts := make([]Point, 1<<14)
	for i := range pts {
		pts[i] = randomPoint(rng, c)
	}
	return pts
}

func runQueries(b *testing.B, q querier, pts []Point) {
	dst := make([]Hit, 0, 64)
	hits := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = q.Query(pts[i&(len(pts)-1)], dst)
		hits += len(dst)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
}

var benchSizes = []int{100, 1000, 10000, 100000}

// BenchmarkQuery: lookups through the index.
func BenchmarkQuery(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("zones="+strconv.Itoa(n), func(b *testing.B) {
			c := benchConfig(n)
			ix, err := NewIndex(randomSet(uint64(n), n, c))
			if err != nil {
				b.Fatal(err)
			}
			runQueries(b, ix, benchPoints(c))
		})
	}
}

// BenchmarkBruteForce: the same lookups by scanning every zone (the
// reference of the property test), for the speed-up ratio.
func BenchmarkBruteForce(b *testing.B) {
	for _, n := range benchSizes[:3] {
		b.Run("zones="+strconv.Itoa(n), func(b *testing.B) {
			c := benchConfig(n)
			runQueries(b, newBruteForce(randomSet(uint64(n), n, c)), benchPoints(c))
		})
	}
}

// BenchmarkNewIndex: validation plus index build of a set as a parser
// returns it (fingerprints computed).
func BenchmarkNewIndex(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("zones="+strconv.Itoa(n), func(b *testing.B) {
			set := randomSet(uint64(n), n, benchConfig(n))
			for _, z := range set.Zones {
				z.Fingerprint = z.ComputeFingerprint()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := NewIndex(set); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var nearPoints = 1 << 14

// BenchmarkQueryNear: lookups at points drawn around the zones (most of
// them inside one or near its edge), the expensive case of the exact test.
func BenchmarkQueryNear(b *testing.B) {
	n := 10000
	c := benchConfig(n)
	set := randomSet(uint64(n), n, c)
	ix, err := NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	pts := make([]Point, nearPoints)
	for i := range pts {
		z := set.Zones[rng.IntN(n)]
		pts[i] = nearZone(rng, z, randomPoint(rng, c))
	}
	runQueries(b, ix, pts)
}

// BenchmarkParseAirports: loading our airports zone set (92 zones).
func BenchmarkParseAirports(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := LoadFile(zonesDir + "/airports.geojson"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStillInside: the hysteresis test for a zone near the point.
func BenchmarkStillInside(b *testing.B) {
	n := 10000
	c := benchConfig(n)
	set := randomSet(uint64(n), n, c)
	ix, err := NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	type q struct {
		id string
		p  Point
	}
	qs := make([]q, 1<<12)
	for i := range qs {
		z := set.Zones[rng.IntN(n)]
		qs[i] = q{z.ID, nearZone(rng, z, randomPoint(rng, c))}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := &qs[i&(len(qs)-1)]
		ix.StillInside(e.id, e.p)
	}
}

// BenchmarkApproaches: the approach look-ahead for drones near the
// airports zone set's zones at 15 m/s, a 30 s horizon and a 200 m buffer;
// BenchmarkQueryAirports is Query at the same points, for comparison.
func BenchmarkApproaches(b *testing.B) {
	ix, err := NewIndex(airportsSet(b))
	if err != nil {
		b.Fatal(err)
	}
	qs := airportPaths(ix, 1<<12)
	dst := make([]Approach, 0, 64)
	found, entries := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := &qs[i&(len(qs)-1)]
		dst = ix.Approaches(q.p, q.vE, q.vN, 30, 200, dst)
		found += len(dst)
		for _, a := range dst {
			if a.EtaS >= 0 {
				entries++
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(found)/float64(b.N), "approaches/op")
	b.ReportMetric(float64(entries)/float64(b.N), "entries/op")
}

func BenchmarkQueryAirports(b *testing.B) {
	ix, err := NewIndex(airportsSet(b))
	if err != nil {
		b.Fatal(err)
	}
	qs := airportPaths(ix, 1<<12)
	pts := make([]Point, len(qs))
	for i, q := range qs {
		pts[i] = q.p
	}
	runQueries(b, ix, pts)
}

func airportsSet(b *testing.B) *ZoneSet {
	set, err := LoadFile(zonesDir + "/airports.geojson")
	if err != nil {
		b.Fatal(err)
	}
	return set
}
