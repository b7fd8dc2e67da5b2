package dashboard_test

// The base map in a real browser (issue 31, point 1): --map-tiles from a
// local XYZ server, --map-pmtiles from an archive built here, and neither
// (the coastline). Each checks the pixels of a screenshot, not only the
// requests, and that no request went to an origin it should not.

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"

	"github.com/nofly-dev/nofly/internal/basemapgen"
	"github.com/nofly-dev/nofly/internal/pmtiles"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// Where the base map tests look: west of the test zones, nothing drawn
// there but the base map.
const bmLat, bmLon, bmZoom = 52.5, -2.0, 11

// screenshot is the page as an image.
func (b *browser) screenshot(name string) image.Image {
	b.t.Helper()
	b.shot(name)
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		b.t.Fatal(err)
	}
	return img
}

// near reports whether c is within tol of want in each channel.
func near(c color.Color, want color.RGBA, tol int) bool {
	r, g, bl, _ := c.RGBA()
	d := func(a uint32, w uint8) bool { x := int(a>>8) - int(w); return x <= tol && x >= -tol }
	return d(r, want.R) && d(g, want.G) && d(bl, want.B)
}

// share is the fraction of the pixels of the box (x0, y0)-(x1, y1) near want.
func share(img image.Image, x0, y0, x1, y1 int, want color.RGBA, tol int) float64 {
	n, hit := 0, 0
	for y := y0; y < y1; y += 2 {
		for x := x0; x < x1; x += 2 {
			n++
			if near(img.At(x, y), want, tol) {
				hit++
			}
		}
	}
	return float64(hit) / float64(max(n, 1))
}

// mapBox is the map's box on the page, 60 pixels in from its edges (the
// zoom buttons and the attribution are there).
func (b *browser) mapBox() (x0, y0, x1, y1 int) {
	r := eval[[]float64](b, `(() => { const r = nofly.map.getContainer().getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()`)
	return int(r[0]) + 60, int(r[1]) + 60, int(r[2]) - 60, int(r[3]) - 60
}

