package geofence

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paulmach/orb"
)

type probe struct {
	lat, lon float64
	want     string // comma-separated zone ids
}

// checkProbes runs known points through both the index and the brute-force
// reference.
func checkProbes(t *testing.T, set *ZoneSet, probes []probe) {
	t.Helper()
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	bf := newBruteForce(set)
	for _, p := range probes {
		pt := Point{Lat: p.lat, Lon: p.lon}
		if got := ids(ix.Query(pt, nil)); got != p.want {
			t.Errorf("index at (%v, %v): %q, want %q", p.lat, p.lon, got, p.want)
		}
		if got := ids(bf.Query(pt, nil)); got != p.want {
			t.Errorf("brute force at (%v, %v): %q, want %q", p.lat, p.lon, got, p.want)
		}
	}
}

func TestAntimeridian(t *testing.T) {
	checkProbes(t, &ZoneSet{Zones: antimeridianZones()}, []probe{
		{0, 179.5, "AM-RING"}, {0, -179.5, "AM-RING"}, {0, 180, "AM-RING"}, {0, -180, "AM-RING"},
		{0, 178.9, ""}, {0, -178.9, ""}, {0, 0, ""}, {0, 540 - 0.5, "AM-RING"}, // 539.5 = 179.5
		{6, 179, "AM-SPLIT"}, {6, -179, "AM-SPLIT"}, {6, 179.999, "AM-SPLIT"}, {6, -180, "AM-SPLIT"}, {6, 177.9, ""},
		{-10, 179.5, "AM-CIRCLE"}, {-10, -179.5, "AM-CIRCLE"}, {-10, 180, "AM-CIRCLE"}, {-10, 179, ""}, {-10, -179, ""},
		{12, 177, "AM-HOLE"}, {12, -177, "AM-HOLE"}, {15, 179.5, ""}, {15, -179.5, ""}, {15, 180, ""}, {15, -176, "AM-HOLE"}, {15, 176, "AM-HOLE"},
	})
}

func TestPoles(t *testing.T) {
	checkProbes(t, &ZoneSet{Zones: polarZones()}, []probe{
		{90, 0, "CAP-N-RING,CAP-N-BOX,CIRCLE-N"}, {90, -123, "CAP-N-RING,CAP-N-BOX,CIRCLE-N"},
		{89.6, 17, "CAP-N-RING"}, {89.6, -180, "CAP-N-RING"}, {89.8, -170, "CAP-N-RING,CAP-N-BOX,CIRCLE-N"},
		{89.4, 0, ""}, {88.5, 45, "ANNULUS-N"}, {88.5, -135, "ANNULUS-N"}, {89, 45, ""}, {88, 45, ""},
		{-90, 0, "CIRCLE-S"}, {-89.8, -170, "CIRCLE-S"}, {-89.3, 10, "CIRCLE-S"}, {-89.2, 10, ""},
	})
}

func TestPolarRingParses(t *testing.T) {
	// A ring along 80°S through every quadrant: the Antarctic cap.
	src := fc(feature(`{"type":"Polygon","coordinates":[[[0,-80],[90,-80],[180,-80],[-90,-80],[0,-80]]]}`, `{"id":"ANTARCTICA"}`))
	ix := mustIndex(t, src)
	for _, p := range []Point{{Lat: -85, Lon: 33}, {Lat: -90, Lon: 0}, {Lat: -80.5, Lon: -179}} {
		if ids(ix.Query(p, nil)) != "ANTARCTICA" {
			t.Errorf("%+v: not in the cap", p)
		}
	}
	if ids(ix.Query(Point{Lat: -79, Lon: 0}, nil)) != "" {
		t.Error("79°S is in the cap")
	}
	// The same cap as a box along ±180° and 90°S.
	box := mustIndex(t, fc(feature(`{"type":"Polygon","coordinates":[[[-180,-80],[180,-80],[180,-90],[-180,-90],[-180,-80]]]}`, `{"id":"BOX"}`)))
	if ids(box.Query(Point{Lat: -85, Lon: 33}, nil)) != "BOX" || ids(box.Query(Point{Lat: -90, Lon: 0}, nil)) != "BOX" {
		t.Error("box cap")
	}
}

