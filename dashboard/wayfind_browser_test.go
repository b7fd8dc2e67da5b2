package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// wayfindZones is an airport's zones at Heathrow (a restricted zone of
// 14 × 7 km, two runway protection zones of 2 × 0.5 km, a warning
// approach lane over one of them whose label would cover the runway
// zone's, a warning park of 800 m radius) and a grid of 2,304 small warning cells around
// Paris-CDG, the page's label work at its worst: every cell drawn, most too
// small for their names.
func wayfindZones() []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"FeatureCollection","features":[
{"type":"Feature","id":"EGLL-FRZ","properties":{"name":"Heathrow FRZ","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-0.56,51.44],[-0.36,51.44],[-0.36,51.50],[-0.56,51.50],[-0.56,51.44]]]}},
{"type":"Feature","id":"EGLL-RPZ-27R","properties":{"name":"Heathrow RPZ 27R","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-0.438,51.4752],[-0.409,51.4752],[-0.409,51.4797],[-0.438,51.4797],[-0.438,51.4752]]]}},
{"type":"Feature","id":"EGLL-RPZ-09L","properties":{"name":"Heathrow RPZ 09L","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-0.516,51.4752],[-0.487,51.4752],[-0.487,51.4797],[-0.516,51.4797],[-0.516,51.4752]]]}},
{"type":"Feature","id":"LANE-27R","properties":{"name":"Heathrow approach lane 27R","category":"warning"},
 "geometry":{"type":"Polygon","coordinates":[[[-0.433,51.474],[-0.395,51.474],[-0.395,51.481],[-0.433,51.481],[-0.433,51.474]]]}},
{"type":"Feature","id":"PARK-HH","properties":{"name":"Hounslow Heath","category":"warning","radius_m":800},
 "geometry":{"type":"Point","coordinates":[-0.404,51.462]}}`)
	const c = 1.0 / 120
	for i := range 48 * 48 {
		x, y := 2.35+float64(i%48)*c, 48.9+float64(i/48)*c
		fmt.Fprintf(&b, `,
{"type":"Feature","id":"CELL-%d","properties":{"name":"Cell %d","category":"warning"},"geometry":{"type":"Polygon","coordinates":[[[%.5f,%.5f],[%.5f,%.5f],[%.5f,%.5f],[%.5f,%.5f],[%.5f,%.5f]]]}}`,
			i, i, x, y, x+c, y, x+c, y+c, x, y+c, x, y)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// press types one printable key as a keyboard does: a keyDown carrying
// its text, so that a page's preventDefault on keydown keeps the character
// out of a field (chromedp.KeyEvent sends the character as a separate
// event no keydown handler can stop).
func press(key, code string, vk int64) chromedp.Action[chromedp.Void] {
	mods := int64(0)
	if key == "?" || key == "+" {
		mods = 8 // shift
	}
	return func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: key, Code: code, Text: key, UnmodifiedText: key,
			WindowsVirtualKeyCode: vk, NativeVirtualKeyCode: vk, Modifiers: mods}
		if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, down); err != nil {
			return chromedp.Void{}, err
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		_, err := chromedp.Call(ctx, input.DispatchKeyEvent, up)
		return chromedp.Void{}, err
	}
}

func slicesContains(ls []labelBox, text string) bool {
	for _, l := range ls {
		if l.Text == text {
			return true
		}
	}
	return false
}

type labelBox struct {
	Zone string  `json:"zone"`
	Text string  `json:"text"`
	X    float64 `json:"x"`
	Y    float64 `json:"y"`
	W    float64 `json:"w"`
	H    float64 `json:"h"`
}

// labelsNow waits for the labels of the view the map settled on and reads
// their boxes on the page.
func labelsNow(b *browser) []labelBox {
	b.t.Helper()
	want := eval[float64](b, `nofly.map.getZoom()`)
	defer func() {
		if z := eval[float64](b, `nofly.map.getZoom()`); z != want {
			b.t.Fatalf("the map moved from zoom %v to %v while its labels were read", want, z)
		}
	}()
	// Drawn for this zoom, after the view's zones came.
	b.run("settle", chromedp.Sleep(300*time.Millisecond), chromedp.Poll[chromedp.Void](`(() => { const s = nofly.labelStats(), z = nofly.map.getZoom();
	  return s.zoom === z && (document.body.dataset.zonesView || '').endsWith('/' + z) && s.zonesView === document.body.dataset.zonesView; })()`,
		chromedp.WithPollingTimeout(20*time.Second)), chromedp.Sleep(300*time.Millisecond))
	return eval[[]labelBox](b, `[...document.querySelectorAll('.zlabel')].map((d) => { const r = d.getBoundingClientRect();
	  return { zone: d.dataset.zoneId, text: d.textContent, x: r.left, y: r.top, w: r.width, h: r.height }; })`)
}

// TestDashboardWayfinding (issue 31, finding one's way): zone names appear
// where they fit (an airport's zoom, not a country's) and never overlap;
// the scale bar follows the zoom; a click shows the point's coordinates
// and Copy puts them on the clipboard (or selects them where there is no
// clipboard API); the search box finds a zone by name and a drone by id,
// one the page does not draw included, and flies there; "/" focuses it and
// "?" lists the shortcuts in a dialog Escape closes.
func TestDashboardWayfinding(t *testing.T) {
	s := startStack(t, wayfindZones(), 2)
	now := time.Now()
	// One drone at Heathrow, one at Gatwick (out of an airport view of
	// Heathrow, so not drawn there).
	s.send(pos("DJI-1234", 1, now, 51.452, -0.47), pos("POLICE-7", 1, now, 51.1537, -0.1821))
	b := openBrowser(t, s.alerter, "operator")
	b.signIn(s.operator)
	// The page frames the zones, then the drones, when it first sees them:
	// after that, the test moves the map.
	b.run("see the drones framed", chromedp.Poll[chromedp.Void](`nofly.droneIds().length > 0 && document.body.dataset.zonesPaintMs`,
		chromedp.WithPollingTimeout(20*time.Second)), chromedp.Sleep(800*time.Millisecond))

	// The header grows (as when it wraps) and shrinks back without the
	// window resizing: Leaflet hears of the map's new height each time.
	for _, h := range []string{"160px", ""} {
		eval[bool](b, `document.getElementById('top').style.minHeight = '`+h+`'; true`)
		b.run("the map takes its height (header min-height "+h+")", chromedp.Poll[chromedp.Void](
			`(() => { const c = document.getElementById('map'); return c.clientHeight > 0 && nofly.map.getSize().y === c.clientHeight; })()`,
			chromedp.WithPollingTimeout(5*time.Second)))
	}

	// A country's zoom: no zone is wide enough for its name.
	eval[bool](b, `nofly.view(51.0, 0.5, 6); true`)
	if got := labelsNow(b); len(got) != 0 {
		t.Errorf("at zoom 6, %d labels: %+v", len(got), got)
	}
	scale6 := eval[string](b, `document.querySelector('.leaflet-control-scale-line').textContent`)
	b.shot("country-no-labels")

	// The airport: the zones' names, none over another.
	eval[bool](b, `nofly.view(51.468, -0.46, 13); true`)
	got := labelsNow(b)
	texts := map[string]bool{}
	for _, l := range got {
		texts[l.Text] = true
	}
	t.Logf("zoom 13 at Heathrow: %d labels %v; %+v", len(got), texts, eval[map[string]any](b, `nofly.labelStats()`))
	for _, want := range []string{"Heathrow FRZ", "Heathrow RPZ 27R", "Heathrow RPZ 09L", "Hounslow Heath"} {
		if !texts[want] {
			t.Errorf("at zoom 13 no label %q (labels %v)", want, texts)
		}
	}
	// The approach lane's label would lie over the runway zone's: the
	// restricted zone is labelled, the lane is not.
	if texts["Heathrow approach lane 27R"] {
		t.Errorf("at zoom 13 the lane's label is drawn over the runway zone's")
	}
	checkLabels := func(zoom string, ls []labelBox) {
		t.Helper()
		map13 := eval[[]float64](b, `(() => { const r = nofly.map.getContainer().getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()`)
		for i, a := range ls {
			if a.X < map13[0] || a.Y < map13[1] || a.X+a.W > map13[2] || a.Y+a.H > map13[3] {
				t.Errorf("%s: label %q at %+v is off the map %v", zoom, a.Text, a, map13)
			}
			for _, c := range ls[i+1:] {
				if a.X < c.X+c.W && c.X < a.X+a.W && a.Y < c.Y+c.H && c.Y < a.Y+a.H {
					t.Errorf("%s: labels %q %+v and %q %+v overlap", zoom, a.Text, a, c.Text, c)
				}
			}
		}
	}
	checkLabels("zoom 13", got)
	scale13 := eval[string](b, `document.querySelector('.leaflet-control-scale-line').textContent`)
	b.shot("airport-labels")
	// Zoomed out one step: the runway zones' labels would meet (their
	// boxes are 1.5 km apart); what is drawn still does not overlap.
	eval[bool](b, `nofly.view(51.468, -0.46, 12); true`)
	got12 := labelsNow(b)
	t.Logf("zoom 12: %d labels", len(got12))
	checkLabels("zoom 12", got12)
	b.shot("airport-zoom12-labels")
	if scale6 == scale13 || scale6 == "" || scale13 == "" {
		t.Errorf("the scale bar says %q at zoom 6 and %q at zoom 13", scale6, scale13)
	}
	t.Logf("scale bar: %q at zoom 6, %q at zoom 13", scale6, scale13)
	if n := eval[int](b, `document.querySelectorAll('.leaflet-control-scale-line').length`); n != 2 {
		t.Errorf("%d scale lines, want metric and imperial", n)
	}

	// The labels' cost at its worst: 2,304 zones drawn, a few hundred of
	// them fitting their names at zoom 14.
	maxMs := 0.0
	for _, z := range []int{12, 13, 14} {
		eval[bool](b, fmt.Sprintf(`nofly.view(49.1, 2.55, %d); true`, z))
		ls := labelsNow(b)
		st := eval[map[string]any](b, `nofly.labelStats()`)
		t.Logf("CDG grid at zoom %d: %s zones drawn, %d labels of %.0f candidates in %.1f ms", z,
			eval[string](b, `document.body.dataset.zonesDrawn`), len(ls), st["candidates"], st["ms"])
		maxMs = math.Max(maxMs, st["ms"].(float64))
		checkLabels(fmt.Sprintf("CDG zoom %d", z), ls)
		if len(ls) > 200 {
			t.Errorf("zoom %d: %d labels, at most 200", z, len(ls))
		}
	}
	b.shot("cdg-grid-labels")
	if maxMs > 100 {
		t.Errorf("placing the labels took %.1f ms, want well under a frame's budget of 100 ms", maxMs)
	}

	// A click where no zone or drone is: its coordinates, and Copy.
	eval[bool](b, `nofly.view(51.468, -0.46, 13); true`)
	b.run("settle", chromedp.Sleep(600*time.Millisecond))
	// South of the restricted zone, the bottom right of the view.
	xy := eval[[]float64](b, `nofly.pixelOf(51.4345, -0.43)`)
	want := eval[[]float64](b, fmt.Sprintf(`(() => { const r = nofly.map.getContainer().getBoundingClientRect();
	  const ll = nofly.map.containerPointToLatLng([%f - r.left, %f - r.top]); return [ll.lat, ll.lng]; })()`, xy[0], xy[1]))
	b.run("click the map", chromedp.MouseClickXY(xy[0], xy[1]), chromedp.WaitVisible(chromedp.CSS(`.coordpop`)))
	shown := eval[string](b, `document.querySelector('.coordpop .coordtext').value`)
	var lat, lon float64
	if _, err := fmt.Sscanf(shown, "%f, %f", &lat, &lon); err != nil || math.Abs(lat-want[0]) > 2e-5 || math.Abs(lon-want[1]) > 2e-5 {
		t.Errorf("a click at %v shows %q, the map's point there is %v", xy, shown, want)
	}
	if dms := eval[string](b, `document.querySelector('.coordpop .dms').textContent`); !strings.HasPrefix(dms, "51°26′") || !strings.Contains(dms, "W") {
		t.Errorf("DMS %q", dms)
	}
	if z := eval[string](b, `document.querySelector('.coordpop .zonesat').textContent`); z != "in no zone drawn here" {
		t.Errorf("south of the zones the popup says %q", z)
	}
	// The clipboard: granted to the page's origin, read back.
	if _, err := chromedp.Call(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "clipboard-read"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: s.alerter}); err != nil {
		t.Fatalf("grant clipboard-read: %v", err)
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	b.run("copy", chromedp.Click(chromedp.CSS(`.coordpop .coordcopy`)), chromedp.WaitVisible(chromedp.CSS(`.coordpop .coordstatus[data-how]`)))
	how := eval[string](b, `document.querySelector('.coordpop .coordstatus').dataset.how`)
	clip, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Errorf("read the clipboard: %v", err)
	}
	t.Logf("copied %q by %s; the clipboard holds %q", shown, how, clip)
	if how != "clipboard" || clip != shown {
		t.Errorf("Copy: by %q, the clipboard holds %q, want %q", how, clip, shown)
	}
	b.shot("click-coordinates")
	// Without a clipboard API (plain http off localhost): the text is
	// selected, or copied with the old command.
	eval[bool](b, `Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true }); true`)
	b.run("copy without the clipboard API", chromedp.Click(chromedp.CSS(`.coordpop .coordcopy`)), chromedp.Sleep(200*time.Millisecond))
	how = eval[string](b, `document.querySelector('.coordpop .coordstatus').dataset.how`)
	sel := eval[string](b, `(() => { const i = document.activeElement; return i && i.classList.contains('coordtext') ? i.value.slice(i.selectionStart, i.selectionEnd) : ''; })()`)
	if (how != "execCommand" && how != "selected") || sel != shown {
		t.Errorf("Copy without the clipboard API: by %q, selected %q, want the coordinates %q selected", how, sel, shown)
	}
	t.Logf("without the clipboard API: %s, %q selected", how, sel)
	b.shot("click-coordinates-fallback")
	// A click on a drone opens the drone's popup, not the coordinates.
	b.run("close the coordinates", chromedp.Click(chromedp.CSS(`.leaflet-popup-close-button`)), chromedp.WaitNotPresent(chromedp.CSS(`.coordpop`)))
	dxy := eval[[]float64](b, `nofly.pixelOf(51.452, -0.47)`)
	b.run("click DJI-1234", chromedp.MouseClickXY(dxy[0], dxy[1]), chromedp.WaitVisible(chromedp.CSS(`.leaflet-popup`)))
	if txt := eval[string](b, `document.querySelector('.leaflet-popup').textContent`); !strings.Contains(txt, "Drone DJI-1234") || strings.Contains(txt, "Copy") {
		t.Errorf("a click on DJI-1234 opened %q, want its own popup", txt)
	}
	b.run("close it", chromedp.Click(chromedp.CSS(`.leaflet-popup-close-button`)), chromedp.WaitNotPresent(chromedp.CSS(`.leaflet-popup`)))
	// Inside the restricted zone and the park (a drone's canvas lies over
	// the zones': the click is the map's): the zones there, restricted first.
	pxy := eval[[]float64](b, `nofly.pixelOf(51.462, -0.404)`)
	b.run("click in the park", chromedp.MouseClickXY(pxy[0], pxy[1]), chromedp.WaitVisible(chromedp.CSS(`.coordpop`)))
	if z := eval[string](b, `document.querySelector('.coordpop .zonesat').textContent`); z != "in Heathrow FRZ (restricted), Hounslow Heath (warning)" {
		t.Errorf("in the park the popup says %q", z)
	}
	b.run("let it fade in", chromedp.Sleep(400*time.Millisecond))
	b.shot("click-coordinates-zones")
	// Each zone named there opens its own popup (the drones' canvas keeps
	// the click from the zones' own).
	b.run("open the FRZ from the coordinates", chromedp.Click(chromedp.CSS(`.coordpop .zonesat button.zonelink`)),
		chromedp.WaitVisible(chromedp.CSS(`.zonepop`)), chromedp.WaitNotPresent(chromedp.CSS(`.coordpop`)))
	if z := eval[string](b, `document.querySelector('.zonepop').textContent`); !strings.Contains(z, "Heathrow FRZ") || !strings.Contains(z, "Floor / ceiling") {
		t.Errorf("the FRZ's button opened %q", z)
	}
	b.run("let it fade in", chromedp.Sleep(400*time.Millisecond))
	b.shot("zone-from-coordinates")
	b.run("close it", chromedp.Click(chromedp.CSS(`.leaflet-popup-close-button`)), chromedp.WaitNotPresent(chromedp.CSS(`.zonepop`)))
	b.run("click in the park again", chromedp.MouseClickXY(pxy[0], pxy[1]), chromedp.WaitVisible(chromedp.CSS(`.coordpop`)))
	b.run("close them", chromedp.Click(chromedp.CSS(`.leaflet-popup-close-button`)), chromedp.WaitNotPresent(chromedp.CSS(`.coordpop`)))
	b.run("click the map again", chromedp.MouseClickXY(xy[0], xy[1]), chromedp.WaitVisible(chromedp.CSS(`.coordpop`)))
	// A second click closes the popup and shows nothing new.
	b.run("click again", chromedp.MouseClickXY(xy[0]+40, xy[1]), chromedp.Sleep(300*time.Millisecond))
	if n := eval[int](b, `document.querySelectorAll('.coordpop').length`); n != 0 {
		t.Errorf("the click that closed the popup opened %d", n)
	}

	// "/" focuses the search box; a zone by name, arrows and Enter.
	b.run("press /", chromedp.Click(chromedp.CSS(`#dronecount`)), press("/", "Slash", 191))
	if id := eval[string](b, `document.activeElement.id`); id != "search" {
		t.Errorf("after /, the focus is on %q, want the search box", id)
	}
	b.run("type a zone's name", chromedp.KeyEvent("rpz 09"), chromedp.WaitVisible(chromedp.CSS(`#searchList [data-id="EGLL-RPZ-09L"]`)))
	b.shot("search-zone")
	opts := eval[[]string](b, `[...document.querySelectorAll('#searchList [role="option"]')].map((o) => o.dataset.kind + ':' + o.dataset.id)`)
	if len(opts) != 1 || opts[0] != "zone:EGLL-RPZ-09L" {
		t.Errorf("'rpz 09' lists %v", opts)
	}
	b.run("pick it", chromedp.KeyEvent(kb.ArrowDown+kb.Enter), chromedp.WaitVisible(chromedp.CSS(`body[data-search-picked="zone:EGLL-RPZ-09L"]`)))
	view := eval[[]float64](b, `(() => { const b = nofly.map.getBounds(); return [b.getWest(), b.getSouth(), b.getEast(), b.getNorth(), nofly.map.getZoom()]; })()`)
	if view[0] > -0.516 || view[1] > 51.4752 || view[2] < -0.487 || view[3] < 51.4797 || view[4] < 14 {
		t.Errorf("after picking RPZ 09L the view is %v, want it to hold [-0.516 51.4752 -0.487 51.4797] at zoom ≥ 14", view)
	}
	// Its label is drawn; the restricted zone round it, which fills the
	// view, is labelled where there is room.
	flown := labelsNow(b)
	checkLabels("RPZ 09L", flown)
	if len(flown) == 0 || !slicesContains(flown, "Heathrow RPZ 09L") {
		t.Errorf("after picking RPZ 09L, labels %+v", flown)
	}
	b.shot("search-zone-flown")

	// A drone the page draws (a part of its id), and one it does not.
	now = time.Now()
	s.send(pos("DJI-1234", 2, now, 51.452, -0.47), pos("POLICE-7", 2, now, 51.1537, -0.1821))
	eval[bool](b, `nofly.view(51.468, -0.46, 12); true`)
	b.run("see DJI-1234", chromedp.Sleep(300*time.Millisecond), chromedp.Poll[chromedp.Void](`nofly.droneIds().includes('DJI-1234')`, chromedp.WithPollingTimeout(20*time.Second)))
	b.run("search dji", chromedp.Click(chromedp.CSS(`#search`)), chromedp.Evaluate[chromedp.Void](`document.getElementById('search').select()`),
		chromedp.KeyEvent("dji"), chromedp.WaitVisible(chromedp.CSS(`#searchList [data-id="DJI-1234"]`)))
	if n := eval[string](b, `document.querySelector('#searchList [data-id="DJI-1234"] .note').textContent`); n != "drone on the map" {
		t.Errorf("DJI-1234's row says %q", n)
	}
	b.run("clear", chromedp.KeyEvent(kb.Escape))
	if !eval[bool](b, `document.getElementById('searchList').hidden`) {
		t.Error("Escape left the matches open")
	}
	if eval[bool](b, `nofly.droneIds().includes('POLICE-7')`) {
		t.Fatal("POLICE-7 is drawn at Heathrow: the test means a drone out of view")
	}
	b.run("search POLICE-7", chromedp.Evaluate[chromedp.Void](`document.getElementById('search').select()`), chromedp.KeyEvent("POLICE-7"),
		chromedp.WaitVisible(chromedp.CSS(`#searchList [data-id="POLICE-7"]`)))
	b.shot("search-drone")
	b.run("fly to it", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`body[data-search-picked="drone:POLICE-7"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#following:not([hidden])`)))
	c := eval[[]float64](b, `[...nofly.center(), nofly.map.getZoom()]`)
	if math.Abs(c[0]-51.1537) > 1e-3 || math.Abs(c[1]+0.1821) > 1e-3 || c[2] < 15 {
		t.Errorf("after picking POLICE-7 the map is at %v, want 51.1537, -0.1821 at zoom ≥ 15", c)
	}
	if f := eval[string](b, `document.getElementById('following').textContent`); !strings.Contains(f, "POLICE-7") {
		t.Errorf("following %q", f)
	}
	b.run("see it drawn", chromedp.Poll[chromedp.Void](`nofly.droneIds().includes('POLICE-7')`, chromedp.WithPollingTimeout(20*time.Second)))
	b.shot("search-drone-flown")

	// "?" lists the shortcuts in a dialog; Escape closes it and gives the
	// focus back.
	b.run("press ?", chromedp.Click(chromedp.CSS(`#dronecount`)), chromedp.Evaluate[chromedp.Void](`document.getElementById('fit').focus()`),
		press("?", "Slash", 191), chromedp.WaitVisible(chromedp.CSS(`#helpPane [role="dialog"]`)))
	if id := eval[string](b, `document.activeElement.id`); id != "helpClose" {
		t.Errorf("the dialog opened with the focus on %q", id)
	}
	keys := eval[[]string](b, `[...document.querySelectorAll('#helpPane dt')].map((d) => d.textContent)`)
	if strings.Join(keys, " ") != "/ f + / − ← ↑ → ↓ Esc ?" {
		t.Errorf("the shortcuts listed: %q", keys)
	}
	b.shot("shortcuts")
	b.run("Escape", chromedp.KeyEvent(kb.Escape))
	if !eval[bool](b, `document.getElementById('helpPane').hidden`) || eval[string](b, `document.activeElement.id`) != "fit" {
		t.Errorf("after Escape the dialog is hidden %v, the focus on %q (want fit)", eval[bool](b, `document.getElementById('helpPane').hidden`), eval[string](b, `document.activeElement.id`))
	}
	// f fits the zones; not while typing.
	z0 := eval[float64](b, `nofly.map.getZoom()`)
	b.run("type f in the search box", chromedp.Click(chromedp.CSS(`#search`)), press("f", "KeyF", 70), chromedp.Sleep(300*time.Millisecond))
	if z := eval[float64](b, `nofly.map.getZoom()`); z != z0 {
		t.Errorf("typing f in the search box moved the map: zoom %v → %v", z0, z)
	}
	b.run("press f", chromedp.KeyEvent(kb.Escape+kb.Escape), chromedp.Click(chromedp.CSS(`#dronecount`)), press("f", "KeyF", 70), chromedp.Sleep(800*time.Millisecond))
	if z := eval[float64](b, `nofly.map.getZoom()`); z >= z0 {
		t.Errorf("f did not fit the zones (Heathrow to Paris): zoom %v → %v", z0, z)
	}
	for _, k := range []struct {
		key, code string
		vk        int64
		step      float64
	}{{"-", "Minus", 189, -1}, {"+", "Equal", 187, 1}} {
		z1 := eval[float64](b, `nofly.map.getZoom()`)
		b.run("press "+k.key, press(k.key, k.code, k.vk), chromedp.Sleep(600*time.Millisecond))
		if z := eval[float64](b, `nofly.map.getZoom()`); z != z1+k.step {
			t.Errorf("%s: zoom %v → %v", k.key, z1, z)
		}
	}
}
