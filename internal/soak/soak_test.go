package soak

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/zonegen"
)

func TestNextStep(t *testing.T) {
	pass := func(n int) Step { return Step{Drones: n, Pass: true} }
	fail := func(n int) Step { return Step{Drones: n} }
	cases := []struct {
		name        string
		steps       []Step
		start, most int
		next, ceil  int
		done        bool
	}{
		{"first step is the start", nil, 5000, 50000, 5000, 0, false},
		{"passes double", []Step{pass(5000)}, 5000, 50000, 10000, 5000, false},
		{"doubling stops at the most", []Step{pass(5000), pass(10000), pass(20000), pass(40000)}, 5000, 50000, 50000, 40000, false},
		{"the most passes: done", []Step{pass(25000), pass(50000)}, 25000, 50000, 0, 50000, true},
		{"a failure bisects", []Step{pass(5000), pass(10000), fail(20000)}, 5000, 50000, 15000, 10000, false},
		{"bisection goes on", []Step{pass(10000), fail(20000), pass(15000)}, 10000, 50000, 17500, 15000, false},
		{"within 10 %: done", []Step{pass(10000), fail(20000), pass(15000), fail(17500), pass(16500)}, 10000, 50000, 0, 16500, true},
		{"the start fails: halve", []Step{fail(5000)}, 5000, 50000, 2500, 0, false},
		{"nothing carried", []Step{fail(1000), fail(500)}, 1000, 50000, 0, 0, true},
		{"a pass above a failure does not count", []Step{pass(5000), fail(10000), pass(12000)}, 5000, 50000, 7500, 5000, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, ceil, done := nextStep(tc.steps, tc.start, tc.most)
			if next != tc.next || ceil != tc.ceil || done != tc.done {
				t.Errorf("nextStep = (%d, %d, %v), want (%d, %d, %v)", next, ceil, done, tc.next, tc.ceil, tc.done)
			}
		})
	}
}