func TestStillInside(t *testing.T) {
	src := fc(
		feature(`{"type":"Point","coordinates":[10,50]}`, `{"id":"C","radius_m":1000,"ceiling_m":120,"clear_buffer_m":100}`),
		feature(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}`, `{"id":"P","floor_m":50,"floor_ref":"AGL","clear_buffer_m":50,"active_until":"2027-01-01T00:00:00Z"}`),
		feature(`{"type":"Polygon","coordinates":[[[20,0],[21,0],[21,1],[20,1],[20,0]]]}`, `{"id":"NOBUF"}`),
	)
	ix := mustIndex(t, src)
	m := 1 / 111319.49 // degrees of latitude per metre (orb.EarthRadius)
	lonAt50 := m / math.Cos(50*math.Pi/180)
	now := utc("2026-12-02T10:00:00Z")
	amsl := func(v float64) Heights { return Heights{}.Set(AMSL, v) }
	cases := []struct {
		name string
		id   string
		p    Point
		want bool
	}{
		{"circle inside", "C", Point{Lat: 50, Lon: 10, Heights: amsl(100)}, true},
		{"circle 50 m out", "C", Point{Lat: 50, Lon: 10 + 1050*lonAt50, Heights: amsl(100)}, true},
		{"circle 150 m out", "C", Point{Lat: 50, Lon: 10 + 1150*lonAt50, Heights: amsl(100)}, false},
		{"above ceiling within buffer", "C", Point{Lat: 50, Lon: 10, Heights: amsl(210)}, true},
		{"above ceiling beyond buffer", "C", Point{Lat: 50, Lon: 10, Heights: amsl(230)}, false},
		{"no height: assumed within", "C", Point{Lat: 50, Lon: 10}, true},
		{"polygon edge 40 m out", "P", Point{Lat: 0.5, Lon: 1 + 40*m, Time: now}, true},
		{"polygon edge 60 m out", "P", Point{Lat: 0.5, Lon: 1 + 60*m, Time: now}, false},
		{"polygon top edge 40 m out", "P", Point{Lat: 1 + 40*m, Lon: 0.5, Time: now}, true},
		{"polygon corner 45 m out diagonally", "P", Point{Lat: 1 + 30*m, Lon: 1 + 30*m, Time: now}, true},
		{"polygon corner 57 m out diagonally", "P", Point{Lat: 1 + 40*m, Lon: 1 + 40*m, Time: now}, false},
		{"below floor within buffer", "P", Point{Lat: 0.5, Lon: 0.5, Time: now, Heights: Heights{}.Set(AGL, 10)}, true},
		{"below floor beyond buffer", "P", Point{Lat: 0.5, Lon: 0.5, Time: now, Heights: Heights{}.Set(AGL, -1)}, false},
		{"zone no longer active", "P", Point{Lat: 0.5, Lon: 0.5, Time: utc("2027-01-01T00:00:00Z")}, false},
		{"no buffer: edge", "NOBUF", Point{Lat: 0.5, Lon: 21 + 1*m}, false},
		{"no buffer: inside", "NOBUF", Point{Lat: 0.5, Lon: 20.5}, true},
		{"unknown zone", "GONE", Point{Lat: 0.5, Lon: 20.5}, false},
	}
	for _, c := range cases {
		if got := ix.StillInside(c.id, c.p); got != c.want {
			t.Errorf("%s: StillInside(%s) = %v, want %v", c.name, c.id, got, c.want)
		}
	}
}

func TestHeightAssumedMerging(t *testing.T) {
	// Two volumes; the point is in both, known height only for the second.
	z := &Zone{ID: "Z", Category: Restricted, Volumes: []Volume{
		{Circle: &Circle{Center: orb.Point{0, 0}, RadiusM: 1000}, Ceiling: &Limit{100, WGS84}},
		{Circle: &Circle{Center: orb.Point{0, 0}, RadiusM: 2000}, Ceiling: &Limit{100, AMSL}},
	}}
	ix, err := NewIndex(&ZoneSet{Zones: []*Zone{z}})
	if err != nil {
		t.Fatal(err)
	}
	h := ix.Query(Point{Heights: Heights{}.Set(AMSL, 50)}, nil)
	if len(h) != 1 || h[0].HeightAssumed {
		t.Fatalf("%+v: want one hit with a checked height", h)
	}
	h = ix.Query(Point{Heights: Heights{}.Set(AGL, 50)}, nil)
	if len(h) != 1 || !h[0].HeightAssumed {
		t.Fatalf("%+v: want one hit with an assumed height", h)
	}
}

func TestTimeWindowRule(t *testing.T) {
	from, until := utc("2026-12-05T12:00:00Z"), utc("2026-12-05T22:00:00Z")
	z := &Zone{ActiveFrom: from, ActiveUntil: until}
	for ts, want := range map[time.Time]bool{
		from.Add(-time.Nanosecond): false, from: true, until.Add(-time.Nanosecond): true, until: false,
	} {
		if z.Active(ts) != want {
			t.Errorf("Active(%v) = %v", ts, !want)
		}
	}
	if !(&Zone{}).Active(time.Time{}) || !(&Zone{ActiveUntil: until}).Active(time.Time{}) {
		t.Error("an unbounded zone must be active at any time, even the zero time")
	}
	// Weekly: Monday 00:00 UTC is second 0.
	if s := weekSecond(utc("2026-11-30T00:00:01Z")); s != 1 {
		t.Errorf("weekSecond(Monday 00:00:01) = %d", s)
	}
	if s := weekSecond(utc("1969-12-28T23:59:59Z")); s != week-1 { // a Sunday before the epoch
		t.Errorf("weekSecond(Sunday 23:59:59, 1969) = %d", s)
	}
}

func TestFingerprintAndDiff(t *testing.T) {
	a := mustIndex(t, squareZone)
	b := mustIndex(t, strings.Replace(squareZone, `"ceiling_m":120`, `"ceiling_m":150`, 1))
	c := mustIndex(t, squareZone)
	sa, _ := a.Zone("SQ")
	sb, _ := b.Zone("SQ")
	sc, _ := c.Zone("SQ")
	if sa.Fingerprint == sb.Fingerprint || sa.Fingerprint != sc.Fingerprint || len(sa.Fingerprint) != 32 {
		t.Fatalf("fingerprints %s %s %s", sa.Fingerprint, sb.Fingerprint, sc.Fingerprint)
	}
	// Reordering JSON keys or features does not change a fingerprint.
	d := mustIndex(t, `{"type":"FeatureCollection","features":[{"properties":{"ceiling_ref":"AGL","floor_ref":"AGL","clear_buffer_m":50,"ceiling_m":120,"floor_m":0,"category":"restricted","name":"square","id":"SQ"},"geometry":{"coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]],"type":"Polygon"},"type":"Feature"}]}`)
	if sd, _ := d.Zone("SQ"); sd.Fingerprint != sa.Fingerprint {
		t.Errorf("reordered keys: %s != %s", sd.Fingerprint, sa.Fingerprint)
	}
	if a.Version() == b.Version() || a.Version() != c.Version() {
		t.Errorf("versions %s %s %s", a.Version(), b.Version(), c.Version())
	}
	ch := Diff(a, b)
	if strings.Join(ch.Changed, ",") != "SQ" || len(ch.Added)+len(ch.Removed) != 0 {
		t.Errorf("Diff: %+v", ch)
	}
	ch = Diff(nil, a)
	if len(ch.Added) != 2 {
		t.Errorf("Diff from nothing: %+v", ch)
	}
	ch = Diff(a, d)
	if strings.Join(ch.Removed, ",") != "CI" || len(ch.Changed) != 0 {
		t.Errorf("Diff removing CI: %+v", ch)
	}
}

// TestCurrentSwap: readers on other goroutines see either the old or the
// new index, never anything else, while a reload swaps it (run with -race).
func TestCurrentSwap(t *testing.T) {
	var cur Current
	if cur.Load() != nil || len(cur.Load().Query(Point{}, nil)) != 0 || cur.Load().StillInside("SQ", Point{}) {
		t.Fatal("an empty holder must answer no zone")
	}
	a := mustIndex(t, squareZone)
	b := mustIndex(t, strings.Replace(squareZone, `"id":"SQ"`, `"id":"SQ2"`, 1))
	cur.Store(a)
	p := Point{Lat: 0.5, Lon: 0.5}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	seen := make([]map[string]bool, 4)
	for g := range seen {
		seen[g] = map[string]bool{}
		wg.Add(1)
		go func(m map[string]bool) {
			defer wg.Done()
			dst := make([]Hit, 0, 4)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ix := cur.Load()
				dst = ix.Query(p, dst)
				m[ix.Version()+"/"+ids(dst)] = true
			}
		}(seen[g])
	}
	for i := 0; i < 200; i++ {
		if i%2 == 0 {
			cur.Store(b)
		} else {
			cur.Store(a)
		}
	}
	close(stop)
	wg.Wait()
	for _, m := range seen {
		for k := range m {
			if k != a.Version()+"/SQ?" && k != b.Version()+"/SQ2?" {
				t.Errorf("reader saw %q", k)
			}
		}
	}
	if old := cur.Store(b); old != a && old != b {
		t.Error("Store returned neither index")
	}
}
