package dashboard_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestDashboardAirportPilot is the README's picture as a test: at New
// Castle County Airport, on the committed OpenStreetMap base map
// (testdata/basemap/ilg.pmtiles), a drone flies from the north-east into
// runway 19's protection zone while its pilot stands 600 m off, reported
// on every third record. The restricted alarm's row names the pilot's
// range and bearing, the pilot is drawn at its pixel with a dashed line to
// the drone, and the runways are drawn under them. Its screenshot
// (airport-…-pilot-at-the-airport.png under the test's artifacts) is
// docs/dashboard-airport.png.
func TestDashboardAirportPilot(t *testing.T) {
	untimed(t)
	zones := []byte(`{"type":"FeatureCollection","features":[
{"type":"Feature","id":"ILG-ATZ","properties":{"name":"New Castle ATZ","category":"warning","radius_m":2500},
 "geometry":{"type":"Point","coordinates":[-75.6065,39.6785]}},
{"type":"Feature","id":"ILG-RPZ-19","properties":{"name":"Runway 19 protection zone","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-75.6045,39.6885],[-75.5990,39.6885],[-75.5985,39.6950],[-75.6050,39.6950],[-75.6045,39.6885]]]}}]}`)
	s := startStack(t, zones, 1, "--map-pmtiles="+filepath.Join(testenv.RepoRoot(), "testdata", "basemap", "ilg.pmtiles"))
	b := openBrowser(t, s.alerter, "airport")
	b.signIn(s.operator)
	b.run("see the zones and the base map", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn]`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-basemap="pmtiles"]`)))

	// The pilot in a field north-east of the airport; the drone flies
	// south-west from beside it into the protection zone, 12 s, 1 Hz.
	const pLat, pLon = 39.7000, -75.5925
	start := time.Now().Add(-12 * time.Second)
	var recs []map[string]any
	for i := range 12 {
		f := float64(i) / 11
		lat, lon := 39.6985+(39.6918-39.6985)*f, -75.5935+(-75.6012+75.5935)*f
		if i%3 == 0 {
			recs = append(recs, posWithPilot("DJI-4471", int64(i+1), start.Add(time.Duration(i)*time.Second), lat, lon, pLat, pLon, "live"))
		} else {
			recs = append(recs, pos("DJI-4471", int64(i+1), start.Add(time.Duration(i)*time.Second), lat, lon))
		}
	}
	s.send(recs...)
	b.run("see the restricted alarm with its pilot",
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm.restricted .pilot`)))
	testWait(t, 15*time.Second, func() bool {
		eval[any](b, `nofly.view(39.6945, -75.5985, 15), null`)
		time.Sleep(time.Second)
		return eval[float64](b, `nofly.map.getZoom()`) == 15
	})
	b.run("see the archive drawn", chromedp.Poll[chromedp.Void](`nofly.basemap.drawn >= 2`))
	var ps []pilotDrawn
	testWait(t, 10*time.Second, func() bool { ps = eval[[]pilotDrawn](b, `nofly.pilots()`); return len(ps) == 1 })
	want := eval[[]float64](b, fmt.Sprintf(`nofly.pixelOf(%g, %g)`, pLat, pLon))
	if p := ps[0]; p.DroneID != "DJI-4471" || math.Hypot(p.Px[0]-want[0], p.Px[1]-want[1]) > 1.5 || p.Line == nil || p.Line.Dash == "" {
		t.Errorf("pilot drawn %+v, want DJI-4471's at %v with a dashed line", p, want)
	}
	row := eval[string](b, `document.querySelector('#active li.alarm.restricted').textContent`)
	if !strings.Contains(row, "Runway 19 protection zone") || !strings.Contains(row, "pilot ") || !strings.Contains(row, "m at ") {
		t.Errorf("the restricted alarm's row %q lacks the zone or the pilot's range and bearing", row)
	}
	time.Sleep(1500 * time.Millisecond) // labels settle
	shot := b.screenshot("pilot-at-the-airport")
	// The base map is there: the map area is not the coastline's flat
	// land or sea but many colours (roads, runways, buildings, water).
	x0, y0, x1, y1 := b.mapBox()
	colours := map[[3]uint32]bool{}
	for y := y0; y < y1; y += 7 {
		for x := x0; x < x1; x += 7 {
			r, g, bl, _ := shot.At(x, y).RGBA()
			colours[[3]uint32{r >> 12, g >> 12, bl >> 12}] = true
		}
	}
	if len(colours) < 40 {
		t.Errorf("%d colours on the map: no base map drawn under the zones", len(colours))
	}
}