func TestPasses(t *testing.T) {
	cases := []struct {
		name               string
		lag                float64
		refused            int64
		perSecond, offered float64
		want               bool
	}{
		{"carried", 0.9, 0, 5000, 5000, true},
		{"lag at the target", 2, 0, 5000, 5000, false},
		{"refusals", 0.1, 3, 5000, 5000, false},
		{"offered less than asked", 0.1, 0, 4000, 5000, false},
		{"95 % is enough", 0.1, 0, 4750, 5000, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := passes(tc.lag, tc.refused, tc.perSecond, tc.offered, 2*time.Second); got != tc.want {
				t.Errorf("passes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSamplingMath(t *testing.T) {
	cases := []struct {
		name string
		got  float64
		want float64
	}{
		{"lag of 10,000 records at 5,000/s", lagSeconds(10000, 5000), 2},
		{"no lag", lagSeconds(0, 5000), 0},
		{"no rate", lagSeconds(100, 0), 0},
		{"per 1k", per1k(0.5, 10000), 0.05},
		{"per 1k without positions", per1k(0.5, 0), -1},
		{"per 1k of an unknown CPU", per1k(-1, 10000), -1},
		{"p95 of 1..20", percentile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 0.95), 19},
		{"p50 of one", percentile([]float64{7}, 0.5), 7},
		{"percentile of none", percentile(nil, 0.95), 0},
		{"median unsorted", median([]float64{9, 1, 5}), 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if math.Abs(tc.got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestTotals(t *testing.T) {
	ss := []Sample{
		{Seconds: 10, Positions: 10000, LagMax: 500, LagMaxS: 0.5, CPU: map[string]float64{"ingest": 1, "alerter": 2, "kafka": 3, "redis": 4, "chromium": -1, "soak": 0.5}},
		{Seconds: 10, Positions: 20000, Refused: 7, LagMax: 300, LagMaxS: 0.9, CPU: map[string]float64{"ingest": 1, "alerter": 2, "kafka": 3, "redis": 4, "chromium": 2, "soak": 0.5}},
	}
	got := totals(ss)
	if got.Positions != 30000 || got.Refused != 7 || got.Seconds != 20 || got.LagMax != 500 || got.LagMaxS != 0.9 {
		t.Errorf("totals = %+v", got)
	}
	if got.CPU["alerter"] != 4 || got.CPU["chromium"] != -1 {
		t.Errorf("CPU = %v: want alerter 4 and chromium unknown (one window without it)", got.CPU)
	}
	if p := got.PipelineCPU(); p != 20 {
		t.Errorf("pipeline CPU = %v, want 20", p)
	}
	ss[0].CPU["redis"] = -1
	if p := totals(ss).PipelineCPU(); p != -1 {
		t.Errorf("pipeline CPU without Redis = %v, want -1", p)
	}
}

func TestPageSummaries(t *testing.T) {
	ss := []Sample{
		{Pages: []PageSample{{Name: "airport", Frames: 600, P95ms: 20, HeapMB: 10}, {Name: "country", Frames: 0, HeapMB: 12}}},
		{Pages: []PageSample{{Name: "airport", Frames: 600, P95ms: 40, HeapMB: 11}, {Name: "country", Frames: 100, P95ms: 90, HeapMB: 13}}},
		{Pages: []PageSample{{Name: "airport", Frames: 600, P95ms: 30, HeapMB: 10.5}, {Name: "country", Frames: 100, P95ms: 70, HeapMB: 12.5}}},
	}
	got := pageSummaries(ss)
	if len(got) != 2 {
		t.Fatalf("%d pages, want 2", len(got))
	}
	a, c := got[0], got[1]
	if a.name != "airport" || a.p95Median != 30 || a.p95Worst != 40 || a.heapFirst != 10 || a.heapLast != 10.5 || a.heapMax != 11 {
		t.Errorf("airport: %+v", a)
	}
	if c.quietWindows != 1 || c.windows != 3 || c.p95Worst != 90 {
		t.Errorf("country: %+v (a window without frames is counted, not averaged in)", c)
	}
}

func TestReport(t *testing.T) {
	cfg := Defaults()
	cfg.Command = "go run ./cmd/soak --drones 10"
	r := &Report{Config: cfg, RunID: "soak-x", OwnBaseMB: 10, ZoneSet: ZoneLoad{Format: "faa-grid", Zones: 100000, Bytes: 35e6, PutS: 12, SwitchS: 30, Version: 2},
		Samples: []Sample{{T: 10, Seconds: 10, Drones: 50000, Positions: 500000, Processed: 400000, LagMax: 40000, LagMaxS: 0.8, AgeMaxS: 1.2, Events: 3, P50: 40 * time.Millisecond,
			P99: 300 * time.Millisecond, RedisMB: 900, OwnMB: 60, OwnKeys: 120, AlerterMB: 400,
			CPU:   map[string]float64{"ingest": 1, "alerter": 2, "kafka": 3, "redis": 4, "chromium": 5, "soak": 0.5},
			Pages: []PageSample{{Name: "airport", Frames: 600, P95ms: 18, HeapMB: 20}}}},
		Steps: []Step{{Drones: 5000, PerSecond: 5000, LagMaxS: 0.5, Pass: true}, {Drones: 10000, PerSecond: 9000, LagMaxS: 9, Pass: false}}, Ceiling: 5000,
		Profiles: []Profile{{Process: "alerter", Drones: 5000, File: "/tmp/a.perf.data", Top: "  20.00%  runtime.mallocgc"}}}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"`go run ./cmd/soak --drones 10`",
		"100,000 zones (faa-grid, 35.0 MB)",
		"| 10,000 | 9,000 | 9.00 | 0 | 0 | **no** |",
		"Ceiling (lag < 2s): **5,000 drones**",
		"| CPU s / 1,000 positions: alerter | 0.0040 (0.20 cores) |",
		"| CPU s / 1,000 positions: pipeline (ingest, alerter, kafka, redis) | **0.0200** (1.00 cores) |",
		"| 10 | 50,000 | 50,000 | 40,000 | 40,000 / 0.80 / 1.2 | 3 | 40 / 300 | 900 (60.0) | 400 | 2.0 | 4.0 | 6.0 | 8.0 | 10.0 | 1.0 | airport 18 / 20.0 |",
		"1000 bytes a drone above the zones, 50000 drones",
		"ingest's gauge (oldest record not committed) 1.2 s",
		"runtime.mallocgc",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Ceiling != 5000 || len(back.Samples) != 1 || back.Samples[0].CPU["kafka"] != 3 {
		t.Errorf("JSON round trip: %+v", back)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		bad  string // a word of the error; "" for none
	}{
		{"defaults", func(*Config) {}, ""},
		{"no drones", func(c *Config) { c.Drones = 0 }, "--drones"},
		{"zero rate", func(c *Config) { c.Hz = 0 }, "--hz"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "--duration"},
		{"no duration is fine when searching", func(c *Config) { c.Duration, c.Ceiling = 0, true }, ""},
		{"four dashboards", func(c *Config) { c.Dashboards = 4 }, "--dashboards"},
		{"unknown format", func(c *Config) { c.ZoneFormat = "kml" }, "--zone-format"},
		{"short ceiling steps", func(c *Config) { c.Ceiling, c.CeilingStep = true, 10*time.Second }, "--ceiling-step"},
		{"profile without a directory", func(c *Config) { c.Profile = time.Second }, "--profile-dir"},
		{"toggler share above 1", func(c *Config) { c.TogglerShare = 2 }, "--toggler-share"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.edit(&c)
			err := c.Validate()
			if tc.bad == "" && err != nil {
				t.Errorf("Validate: %v", err)
			}
			if tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
				t.Errorf("Validate = %v, want an error naming %s", err, tc.bad)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	rss, err := parseVmRSS(strings.NewReader("Name:\talerter\nVmPeak:\t  900000 kB\nVmRSS:\t  409600 kB\nThreads:\t9\n"))
	if err != nil || math.Abs(rss-419.4304) > 1e-9 {
		t.Errorf("parseVmRSS = %v, %v; want 419.4304 MB", rss, err)
	}
	if _, err := parseVmRSS(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("parseVmRSS without VmRSS: no error")
	}
	mb, err := parseUsedMemory("# Memory\r\nused_memory:123456789\r\nused_memory_human:117.74M\r\n")
	if err != nil || mb != 123.456789 {
		t.Errorf("parseUsedMemory = %v, %v", mb, err)
	}
	if p, ok := ppidOf([]byte("4242 (chrome (renderer)) S 4100 4242 4242 0 -1")); !ok || p != 4100 {
		t.Errorf("ppidOf = %d, %v; want 4100 (a name with a parenthesis)", p, ok)
	}
	metrics := "# HELP nofly_ingest_consumer_lag_seconds x\nnofly_ingest_consumer_lag_seconds{group=\"g\",partition=\"0\"} 0.4\n" +
		"nofly_ingest_consumer_lag_seconds{group=\"g\",partition=\"1\"} 1.5\nnofly_ingest_consumer_lag_records{group=\"g\",partition=\"1\"} 900\n"
	if got := maxGauge(metrics, "nofly_ingest_consumer_lag_seconds"); got != 1.5 {
		t.Errorf("maxGauge = %v, want 1.5", got)
	}
	if got := maxGauge("", "nofly_ingest_consumer_lag_seconds"); got != -1 {
		t.Errorf("maxGauge of nothing = %v, want -1", got)
	}
	top := perfTop("# comment\n\n    31.20%  [.] runtime.scanobject\n     9.10%  [.] geofence.(*Index).Query\n     1.00%  [.] x\n", 2)
	if top != "    31.20%  [.] runtime.scanobject\n     9.10%  [.] geofence.(*Index).Query" {
		t.Errorf("perfTop = %q", top)
	}
}

// TestFleet: every active drone sends one fix a tick with seq = tick + 1
// on its own client; togglers alternate between the zone and the clear
// point, in the zone at 120 m AGL, out of every zone outside; the ids
// name their drones back.
func TestFleet(t *testing.T) {
	set := zonegen.FAAGrid(7, 3000)
	zs, _, err := geofence.Loader{}.Parse(bytes.NewReader(set.Doc))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := geofence.NewIndex(zs)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	in, out, _, err := togglerPoints(set, ix, now)
	if err != nil {
		t.Fatal(err)
	}
	h := geofence.Heights{AGL: 120, HasAGL: true}
	if len(ix.Query(geofence.Point{Lat: in[1], Lon: in[0], Time: now, Heights: h}, nil)) == 0 {
		t.Error("the togglers' inside point is in no zone")
	}
	if n := len(ix.Query(geofence.Point{Lat: out[1], Lon: out[0], Time: now, Heights: h}, nil)); n != 0 {
		t.Errorf("the togglers' outside point is in %d zones", n)
	}

	c := Defaults()
	c.Clients, c.TogglerShare, c.ToggleEvery = 4, 0.1, 2
	f := newFleet(set, 40, c, in, out)
	if got := f.togglers(40); got != 4 {
		t.Errorf("togglers(40) = %d, want 4", got)
	}
	insideAt := map[int64]int{}
	for k := range int64(4) {
		bodies := f.tick(k, 30, 1, now) // 30 of the 40 fly
		if len(bodies) != 4 {
			t.Fatalf("%d bodies, want one per client", len(bodies))
		}
		n := 0
		for cl, b := range bodies {
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				var p struct {
					Drone string  `json:"drone_id"`
					Seq   int64   `json:"seq"`
					Lat   float64 `json:"lat"`
					Lon   float64 `json:"lon"`
				}
				if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
					t.Fatal(err)
				}
				n++
				i, ok := droneIndex(p.Drone)
				if !ok || i >= 30 || clientOf(i, 4) != cl || p.Seq != k+1 || f.droneID(i) != p.Drone {
					t.Errorf("tick %d client %d: %+v (index %d, %v)", k, cl, p, i, ok)
				}
				if f.isToggler(i) && math.Abs(p.Lat-in[1]) < 1e-6 && math.Abs(p.Lon-in[0]) < 1e-6 {
					insideAt[k]++
				}
			}
		}
		if n != 30 {
			t.Errorf("tick %d: %d fixes, want 30", k, n)
		}
	}
	// Toggler i is in the zone when ((seq-1+i)/every) is odd: with every
	// 2 and togglers 0, 10, 20, ticks 0-3 have 0, 1... inside.
	for k := range int64(4) {
		want := 0
		for _, i := range []int{0, 10, 20} {
			if togglerInside(i, k+1, 2) {
				want++
			}
		}
		if insideAt[k] != want {
			t.Errorf("tick %d: %d togglers inside, want %d", k, insideAt[k], want)
		}
	}
	if _, ok := droneIndex("UAV-1"); ok {
		t.Error("droneIndex took another fleet's id")
	}
}

func TestLatencyMatching(t *testing.T) {
	log := newAcceptLog(3)
	log.add(1, 4, 5_000_000) // client 1's request of tick 4 (seq 5)
	s := &sseClient{pending: []sseEvent{
		{drone: 7, seq: 5, at: 45_000_000}, // drone 7 is client 1's: 40 ms
		{drone: 8, seq: 5, at: 46_000_000}, // client 2's: not accepted yet
		{drone: 9, seq: 1, at: 1_000_000},  // client 0's, never accepted
	}}
	lat, un := s.match(log, 70_000_000, 60_000_000)
	if len(lat) != 1 || lat[0] != 40*time.Millisecond || un != 1 || len(s.pending) != 1 || s.pending[0].drone != 8 {
		t.Errorf("match = %v, %d unmatched, pending %v", lat, un, s.pending)
	}
	s.add(`{"type":"raised","drone_id":"SOAK-000004","seq":3}`)
	s.add(`{"type":"approaching","drone_id":"SOAK-000004","seq":3}`)
	s.add(`{"type":"cleared","drone_id":"UAV-1","seq":3}`)
	if len(s.pending) != 2 || s.pending[1].drone != 4 || s.other != 1 || s.foreign != 1 {
		t.Errorf("after add: pending %v, other %d, foreign %d", s.pending, s.other, s.foreign)
	}
}
