package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// counters are what the progress display shows, updated by the sender and
// the alerter poller.
type counters struct {
	steps    atomic.Int64 // fleet steps done
	sent     atomic.Int64 // records ingest accepted (or written to --out)
	httpErrs atomic.Int64 // POST attempts that failed and were retried
	rejected atomic.Int64 // records of batches ingest refused
	// Alarms raised and cleared since the start, by the alerter's counters;
	// alarmsOK is false until a poll succeeded, alarmsStale while the last
	// one failed.
	raised, cleared       atomic.Int64
	alarmsOK, alarmsStale atomic.Bool
}

// console is stderr, shared by the log and, on a terminal, the progress
// line: a log record clears the line first and puts it back after, so the
// two do not garble each other.
type console struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	line string // the progress line on screen, "" when none
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.line != "" {
		io.WriteString(c.w, "\r\x1b[K")
	}
	n, err := c.w.Write(p)
	if c.line != "" {
		io.WriteString(c.w, c.line)
	}
	return n, err
}

// draw puts line on screen in place of the last one.
func (c *console) draw(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.line = line
	io.WriteString(c.w, "\r"+line+"\x1b[K")
}

// leave ends the progress line, leaving it on screen.
func (c *console) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.line != "" {
		io.WriteString(c.w, "\n")
	}
	c.line = ""
}

// display redraws the progress line on a terminal, or logs progress.
type display struct {
	cnt     *counters
	con     *console
	log     *slog.Logger
	done    func() float64 // share of the run done, -1 when unbounded
	start   time.Time
	file    bool // writing --out: nothing is posted
	alerter bool // --alerter given

	samples []sample // recent (time, sent), for the rate
}

type sample struct {
	t time.Time
	n int64
}

// rate returns records per second since the first sample within window
// of now (or the last one before it), after adding now's.
func (d *display) rate(now time.Time, window time.Duration) float64 {
	d.samples = append(d.samples, sample{now, d.cnt.sent.Load()})
	for len(d.samples) > 2 && now.Sub(d.samples[1].t) >= window {
		d.samples = d.samples[1:]
	}
	first, last := d.samples[0], d.samples[len(d.samples)-1]
	if s := last.t.Sub(first.t).Seconds(); s > 0 {
		return float64(last.n-first.n) / s
	}
	return 0
}

// run runs the display until the returned stop, which shows the end.
func (d *display) run(c config) (stop func()) {
	every := c.logged
	if d.con.tty {
		every = c.redraw
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	d.rate(d.start, 0)
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				d.show(now, false)
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		d.show(time.Now(), true)
	}
}

// show draws the line (terminal) or logs a line; final marks the end.
func (d *display) show(now time.Time, final bool) {
	rate := 0.0
	switch {
	case final:
		if s := now.Sub(d.start).Seconds(); s > 0 {
			rate = float64(d.cnt.sent.Load()) / s // the mean over the run
		}
	case d.con.tty:
		rate = d.rate(now, 2*time.Second)
	default:
		rate = d.rate(now, 0) // since the last line
	}
	if d.con.tty {
		d.con.draw(d.line(now, rate))
		if final {
			d.con.leave()
		}
		return
	}
	msg := "progress"
	if final {
		msg = "done"
	}
	attrs := []any{"elapsed", now.Sub(d.start).Round(time.Second), "records_sent", d.cnt.sent.Load(),
		"records_per_s", math.Round(rate)}
	if !d.file {
		attrs = append(attrs, "http_errors", d.cnt.httpErrs.Load(), "rejected", d.cnt.rejected.Load())
	}
	if d.alerter && d.cnt.alarmsOK.Load() {
		attrs = append(attrs, "alarms_raised", d.cnt.raised.Load(), "alarms_cleared", d.cnt.cleared.Load())
	}
	if f := d.done(); f >= 0 && !final {
		attrs = append(attrs, "done_pct", math.Floor(f*100))
	}
	d.log.Info(msg, attrs...)
}

const barWidth = 16

