package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/internal/benchcompare"
)

// procNames are the processes whose CPU a soak reports, in the report's
// order; "chromium" is every dashboard's browser with its children, and
// "soak" the load generator itself (traffic, SSE client, sampling).
var procNames = []string{"ingest", "alerter", "kafka", "redis", "chromium", "soak"}

// Sample is one sample interval.
type Sample struct {
	T       float64 `json:"t_s"` // end of the window, since the traffic started
	Seconds float64 `json:"seconds"`
	Drones  int     `json:"drones"`
	// Positions accepted (202) in the window, and refused.
	Positions int64 `json:"positions"`
	Refused   int64 `json:"refused"`
	// Processed is the records the alerter committed in the window (ticks
	// included: one a partition a second).
	Processed int64 `json:"processed"`
	// LagMax is the largest of the 1 s lag readings in the window, in
	// records and in seconds of the offered rate.
	LagMax  int64   `json:"lag_max_records"`
	LagMaxS float64 `json:"lag_max_s"`
	// AgeMaxS is ingest's nofly_ingest_consumer_lag_seconds, the age of
	// the oldest record not committed, the largest read in the window
	// (-1: none; ingest measures every 5 s).
	AgeMaxS float64 `json:"ingest_lag_max_s"`
	// Events matched to their 202 in the window, and their latency from
	// the 202 to the SSE client.
	Events  int           `json:"events"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	RedisMB float64       `json:"redis_used_memory_mb"`
	// OwnMB and OwnKeys are the run's own keys' memory and count.
	OwnMB     float64 `json:"redis_own_keys_mb"`
	OwnKeys   int     `json:"redis_own_keys"`
	AlerterMB float64 `json:"alerter_rss_mb"`
	IngestMB  float64 `json:"ingest_rss_mb"`
	// CPU is each process's CPU seconds in the window (-1: unknown).
	CPU   map[string]float64 `json:"cpu_s"`
	Pages []PageSample       `json:"pages,omitempty"`
}

// PerSecond is the positions accepted per second of the window.
func (s Sample) PerSecond() float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return float64(s.Positions) / s.Seconds
}

// ZoneLoad is the zone set and what loading it took.
type ZoneLoad struct {
	Format    string  `json:"format"`
	Zones     int     `json:"zones"`
	Bytes     int     `json:"bytes"`
	GenerateS float64 `json:"generate_s"`
	// PutS is PUT /v1/zones's answer time; SwitchS from the PUT's start
	// until the alerter's nofly_alerter_zone_version showed the version.
	PutS    float64 `json:"put_s"`
	SwitchS float64 `json:"switch_s"`
	Version int64   `json:"version"`
}

// Profile is a perf profile of one process: its file and the top of its
// report.
type Profile struct {
	Process string `json:"process"`
	Drones  int    `json:"drones"`
	File    string `json:"file"`
	Top     string `json:"top"`
}

// Report is a soak's figures.
type Report struct {
	Config   Config    `json:"config"`
	RunID    string    `json:"run_id"`
	Started  time.Time `json:"started"`
	CPUs     int       `json:"cpus"`
	Go       string    `json:"go"`
	Redis    string    `json:"redis_version"`
	LoadAvg  [2]string `json:"loadavg_start_end"`
	ZoneSet  ZoneLoad  `json:"zone_set"`
	Togglers int       `json:"togglers"`
	// TogglerSite is where the togglers alarm (the airport view).
	TogglerSite string   `json:"toggler_site"`
	Samples     []Sample `json:"samples"`
	// OwnBaseMB is the run's own keys before the traffic (the zone
	// store's versions): what the drones add is above it.
	OwnBaseMB float64 `json:"redis_own_keys_before_traffic_mb"`
	// Latency is every matched event's, over the run.
	Latency   benchcompare.Latency `json:"latency"`
	Unmatched int                  `json:"unmatched_events"`
	// OtherEvents are the stream's events that are not raises or clears
	// (approaching warnings); Reconnects the SSE client's.
	OtherEvents int       `json:"other_events"`
	Reconnects  int       `json:"sse_reconnects"`
	Steps       []Step    `json:"ceiling_steps,omitempty"`
	Ceiling     int       `json:"ceiling_drones,omitempty"`
	Profiles    []Profile `json:"profiles,omitempty"`
}

// Totals is the run's sums: positions, and each process's CPU seconds
// over the samples that measured it.
type Totals struct {
	Positions, Refused int64
	Processed          int64
	Seconds            float64
	CPU                map[string]float64
	LagMax             int64
	LagMaxS, AgeMaxS   float64
}

// totals sums samples (all of them when from is 0).
func totals(samples []Sample) Totals {
	t := Totals{CPU: map[string]float64{}}
	for _, s := range samples {
		t.Positions += s.Positions
		t.Refused += s.Refused
		t.Processed += s.Processed
		t.Seconds += s.Seconds
		if s.LagMax > t.LagMax {
			t.LagMax = s.LagMax
		}
		t.LagMaxS = max(t.LagMaxS, s.LagMaxS)
		t.AgeMaxS = max(t.AgeMaxS, s.AgeMaxS)
		for _, n := range procNames {
			c, ok := s.CPU[n]
			if !ok || c < 0 || t.CPU[n] < 0 {
				t.CPU[n] = -1
				continue
			}
			t.CPU[n] += c
		}
	}
	return t
}

// PipelineCPU is ingest's, the alerter's, the broker's and Redis's CPU:
// the cost of the pipeline without its clients.
func (t Totals) PipelineCPU() float64 {
	var sum float64
	for _, n := range procNames[:4] {
		if t.CPU[n] < 0 {
			return -1
		}
		sum += t.CPU[n]
	}
	return sum
}

// pageSummary is one page over the run: its p95 per window (median and
// worst), the heap's first and last reading.
type pageSummary struct {
	name                  string
	p95Median, p95Worst   float64
	heapFirst, heapLast   float64
	heapMax, frames       float64
	windows, quietWindows int
}

func pageSummaries(samples []Sample) []pageSummary {
	var out []pageSummary
	idx := map[string]int{}
	p95s := map[string][]float64{}
	for _, s := range samples {
		for _, p := range s.Pages {
			i, ok := idx[p.Name]
			if !ok {
				i = len(out)
				idx[p.Name] = i
				out = append(out, pageSummary{name: p.Name, heapFirst: p.HeapMB})
			}
			ps := &out[i]
			ps.windows++
			ps.frames += float64(p.Frames)
			if p.Frames == 0 {
				ps.quietWindows++
			} else {
				p95s[p.Name] = append(p95s[p.Name], p.P95ms)
			}
			ps.heapLast = p.HeapMB
			ps.heapMax = max(ps.heapMax, p.HeapMB)
		}
	}
	for i := range out {
		if xs := p95s[out[i].name]; len(xs) > 0 {
			out[i].p95Median, out[i].p95Worst = median(xs), slices.Max(xs)
		}
	}
	return out
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("soak: JSON report: %w", err)
	}
	return nil
}

// WriteMarkdown writes r's summary and its per-sample table.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "## Soak %s\n\n", r.RunID)
	fmt.Fprintf(&b, "`%s`\n\n", c.Command)
	fmt.Fprintf(&b, "Machine: %d CPUs, %s, Redis %s; load average %s at the start, %s at the end. Started %s.\n\n",
		r.CPUs, r.Go, r.Redis, r.LoadAvg[0], r.LoadAvg[1], r.Started.UTC().Format(time.RFC3339))
	z := r.ZoneSet
	fmt.Fprintf(&b, "Zones: %s zones (%s, %.1f MB), generated in %.1f s; PUT /v1/zones answered in %.1f s, in use by the alerter (version %d) %.1f s after the PUT began.\n\n",
		commas(int64(z.Zones)), z.Format, float64(z.Bytes)/1e6, z.GenerateS, z.PutS, z.Version, z.SwitchS)
	fmt.Fprintf(&b, "Traffic: %s drones at %g Hz (%d clients, %d partitions), %d of them togglers at %s every %d fixes; the rest fly at %g m/s, %g m AGL, over the set's sites. Dashboards: %d.\n\n",
		commas(int64(c.Drones)), c.Hz, c.Clients, c.Partitions, r.Togglers, r.TogglerSite, c.ToggleEvery, c.SpeedMPS, c.AltAGLM, c.Dashboards)

	if len(r.Steps) > 0 {
		b.WriteString("### Ceiling search\n\n| drones | positions/s | lag max (s) | refused | alarm p99 | carried |\n| ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, s := range r.Steps {
			fmt.Fprintf(&b, "| %s | %s | %.2f | %d | %s | %s |\n", commas(int64(s.Drones)), commas(int64(s.PerSecond)), s.LagMaxS, s.Refused,
				ms(s.P99), map[bool]string{true: "yes", false: "**no**"}[s.Pass])
		}
		fmt.Fprintf(&b, "\nCeiling (lag < %v): **%s drones** at %g Hz.\n\n", c.LagTarget, commas(int64(r.Ceiling)), c.Hz)
	}

	t := totals(r.Samples)
	b.WriteString("### Summary\n\n| figure | value |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| positions accepted (202) | %s in %.0f s (%s/s); refused %s |\n", commas(t.Positions), t.Seconds,
		commas(int64(float64(t.Positions)/max(t.Seconds, 1))), commas(t.Refused))
	fmt.Fprintf(&b, "| processed by the alerter (committed offsets, ticks included) | %s (%s/s) |\n", commas(t.Processed),
		commas(int64(float64(t.Processed)/max(t.Seconds, 1))))
	fmt.Fprintf(&b, "| consumer lag max | %s records, %.2f s of traffic; ingest's gauge (oldest record not committed) %.1f s (target < %v) |\n",
		commas(t.LagMax), t.LagMaxS, t.AgeMaxS, c.LagTarget)
	l := r.Latency
	fmt.Fprintf(&b, "| alarm latency 202 → SSE client p50 / p90 / p99 / max | %s / %s / %s / %s ms (%s events; target p99 ≤ 500 ms) |\n",
		ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max), commas(int64(l.N)))
	fmt.Fprintf(&b, "| events not matched / other events / SSE reconnects | %d / %d / %d |\n", r.Unmatched, r.OtherEvents, r.Reconnects)
	if n := len(r.Samples); n > 0 {
		first, mid, last := r.Samples[0], r.Samples[n/2], r.Samples[n-1]
		fmt.Fprintf(&b, "| Redis used_memory first / middle / last / max | %.0f / %.0f / %.0f / %.0f MB |\n", first.RedisMB, mid.RedisMB, last.RedisMB,
			maxOf(r.Samples, func(s Sample) float64 { return s.RedisMB }))
		flown := maxOf(r.Samples, func(s Sample) float64 { return float64(s.Drones) })
		fmt.Fprintf(&b, "| Redis: the run's own keys before the traffic; first / middle / last / max sample | %.1f; %.1f / %.1f / %.1f / %.1f MB (%d keys at the end; %.0f bytes a drone above the zones, %.0f drones) |\n",
			r.OwnBaseMB, first.OwnMB, mid.OwnMB, last.OwnMB, maxOf(r.Samples, func(s Sample) float64 { return s.OwnMB }), last.OwnKeys,
			1e6*(last.OwnMB-r.OwnBaseMB)/max(flown, 1), flown)
		fmt.Fprintf(&b, "| alerter RSS first / middle / last / max | %.0f / %.0f / %.0f / %.0f MB |\n", first.AlerterMB, mid.AlerterMB, last.AlerterMB,
			maxOf(r.Samples, func(s Sample) float64 { return s.AlerterMB }))
		fmt.Fprintf(&b, "| ingest RSS first / last | %.0f / %.0f MB |\n", first.IngestMB, last.IngestMB)
	}
	for _, n := range procNames {
		fmt.Fprintf(&b, "| CPU s / 1,000 positions: %s | %s (%s cores) |\n", n, f4(per1k(t.CPU[n], t.Positions)), cores(t.CPU[n], t.Seconds))
	}
	fmt.Fprintf(&b, "| CPU s / 1,000 positions: pipeline (ingest, alerter, kafka, redis) | **%s** (%s cores) |\n",
		f4(per1k(t.PipelineCPU(), t.Positions)), cores(t.PipelineCPU(), t.Seconds))
	for _, p := range pageSummaries(r.Samples) {
		fmt.Fprintf(&b, "| page %s: frame time p95 per window, median / worst | %.1f / %.1f ms (target ≤ 50 ms; %d of %d windows without a frame) |\n",
			p.name, p.p95Median, p.p95Worst, p.quietWindows, p.windows)
		fmt.Fprintf(&b, "| page %s: JS heap first / last / max | %.1f / %.1f / %.1f MB |\n", p.name, p.heapFirst, p.heapLast, p.heapMax)
	}
	b.WriteString("\n")

	b.WriteString("### Per sample\n\nCPU in ms per 1,000 positions of the window; pages: frame time p95 (ms) / JS heap (MB).\n\n")
	b.WriteString("| t (s) | drones | pos/s | processed/s | lag max (rec / s / ingest's s) | events | p50 / p99 (ms) | Redis MB (own) | alerter RSS MB |")
	for _, n := range procNames {
		b.WriteString(" " + n + " |")
	}
	b.WriteString(" pages |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for range procNames {
		b.WriteString(" ---: |")
	}
	b.WriteString(" --- |\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "| %.0f | %s | %s | %s | %s / %.2f / %.1f | %d | %s / %s | %.0f (%.1f) | %.0f |", s.T, commas(int64(s.Drones)), commas(int64(s.PerSecond())),
			commas(int64(float64(s.Processed)/max(s.Seconds, 1e-9))), commas(s.LagMax), s.LagMaxS, s.AgeMaxS, s.Events, ms(s.P50), ms(s.P99), s.RedisMB, s.OwnMB, s.AlerterMB)
		for _, n := range procNames {
			c, ok := s.CPU[n]
			if !ok {
				c = -1
			}
			v := per1k(c, s.Positions)
			if v < 0 {
				b.WriteString(" – |")
			} else {
				fmt.Fprintf(&b, " %.1f |", v*1000)
			}
		}
		var ps []string
		for _, p := range s.Pages {
			ps = append(ps, fmt.Sprintf("%s %.0f / %.1f", p.Name, p.P95ms, p.HeapMB))
		}
		fmt.Fprintf(&b, " %s |\n", strings.Join(ps, "; "))
	}
	for _, p := range r.Profiles {
		fmt.Fprintf(&b, "\n### Profile: %s at %s drones (`%s`)\n\n```\n%s\n```\n", p.Process, commas(int64(p.Drones)), p.File, strings.Trim(p.Top, "\n"))
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("soak: Markdown report: %w", err)
	}
	return nil
}

func maxOf(ss []Sample, f func(Sample) float64) float64 {
	m := 0.0
	for _, s := range ss {
		m = max(m, f(s))
	}
	return m
}

func f4(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.4f", v)
}

func cores(cpu, secs float64) string {
	if cpu < 0 || secs <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", cpu/secs)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
