package dashboard_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// posWithPilot is pos with the pilot's position in nofly's own telemetry
// JSON ("operator").
func posWithPilot(drone string, seq int64, ts time.Time, lat, lon, opLat, opLon float64, typ string) map[string]any {
	p := pos(drone, seq, ts, lat, lon)
	p["operator"] = map[string]any{"lat": opLat, "lon": opLon, "type": typ}
	return p
}

type pilotDrawn struct {
	DroneID string    `json:"drone_id"`
	Lat     float64   `json:"lat"`
	Lon     float64   `json:"lon"`
	Type    string    `json:"type"`
	Tooltip string    `json:"tooltip"`
	Px      []float64 `json:"px"`
	Line    *struct {
		Left, Top, Right, Bottom float64
		Dash                     string
	} `json:"line"`
}

// TestDashboardPilot: a drone whose records carry its pilot (posted to
// ingest as the feeds' JSON would) raises an alarm; the map draws the
// pilot as a square at the pilot's pixel, a dashed line from the drone's
// pixel to it, a tooltip with its type and age; the alarm row says the
// pilot's range and bearing from the drone; a drone without a pilot has
// none drawn; a pilot that moves is redrawn where it went.
func TestDashboardPilot(t *testing.T) {
	untimed(t)
	s := startStack(t, testZones(), 2)
	b := openBrowser(t, s.alerter, "operator")
	b.signIn(s.operator)
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)))

	now := time.Now()
	// The pilot 1.2 km south-west of the drone: 0.008° south, 0.012° west.
	const dLat, dLon, pLat, pLon = 51.45, 0.45, 51.442, 0.438
	s.send(posWithPilot("UAV-P", 1, now, dLat, dLon, pLat, pLon, "live"),
		pos("UAV-N", 1, now, 51.452, 0.455)) // inside too, no pilot
	sel := `#active li.alarm[data-state="active"]`
	b.run("see the alarms", chromedp.WaitVisible(chromedp.CSS(`body[data-drones="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm .pilot`)))
	// Close enough to tell the pilot from the drone: the first sight of the
	// drones fits the map to them, animated; the view is set once that is
	// over.
	testWait(t, 10*time.Second, func() bool { return eval[int](b, `nofly.stats.positions`) >= 2 })
	// (on a loaded machine the fit's animation may end after the view was
	// set, so the view is set until it stays).
	testWait(t, 15*time.Second, func() bool {
		eval[any](b, `nofly.view(51.446, 0.444, 14), null`)
		time.Sleep(time.Second)
		return eval[float64](b, `nofly.map.getZoom()`) == 14
	})
	time.Sleep(300 * time.Millisecond)
	var ps []pilotDrawn
	testWait(t, 10*time.Second, func() bool { ps = eval[[]pilotDrawn](b, `nofly.pilots()`); return len(ps) == 1 })
	p := ps[0]
	if p.DroneID != "UAV-P" || p.Lat != pLat || p.Lon != pLon || p.Type != "live" {
		t.Fatalf("pilot drawn: %+v", p)
	}
	want := eval[[]float64](b, `nofly.pixelOf(51.442, 0.438)`)
	drone := eval[[]float64](b, `nofly.pixelOf(51.45, 0.45)`)
	if math.Hypot(p.Px[0]-want[0], p.Px[1]-want[1]) > 1.5 {
		t.Errorf("pilot marker centred at %v, want the pilot's pixel %v", p.Px, want)
	}
	if l := p.Line; l == nil || l.Dash == "" || math.Abs(l.Left-want[0]) > 2 || math.Abs(l.Bottom-want[1]) > 2 ||
		math.Abs(l.Right-drone[0]) > 2 || math.Abs(l.Top-drone[1]) > 2 {
		t.Errorf("line %+v, want dashed from the drone %v to the pilot %v", p.Line, drone, want)
	}
	if !strings.Contains(p.Tooltip, "pilot (live GNSS) of UAV-P") || !strings.Contains(p.Tooltip, "s ago") ||
		!strings.Contains(p.Tooltip, "1.2 km at 223°") {
		t.Errorf("tooltip %q", p.Tooltip)
	}
	rows := eval[[]string](b, `[...document.querySelectorAll('`+sel+`')].map((li) => li.textContent)`)
	var withPilot, without int
	for _, r := range rows {
		switch {
		case strings.Contains(r, "drone UAV-P"):
			if !strings.Contains(r, "pilot 1.2 km at 223° (live, ") || !strings.Contains(r, " s ago)") {
				t.Errorf("UAV-P's row %q lacks the pilot's range and bearing", r)
			}
			withPilot++
		case strings.Contains(r, "drone UAV-N"):
			if strings.Contains(r, "pilot") {
				t.Errorf("UAV-N's row %q has a pilot", r)
			}
			without++
		}
	}
	if withPilot != 1 || without != 1 {
		t.Errorf("rows: %q", rows)
	}
	t.Logf("zoom %v, drone at %v, pilot at %v", eval[float64](b, `nofly.map.getZoom()`), drone, want)
	b.shot("pilot-drawn")

	// The pilot walks north-east of the drone, and the drone's next record
	// carries none: the map keeps the last known.
	s.send(posWithPilot("UAV-P", 2, now.Add(time.Second), dLat, dLon, 51.455, 0.46, "fixed"))
	testWait(t, 10*time.Second, func() bool {
		ps = eval[[]pilotDrawn](b, `nofly.pilots()`)
		return len(ps) == 1 && ps[0].Type == "fixed"
	})
	s.send(pos("UAV-P", 3, now.Add(2*time.Second), dLat, dLon))
	time.Sleep(1500 * time.Millisecond)
	ps = eval[[]pilotDrawn](b, `nofly.pilots()`)
	want = eval[[]float64](b, `nofly.pixelOf(51.455, 0.46)`)
	if len(ps) != 1 || ps[0].Lat != 51.455 || math.Hypot(ps[0].Px[0]-want[0], ps[0].Px[1]-want[1]) > 1.5 {
		t.Errorf("after a record without a pilot: %+v, want the last known at %v", ps, want)
	}
	b.shot("pilot-moved")

	// The same, as the API answers it to a viewer: the pilot at the raise
	// (live, 1.2 km at 223° from the raising position) and the latest
	// (fixed, from the record before the last).
	req, _ := http.NewRequest("GET", s.alerter+"/v1/alarms?drone=UAV-P", nil)
	req.Header.Set("Authorization", "Bearer "+s.viewer)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var raw struct {
		Alarms []map[string]json.RawMessage `json:"alarms"`
	}
	body, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(body, &raw); err != nil || len(raw.Alarms) != 1 {
		t.Fatalf("GET /v1/alarms?drone=UAV-P: %d %s", res.StatusCode, body)
	}
	type pilot struct {
		Type       string    `json:"type"`
		TS         time.Time `json:"ts"`
		RangeM     float64   `json:"range_m"`
		BearingDeg float64   `json:"bearing_deg"`
	}
	var atRaise, latest pilot
	if json.Unmarshal(raw.Alarms[0]["operator"], &atRaise) != nil || json.Unmarshal(raw.Alarms[0]["operator_latest"], &latest) != nil {
		t.Fatalf("alarm %s", body)
	}
	if atRaise.Type != "live" || math.Abs(atRaise.RangeM-1217.8) > 2 || math.Abs(atRaise.BearingDeg-223.1) > 0.2 || !atRaise.TS.Equal(now) {
		t.Errorf("operator at the raise %+v", atRaise)
	}
	if latest.Type != "fixed" || !latest.TS.Equal(now.Add(time.Second)) || math.Abs(latest.BearingDeg-51) > 1 {
		t.Errorf("operator_latest %+v", latest)
	}
}

// testWait polls cond until it holds or d passes.
func testWait(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("not within %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
