package geofence

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var propertyConfigs = []struct {
	name          string
	c             genConfig
	zones, points int
}{
	{"dense", genConfig{minLon: 5, maxLon: 9, minLat: 45, maxLat: 48, minSize: 0.01, maxSize: 0.12, altitudes: true, times: true}, 400, 60000},
	{"antimeridian", genConfig{minLon: 170, maxLon: 190, minLat: -30, maxLat: 30, minSize: 0.2, maxSize: 2, altitudes: true, times: true}, 150, 25000},
	{"polar", genConfig{minLon: -180, maxLon: 180, minLat: 80, maxLat: 88, minSize: 0.1, maxSize: 1.5, altitudes: true, times: true}, 150, 25000},
}

func sameHits(a, b []Hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestIndexMatchesBruteForce: over random zones (polygons with holes,
// multipolygons, circles, altitude bands in all references, time windows
// and weekly schedules, antimeridian and polar regions) and 110,000 random
// points, the index and the brute-force scan give identical answers, and
// StillInside agrees with the reference hysteresis test.
func TestIndexMatchesBruteForce(t *testing.T) {
	total := 0
	for ci, pc := range propertyConfigs {
		t.Run(pc.name, func(t *testing.T) {
			set := randomSet(uint64(100+ci), pc.zones, pc.c)
			if pc.name == "polar" {
				set.Zones = append(set.Zones, polarZones()...)
			}
			if pc.name == "antimeridian" {
				set.Zones = append(set.Zones, antimeridianZones()...)
			}
			ix, err := NewIndex(set)
			if err != nil {
				t.Fatal(err)
			}
			bf := newBruteForce(set)
			rng := rand.New(rand.NewPCG(uint64(7+ci), 9))
			var got, want []Hit
			hits, assumed, mismatches := 0, 0, 0
			for i := 0; i < pc.points; i++ {
				p := randomPoint(rng, pc.c)
				got = ix.Query(p, got)
				want = bf.Query(p, want)
				if !sameHits(got, want) {
					mismatches++
					if mismatches <= 5 {
						t.Errorf("point %d %+v: index %s, brute force %s", i, p, ids(got), ids(want))
					}
				}
				hits += len(want)
				for _, h := range want {
					if h.HeightAssumed {
						assumed++
					}
					if !ix.StillInside(h.Zone.ID, p) {
						t.Errorf("point %d inside %s but not StillInside", i, h.Zone.ID)
					}
				}
				// Hysteresis near a random zone.
				z := set.Zones[rng.IntN(len(set.Zones))]
				q := nearZone(rng, z, p)
				if a, b := ix.StillInside(z.ID, q), bf.StillInside(z.ID, q); a != b {
					mismatches++
					if mismatches <= 5 {
						t.Errorf("StillInside(%s, %+v): index %v, brute force %v", z.ID, q, a, b)
					}
				}
			}
			total += pc.points
			// The test must exercise something: hits, and assumed heights.
			if hits < pc.points/50 || assumed == 0 {
				t.Fatalf("too few hits to mean anything: %d hits, %d assumed over %d points", hits, assumed, pc.points)
			}
			t.Logf("%d points, %d hits (%d with assumed heights), %d mismatches", pc.points, hits, assumed, mismatches)
		})
	}
	if total < 100000 {
		t.Fatalf("only %d points", total)
	}
}

// nearZone returns p moved close to z's boundary region.
func nearZone(rng *rand.Rand, z *Zone, p Point) Point {
	v := z.Volumes[0]
	var c [2]float64
	var size float64
	if v.Circle != nil {
		c = v.Circle.Center
		size = v.Circle.RadiusM / 111e3
	} else {
		r := v.Area[0][0]
		c = r[0]
		size = math.Abs(r[0][1]-r[len(r)/2][1]) + 0.01
	}
	q := p
	q.Lat = math.Max(-90, math.Min(90, c[1]+(rng.Float64()*2-1)*size*1.2))
	q.Lon = wrap180(c[0] + (rng.Float64()*2-1)*size*1.2/math.Max(0.05, math.Cos(c[1]*math.Pi/180)))
	return q
}

// TestQueryDoesNotAllocate: with room in dst, Query allocates nothing.
func TestQueryDoesNotAllocate(t *testing.T) {
	set := randomSet(1, 2000, europe)
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pts := make([]Point, 1000)
	for i := range pts {
		pts[i] = randomPoint(rng, europe)
	}
	dst := make([]Hit, 0, 64)
	n := 0
	allocs := testing.AllocsPerRun(5, func() {
		for _, p := range pts {
			dst = ix.Query(p, dst)
			n += len(dst)
		}
	})
	if allocs != 0 {
		t.Fatalf("Query allocates: %v allocs per %d queries", allocs, len(pts))
	}
	if n == 0 {
		t.Fatal("no hits: the test measured nothing")
	}
}

func ExampleIndex_Query() {
	set := &ZoneSet{Version: "example", Zones: []*Zone{{
		ID: "EGLL-RWY", Name: "Heathrow runways", Category: Restricted,
		Volumes: []Volume{{Circle: &Circle{Center: [2]float64{-0.4614, 51.4700}, RadiusM: 5000},
			Ceiling: &Limit{M: 400, Ref: AMSL}}},
	}}}
	ix, err := NewIndex(set)
	if err != nil {
		panic(err)
	}
	var hits []Hit
	hits = ix.Query(Point{Lat: 51.4706, Lon: -0.4619, Heights: Heights{}.Set(AMSL, 85)}, hits)
	for _, h := range hits {
		fmt.Println(h.Zone.ID, h.Zone.Category, h.HeightAssumed)
	}
	hits = ix.Query(Point{Lat: 51.4706, Lon: -0.4619}, hits) // no height known
	fmt.Println(len(hits), hits[0].HeightAssumed)
	// Output:
	// EGLL-RWY restricted false
	// 1 true
}
