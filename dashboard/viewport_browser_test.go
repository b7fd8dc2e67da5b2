package dashboard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// viewportSites are the five airports genZones100k crowds its zones around.
var viewportSites = [][2]float64{{-0.4543, 51.4700}, {2.5479, 49.0097}, {8.5622, 50.0379}, {4.7683, 52.3105}, {-3.5676, 40.4983}}

// genZones100k is n zones like the FAA's UAS facility maps: 90% 30"×30"
// cells filling a square around each airport, then circles and smooth
// star polygons of 8-200 vertices spread evenly within 60 km (as
// api/mapview_viewport_test.go's generator, which the Go benchmark uses).
func genZones100k(n int) []byte {
	r := rand.New(rand.NewPCG(29, 29))
	var b bytes.Buffer
	b.WriteString(`{"type":"FeatureCollection","features":[`)
	f := func(x float64) string { return fmt.Sprintf("%.7f", x) }
	const c = 1.0 / 120
	cells := n * 9 / 10
	side := int(math.Ceil(math.Sqrt(float64(cells / len(viewportSites)))))
	k := 0
	sep := func() {
		if k > 0 {
			b.WriteByte(',')
		}
		k++
	}
	for si, s := range viewportSites {
		x0, y0 := math.Floor(s[0]/c)-float64(side/2), math.Floor(s[1]/c)-float64(side/2)
		for i := 0; i < cells/len(viewportSites); i++ {
			x, y := (x0+float64(i%side))*c, (y0+float64(i/side))*c
			sep()
			fmt.Fprintf(&b, `{"type":"Feature","properties":{"id":"UASFM-%d-%d","name":"UAS facility map","category":"warning","ceiling_m":30.48,"ceiling_ref":"AGL"},"geometry":{"type":"Polygon","coordinates":[[[%s,%s],[%s,%s],[%s,%s],[%s,%s],[%s,%s]]]}}`,
				si, i, f(x), f(y), f(x+c), f(y), f(x+c), f(y+c), f(x), f(y+c), f(x), f(y))
		}
	}
	for i := 0; k < n; i++ {
		s := viewportSites[r.IntN(len(viewportSites))]
		u, a := r.Float64(), r.Float64()*2*math.Pi
		lon, lat := s[0]+0.6*math.Sqrt(u)*math.Cos(a)/math.Cos(s[1]*math.Pi/180), s[1]+0.6*math.Sqrt(u)*math.Sin(a)
		sep()
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"type":"Feature","properties":{"id":"C%d","name":"circle %d","category":"restricted","radius_m":%d},"geometry":{"type":"Point","coordinates":[%s,%s]}}`,
				i, i, 500+r.IntN(4500), f(lon), f(lat))
			continue
		}
		nv, size, ph := 8+r.IntN(193), 0.005+0.04*r.Float64(), r.Float64()*2*math.Pi
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

// TestDashboardZonesByViewport (issue 29): over 100,000 zones, the page at
// an airport view draws the zones of its view only, within 500 KB of JSON,
// its first paint measured (≤ 1 s the target, logged; a generous bound
// fails); panning loads the new view's zones; the country view is
// reduced to clusters.
func TestDashboardZonesByViewport(t *testing.T) {
	const n = 100_000
	doc := genZones100k(n)
	t.Logf("zone set: %d zones, %.1f MB of GeoJSON", n, float64(len(doc))/1e6)
	s := startStack(t, doc, 2)
	// The server builds a version's view index at its first view; the
	// page's first paint is measured with it built, as every page after
	// the first after a zone change finds it.
	ask := func(q string) (int, []byte, time.Duration) {
		req, _ := http.NewRequest("GET", s.alerter+"/v1/map/zones?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+s.viewer)
		t0 := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(res.Body)
		return res.StatusCode, body.Bytes(), time.Since(t0)
	}
	code, _, cold := ask("bbox=-0.6,51.4,-0.3,51.55&zoom=13")
	if code != 200 {
		t.Fatalf("first view: %d", code)
	}
	_, body, warm := ask("bbox=-0.6,51.4,-0.3,51.5&zoom=13")
	t.Logf("server: first view of the version (index built) %v, another view %v (%d bytes)", cold.Round(time.Millisecond), warm.Round(time.Millisecond), len(body))

	b := openBrowser(t, s.alerter, "viewer")
	b.signIn(s.viewer)
	// Unasked for a view, the page fits the set: all five airports, reduced.
	b.run("see the set's view", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-reduced="true"]`)))
	b.shot("zones-country")
	t.Logf("country view: %s zones drawn, %s clusters (%s)", eval[string](b, `document.body.dataset.zonesDrawn`),
		eval[string](b, `document.body.dataset.zonesClusters`), eval[string](b, `document.body.dataset.zonesView`))

	// An airport view, as a bookmark opens it.
	eval[bool](b, `location.hash = '#map=13/51.4700/-0.4543'; location.reload(); true`)
	b.run("open the airport view", chromedp.Sleep(300*time.Millisecond), chromedp.WaitVisible(chromedp.CSS(`body[data-zones-paint-ms]`)))
	paint := eval[float64](b, `+document.body.dataset.zonesPaintMs`)
	b.run("settle", chromedp.Sleep(1500*time.Millisecond))
	view := eval[string](b, `document.body.dataset.zonesView`)
	drawn := eval[[]string](b, `nofly.zonesDrawn()`)
	t.Logf("airport view %s: first zones painted %.0f ms after navigation, %d drawn (target ≤ 1000 ms)", view, paint, len(drawn))
	if paint > 5000 {
		t.Errorf("first paint of the airport view %.0f ms after navigation, target ≤ 1000 ms", paint)
	}
	if eval[string](b, `document.body.dataset.zonesReduced`) != "false" {
		t.Errorf("the airport view is reduced")
	}
	// What the page drew is what the server says meets its box.
	bbox, zoom, _ := strings.Cut(view, "/")
	_, ab, _ := ask("bbox=" + bbox + "&zoom=" + zoom)
	var a struct {
		InView   int `json:"in_view"`
		Features []struct {
			ID string `json:"id"`
		} `json:"features"`
	}
	if err := json.Unmarshal(ab, &a); err != nil {
		t.Fatal(err)
	}
	if len(drawn) != a.InView || len(drawn) == 0 || len(drawn) > 5000 {
		t.Errorf("drawn %d zones, the server has %d in the view's box", len(drawn), a.InView)
	}
	// The zone names' placement (wayfind.js) over the most zones a view
	// draws: a pass over them when the map stops moving.
	ls := eval[map[string]any](b, `nofly.labelStats()`)
	t.Logf("zone labels at the airport view: %v drawn of %v candidates, placed in %.1f ms (the most of %v passes %.1f ms)",
		ls["drawn"], ls["candidates"], ls["ms"], ls["runs"], ls["maxMs"])
	if ms, _ := ls["maxMs"].(float64); ms > 100 {
		t.Errorf("placing the zone labels took %.1f ms, want well under 100", ms)
	}
	b.shot("zones-airport")
	before := map[string]bool{}
	for _, id := range drawn {
		before[id] = true
	}

	// Pan 15 km east: the new view's zones are loaded, the old ones go.
	loads := eval[string](b, `document.body.dataset.zonesLoads`)
	eval[bool](b, `nofly.view(51.47, -0.24, 13); true`)
	b.run("see the panned view", chromedp.WaitVisible(chromedp.CSS(`body:not([data-zones-view="`+view+`"])`)))
	b.run("settle", chromedp.Sleep(500*time.Millisecond))
	after := eval[[]string](b, `nofly.zonesDrawn()`)
	fresh := 0
	for _, id := range after {
		if !before[id] {
			fresh++
		}
	}
	t.Logf("after the pan: %d drawn, %d new; loads %s → %s", len(after), fresh, loads, eval[string](b, `document.body.dataset.zonesLoads`))
	if fresh == 0 {
		t.Errorf("panning drew no new zone")
	}
	b.shot("zones-panned")

	// Every answer the page read was within 500 KB.
	sizes := eval[[]float64](b, `performance.getEntriesByType('resource').filter((e) => e.name.includes('v1/map/zones')).map((e) => e.decodedBodySize)`)
	most := 0.0
	for _, x := range sizes {
		most = math.Max(most, x)
	}
	t.Logf("zone answers read since the reload: %d, the largest %.0f bytes", len(sizes), most)
	if len(sizes) == 0 || most > 500_000 {
		t.Errorf("zone answers %v: want some, each ≤ 500,000 bytes", sizes)
	}
}
