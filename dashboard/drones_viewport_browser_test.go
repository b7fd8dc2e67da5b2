package dashboard_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestDashboardDronesByViewport (issue 29): the page's positions stream
// is its view's. 1,200 drones around Heathrow, 300 around Paris and one
// in alarm over the test square: the country view gets clusters whose
// counts add up to the 1,500 others, with the drone in alarm drawn one by
// one; zoomed on Heathrow it draws the drones there and none of Paris;
// panned to Paris, the reverse — each view a new stream with its bbox.
func TestDashboardDronesByViewport(t *testing.T) {
	untimed(t)
	s := startStack(t, testZones(), 2)
	now := time.Now()
	var recs []map[string]any
	for i := range 1200 {
		recs = append(recs, pos(fmt.Sprintf("H%04d", i), 1, now, 51.40+float64(i/40)*0.005, -0.60+float64(i%40)*0.0075))
	}
	for i := range 300 {
		recs = append(recs, pos(fmt.Sprintf("P%03d", i), 1, now, 48.95+float64(i/20)*0.01, 2.45+float64(i%20)*0.01))
	}
	recs = append(recs, pos("ALARM", 1, now, 51.5, 0.5))
	s.send(recs...)

	b := openBrowser(t, s.alerter, "viewer")
	b.signIn(s.viewer)
	// The page frames the zones, then the drones, when it first sees them
	// (on a loaded machine after a view set too early, which it then
	// undid): the test moves the map only after both.
	b.run("see the zones and the drones framed", chromedp.Poll[chromedp.Void](
		`document.body.dataset.zonesPaintMs && document.body.dataset.clusters !== undefined`,
		chromedp.WithPollingTimeout(30*time.Second)), chromedp.Sleep(800*time.Millisecond))
	eval[bool](b, `nofly.view(50.3, 1.0, 6); true`)
	// One evaluation reads the frame whole: the stream reopens when the
	// view settles (a moveend), and its first frame redraws the clusters.
	type clusterFrame struct {
		Clusters  int    `json:"clusters"`
		Drawn     int    `json:"drawn"`
		Clustered string `json:"clustered"`
		IDs       string `json:"ids"`
	}
	var frame clusterFrame
	countryDone := func() error {
		frame = eval[clusterFrame](b, `({clusters: +(document.body.dataset.clusters || 0), drawn: document.querySelectorAll('.dcluster').length,
			clustered: document.body.dataset.clusteredDrones || '', ids: nofly.droneIds().join(',')})`)
		if frame.Clustered != "1500" || frame.IDs != "ALARM" {
			return fmt.Errorf("clustered %s, one by one %s", frame.Clustered, frame.IDs)
		}
		return nil
	}
	testenv.CheckFor(t, 60*time.Second, countryDone)
	if frame.Clusters < 2 || frame.Clusters > 200 {
		t.Errorf("country view: %d clusters for two airports' drones", frame.Clusters)
	}
	if frame.Drawn != frame.Clusters {
		t.Errorf("%d cluster markers drawn, the frame had %d", frame.Drawn, frame.Clusters)
	}
	b.shot("drones-country")

	views := []struct {
		name          string
		lat, lon      float64
		zoom          int
		want, notWant string
	}{
		{"heathrow", 51.47, -0.45, 13, "H", "P"},
		{"paris", 49.0, 2.55, 13, "P", "H"},
	}
	for _, v := range views {
		eval[bool](b, fmt.Sprintf(`nofly.view(%g, %g, %d); true`, v.lat, v.lon, v.zoom))
		testenv.CheckFor(t, 30*time.Second, func() error {
			ids := eval[[]string](b, `nofly.droneIds()`)
			mine, other := 0, 0
			for _, id := range ids {
				switch {
				case strings.HasPrefix(id, v.want):
					mine++
				case strings.HasPrefix(id, v.notWant):
					other++
				}
			}
			if mine == 0 || other > 0 || eval[string](b, `document.body.dataset.clusters`) != "0" {
				return fmt.Errorf("%s: %d of its drones, %d of the other airport, %s clusters", v.name, mine, other, eval[string](b, `document.body.dataset.clusters`))
			}
			return nil
		})
		pv := eval[map[string]any](b, `nofly.posView()`)
		bbox := pv["bbox"].([]any)
		west, _ := strconv.ParseFloat(bbox[0].(string), 64)
		east, _ := strconv.ParseFloat(bbox[2].(string), 64)
		if west > v.lon || east < v.lon || east-west > 1 {
			t.Errorf("%s: the stream's view %v does not fit the map's", v.name, pv)
		}
		t.Logf("%s: %d drones drawn one by one (stream bbox %v, zoom %v)", v.name, len(eval[[]string](b, `nofly.droneIds()`)), bbox, pv["zoom"])
		b.shot("drones-" + v.name)
	}
	var streams []string
	for _, r := range b.requestsSeen() {
		if strings.Contains(r, "/v1/map/positions") {
			streams = append(streams, r)
		}
	}
	if len(streams) < 3 {
		t.Errorf("positions streams opened: %q, want one per view (3 or more)", streams)
	}
	for _, r := range streams {
		if !strings.Contains(r, "bbox=") || !strings.Contains(r, "zoom=") {
			t.Errorf("a positions stream without its view: %s", r)
		}
	}
}

// requestsSeen is every request the page made so far.
func (b *browser) requestsSeen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}
