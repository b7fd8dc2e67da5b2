package geofence

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paulmach/orb"
)

// metre conversions of the path's local projection around latitude lat.
func lonM(lat float64) float64 { return math.Cos(lat*deg) * earthRadius * deg }

const latM = earthRadius * deg

func boxZone(id string, lon0, lat0, lon1, lat1 float64) *Zone {
	return &Zone{ID: id, Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{{
		{lon0, lat0}, {lon1, lat0}, {lon1, lat1}, {lon0, lat1}, {lon0, lat0},
	}}}}}}
}

// TestApproaches: one row per rule of Approaches' contract.
func TestApproaches(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const y = 47.005 // the square's middle latitude
	sq := func(id string) *Zone { return boxZone(id, 8, 47, 8.01, 47.01) }
	west := func(m float64) float64 { return 8 - m/lonM(y) } // m metres west of the square
	at := func(lon, lat float64) Point { return Point{Lat: lat, Lon: lon, Time: t0} }

	floor := sq("FLOOR")
	floor.Volumes[0].Floor = &Limit{M: 200, Ref: AMSL}
	until := sq("UNTIL")
	until.ActiveUntil = t0.Add(10 * time.Second)
	from := sq("FROM")
	from.ActiveFrom = t0.Add(20 * time.Second)
	hole := &Zone{ID: "HOLE", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{
		{{8.2, 47.2}, {8.22, 47.2}, {8.22, 47.22}, {8.2, 47.22}, {8.2, 47.2}},
		{{8.205, 47.205}, {8.205, 47.215}, {8.215, 47.215}, {8.215, 47.205}, {8.205, 47.205}},
	}}}}}
	circle := &Zone{ID: "CIRCLE", Category: Warning, Volumes: []Volume{{Circle: &Circle{Center: orb.Point{8.1, 47.1}, RadiusM: 1000}}}}
	// Two volumes: one ahead, one 100 m north of p and off the path, so
	// that DistM comes from a volume outside the box searched.
	twoVol := &Zone{ID: "TWO", Category: Restricted, Volumes: []Volume{
		sq("").Volumes[0],
		{Area: orb.MultiPolygon{{{{7.99, y + 100/latM}, {7.999, y + 100/latM}, {7.999, y + 0.01}, {7.99, y + 0.01}, {7.99, y + 100/latM}}}}},
	}}
	far := boxZone("FAR", 8.012, 47, 8.02, 47.01)
	am := boxZone("AM", -179.995, 0, -179.985, 0.01)
	amRing := &Zone{ID: "AM-RING", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{{
		{179.99, 1}, {-179.99, 1}, {-179.99, 1.01}, {179.99, 1.01}, {179.99, 1},
	}}}}}}

	// A spike whose tip touches the path at lon 0.002 before the path
	// enters the block east of lon 0.01: touching is not entering.
	spike := &Zone{ID: "SPIKE", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{{
		{0.001, 0.01}, {0.002, 0.005}, {0.003, 0.01}, {0.01, 0.01}, {0.01, 0}, {0.02, 0}, {0.02, 0.02}, {0.001, 0.02}, {0.001, 0.01},
	}}}}}}
	amWest := boxZone("AM-WEST", 179.985, 0, 179.995, 0.01)

	type want struct {
		id       string
		eta      float64 // -1: none
		dist     float64
		entryLon float64 // checked when eta >= 0
		entryLat float64
	}
	cases := []struct {
		name                string
		zones               []*Zone
		p                   Point
		vE, vN, horizon, bf float64
		want                []want
	}{
		{"straight at a square from 300 m", []*Zone{sq("SQ")}, at(west(300), y), 10, 0, 60, 0,
			[]want{{"SQ", 30, 300, 8, y}}},
		{"heading away, beyond the buffer", []*Zone{sq("SQ")}, at(west(300), y), -10, 0, 60, 100, nil},
		{"heading away, within the buffer", []*Zone{sq("SQ")}, at(west(300), y), -10, 0, 60, 500,
			[]want{{"SQ", -1, 300, 0, 0}}},
		{"parallel to an edge", []*Zone{sq("SQ")}, at(8.005, 47-100/latM), 10, 0, 60, 50, nil},
		{"parallel to an edge, within the buffer", []*Zone{sq("SQ")}, at(8.005, 47-100/latM), 10, 0, 60, 150,
			[]want{{"SQ", -1, 100, 0, 0}}},
		{"a circle from 2 km south", []*Zone{circle}, at(8.1, 47.1-2000/latM), 0, 20, 60, 0,
			[]want{{"CIRCLE", 50, 1000, 8.1, 47.1 - 1000/latM}}},
		{"from inside the hole", []*Zone{hole}, at(8.21, 47.21), 10, 0, 60, 0,
			[]want{{"HOLE", 0.005 * lonM(47.21) / 10, 0.005 * lonM(47.21), 8.215, 47.21}}},
		{"floor above the drone", []*Zone{floor}, Point{Lat: y, Lon: west(300), Time: t0, Heights: Heights{}.Set(AMSL, 100)}, 10, 0, 60, 500, nil},
		{"floor, height unknown: assumed within", []*Zone{floor}, at(west(300), y), 10, 0, 60, 0,
			[]want{{"FLOOR", 30, 300, 8, y}}},
		{"inactive at the entry", []*Zone{until}, at(west(300), y), 10, 0, 60, 0, nil},
		{"inactive now, active at the entry", []*Zone{from}, at(west(300), y), 10, 0, 60, 0,
			[]want{{"FROM", 30, 300, 8, y}}},
		{"inactive now, buffer only", []*Zone{from}, at(west(300), y), -10, 0, 60, 500, nil},
		{"containing p", []*Zone{sq("SQ")}, at(8.005, y), 10, 0, 60, 500, nil},
		{"two zones on the path, in set order", []*Zone{far, sq("SQ")}, at(west(300), y), 10, 0, 180, 0,
			[]want{{"FAR", (300 + 0.012*lonM(y)) / 10, 300 + 0.012*lonM(y), 8.012, y}, {"SQ", 30, 300, 8, y}}},
		{"zero velocity", []*Zone{sq("SQ"), far}, at(west(300), y), 0, 0, 60, 500,
			[]want{{"SQ", -1, 300, 0, 0}}},
		{"zero velocity, beyond the buffer", []*Zone{sq("SQ")}, at(west(300), y), 0, 0, 60, 100, nil},
		{"nearest volume off the path", []*Zone{twoVol}, at(west(300), y), 10, 0, 60, 0,
			[]want{{"TWO", 30, 100, 8, y}}},
		{"across the antimeridian", []*Zone{am}, at(179.995, 0.005), 50, 0, 60, 0,
			[]want{{"AM", 0.01 * lonM(0.005) / 50, 0.01 * lonM(0.005), -179.995, 0.005}}},
		{"across the antimeridian, westward", []*Zone{amWest}, at(-179.995, 0.005), -50, 0, 60, 0,
			[]want{{"AM-WEST", 0.01 * lonM(0.005) / 50, 0.01 * lonM(0.005), 179.995, 0.005}}},
		{"touching a vertex, then entering", []*Zone{spike}, at(-0.01, 0.005), 50, 0, 60, 0,
			[]want{{"SPIKE", 0.02 * lonM(0.005) / 50, 0.0117670 * lonM(0.005), 0.01, 0.005}}}, // nearest: the spike's west edge
		{"a ring across the antimeridian, from the west", []*Zone{amRing}, at(179.99-0.01, 1.005), 50, 0, 60, 0,
			[]want{{"AM-RING", 0.01 * lonM(1.005) / 50, 0.01 * lonM(1.005), 179.99, 1.005}}},
		{"a ring across the antimeridian, from the east", []*Zone{amRing}, at(-179.99+0.01, 1.005), -50, 0, 60, 0,
			[]want{{"AM-RING", 0.01 * lonM(1.005) / 50, 0.01 * lonM(1.005), -179.99, 1.005}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix, err := NewIndex(&ZoneSet{Zones: c.zones})
			if err != nil {
				t.Fatal(err)
			}
			got := ix.Approaches(c.p, c.vE, c.vN, c.horizon, c.bf, nil)
			if len(got) != len(c.want) {
				t.Fatalf("got %d approaches %+v, want %d", len(got), got, len(c.want))
			}
			for i, w := range c.want {
				a := got[i]
				if a.Zone.ID != w.id {
					t.Errorf("approach %d: zone %s, want %s", i, a.Zone.ID, w.id)
				}
				if w.eta < 0 {
					if a.EtaS != -1 || a.EntryLat != 0 || a.EntryLon != 0 {
						t.Errorf("%s: EtaS %v entry %v,%v, want -1 and no entry", w.id, a.EtaS, a.EntryLat, a.EntryLon)
					}
				} else {
					if math.Abs(a.EtaS-w.eta) > 0.005*w.eta {
						t.Errorf("%s: EtaS %v, want %v ± 0.5%%", w.id, a.EtaS, w.eta)
					}
					if math.Abs(wrap180(a.EntryLon-w.entryLon))*lonM(w.entryLat) > 0.5 || math.Abs(a.EntryLat-w.entryLat)*latM > 0.5 {
						t.Errorf("%s: entry at %v,%v, want %v,%v (the edge)", w.id, a.EntryLat, a.EntryLon, w.entryLat, w.entryLon)
					}
				}
				if math.Abs(a.DistM-w.dist) > 0.005*w.dist+0.01 {
					t.Errorf("%s: DistM %v, want %v", w.id, a.DistM, w.dist)
				}
			}
		})
	}
}