func (b *browser) showBasemapView() {
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-basemap]`)))
	b.goTo(bmLat, bmLon, bmZoom)
}

// goTo sets the map's view once the page has fitted its zones, and waits
// until the view is there.
func (b *browser) goTo(lat, lon float64, z int) {
	b.t.Helper()
	b.run("go to the view", chromedp.Sleep(500*time.Millisecond),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`void nofly.view(%g, %g, %d)`, lat, lon, z)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`Math.abs(nofly.center()[0] - %g) < 0.001 && nofly.map.getZoom() === %d`, lat, z)))
}

// TestDashboardBasemapTiles: --map-tiles draws the tile server's tiles
// under the zones; the CSP admits that origin and only it; the coastline
// is gone; the page asked nothing of any third origin.
func TestDashboardBasemapTiles(t *testing.T) {
	untimed(t)
	tileColour := color.RGBA{R: 214, G: 96, B: 200, A: 255}
	var tile bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 256, 256))
	for y := range 256 {
		for x := range 256 {
			img.Set(x, y, tileColour)
		}
	}
	if err := png.Encode(&tile, img); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	tiles := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(tile.Bytes())
	}))
	defer tiles.Close()

	s := startStack(t, testZones(), 1, "--map-tiles="+tiles.URL+"/{z}/{x}/{y}.png", "--map-attribution=Test tiles <b>& co</b>")
	res, err := http.Get(s.alerter + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	csp := res.Header.Get("Content-Security-Policy")
	if want := "img-src 'self' data: " + tiles.URL + ";"; !strings.Contains(csp, want) || strings.Count(csp, "http") != 1 {
		t.Errorf("CSP %q, want exactly %q admitted", csp, tiles.URL)
	}
	b := openBrowser(t, s.alerter, "viewer")
	b.others = []string{tiles.URL}
	b.signIn(s.viewer)
	b.showBasemapView()
	b.run("see the tiles drawn", chromedp.WaitReady(chromedp.CSS(`body[data-basemap="tiles"]`)),
		chromedp.Poll[chromedp.Void](`nofly.basemap.drawn >= 6`))
	time.Sleep(500 * time.Millisecond)
	shot := b.screenshot("tiles")
	x0, y0, x1, y1 := b.mapBox()
	if f := share(shot, x0, y0, x1, y1, tileColour, 3); f < 0.9 {
		t.Errorf("%.0f%% of the map is the tiles' colour, want ≥ 90%%", f*100)
	}
	mu.Lock()
	n := len(asked)
	mu.Unlock()
	if n == 0 {
		t.Error("the tile server was asked nothing")
	}
	attr := eval[string](b, `document.querySelector('.leaflet-control-attribution').textContent`)
	if !strings.Contains(attr, "Test tiles <b>& co</b>") || strings.Contains(attr, "Natural Earth") {
		t.Errorf("attribution %q: the tiles' text, escaped, and no coastline's, wanted", attr)
	}
	if land := eval[int](b, `document.querySelectorAll('.leaflet-overlay-pane path').length`); land != 0 {
		t.Logf("%d overlay paths (zones draw on canvas)", land)
	}
	t.Logf("tile server asked %d tiles", n)
}

// testArchive is a vector archive of the Protomaps layers basemap.js
// paints: earth everywhere around bm, water west of it, a runway east.
func testArchive(t *testing.T) string {
	t.Helper()
	poly := func(w, s, e, n float64) orb.Polygon {
		return orb.Polygon{{{w, s}, {e, s}, {e, n}, {w, n}, {w, s}}}
	}
	f := func(layer string, g orb.Geometry, props map[string]any) basemapgen.Feature {
		gf := geojson.NewFeature(g)
		gf.Properties = props
		return basemapgen.Feature{Layer: layer, MinZoom: 0, MaxZoom: 14, Feature: gf}
	}
	features := []basemapgen.Feature{
		f("earth", poly(bmLon-0.5, bmLat-0.3, bmLon+0.5, bmLat+0.3), map[string]any{"kind": "earth"}),
		f("water", poly(bmLon-0.5, bmLat-0.3, bmLon-0.06, bmLat+0.3), map[string]any{"kind": "water", "name": "Test Reservoir"}),
		f("roads", orb.LineString{{bmLon + 0.04, bmLat}, {bmLon + 0.2, bmLat}}, map[string]any{"kind": "aeroway", "kind_detail": "runway", "ref": "09/27"}),
	}
	tiles, err := basemapgen.VectorTiles(features, 6, 12)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = pmtiles.Write(&buf, pmtiles.Archive{TileType: pmtiles.TileMVT, TileCompression: pmtiles.CompressionGzip,
		Bounds: [4]float64{bmLon - 0.5, bmLat - 0.3, bmLon + 0.5, bmLat + 0.3}, Center: [2]float64{bmLon, bmLat}, CenterZoom: bmZoom,
		Metadata: map[string]any{"name": "test", "attribution": `<a href="https://openstreetmap.org/copyright">© OpenStreetMap contributors</a>`}, Tiles: tiles})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "test.pmtiles")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("test archive: %d tiles, %d bytes", len(tiles), buf.Len())
	return p
}

// TestDashboardBasemapPMTiles: --map-pmtiles draws the archive (water,
// land and the runway in basemap.js's colours where they are), every
// archive read is a 206 range answer from the alerter, and nothing else
// is asked of anyone.
func TestDashboardBasemapPMTiles(t *testing.T) {
	untimed(t)
	s := startStack(t, testZones(), 1, "--map-pmtiles="+testArchive(t))
	b := openBrowser(t, s.alerter, "viewer")
	b.signIn(s.viewer)
	b.showBasemapView()
	b.run("see the archive drawn", chromedp.WaitReady(chromedp.CSS(`body[data-basemap="pmtiles"]`)),
		chromedp.Poll[chromedp.Void](`nofly.basemap.drawn >= 4`))
	time.Sleep(time.Second) // labels settle
	shot := b.screenshot("pmtiles")
	at := func(lat, lon float64) (int, int) {
		xy := eval[[]float64](b, fmt.Sprintf(`nofly.pixelOf(%g, %g)`, lat, lon))
		return int(xy[0]), int(xy[1])
	}
	water := color.RGBA{0xa9, 0xcb, 0xe6, 255}
	earth := color.RGBA{0xf2, 0xef, 0xe9, 255}
	runway := color.RGBA{0x7d, 0x82, 0x8c, 255}
	for _, c := range []struct {
		what     string
		lat, lon float64
		want     color.RGBA
	}{
		{"water", bmLat + 0.02, bmLon - 0.2, water},
		{"land", bmLat + 0.05, bmLon + 0.01, earth},
		{"runway", bmLat, bmLon + 0.12, runway},
	} {
		x, y := at(c.lat, c.lon)
		if f := share(shot, x-3, y-1, x+3, y+2, c.want, 6); f < 0.5 {
			t.Errorf("%s at (%d, %d) is %v, want %v", c.what, x, y, shot.At(x, y), c.want)
		}
	}
	// Every archive read was a range answered 206 by the alerter itself.
	reads := eval[[]string](b, `performance.getEntriesByType('resource').filter((e) => e.name.includes('basemap.pmtiles')).map((e) => e.name + ' ' + e.responseStatus)`)
	if len(reads) == 0 {
		t.Fatal("the page read no archive")
	}
	for _, r := range reads {
		if !strings.HasPrefix(r, s.alerter+"/v1/map/basemap.pmtiles ") || !strings.HasSuffix(r, " 206") {
			t.Errorf("archive read %q, want a 206 from the alerter", r)
		}
	}
	attr := eval[string](b, `document.querySelector('.leaflet-control-attribution').textContent`)
	if !strings.Contains(attr, "© OpenStreetMap contributors") || strings.Contains(attr, "<a") {
		t.Errorf("attribution %q: the archive's, as text", attr)
	}
	t.Logf("%d archive reads, %d tiles drawn", len(reads), eval[int](b, `nofly.basemap.drawn`))

	// East of the archive's bounds the coastline's land is drawn, not the
	// archive's empty earth: a regional map does not blank the world.
	b.goTo(bmLat, bmLon+1.5, bmZoom)
	time.Sleep(500 * time.Millisecond)
	shot = b.screenshot("outside-the-archive")
	x0, y0, x1, y1 := b.mapBox()
	if f := share(shot, x0, y0, x1, y1, color.RGBA{0xee, 0xf0, 0xea, 255}, 1); f < 0.9 {
		t.Errorf("outside the archive %.0f%% of the map is the coastline's land, want ≥ 90%%", f*100)
	}
}

// TestDashboardBasemapNone: without either flag the page draws its
// coastline as before and asks for no base map.
func TestDashboardBasemapNone(t *testing.T) {
	untimed(t)
	s := startStack(t, testZones(), 1)
	b := openBrowser(t, s.alerter, "viewer")
	b.signIn(s.viewer)
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-basemap="coastline"]`)))
	// Great Britain's coast near the Wash: land east, sea west of it.
	b.goTo(52.9, 0.6, 8)
	time.Sleep(time.Second)
	shot := b.screenshot("coastline")
	land := color.RGBA{0xee, 0xf0, 0xea, 255}
	x, y := func() (int, int) {
		xy := eval[[]float64](b, `nofly.pixelOf(52.6, -0.5)`)
		return int(xy[0]), int(xy[1])
	}()
	if !near(shot.At(x, y), land, 4) {
		t.Errorf("inland England at (%d, %d) is %v, want the coastline's land %v", x, y, shot.At(x, y), land)
	}
	x, y = func() (int, int) { xy := eval[[]float64](b, `nofly.pixelOf(53.3, 1.5)`); return int(xy[0]), int(xy[1]) }()
	if near(shot.At(x, y), land, 4) {
		t.Errorf("the North Sea at (%d, %d) is drawn as land", x, y)
	}
	if attr := eval[string](b, `document.querySelector('.leaflet-control-attribution').textContent`); !strings.Contains(attr, "Natural Earth") {
		t.Errorf("attribution %q: the coastline's wanted", attr)
	}
	if n := eval[int](b, `performance.getEntriesByType('resource').filter((e) => e.name.includes('basemap.pmtiles') || e.name.includes('protomaps')).length`); n != 0 {
		t.Errorf("%d base map requests without a base map", n)
	}
}

