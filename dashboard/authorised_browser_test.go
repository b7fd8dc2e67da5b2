package dashboard_test

// Authorised flights and approaching warnings (issue 28) in a real browser
// against a running cmd/ingest and cmd/alerter on the real Kafka and Redis.

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// metric reads one unlabelled sample of the service's /metrics.
func metric(base, name string) (float64, error) {
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no sample of %s", base, name)
}

// approach is three positions of drone, one a second up to now, flying
// east at speed (m/s) along latitude 51.5 towards the test square's west
// edge (longitude 0.4), the last one metresOut short of it: two positions
// with a velocity, each predicted to enter within 30 s, open an approach
// episode.
func approach(drone string, speed, metresOut float64) []map[string]any {
	const lat = 51.5
	mPerDegLon := 6378137 * math.Pi / 180 * math.Cos(lat*math.Pi/180)
	now := time.Now()
	var recs []map[string]any
	for i := range 3 {
		back := float64(2 - i)
		lon := 0.4 - (metresOut+back*speed)/mPerDegLon
		recs = append(recs, pos(drone, int64(i+1), now.Add(-time.Duration(back)*time.Second), lat, lon))
	}
	return recs
}

// etaOf is the seconds of an "ETA 23 s" text; -1 when it has none.
func etaOf(text string) int {
	m := regexp.MustCompile(`ETA (\d+) s`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestDashboardAuthorisedFlight: an admin authorises drone AUTH-1 over the
// test square through the Authorisations panel, picking both on the map (a
// request without a drone first: the 400 is shown at the drone field);
// AUTH-1 enters the square and
// its alarm shows in the calm Authorised section — no banner, no beep,
// nothing unacked, the drone drawn calm; a viewer sees the authorisation
// but no form and no Revoke; the admin revokes it through the panel and
// within seconds the unauthorized event makes the alarm page: in the
// unacked list, the banner, the beep, the title. The step with an
// approaching drone beside it and the panel open is the screenshot of
// docs/dashboard-authorised.png.
func TestDashboardAuthorisedFlight(t *testing.T) {
	s := startStack(t, testZones(), 2)
	b := openBrowser(t, s.alerter, "admin")
	b.signIn(s.admin)
	// A view of the square's west side, the panel's room on the left: the
	// page draws the zones of its view (issue 29), the square alone.
	eval[bool](b, `location.hash = '#map=13/51.4750/0.3600'; location.reload(); true`)
	b.run("see the zones drawn", chromedp.Sleep(300*time.Millisecond), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="1"]`)), chromedp.Click(chromedp.CSS(`#sound`)))

	// The panel, and a request the API refuses: its field is named.
	b.run("open the Authorisations panel", chromedp.Click(chromedp.CSS(`#authOpen`)),
		chromedp.WaitVisible(chromedp.CSS(`#authForm`)), chromedp.WaitVisible(chromedp.CSS(`#auth-active`)))
	b.run("submit without a drone", chromedp.SendKeys(chromedp.CSS(`#authForm input[name="reason"]`), "police patrol over the square"),
		chromedp.Click(chromedp.CSS(`#authForm .quick button[data-hours="1"]`)),
		chromedp.Click(chromedp.CSS(`#authForm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#authForm .fielderr[data-for="drone"]`)))
	if msg := eval[string](b, `document.querySelector('#authForm .fielderr[data-for="drone"]').textContent`); !strings.Contains(msg, "drone") {
		t.Errorf("the drone field's error says %q", msg)
	}
	b.shot("authorisation-refused")

	// The drone and the zone picked on the map: AUTH-1 flies west of the
	// square, outside it.
	s.send(pos("AUTH-1", 1, time.Now(), 51.45, 0.38))
	b.run("see AUTH-1", chromedp.WaitVisible(chromedp.CSS(`body[data-drones="1"]`)), chromedp.Sleep(300*time.Millisecond))
	click := func(what string, lat, lon float64) {
		t.Helper()
		xy := eval[[]float64](b, fmt.Sprintf(`nofly.pixelOf(%g, %g)`, lat, lon))
		b.run(what, chromedp.MouseClickXY(xy[0], xy[1]))
	}
	b.run("pick a drone", chromedp.Click(chromedp.CSS(`#authForm button.pick[data-pick="drone"]`)))
	click("click AUTH-1 on the map", 51.45, 0.38)
	if got := eval[string](b, `document.querySelector('#authForm input[name="drone"]').value`); got != "AUTH-1" {
		t.Errorf("the drone picked on the map filled %q, want AUTH-1", got)
	}
	// Outside picking, the same click opens the drone's popup, with
	// Authorise… for an admin.
	click("click AUTH-1 again", 51.45, 0.38)
	b.run("see its popup", chromedp.WaitVisible(chromedp.CSS(`.leaflet-popup`)))
	if txt := eval[string](b, `document.querySelector('.leaflet-popup').textContent`); !strings.Contains(txt, "Drone AUTH-1") || !strings.Contains(txt, "Authorise…") {
		t.Errorf("the drone's popup says %q", txt)
	}
	b.run("close it", chromedp.Click(chromedp.CSS(`.leaflet-popup-close-button`)), chromedp.WaitNotPresent(chromedp.CSS(`.leaflet-popup`)))
	b.run("pick zones", chromedp.Click(chromedp.CSS(`#authForm button.pick[data-pick="zone"]`)))
	click("click the square on the map", 51.49, 0.42)
	b.run("see the square picked", chromedp.WaitVisible(chromedp.CSS(`#zoneChips .chip[data-zone-id="SQUARE"]`)),
		chromedp.Click(chromedp.CSS(`#authForm button.pick[data-pick="zone"]`)))
	if n := eval[int](b, `document.querySelectorAll('#zoneChips .chip').length`); n != 1 {
		t.Errorf("%d zones picked with one click in the square, want 1", n)
	}
	if n := eval[int](b, `document.querySelectorAll('.leaflet-popup').length`); n != 0 {
		t.Errorf("picking opened %d popups: %q", n, eval[string](b, `document.querySelector(".leaflet-popup").textContent`))
	}
	b.run("authorise AUTH-1 over the square", chromedp.SendKeys(chromedp.CSS(`#authForm input[name="reference"]`), "MPS-2026-0412"),
		chromedp.Click(chromedp.CSS(`#authForm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#auth-active li.authz[data-drone="AUTH-1"]`)))
	item := eval[string](b, `document.querySelector('#auth-active li.authz[data-drone="AUTH-1"]').textContent`)
	for _, want := range []string{"AUTH-1", "ACTIVE", "permit MPS-2026-0412", "Test square (SQUARE)", "police patrol over the square", "by security-admin"} {
		if !strings.Contains(item, want) {
			t.Errorf("the authorisation shows %q, without %q", item, want)
		}
	}
	if n := eval[int](b, `document.querySelectorAll('#authForm .fielderr:not(:empty)').length`); n != 0 {
		t.Errorf("%d field errors left after the authorisation was made", n)
	}
	// In use by the alerter (it polls the store each second).
	testenv.CheckFor(t, 10*time.Second, func() error {
		v, err := metric(s.alerter, "nofly_alerter_authorization_version")
		if err == nil && v < 1 {
			err = fmt.Errorf("authorisation version %v in use", v)
		}
		return err
	})

	s.send(pos("AUTH-1", 2, time.Now(), 51.45, 0.41))
	calmSel := `#authorised li.alarm[data-state="active"][data-authorised="true"]`
	b.run("see the alarm in the Authorised section", chromedp.WaitVisible(chromedp.CSS(calmSel)))
	text := eval[string](b, `document.querySelector('`+calmSel+`').textContent`)
	for _, want := range []string{"AUTHORISED · ACTIVE", "drone AUTH-1 in Test square", "permit MPS-2026-0412"} {
		if !strings.Contains(text, want) {
			t.Errorf("the authorised alarm %q lacks %q", text, want)
		}
	}
	time.Sleep(time.Second) // what a wrong page would do, it would have done by now
	quiet := func(when string) {
		t.Helper()
		if n := eval[int](b, `document.querySelectorAll('#active li.alarm').length`); n != 0 {
			t.Errorf("%s: %d alarms in the paging list, want 0", when, n)
		}
		if !eval[bool](b, `document.getElementById('banner').hidden`) {
			t.Errorf("%s: a banner: %q", when, eval[string](b, `document.getElementById('banner').textContent`))
		}
		if title := eval[string](b, `document.title`); title != "nofly — operations" {
			t.Errorf("%s: title %q, want no unacked count", when, title)
		}
		if n := eval[int](b, `nofly.stats.beeps`); n != 0 {
			t.Errorf("%s: %d beeps", when, n)
		}
	}
	quiet("authorised alarm")
	if st := eval[string](b, `nofly.droneStyle('AUTH-1')`); !strings.Contains(st, `"fillColor":"#26a69a"`) {
		t.Errorf("the authorised drone is drawn %s, want the calm fill", st)
	}

	// An intruder approaching beside it: the screenshot of the docs.
	s.send(approach("APP-2", 50, 1300)...)
	b.run("see the intruder approaching", chromedp.WaitVisible(chromedp.CSS(`#approaching li.approach[data-drone-id="APP-2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-drones="2"]`)), chromedp.Sleep(1200*time.Millisecond))
	quiet("an approach")
	b.shot("authorised-approaching-panel")

	// A viewer sees the list, but neither the form nor Revoke.
	v := openBrowser(t, s.alerter, "viewer")
	v.signIn(s.viewer)
	v.run("viewer opens the panel", chromedp.Click(chromedp.CSS(`#authOpen`)),
		chromedp.WaitVisible(chromedp.CSS(`#auth-active li.authz[data-drone="AUTH-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(calmSel)))
	if n := eval[int](v, `document.querySelectorAll('#authPanel button.revoke').length`); n != 0 {
		t.Errorf("the viewer is offered %d Revoke buttons", n)
	}
	if !eval[bool](v, `document.getElementById('authForm').hidden && getComputedStyle(document.getElementById('authForm')).display === 'none'`) {
		t.Error("the viewer is shown the form to authorise")
	}
	v.shot("viewer-panel")

	// Revoke: within seconds the alarm pages as a raise does.
	row := `#auth-active li.authz[data-drone="AUTH-1"]`
	b.run("click Revoke", chromedp.Click(chromedp.CSS(row+` button.revoke`)), chromedp.WaitVisible(chromedp.CSS(row+` .confirm button.yes`)))
	b.shot("revoke-confirm")
	revoked := time.Now()
	b.run("confirm the revocation", chromedp.Click(chromedp.CSS(row+` .confirm button.yes`)),
		chromedp.WaitVisible(chromedp.CSS(`#auth-ended li.authz[data-drone="AUTH-1"]`)))
	pageSel := `#active li.alarm[data-state="active"][data-acked="false"][data-authorised="false"]`
	b.run("see the alarm page", chromedp.WaitVisible(chromedp.CSS(pageSel)), chromedp.WaitVisible(chromedp.CSS(`#banner:not([hidden])`)))
	took := time.Since(revoked)
	t.Logf("the alarm paged %v after the revocation was confirmed", took.Round(time.Millisecond))
	if took > 8*time.Second {
		t.Errorf("the revoked authorisation's alarm paged after %v, want within a few seconds", took)
	}
	text = eval[string](b, `document.querySelector('`+pageSel+`').textContent`)
	if !strings.Contains(text, "ACTIVE · UNACKED") || !strings.Contains(text, "drone AUTH-1 in Test square") {
		t.Errorf("the paging alarm shows %q", text)
	}
	banner := eval[string](b, `document.getElementById('banner').textContent`)
	if !strings.Contains(banner, "RESTRICTED ZONE INCURSION: drone AUTH-1 in Test square") || !strings.Contains(banner, "revoked") {
		t.Errorf("banner %q", banner)
	}
	if title := eval[string](b, `document.title`); title != "(1) nofly — operations" {
		t.Errorf("title %q, want the unacked count", title)
	}
	if n := eval[int](b, `document.querySelectorAll('#authorised li.alarm').length`); n != 0 {
		t.Errorf("%d alarms left in the Authorised section", n)
	}
	if n := eval[int](b, `nofly.stats.beeps`); n != 1 {
		t.Errorf("%d beeps after the revocation, want 1", n)
	}
	item = eval[string](b, `document.querySelector('#auth-ended li.authz[data-drone="AUTH-1"]').textContent`)
	if !strings.Contains(item, "REVOKED") || !strings.Contains(item, "by security-admin") {
		t.Errorf("the revoked authorisation shows %q", item)
	}
	b.shot("revoked-pages")
	// The viewer's page hears it too, and its collapsed Authorised section
	// stays collapsed across a reload.
	v.run("viewer sees the alarm page", chromedp.WaitVisible(chromedp.CSS(pageSel)))
	eval[bool](v, `document.getElementById('authorisedBox').open = false; true`)
	v.run("reload", chromedp.Sleep(300*time.Millisecond), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	if eval[bool](v, `document.getElementById('authorisedBox').open`) {
		t.Error("the Authorised section opened again after a reload; its collapsed state is not remembered")
	}
	if n := eval[int](b, `nofly.stats.duplicates`); n != 0 {
		t.Errorf("%d events shown twice", n)
	}
}

// TestDashboardApproaching: a drone flying at a restricted zone is shown
// approaching before it enters — a dashed amber row with the ETA counting
// down, a dashed line to the predicted entry point on the map — and drawn
// again from GET /v1/drones after a reload; its raise takes both away.
func TestDashboardApproaching(t *testing.T) {
	untimed(t)
	s := startStack(t, testZones(), 2, "--approach-before=restricted=30s", "--approach-buffer=50")
	b := openBrowser(t, s.alerter, "operator")
	b.signIn(s.operator)
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)))

	s.send(approach("APP-1", 40, 800)...)
	sent := time.Now()
	rowSel := `#approaching li.approach[data-drone-id="APP-1"][data-zone-id="SQUARE"]`
	b.run("see it approaching", chromedp.WaitVisible(chromedp.CSS(rowSel)))
	t.Logf("approaching shown %v after ingest's 202", time.Since(sent).Round(time.Millisecond))
	if n := eval[int](b, `document.querySelectorAll('#active li.alarm').length`); n != 0 {
		t.Fatalf("%d alarms before the drone entered", n)
	}
	text := eval[string](b, `document.querySelector('`+rowSel+`').textContent`)
	for _, want := range []string{"APPROACHING", "drone APP-1 → Test square", "restricted", "m from its edge", "entry predicted at 51.5"} {
		if !strings.Contains(text, want) {
			t.Errorf("the approaching row %q lacks %q", text, want)
		}
	}
	eta := etaOf(text)
	if eta < 15 || eta > 21 {
		t.Errorf("ETA %d s shown (%q), want about 20 s (800 m at 40 m/s)", eta, text)
	}
	type drawn struct {
		DroneID string `json:"drone_id"`
		Line    *struct {
			LatLngs   [][2]float64 `json:"latlngs"`
			DashArray string       `json:"dashArray"`
		} `json:"line"`
		Label string `json:"label"`
	}
	checkLine := func(when string) {
		t.Helper()
		ds := eval[[]drawn](b, `nofly.approaches()`)
		if len(ds) != 1 || ds[0].Line == nil {
			t.Fatalf("%s: the map draws %+v, want one approach line", when, ds)
		}
		l := ds[0].Line
		if l.DashArray == "" || len(l.LatLngs) != 2 {
			t.Errorf("%s: the approach line is %+v, want dashed, drone to entry", when, l)
		}
		if to := l.LatLngs[1]; math.Abs(to[0]-51.5) > 0.001 || math.Abs(to[1]-0.4) > 0.001 {
			t.Errorf("%s: the line ends at %v, want the entry point 51.5, 0.4", when, to)
		}
		if from := l.LatLngs[0]; math.Abs(from[0]-51.5) > 0.001 || from[1] > 0.39 {
			t.Errorf("%s: the line starts at %v, want the drone west of the square", when, from)
		}
		if etaOf(ds[0].Label) < 0 {
			t.Errorf("%s: the map's label is %q, want the ETA", when, ds[0].Label)
		}
	}
	checkLine("live")
	b.shot("approaching")

	// The ETA counts down each second.
	time.Sleep(2100 * time.Millisecond)
	later := etaOf(eval[string](b, `document.querySelector('`+rowSel+` .eta').textContent`))
	if later > eta-2 || later < eta-3 {
		t.Errorf("ETA %d s, then %d s 2.1 s later: it does not count down each second", eta, later)
	}

	// A page opened mid-approach draws it from GET /v1/drones.
	b.run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)), chromedp.WaitVisible(chromedp.CSS(rowSel)))
	if e := etaOf(eval[string](b, `document.querySelector('`+rowSel+`').textContent`)); e < 0 || e > later {
		t.Errorf("after a reload: ETA %d s, want at most %d s", e, later)
	}
	checkLine("after a reload")
	b.shot("approaching-reloaded")

	// It enters: the raise takes the approach away.
	s.send(pos("APP-1", 4, time.Now(), 51.5, 0.402))
	b.run("see the raise replace the approach", chromedp.WaitVisible(chromedp.CSS(`#active li.alarm[data-state="active"][data-acked="false"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#approaching li.approach`)))
	if ds := eval[[]drawn](b, `nofly.approaches()`); len(ds) != 0 {
		t.Errorf("after the raise the map still draws %+v", ds)
	}
	if !strings.Contains(eval[string](b, `document.getElementById('banner').textContent`), "RESTRICTED ZONE INCURSION: drone APP-1") {
		t.Error("the raise after the approach was not cued")
	}
	b.shot("approach-raised")
}