// TestApproachesMatchBruteForce: over random paths around the testdata
// zones (airports.geojson, with the antimeridian and polar zones of the
// property test), stepping along the path by 0.05 s and asking Query finds
// the first step inside each zone within one step of EtaS, and DistM and
// the buffer agree with the reference distance. Zones' activity is
// dropped, so that this compares geometry; TestApproaches checks time.
func TestApproachesMatchBruteForce(t *testing.T) {
	set := load(t, "airports.geojson")
	set.Zones = append(set.Zones, antimeridianZones()...)
	set.Zones = append(set.Zones, polarZones()...)
	// Small boxes each on one side of the antimeridian, for paths from
	// the other side.
	set.Zones = append(set.Zones, boxZone("AM-W", 179.97, -30, 179.99, -29.98), boxZone("AM-E", -179.99, -30.1, -179.97, -30.08))
	for i, z := range set.Zones {
		c := *z
		c.ActiveFrom, c.ActiveUntil, c.Windows, c.Fingerprint = time.Time{}, time.Time{}, nil, ""
		set.Zones[i] = &c
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	bf := newBruteForce(set)
	index := make(map[*Zone]int, len(set.Zones))
	for i, z := range set.Zones {
		index[z] = i
	}
	const dt = 0.05
	rng := rand.New(rand.NewPCG(11, 12))
	var hits, hits0 []Hit
	var got []Approach
	entries, grazes, buffered, mismatches := 0, 0, 0, 0
	fail := func(format string, args ...any) {
		mismatches++
		if mismatches <= 10 {
			t.Errorf(format, args...)
		}
	}
	const paths = 800
	for n := 0; n < paths; n++ {
		p, toward := aroundZone(rng, set.Zones[rng.IntN(len(set.Zones))])
		if rng.IntN(3) > 0 {
			p.Heights = p.Heights.Set(AMSL, 600*rng.Float64())
		}
		if rng.IntN(3) > 0 {
			p.Heights = p.Heights.Set(AGL, 300*rng.Float64())
		}
		speed, dir := 5+55*rng.Float64(), 2*math.Pi*rng.Float64()
		if rng.IntN(2) > 0 {
			dir = toward + (rng.Float64()-0.5)*math.Pi/2
		}
		vE, vN := speed*math.Sin(dir), speed*math.Cos(dir)
		h := 20 + 280*rng.Float64()
		buf := float64(rng.IntN(4)) * 500
		got = ix.Approaches(p, vE, vN, h, buf, got)

		kx, ky := lonM(p.Lat), latM
		pos := func(t float64) Point {
			q := p
			q.Lon, q.Lat = wrap180(p.Lon+vE*t/kx), p.Lat+vN*t/ky
			return q
		}
		inside := func(t float64, zi int) bool {
			hits = ix.Query(pos(t), hits)
			for _, h := range hits {
				if h.Zone == set.Zones[zi] {
					return true
				}
			}
			return false
		}
		hits0 = ix.Query(p, hits0)
		eta := make([]float64, len(set.Zones))
		for i := range eta {
			eta[i] = -1
		}
		for _, h := range hits0 {
			eta[index[h.Zone]] = -2 // contains p
		}
		for k := 1; float64(k)*dt <= h; k++ {
			hits = ix.Query(pos(float64(k)*dt), hits)
			for _, hit := range hits {
				if zi := index[hit.Zone]; eta[zi] == -1 {
					eta[zi] = float64(k) * dt
				}
			}
		}
		listed := make(map[int]Approach, len(got))
		last := -1
		for _, a := range got {
			zi := index[a.Zone]
			if zi <= last {
				fail("path %d: approaches not in set order: %d after %d", n, zi, last)
			}
			last = zi
			listed[zi] = a
		}
		for zi, zz := range set.Zones {
			a, ok := listed[zi]
			if eta[zi] == -2 {
				if ok {
					fail("path %d: %s contains p but is listed", n, zz.ID)
				}
				continue
			}
			ref := math.Inf(1)
			for vi := range zz.Volumes {
				if vok, _ := refVertical(&zz.Volumes[vi], p.Heights, 0); vok {
					ref = math.Min(ref, bf.distM(zi, vi, p))
				}
			}
			switch {
			case eta[zi] >= 0 && (!ok || math.Abs(a.EtaS-eta[zi]) > dt+1e-6):
				fail("path %d (p %+v v %.2f,%.2f h %.1f): %s first inside at %.2f s, Approaches %+v (listed %v)", n, p, vE, vN, h, zz.ID, eta[zi], a, ok)
			case ok && a.EtaS >= 0 && eta[zi] < 0:
				// In and out between two steps: a finer look must see it.
				seen := false
				for s := 0.0; s <= dt && a.EtaS+s <= h; s += dt / 200 {
					seen = seen || inside(a.EtaS+s, zi)
				}
				if !seen {
					fail("path %d (p %+v v %.2f,%.2f h %.1f): %s: EtaS %v, but no step is inside", n, p, vE, vN, h, zz.ID, a.EtaS)
				}
				grazes++
			case !ok && ref <= buf-0.01:
				fail("path %d: %s is %.2f m away, within the %v m buffer, not listed", n, zz.ID, ref, buf)
			case ok && math.Abs(a.DistM-ref) > 0.01+1e-6*ref && math.Abs(p.Lat) < 89:
				// (Within a degree of a pole the local projection
				// degenerates: a cap's distance there is to its pole side.)
				fail("path %d (p %+v): %s: DistM %v, reference %v", n, p, zz.ID, a.DistM, ref)
			case ok && a.EtaS < 0 && a.DistM > buf:
				fail("path %d: %s listed without entry, %v m away beyond the %v m buffer", n, zz.ID, a.DistM, buf)
			}
			if ok && a.EtaS >= 0 {
				entries++
			} else if ok {
				buffered++
			}
		}
	}
	t.Logf("%d paths: %d entries (%d between steps), %d buffer-only, %d mismatches", paths, entries, grazes, buffered, mismatches)
	if entries < paths/5 || buffered < paths/20 {
		t.Fatalf("too few approaches to mean anything: %d entries, %d buffer-only", entries, buffered)
	}
}

// aroundZone returns a point 0.5 to 2 zone sizes from a zone's centre
// (a circle's, or its first polygon's first vertex) and the direction to
// that centre, radians clockwise from north.
func aroundZone(rng *rand.Rand, z *Zone) (Point, float64) {
	v := z.Volumes[0]
	var c orb.Point
	var size float64 // metres
	if v.Circle != nil {
		c, size = v.Circle.Center, v.Circle.RadiusM
	} else {
		r := v.Area[0][0]
		c, size = r[0], math.Max(200, math.Abs(r[0][1]-r[len(r)/2][1])*latM)
	}
	d, dir := size*(0.5+1.5*rng.Float64()), 2*math.Pi*rng.Float64()
	lat := math.Max(-89.999, math.Min(89.999, c[1]+d*math.Cos(dir)/latM))
	lon := wrap180(c[0] + d*math.Sin(dir)/math.Max(lonM(lat), 1))
	return Point{Lat: lat, Lon: lon, Time: baseTime}, dir + math.Pi
}

// TestApproachesDoNotAllocate: with room in dst, Approaches allocates
// nothing.
func TestApproachesDoNotAllocate(t *testing.T) {
	ix, err := NewIndex(load(t, "airports.geojson"))
	if err != nil {
		t.Fatal(err)
	}
	qs := airportPaths(ix, 500)
	dst := make([]Approach, 0, 64)
	n := 0
	allocs := testing.AllocsPerRun(5, func() {
		for _, q := range qs {
			dst = ix.Approaches(q.p, q.vE, q.vN, 30, 200, dst)
			n += len(dst)
		}
	})
	if allocs != 0 {
		t.Fatalf("Approaches allocates: %v allocs per %d calls", allocs, len(qs))
	}
	if n == 0 {
		t.Fatal("no approaches: the test measured nothing")
	}
}

type approachQuery struct {
	p      Point
	vE, vN float64
}

// airportPaths returns drones around the zones of ix (aroundZone) at
// 15 m/s, half of them heading at the zone.
func airportPaths(ix *Index, n int) []approachQuery {
	rng := rand.New(rand.NewPCG(21, 22))
	zones := ix.Zones()
	qs := make([]approachQuery, n)
	for i := range qs {
		p, dir := aroundZone(rng, zones[rng.IntN(len(zones))])
		p.Time = time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)
		p.Heights = p.Heights.Set(AGL, 100*rng.Float64())
		if rng.IntN(2) == 0 {
			dir = 2 * math.Pi * rng.Float64()
		}
		qs[i] = approachQuery{p, 15 * math.Sin(dir), 15 * math.Cos(dir)}
	}
	return qs
}

