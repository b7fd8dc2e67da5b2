package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

type incidentDrawn struct {
	TrackPoints int       `json:"trackPoints"`
	TrackBox    []float64 `json:"trackBox"`
	TrackD      int       `json:"trackD"`
	Raised      int       `json:"raised"`
	Cleared     int       `json:"cleared"`
	Pilots      int       `json:"pilots"`
	Points      int       `json:"points"`
	Timeline    []string  `json:"timeline"`
}

// incidentPos is second t of UAV-I's flight east along 51.5° N through the
// test square (0.4-0.6° E): outside for 100 s, inside 60 s, outside after;
// its pilot stands at the take-off point.
func incidentPos(base time.Time, t int) map[string]any {
	lon := 0.30 + 0.001*float64(t)
	switch {
	case t >= 160:
		lon = 0.61 + 0.001*float64(t-160)
	case t >= 100:
		lon = 0.401 + 0.0033*float64(t-100)
	}
	// A gentle weave north and south, as a drone does: a path, not a line.
	lat := 51.5 + 0.004*math.Sin(float64(t)/12)
	return posWithPilot("UAV-I", int64(t+1), base.Add(time.Duration(t)*time.Second), lat, lon, 51.49, 0.30, "takeoff")
}

// TestDashboardIncident: a drone flies through a zone, the operator acks
// the alarm with a note while it is inside, the drone leaves; its row's
// Incident button draws the story (the track from before the entry to
// after the clear, the raise and clear, the pilot) and the timeline lists
// the raise, the ack with who and the note, and the clear; a report
// downloads with the token. The report the police get covers the same
// window, and its HTML prints to A4 pages (chromium --print-to-pdf).
func TestDashboardIncident(t *testing.T) {
	untimed(t)
	s := startStack(t, testZones(), 2)
	b := openBrowser(t, s.alerter, "operator")
	b.signIn(s.operator)
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)))

	// One position a second of ts, sent 40 ms apart: the alerter's batches
	// hold about one position of the drone each, as at 1 Hz in real time
	// (one track point per drone per batch).
	// The ts run from 110 s ago: the raise is 10 s ago, the clear 50 s
	// ahead (ingest takes ts up to 10 minutes ahead), so the ack comes
	// between them by the clocks the report shows however slow the run.
	base := time.Now().Add(-110 * time.Second)
	fly := func(from, to int) {
		for i := from; i < to; i++ {
			s.send(incidentPos(base, i))
			time.Sleep(40 * time.Millisecond)
		}
	}
	fly(0, 130)
	sel := `#active li.alarm[data-state="active"][data-acked="false"]`
	b.run("see the alarm", chromedp.WaitVisible(chromedp.CSS(sel)))
	// Its story while it is active: the raise only; the ack and the clear
	// are added as their events arrive.
	b.run("open the active alarm's story", chromedp.Click(chromedp.CSS(sel+` button.incident-open`)),
		chromedp.WaitVisible(chromedp.CSS(`#incident .incident-timeline li[data-kind="raised"]`)))
	if n := eval[int](b, `document.querySelectorAll('#incident .incident-timeline li').length`); n != 1 {
		t.Errorf("an active, unacked alarm's timeline has %d lines, want the raise", n)
	}
	b.run("ack it with a note", ackWithNote(sel, "patrol sent to gate 4"),
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm[data-acked="true"]`)))
	b.run("see the ack in the open story", chromedp.WaitVisible(chromedp.CSS(`#incident .incident-timeline li[data-kind="acked"]`)))
	fly(130, 220)
	b.run("see it clear", chromedp.WaitNotPresent(chromedp.CSS(`#active li.alarm`)),
		chromedp.WaitVisible(chromedp.CSS(`#incident .incident-timeline li[data-kind="cleared"]`)))
	b.run("close the story", chromedp.Click(chromedp.CSS(`#incident button[aria-label="Close the incident"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#incident`)))
	b.run("find it in the history", chromedp.SetValue(chromedp.CSS(`#historyForm input[name="drone"]`), "UAV-I"),
		chromedp.Click(chromedp.CSS(`#historyForm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#history li.alarm[data-state="cleared"] button.incident-open`)))
	id := eval[string](b, `document.querySelector('#history li.alarm').dataset.alarmId`)
	b.run("open its story", chromedp.Click(chromedp.CSS(`#history li.alarm button.incident-open`)),
		chromedp.WaitVisible(chromedp.CSS(`#incident .incident-timeline li[data-kind="cleared"]`)), chromedp.Sleep(500*time.Millisecond))
	d := eval[incidentDrawn](b, `nofly.incident.drawn()`)
	t.Logf("drawn: %+v", d)
	if d.TrackPoints < 30 || d.Points != d.TrackPoints || d.TrackD < 60 || len(d.TrackBox) != 4 || d.TrackBox[2] < 200 {
		t.Errorf("track drawn %+v: want the path from before the entry to after the clear", d)
	}
	if d.Raised != 1 || d.Cleared != 1 || d.Pilots < 1 {
		t.Errorf("raise %d, clear %d, pilot markers %d drawn, want 1, 1, ≥1", d.Raised, d.Cleared, d.Pilots)
	}
	tl := strings.Join(d.Timeline, "\n")
	for _, want := range []string{"raised entered Test square (SQUARE, restricted)", "acknowledged acknowledged by ops-desk", "“patrol sent to gate 4”", "cleared cleared: exited"} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %q:\n%s", want, tl)
		}
	}
	if len(d.Timeline) != 3 || !strings.Contains(d.Timeline[0], "raised") || !strings.Contains(d.Timeline[1], "acknowledged") || !strings.Contains(d.Timeline[2], "cleared") {
		t.Errorf("timeline not raise, ack, clear in that order: %q", d.Timeline)
	}
	if p := eval[string](b, `document.querySelector('#incident .pilotline').textContent`); !strings.Contains(p, "pilot (takeoff)") {
		t.Errorf("pilot line %q", p)
	}
	b.shot("incident-story")

	b.run("download the CSV report", chromedp.Click(chromedp.CSS(`#incident button[data-format="csv"]`)))
	testWait(t, 10*time.Second, func() bool { return eval[bool](b, `!!nofly.incident.lastDownload`) })
	var dl struct {
		Name string `json:"name"`
		Size int    `json:"size"`
	}
	dl = eval[struct {
		Name string `json:"name"`
		Size int    `json:"size"`
	}](b, `nofly.incident.lastDownload`)
	if dl.Name != "nofly-alarm-"+id+".csv" || dl.Size < 1000 {
		t.Errorf("download %+v", dl)
	}

	// The report as the police get it (a viewer's token): the track covers
	// the window from two minutes before the raise to the last point after
	// the clear.
	get := func(format string) []byte {
		req, _ := http.NewRequest("GET", s.alerter+"/v1/alarms/"+id+"/report?format="+format, nil)
		req.Header.Set("Authorization", "Bearer "+s.viewer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("report %s: %d %s", format, res.StatusCode, body)
		}
		return body
	}
	var rep struct {
		Features []struct {
			Properties map[string]any `json:"properties"`
		} `json:"features"`
		Alarm struct {
			Raised  struct{ TS time.Time } `json:"raised"`
			Cleared struct{ TS time.Time } `json:"cleared"`
		} `json:"alarm"`
	}
	if err := json.Unmarshal(get("geojson"), &rep); err != nil {
		t.Fatal(err)
	}
	var first, last time.Time
	n := 0
	for _, f := range rep.Features {
		if f.Properties["kind"] != "track_point" {
			continue
		}
		ts, _ := time.Parse(time.RFC3339Nano, f.Properties["ts"].(string))
		if first.IsZero() {
			first = ts
		}
		last = ts
		n++
	}
	raise, clear := rep.Alarm.Raised.TS, rep.Alarm.Cleared.TS
	t.Logf("report track: %d points from %v to %v; raised %v, cleared %v", n, first, last, raise, clear)
	if first.After(raise.Add(-100*time.Second)) || last.Before(clear.Add(30*time.Second)) {
		t.Errorf("report track %v to %v does not cover before the entry (raise %v) to after the clear (%v)", first, last, raise, clear)
	}

	// The other formats beside it, for a look (and a KML schema check:
	// docs/api.md says how).
	dir := artifacts(t)
	for _, f := range []string{"kml", "csv", "geojson"} {
		if err := os.WriteFile(filepath.Join(dir, "report."+f), get(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The alarm's link (#alarm=<id>, Alertmanager's "dashboard" link) opens
	// its story too.
	b.run("open the alarm's link", chromedp.Navigate(s.alerter+"/#alarm="+id), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#incident[data-alarm-id="`+id+`"] .incident-timeline li[data-kind="cleared"]`)))
	b.shot("incident-linked")

	// The HTML page in a tab, as served (a viewer's token): its own
	// Content-Security-Policy admits its style sheet (by hash), and it asks
	// for nothing.
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer " + s.viewer}}); err != nil {
		t.Fatal(err)
	}
	b.run("open the HTML report", chromedp.Navigate(s.alerter+"/v1/alarms/"+id+"/report"),
		chromedp.WaitVisible(chromedp.CSS(`svg polyline`)))
	if styled := eval[string](b, `getComputedStyle(document.querySelector('h2.pagebreak')).breakBefore + ' ' + getComputedStyle(document.body).maxWidth`); !strings.HasPrefix(styled, "page 718.1") { // 190mm
		t.Errorf("the report's style %q: its CSP refused its style sheet?", styled)
	}
	b.shot("report-in-a-tab")

	// The HTML report printed as the browser's "save as PDF" would.
	html := filepath.Join(dir, "report-"+id+".html")
	if err := os.WriteFile(html, get("html"), 0o644); err != nil {
		t.Fatal(err)
	}
	pdf := filepath.Join(dir, "report.pdf")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
		"--print-to-pdf="+pdf, "file://"+html).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium --print-to-pdf: %v\n%s", err, out)
	}
	st, err := os.Stat(pdf)
	if err != nil || st.Size() < 10000 {
		t.Fatalf("the PDF: %v %v", st, err)
	}
	t.Logf("report PDF: %s (%d bytes)", pdf, st.Size())
	if _, err := exec.LookPath("pdftoppm"); err == nil {
		if out, err := exec.Command("pdftoppm", "-png", "-r", "60", pdf, filepath.Join(dir, "report-page")).CombinedOutput(); err != nil {
			t.Errorf("pdftoppm: %v\n%s", err, out)
		}
	}
}