// line is the progress line: under 80 columns when nothing fails.
func (d *display) line(now time.Time, rate float64) string {
	var b strings.Builder
	if f := d.done(); f >= 0 {
		n := int(f * barWidth)
		fmt.Fprintf(&b, "[%s%s] %3d%%  ", strings.Repeat("█", n), strings.Repeat("░", barWidth-n), int(f*100))
	}
	b.WriteString(now.Sub(d.start).Truncate(time.Second).String())
	verb := "sent"
	if d.file {
		verb = "written"
	}
	fmt.Fprintf(&b, "  %s %d  %.0f rec/s", verb, d.cnt.sent.Load(), rate)
	if d.file {
		return b.String()
	}
	h, r := d.cnt.httpErrs.Load(), d.cnt.rejected.Load()
	if h == 0 && r == 0 {
		b.WriteString("  errors 0")
	} else {
		fmt.Fprintf(&b, "  errors: %d http, %d rejected", h, r)
	}
	switch {
	case !d.alerter || !d.cnt.alarmsOK.Load():
		b.WriteString("  alarms –")
	default:
		fmt.Fprintf(&b, "  alarms %d", d.cnt.raised.Load())
		if d.cnt.alarmsStale.Load() {
			b.WriteString("?")
		}
	}
	return b.String()
}

// The alerter's counters of the events it committed (alerts/consume).
const (
	raisedMetric  = "nofly_alerter_events_raised_total"
	clearedMetric = "nofly_alerter_events_cleared_total"
)

// pollAlerter reads the alerter's event counters every interval until ctx
// ends, and counts their increase since the first read into cnt.
func pollAlerter(ctx context.Context, base string, every time.Duration, cnt *counters, log *slog.Logger) {
	url := strings.TrimRight(base, "/")
	if !strings.HasSuffix(url, "/metrics") {
		url += "/metrics"
	}
	client := &http.Client{Timeout: max(every, 500*time.Millisecond)}
	var raised, cleared increase
	failing := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r, c, err := alerterCounts(ctx, client, url)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			cnt.alarmsStale.Store(true)
			if !failing {
				log.Warn("cannot read the alerter's metrics; alarms not counted until it answers", "url", url, "err", err)
			}
			failing = true
		default:
			if failing {
				log.Info("the alerter's metrics answer again", "url", url)
			}
			failing = false
			cnt.raised.Store(int64(raised.add(r)))
			cnt.cleared.Store(int64(cleared.add(c)))
			cnt.alarmsStale.Store(false)
			cnt.alarmsOK.Store(true)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func alerterCounts(ctx context.Context, client *http.Client, url string) (raised, cleared float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("alerter metrics: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("alerter metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("alerter metrics: %s answered %s", url, resp.Status)
	}
	return parseCounts(resp.Body)
}

// parseCounts reads the raised and cleared counters from a Prometheus text
// exposition, summing over labels if there are any.
func parseCounts(r io.Reader) (raised, cleared float64, err error) {
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var dst *float64
		var name string
		switch {
		case strings.HasPrefix(line, raisedMetric):
			dst, name = &raised, raisedMetric
		case strings.HasPrefix(line, clearedMetric):
			dst, name = &cleared, clearedMetric
		default:
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts with this one
		}
		if rest[0] == '{' {
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				return 0, 0, fmt.Errorf("alerter metrics: bad line %q", line)
			}
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, 0, fmt.Errorf("alerter metrics: bad line %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("alerter metrics: %q: %w", line, err)
		}
		*dst += v
		found = found || name == raisedMetric
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("alerter metrics: %w", err)
	}
	if !found {
		return 0, 0, fmt.Errorf("alerter metrics: no %s (is it an alerter?)", raisedMetric)
	}
	return raised, cleared, nil
}

// increase is how much a counter grew since its first reading, across
// restarts of the process that counts (a reading below the last one starts
// again from 0), as Prometheus's increase() reads it.
type increase struct {
	last, total float64
	seen        bool
}

func (c *increase) add(v float64) float64 {
	switch {
	case !c.seen:
		c.seen = true
	case v >= c.last:
		c.total += v - c.last
	default:
		c.total += v
	}
	c.last = v
	return c.total
}