// TestDashboardBasemapAirport draws the committed demo archive
// (testdata/basemap/ilg.pmtiles, cmd/basemap from OpenStreetMap data) at
// New Castle County Airport under an aerodrome zone: the runways are where
// OpenStreetMap has them, in the runway colour. Its screenshot is
// docs/dashboard-basemap.png.
func TestDashboardBasemapAirport(t *testing.T) {
	untimed(t)
	zones := []byte(`{"type":"FeatureCollection","features":[
{"type":"Feature","id":"ILG-ATZ","properties":{"name":"New Castle ATZ","category":"warning","radius_m":2500},
 "geometry":{"type":"Point","coordinates":[-75.6065,39.6785]}},
{"type":"Feature","id":"ILG-RPZ-19","properties":{"name":"Runway 19 protection zone","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-75.6045,39.6885],[-75.5990,39.6885],[-75.5985,39.6950],[-75.6050,39.6950],[-75.6045,39.6885]]]}},
{"type":"Feature","id":"FAR","properties":{"name":"Elsewhere","category":"warning","radius_m":500},"geometry":{"type":"Point","coordinates":[0.9,51.5]}}]}`)
	s := startStack(t, zones, 1, "--map-pmtiles="+filepath.Join(testenv.RepoRoot(), "testdata", "basemap", "ilg.pmtiles"))
	b := openBrowser(t, s.alerter, "viewer")
	b.signIn(s.viewer)
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn]`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-basemap="pmtiles"]`)))
	b.goTo(39.6805, -75.6040, 14)
	b.run("see the archive drawn", chromedp.Poll[chromedp.Void](`nofly.basemap.drawn >= 6`))
	time.Sleep(1500 * time.Millisecond) // labels settle
	shot := b.screenshot("airport")
	// What the view cost: the archive's range reads and their bytes.
	cost := eval[[]float64](b, `(() => { const e = performance.getEntriesByType('resource').filter((e) => e.name.includes('basemap.pmtiles'));
		return [e.length, e.reduce((s, x) => s + x.encodedBodySize, 0)]; })()`)
	t.Logf("the airport view at zoom 14: %.0f archive range reads, %.0f bytes; %d tiles drawn", cost[0], cost[1], eval[int](b, `nofly.basemap.drawn`))
	// The runways are under the zone's tint: darker by far than the
	// ground 25 pixels off them, in the middle of runway 1-19 (OSM way
	// 50597863) and of 9-27.
	lum := func(c color.Color) float64 {
		r, g, bl, _ := c.RGBA()
		return (0.3*float64(r) + 0.59*float64(g) + 0.11*float64(bl)) / 257
	}
	for _, c := range []struct{ lat, lon, offLat, offLon float64 }{
		{39.6789, -75.60272, 39.6789, -75.6060},
		{39.68025, -75.60770, 39.6830, -75.60770},
	} {
		xy := eval[[]float64](b, fmt.Sprintf(`nofly.pixelOf(%g, %g)`, c.lat, c.lon))
		off := eval[[]float64](b, fmt.Sprintf(`nofly.pixelOf(%g, %g)`, c.offLat, c.offLon))
		darkest := 255.0
		for dy := -3; dy <= 3; dy++ {
			for dx := -3; dx <= 3; dx++ {
				darkest = min(darkest, lum(shot.At(int(xy[0])+dx, int(xy[1])+dy)))
			}
		}
		ground := lum(shot.At(int(off[0]), int(off[1])))
		if darkest > ground-60 {
			t.Errorf("runway at (%g, %g): darkest %.0f, the ground beside it %.0f: no runway drawn there", c.lat, c.lon, darkest, ground)
		}
	}
}