// TestApproachBeforeProperty: approach_before_s is read into
// Zone.ApproachBefore, validated with the feature and field named, and
// left out of the fingerprint.
func TestApproachBeforeProperty(t *testing.T) {
	parse := func(props string) (*ZoneSet, error) {
		set, _, err := Loader{Strict: true}.Parse(strings.NewReader(fc(feature(sq, props))))
		return set, err
	}
	set, err := parse(`{"id":"A","approach_before_s":90.5}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Zones[0].ApproachBefore; got != 90500*time.Millisecond {
		t.Fatalf("ApproachBefore %v, want 1m30.5s", got)
	}
	plain, err := parse(`{"id":"A"}`)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Zones[0].ApproachBefore != 0 {
		t.Fatalf("unset: ApproachBefore %v, want 0", plain.Zones[0].ApproachBefore)
	}
	if plain.Zones[0].Fingerprint != set.Zones[0].Fingerprint {
		t.Fatal("approach_before_s changed the fingerprint: a new horizon would clear and re-raise the zone's alarms")
	}
	if plain.Version == set.Version {
		t.Fatal("the set's version ignores approach_before_s: a horizon change would look like no change")
	}
	if set, err := parse(`{"id":"A","approach_before_s":3600}`); err != nil || set.Zones[0].ApproachBefore != time.Hour {
		t.Fatalf("3600: %v", err)
	}
	for _, bad := range []string{`0`, `-1`, `3600.5`, `1e9`, `"soon"`, `true`} {
		_, err := parse(`{"id":"A","approach_before_s":` + bad + `}`)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: err %v, want a ValidationError", bad, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `feature 1 (id "A"): properties.approach_before_s: must be`) {
			t.Errorf("%s: %q does not name the feature and field", bad, msg)
		}
	}
	// Zones built in code: 0 is unset, negative or over an hour invalid.
	for _, d := range []time.Duration{-time.Second, time.Hour + 1} {
		z := boxZone("C", 0, 0, 1, 1)
		z.ApproachBefore = d
		if _, err := NewIndex(&ZoneSet{Zones: []*Zone{z}}); err == nil || !strings.Contains(err.Error(), "ApproachBefore") {
			t.Errorf("ApproachBefore %v: err %v", d, err)
		}
	}
}
