package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paulmach/orb"

	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/geofence"
)

// viewSites are where genViewZones's zones crowd: five airports.
var viewSites = [][2]float64{{-0.4543, 51.4700}, {2.5479, 49.0097}, {8.5622, 50.0379}, {4.7683, 52.3105}, {-3.5676, 40.4983}}

// airportView is a view of about 10 × 11 km on the first site, what a
// 1280 × 800 px map shows at zoom 13: the "airport-sized view".
func airportView(site [2]float64) viewParams {
	return viewParams{box: dronestore.BBox{MinLon: site[0] - 0.075, MinLat: site[1] - 0.05, MaxLon: site[0] + 0.075, MaxLat: site[1] + 0.05}, zoom: 13}
}

// countryView holds all five sites, at zoom 5.
var countryView = viewParams{box: dronestore.BBox{MinLon: -10, MinLat: 38, MaxLon: 12, MaxLat: 55}, zoom: 5}

// genViewZones is a GeoJSON set of n zones like the FAA's UAS facility
// maps: 90% 30"×30" grid cells filling a disk around each site (a ceiling
// in feet AGL, lower near the runway), 5% circles (500 m to 5 km) and 5%
// smooth star-shaped polygons of 8 to 200 vertices, spread evenly within
// 60 km of a site.
func genViewZones(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 29))
	var b bytes.Buffer
	b.WriteString(`{"type":"FeatureCollection","features":[`)
	f := func(x float64) string { return fmt.Sprintf("%.7f", x) }
	cells := n * 9 / 10
	perSite := cells / len(viewSites)
	k := 0
	sep := func() {
		if k > 0 {
			b.WriteByte(',')
		}
		k++
	}
	const c = 1.0 / 120
	for si, s := range viewSites {
		want := perSite
		if si == len(viewSites)-1 {
			want = cells - perSite*(len(viewSites)-1)
		}
		side := int(math.Ceil(math.Sqrt(float64(want) * 4 / math.Pi)))
		x0, y0 := math.Floor(s[0]/c)-float64(side/2), math.Floor(s[1]/c)-float64(side/2)
		got := 0
		for ring := 0; got < want; ring++ {
			// Cells by distance from the centre, square ring by ring.
			for dy := -ring; dy <= ring && got < want; dy++ {
				for dx := -ring; dx <= ring && got < want; dx++ {
					if max(abs(dx), abs(dy)) != ring {
						continue
					}
					x, y := (x0+float64(side/2+dx))*c, (y0+float64(side/2+dy))*c
					ft := []int{0, 50, 100, 200, 300, 400}[min(5, ring*6/(side/2+1))]
					sep()
					fmt.Fprintf(&b, `{"type":"Feature","properties":{"id":"UASFM-%d-%d-%d","name":"UAS facility map %d ft","category":"warning","ceiling_m":%.2f,"ceiling_ref":"AGL"},"geometry":{"type":"Polygon","coordinates":[[[%s,%s],[%s,%s],[%s,%s],[%s,%s],[%s,%s]]]}}`,
						si, dx, dy, ft, float64(ft)*0.3048, f(x), f(y), f(x+c), f(y), f(x+c), f(y+c), f(x), f(y+c), f(x), f(y))
					got++
				}
			}
		}
	}
	for i := 0; k < n; i++ {
		s := viewSites[r.IntN(len(viewSites))]
		u := r.Float64()
		a := r.Float64() * 2 * math.Pi
		lon, lat := s[0]+0.6*math.Sqrt(u)*math.Cos(a)/math.Cos(s[1]*math.Pi/180), s[1]+0.6*math.Sqrt(u)*math.Sin(a)
		sep()
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"type":"Feature","properties":{"id":"C%d","name":"circle %d","category":"restricted","radius_m":%d},"geometry":{"type":"Point","coordinates":[%s,%s]}}`,
				i, i, 500+r.IntN(4500), f(lon), f(lat))
			continue
		}
		nv := 8 + r.IntN(193)
		size, ph := 0.005+0.04*r.Float64(), r.Float64()*2*math.Pi
		fmt.Fprintf(&b, `{"type":"Feature","properties":{"id":"P%d","name":"polygon %d","category":"restricted"},"geometry":{"type":"Polygon","coordinates":[[`, i, i)
		var first string
		for v := range nv {
			t := (float64(v) + 0.8*r.Float64()) / float64(nv) * 2 * math.Pi
			// Smooth, as airspace boundaries are (arcs and straight legs
			// of many vertices).
			rr := size * (0.7 + 0.2*math.Sin(3*t+ph) + 0.08*math.Sin(7*t+2*ph))
			p := "[" + f(lon+rr*math.Cos(t)/math.Cos(lat*math.Pi/180)) + "," + f(lat+rr*math.Sin(t)) + "]"
			if v == 0 {
				first = p
			}
			b.WriteString(p + ",")
		}
		b.WriteString(first + "]]}}")
	}
	b.WriteString("]}")
	return b.Bytes()
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func parseViewSet(t testing.TB, doc []byte) *geofence.ZoneSet {
	t.Helper()
	set, err := geofence.ParseGeoJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// viewAnswer is a view's answer as a client reads it.
type viewAnswer struct {
	ZoneVersion int64     `json:"zone_version"`
	Zones       int       `json:"zones"`
	BBox        []float64 `json:"bbox"`
	Zoom        int       `json:"zoom"`
	SetBBox     []float64 `json:"set_bbox"`
	InView      int       `json:"in_view"`
	Reduced     bool      `json:"reduced"`
	Features    []struct {
		ID       string `json:"id"`
		Geometry struct {
			Type        string          `json:"type"`
			Coordinates json.RawMessage `json:"coordinates"`
		} `json:"geometry"`
		Properties drawnProps `json:"properties"`
	} `json:"features"`
	Clusters []struct {
		BBox                       []float64 `json:"bbox"`
		Count, Restricted, Warning int
	} `json:"clusters"`
}

// TestViewQueryBruteForce: the grid index answers what testing every
// volume answers, for random views large and small over polygons, holes,
// circles, zones across the antimeridian and near the poles; and the
// predicate itself never misses a volume with a point in the box.
func TestViewQueryBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 1))
	set := &geofence.ZoneSet{}
	add := func(v geofence.Volume) {
		set.Zones = append(set.Zones, &geofence.Zone{ID: fmt.Sprintf("Z%d", len(set.Zones)), Category: geofence.Restricted, Volumes: []geofence.Volume{v}})
	}
	for i := range 3000 {
		lon, lat := -180+360*r.Float64(), -85+170*r.Float64()
		if i%3 == 0 { // crowd some near one place
			lon, lat = 2+r.Float64(), 48+r.Float64()
		}
		size := math.Pow(10, -3+3.5*r.Float64()) // 0.001° to 3°
		switch i % 4 {
		case 0:
			add(geofence.Volume{Circle: &geofence.Circle{Center: orb.Point{lon, lat}, RadiusM: size * 111_000}})
		default:
			var outer, hole orb.Ring
			nv := 3 + r.IntN(30)
			for v := range nv {
				a := (float64(v) + 0.8*r.Float64()) / float64(nv) * 2 * math.Pi
				rr := size * (0.3 + 0.7*r.Float64())
				outer = append(outer, orb.Point{lon + rr*math.Cos(a), math.Max(-89.9, math.Min(89.9, lat+rr*math.Sin(a)))})
				hole = append(hole, orb.Point{lon + 0.2*size*math.Cos(a), lat + 0.2*size*math.Sin(a)})
			}
			outer, hole = append(outer, outer[0]), append(hole, hole[0])
			p := orb.Polygon{outer}
			if i%4 == 2 {
				p = append(p, hole)
			}
			add(geofence.Volume{Area: orb.MultiPolygon{p}})
		}
	}
	// Across the antimeridian.
	add(geofence.Volume{Area: orb.MultiPolygon{{{{179, -17}, {-179, -17}, {-179, -16}, {179, -16}, {179, -17}}}}})
	vi := newViewIndex(1, set)
	for q := range 600 {
		w := math.Pow(10, -2.5+4.5*r.Float64())
		x0, y0 := -180+(360-w)*r.Float64(), -90+(180-w/2)*r.Float64()
		if q%3 == 0 {
			x0, y0 = 2+r.Float64(), 48+r.Float64()
		}
		box := orb.Bound{Min: orb.Point{x0, y0}, Max: orb.Point{math.Min(180, x0+w), math.Min(90, y0+w/2)}}
		got := vi.query(box)
		var want []int32
		for i := range vi.feats {
			if vi.feats[i].intersects(box) {
				want = append(want, int32(i))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("box %v: index %d volumes, brute force %d", box, len(got), len(want))
		}
		// A volume left out has no point of the box inside it.
		in := map[int32]bool{}
		for _, i := range got {
			in[i] = true
		}
		for range 50 {
			p := orb.Point{box.Min[0] + (box.Max[0]-box.Min[0])*r.Float64(), box.Min[1] + (box.Max[1]-box.Min[1])*r.Float64()}
			for i := range vi.feats {
				f := &vi.feats[i]
				if in[int32(i)] || !f.bound.Contains(p) {
					continue
				}
				inside := false
				if f.circle != nil {
					inside = haversineM(f.circle.Center, p) < f.circle.RadiusM
				} else if !f.wraps {
					for _, poly := range f.area {
						odd := false
						for _, ring := range poly {
							if ringHas(ring, p) {
								odd = !odd
							}
						}
						inside = inside || odd
					}
				}
				if inside {
					t.Fatalf("box %v: volume %s holds %v of the box and was left out", box, f.zone.ID, p)
				}
			}
		}
	}
}

// TestViewAnswerBound: an airport view of 20,000 zones answers every
// volume in it, under the bound; a country view holding them all answers
// reduced, under the bound, every volume in it drawn or inside a cluster.
func TestViewAnswerBound(t *testing.T) {
	set := parseViewSet(t, genViewZones(7, 20_000))
	vi := newViewIndex(3, set)
	for _, tt := range []struct {
		name    string
		p       viewParams
		reduced bool
	}{
		{"airport", airportView(viewSites[0]), false},
		{"airport zoomed out", viewParams{box: airportView(viewSites[1]).box, zoom: 10}, false},
		{"country", countryView, true},
		{"world at zoom 0", viewParams{box: dronestore.BBox{MinLon: -180, MinLat: -90, MaxLon: 180, MaxLat: 90}, zoom: 0}, true},
		{"empty sea", viewParams{box: dronestore.BBox{MinLon: -30, MinLat: 40, MaxLon: -29, MaxLat: 41}, zoom: 12}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := vi.answer(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > viewMaxBytes {
				t.Errorf("%d bytes, bound %d", len(b), viewMaxBytes)
			}
			var a viewAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			if a.Reduced != tt.reduced || a.ZoneVersion != 3 || a.Zones != 20_000 || a.Zoom != tt.p.zoom || len(a.SetBBox) != 4 {
				t.Fatalf("reduced %v (want %v), version %d, zones %d, zoom %d, set_bbox %v", a.Reduced, tt.reduced, a.ZoneVersion, a.Zones, a.Zoom, a.SetBBox)
			}
			hits := vi.query(boxBound(tt.p.box))
			if a.InView != len(hits) {
				t.Errorf("in_view %d, want %d", a.InView, len(hits))
			}
			drawn := map[string]bool{}
			for _, f := range a.Features {
				drawn[f.ID] = true
			}
			clustered := 0
			for _, c := range a.Clusters {
				clustered += c.Count
				if c.Restricted+c.Warning != c.Count {
					t.Errorf("cluster %v: %d + %d != %d", c.BBox, c.Restricted, c.Warning, c.Count)
				}
			}
			if !tt.reduced && (len(a.Features) != len(hits) || len(a.Clusters) != 0) {
				t.Errorf("%d features and %d clusters for %d volumes in view", len(a.Features), len(a.Clusters), len(hits))
			}
			if len(a.Features)+clustered != len(hits) {
				t.Errorf("%d drawn + %d clustered != %d in view", len(a.Features), clustered, len(hits))
			}
			// Every volume not drawn lies inside a cluster's box.
			for _, i := range hits {
				f := &vi.feats[i]
				if drawn[f.zone.ID+"#0"] {
					continue
				}
				ok := false
				for _, c := range a.Clusters {
					cb := orb.Bound{Min: orb.Point{c.BBox[0], c.BBox[1]}, Max: orb.Point{c.BBox[2], c.BBox[3]}}
					if cb.Contains(f.bound.Min) && cb.Contains(f.bound.Max) {
						ok = true
						break
					}
				}
				if !ok {
					t.Fatalf("volume %s (bound %v) is neither drawn nor in a cluster", f.zone.ID, f.bound)
				}
			}
			t.Logf("%s: %d bytes, %d in view, %d drawn, %d clusters", tt.name, len(b), len(hits), len(a.Features), len(a.Clusters))
		})
	}
}

// TestViewDrawnOutward: each polygon drawn in a view covers every vertex
// of the zone (the answer's rings under the nonzero rule).
func TestViewDrawnOutward(t *testing.T) {
	set := parseViewSet(t, genViewZones(11, 4000))
	vi := newViewIndex(1, set)
	for _, z := range []int{8, 11, 14} {
		b, err := vi.answer(viewParams{box: dronestore.BBox{MinLon: -1.2, MinLat: 51, MaxLon: 0.3, MaxLat: 52}, zoom: z})
		if err != nil {
			t.Fatal(err)
		}
		var a viewAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, f := range a.Features {
			if f.Geometry.Type != "MultiPolygon" {
				continue
			}
			var mp orb.MultiPolygon
			if err := json.Unmarshal(f.Geometry.Coordinates, &mp); err != nil {
				t.Fatal(err)
			}
			zone := set.Zones[0]
			for _, zz := range set.Zones {
				if zz.ID == f.Properties.ZoneID {
					zone = zz
				}
			}
			for _, ring := range zone.Volumes[0].Area[0] {
				for _, p := range ring {
					w := 0
					for _, poly := range mp {
						for _, rr := range poly {
							w += windingOf(p, rr)
						}
					}
					if w == 0 && !onRings(p, mp) {
						t.Fatalf("zoom %d: vertex %v of %s not covered by its drawing", z, p, zone.ID)
					}
				}
			}
			checked++
		}
		if checked == 0 {
			t.Fatalf("zoom %d: no polygon in view", z)
		}
	}
}

func windingOf(p orb.Point, r orb.Ring) int {
	w := 0
	for i := 0; i+1 < len(r); i++ {
		a, b := r[i], r[i+1]
		c := (b[0]-a[0])*(p[1]-a[1]) - (p[0]-a[0])*(b[1]-a[1])
		if a[1] <= p[1] {
			if b[1] > p[1] && c > 0 {
				w++
			}
		} else if b[1] <= p[1] && c < 0 {
			w--
		}
	}
	return w
}

func onRings(p orb.Point, mp orb.MultiPolygon) bool {
	for _, poly := range mp {
		for _, r := range poly {
			for i := 0; i+1 < len(r); i++ {
				a, b := r[i], r[i+1]
				dx, dy := b[0]-a[0], b[1]-a[1]
				t := 0.0
				if l := dx*dx + dy*dy; l > 0 {
					t = math.Max(0, math.Min(1, ((p[0]-a[0])*dx+(p[1]-a[1])*dy)/l))
				}
				if math.Hypot(p[0]-a[0]-t*dx, p[1]-a[1]-t*dy) <= 1e-9 {
					return true
				}
			}
		}
	}
	return false
}

// TestMapZonesViewHTTP: the route: the view's zones only, an ETag per
// version, box and zoom with 304 on If-None-Match, a cache the browser may
// keep; the whole set without parameters as before; bad parameters 400.
func TestMapZonesViewHTTP(t *testing.T) {
	srv, store, _ := zoneServer(t)
	set := `{"type":"FeatureCollection","features":[
{"type":"Feature","geometry":{"type":"Point","coordinates":[7.5,46]},"properties":{"id":"C","name":"Circle","category":"warning","radius_m":500}},
{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[7,46],[7.1,46],[7.1,46.1],[7,46.1],[7,46]],[[7.04,46.04],[7.06,46.04],[7.06,46.06],[7.04,46.06],[7.04,46.04]]]},"properties":{"id":"H","name":"Holed","category":"restricted"}},
{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[9,47],[9.1,47],[9.1,47.1],[9,47]]]},"properties":{"id":"F","name":"Far","category":"restricted"}}]}`
	if _, err := store.Put(context.Background(), 0, "geojson", json.RawMessage(set), "test"); err != nil {
		t.Fatal(err)
	}
	get := func(q string, hdr ...string) answer { return do(t, srv, "GET", "/v1/map/zones?"+q, "", hdr...) }
	ids := func(a answer) string {
		var v viewAnswer
		if err := json.Unmarshal([]byte(a.raw), &v); err != nil {
			t.Fatalf("%s: %v", a.raw, err)
		}
		var s []string
		for _, f := range v.Features {
			s = append(s, f.Properties.ZoneID)
		}
		return strings.Join(s, ",")
	}
	for _, tt := range []struct{ q, want string }{
		{"bbox=7.05,46.05,7.055,46.055&zoom=14", ""}, // inside the hole
		{"bbox=7.05,46.05,7.065,46.055&zoom=14", "H"},
		{"bbox=7.09,45.99,7.6,46.5&zoom=10", "C,H"},
		{"bbox=7.5,46.0,7.6,46.1&zoom=10", "C"},
		{"bbox=7.507,45.99,7.6,46.1&zoom=10", ""},   // 541 m east of the circle's centre, radius 500 m
		{"bbox=8.99,46.99,9.01,47.01&zoom=12", "F"}, // the triangle's corner
		{"bbox=9.08,47.0,9.2,47.01&zoom=12", "F"},   // its bottom side
		{"bbox=9.0,47.09,9.005,47.095&zoom=16", ""}, // beside its slanted side
		{"zoom=3", "C,H,F"},
		{"bbox=-10,30,20,60", "C,H,F"},
	} {
		a := get(tt.q)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", tt.q, a.status, a.raw)
		}
		if got := ids(a); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.q, got, tt.want)
		}
		if a.header.Get("Cache-Control") != "private, no-cache" || a.header.Get("Content-Type") != "application/geo+json" {
			t.Errorf("%s: %v", tt.q, a.header)
		}
	}
	a := get("bbox=7,46,7.2,46.2&zoom=12")
	tag := a.header.Get("ETag")
	if !strings.HasPrefix(tag, `"1-12-`) {
		t.Fatalf("ETag %q", tag)
	}
	if nm := get("bbox=7,46,7.2,46.2&zoom=12", "If-None-Match", tag); nm.status != 304 || nm.header.Get("ETag") != tag || nm.header.Get("Cache-Control") != "private, no-cache" {
		t.Errorf("If-None-Match the view's tag: %d %v", nm.status, nm.header)
	}
	if nm := get("bbox=7,46,7.2,46.2&zoom=13", "If-None-Match", tag); nm.status != 200 || nm.header.Get("ETag") == tag {
		t.Errorf("another zoom: %d %s", nm.status, nm.header.Get("ETag"))
	}
	if nm := get("bbox=7,46,7.2,46.3&zoom=12", "If-None-Match", tag); nm.status != 200 || nm.header.Get("ETag") == tag {
		t.Errorf("another box: %d %s", nm.status, nm.header.Get("ETag"))
	}
	if nm := get("bbox=7,46,7.2,46.2&zoom=12", "If-None-Match", `"1"`); nm.status != 200 {
		t.Errorf("the whole set's tag for a view: %d", nm.status)
	}
	if _, err := store.Put(context.Background(), 1, "geojson", json.RawMessage(collection(feature("X", 7.1))), "test"); err != nil {
		t.Fatal(err)
	}
	// While version 2 is indexed, version 1 answers (here: 304, the
	// client has it); then version 2.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		nm := get("bbox=7,46,7.2,46.2&zoom=12", "If-None-Match", tag)
		if nm.status == 304 && nm.header.Get("ETag") == tag && time.Since(start) < 10*time.Second {
			continue
		}
		if nm.status != 200 || !strings.HasPrefix(nm.header.Get("ETag"), `"2-12-`) || ids(nm) != "X" {
			t.Errorf("after a change: %d %s %s", nm.status, nm.header.Get("ETag"), nm.raw)
		}
		break
	}
	// Without parameters: the whole set, as before.
	if w := do(t, srv, "GET", "/v1/map/zones", ""); w.status != 200 || w.header.Get("ETag") != `"2"` || w.header.Get("Cache-Control") != "no-store" {
		t.Errorf("whole set: %d %v", w.status, w.header)
	}
	for _, q := range []string{"bbox=1,2,0,3", "bbox=0,3,1,2", "bbox=181,0,182,1", "bbox=a", "bbox=", "zoom=23", "zoom=-1", "zoom=x", "zoom=", "zoom=1.5"} {
		a := get(q)
		field := strings.SplitN(q, "=", 2)[0]
		if a.status != 400 || !strings.Contains(a.raw, `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s", q, a.status, a.raw)
		}
	}
}

// TestMapZonesBBoxPattern: the view's bbox is described by the same
// pattern as GET /v1/drones', which parseBBox applies.
func TestMapZonesBBoxPattern(t *testing.T) {
	if a, b := describedPattern("GET /v1/map/zones", "bbox").String(), bboxPattern.String(); a != b {
		t.Errorf("GET /v1/map/zones bbox pattern %s, GET /v1/drones' %s", a, b)
	}
}

// The viewport answer over 100,000 zones (90,000 facility-map cells around
// five airports, 5,000 circles, 5,000 polygons): an airport view and a
// country view, encoded afresh each time (the cache is what a second page
// asking the same view gets). BENCHMARKS.md "Zones by viewport (issue 29)".
func BenchmarkMapZonesView(b *testing.B) {
	doc := genViewZones(29, 100_000)
	t0 := time.Now()
	set := parseViewSet(b, doc)
	parsed := time.Since(t0)
	t0 = time.Now()
	vi := newViewIndex(1, set)
	b.Logf("100,000 zones: %d MB of GeoJSON parsed in %v, indexed in %v", len(doc)>>20, parsed.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	for _, bc := range []struct {
		name string
		p    viewParams
	}{
		{"airport", airportView(viewSites[0])},
		{"airport-z11", viewParams{box: airportView(viewSites[0]).box, zoom: 11}},
		{"city-z11", viewParams{box: dronestore.BBox{MinLon: -0.9, MinLat: 51.25, MaxLon: 0, MaxLat: 51.7}, zoom: 11}},
		{"country", countryView},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int
			b.ReportAllocs()
			for b.Loop() {
				body, err := vi.encode(bc.p)
				if err != nil {
					b.Fatal(err)
				}
				n = len(body)
			}
			b.ReportMetric(float64(n), "bytes/view")
		})
	}
}
