package soak

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/zonegen"
)

// pageViews are the dashboards a soak opens, in order.
var pageViews = []string{"airport", "country", "panning"}

// view is a map view: centre and zoom.
type view struct {
	lat, lon float64
	zoom     int
}

// page is one dashboard: a headless chromium of its own (a background
// tab's animation frames would be throttled), signed in with a viewer
// token.
type page struct {
	name   string
	ctx    context.Context
	cancel func()
	pid    int // the browser's; its renderers are its children
	views  []view
	next   int
}

// openPage starts chromium on the dashboard at origin, signs in and moves
// the map to the first of views.
func openPage(ctx context.Context, origin, token, name string, views []view) (*page, error) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		return nil, fmt.Errorf("chromium is not on PATH (bash scripts/chromium.sh install): %w", err)
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1400, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	p := &page{name: name, ctx: bctx, cancel: func() { cancelB(); cancelA() }, views: views}
	if _, err := chromedp.Call(bctx, performance.Enable, performance.EnableParams{}); err != nil {
		p.cancel()
		return nil, fmt.Errorf("dashboard %s: start chromium: %w", name, err)
	}
	if proc := chromedp.FromContext(bctx).Browser.Process(); proc != nil {
		p.pid = proc.Pid
	}
	tctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	err = chromedp.Do(tctx, chromedp.Navigate(origin+"/"),
		chromedp.WaitVisible(chromedp.CSS("#tokenPane:not([hidden]) #token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#tokenForm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("dashboard %s: sign in: %w", name, err)
	}
	if err := p.pan(ctx); err != nil {
		p.cancel()
		return nil, err
	}
	return p, nil
}

// pan moves the map to the page's next view.
func (p *page) pan(ctx context.Context) error {
	v := p.views[p.next%len(p.views)]
	p.next++
	tctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	_, err := chromedp.Run(tctx, chromedp.Evaluate[bool](fmt.Sprintf("(nofly.view(%f, %f, %d), true)", v.lat, v.lon, v.zoom)))
	if err != nil {
		return fmt.Errorf("dashboard %s: view: %w", p.name, err)
	}
	return nil
}

// PageSample is what a page did over a sample interval.
type PageSample struct {
	Name   string  `json:"name"`
	Frames int     `json:"frames"`
	P95ms  float64 `json:"frame_p95_ms"`
	MaxMs  float64 `json:"frame_max_ms"`
	HeapMB float64 `json:"js_heap_mb"`
	// Drones and Clusters are what its map shows (data-drones,
	// data-clusters).
	Drones   string `json:"drones"`
	Clusters string `json:"clusters"`
}

// sample takes the frame times the page noted since the last sample
// (emptying nofly.stats.frames) and its JS heap after a collection.
func (p *page) sample(ctx context.Context) (PageSample, error) {
	tctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	s := PageSample{Name: p.name}
	frames, err := chromedp.Run(tctx, chromedp.Evaluate[[]float64](`nofly.stats.frames.splice(0)`))
	if err != nil {
		return s, fmt.Errorf("dashboard %s: frames: %w", p.name, err)
	}
	s.Frames = len(frames)
	if len(frames) > 0 {
		slices.Sort(frames)
		s.P95ms, s.MaxMs = percentile(frames, 0.95), frames[len(frames)-1]
	}
	if _, err := chromedp.Call(tctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return s, fmt.Errorf("dashboard %s: collect garbage: %w", p.name, err)
	}
	m, err := chromedp.Call(tctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return s, fmt.Errorf("dashboard %s: metrics: %w", p.name, err)
	}
	for _, x := range m.Metrics {
		if x.Name == "JSHeapUsedSize" {
			s.HeapMB = x.Value / 1e6
		}
	}
	s.Drones, _ = chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.dataset.drones || ''`))
	s.Clusters, _ = chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.dataset.clusters || ''`))
	return s, nil
}

// pageViewsOf are the views of the dashboards: the airport the togglers
// alarm at (zoom 13), the set's country (zoom 5) and a tour of its first
// eight sites (zoom 11).
func pageViewsOf(set *zonegen.Set, airport zonegen.Site) map[string][]view {
	country := view{39, -97, 5} // the contiguous US: the FAA grid's airports
	if set.Format == "ed269" {
		country = view{48, 8, 5}
	}
	var tour []view
	for _, s := range set.Sites[:min(8, len(set.Sites))] {
		tour = append(tour, view{s.Lat, s.Lon, 11})
	}
	return map[string][]view{"airport": {{airport.Lat, airport.Lon, 13}}, "country": {country}, "panning": tour}
}

// openPages opens n dashboards, one after the other (three chromium
// starts at once on two cores time out).
func openPages(ctx context.Context, origin string, tokens []string, views map[string][]view) ([]*page, error) {
	var pages []*page
	for i, tok := range tokens {
		name := pageViews[i]
		p, err := openPage(ctx, origin, tok, name, views[name])
		if err != nil {
			closePages(pages)
			return nil, err
		}
		pages = append(pages, p)
	}
	return pages, nil
}

func closePages(pages []*page) {
	for _, p := range pages {
		p.cancel()
	}
}
