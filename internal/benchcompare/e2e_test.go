package benchcompare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"

	"github.com/nofly-dev/nofly/alerts/outbox"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	ten := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of ten is the fifth", ten, 0.5, 5 * time.Millisecond},
		{"p90 of ten is the ninth", ten, 0.9, 9 * time.Millisecond},
		{"p99 of ten is the largest", ten, 0.99, 10 * time.Millisecond},
		{"p99 of a hundred is the 99th", hundred, 0.99, 99 * time.Millisecond},
		{"p50 of a hundred is the 50th", hundred, 0.5, 50 * time.Millisecond},
		{"max", hundred, 1, 100 * time.Millisecond},
		{"tiny q is the smallest", ten, 0.001, time.Millisecond},
		{"odd count median", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.q); got != tc.want {
				t.Fatalf("Percentile(q=%g) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ds := []time.Duration{40, 10, 30, 20, -5}
	got := Summarize(ds)
	want := Latency{N: 5, Min: -5, P50: 20, P90: 40, P99: 40, Max: 40, Mean: 19}
	if got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Latency{}) {
		t.Error("Summarize(nil) is not zero")
	}
}

const infoSample = "# Server\r\nredis_version:7.0.15\r\nprocess_id:23864\r\n\r\n# Stats\r\n" +
	"total_connections_received:12\r\ntotal_commands_processed:107605\r\ninstantaneous_ops_per_sec:3\r\n" +
	"total_reads_processed:718\r\ntotal_writes_processed:658\r\n\r\n# Commandstats\r\n" +
	"cmdstat_evalsha:calls=40,usec=9000,usec_per_call=225.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_hset:calls=1200,usec=800,usec_per_call=0.67,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=9,usec=900,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseRedisInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info string
		want RedisStats
		bad  bool
	}{
		{"full", infoSample, RedisStats{Commands: 107605, Reads: 718, Writes: 658, PID: 23864, Version: "7.0.15",
			ByCommand: map[string]int64{"evalsha": 40, "hset": 1200, "info": 9}}, false},
		{"LF line ends", strings.ReplaceAll(infoSample, "\r\n", "\n"), RedisStats{Commands: 107605, Reads: 718, Writes: 658, PID: 23864,
			Version: "7.0.15", ByCommand: map[string]int64{"evalsha": 40, "hset": 1200, "info": 9}}, false},
		{"no stats section", "# Server\r\nredis_version:7.0.15\r\n", RedisStats{}, true},
		{"bad number", "total_commands_processed:12x\r\n", RedisStats{}, true},
		{"command without calls", "total_commands_processed:1\r\ncmdstat_get:usec=3\r\n", RedisStats{}, true},
		{"bad calls", "total_commands_processed:1\r\ncmdstat_get:calls=z,usec=3\r\n", RedisStats{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRedisInfo(tc.info)
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, want error %v", err, tc.bad)
			}
			if tc.bad {
				return
			}
			if got.Commands != tc.want.Commands || got.Reads != tc.want.Reads || got.Writes != tc.want.Writes ||
				got.PID != tc.want.PID || got.Version != tc.want.Version || !mapsEqual(got.ByCommand, tc.want.ByCommand) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestRedisStatsSub(t *testing.T) {
	before := RedisStats{Commands: 100, Reads: 10, Writes: 9, ByCommand: map[string]int64{"evalsha": 4, "info": 2, "get": 7}}
	after := RedisStats{Commands: 1100, Reads: 30, Writes: 25, PID: 5, ByCommand: map[string]int64{"evalsha": 14, "info": 4,
		"get": 7, "xadd": 3, "fcall": 2, "eval_ro": 1}}
	d := after.Sub(before)
	if d.Commands != 1000 || d.Reads != 20 || d.Writes != 16 || d.PID != 5 {
		t.Fatalf("Sub = %+v", d)
	}
	// INFO's own calls and commands not called in between are left out.
	if want := map[string]int64{"evalsha": 10, "xadd": 3, "fcall": 2, "eval_ro": 1}; !mapsEqual(d.ByCommand, want) {
		t.Fatalf("ByCommand = %v, want %v", d.ByCommand, want)
	}
	if n := d.ScriptCalls(); n != 13 {
		t.Errorf("ScriptCalls = %d, want 13", n)
	}
}

func TestMetricValues(t *testing.T) {
	text := "# HELP nofly_alerter_events_raised_total Raised.\n# TYPE nofly_alerter_events_raised_total counter\n" +
		"nofly_alerter_events_raised_total 1523\nnofly_alerter_events_cleared_total 1.5e+03\n" +
		"nofly_alerter_batch_seconds_bucket{le=\"0.001\"} 3\nnofly_alerter_records_total_extra 9\n"
	got, err := MetricValues(text, "nofly_alerter_events_raised_total", "nofly_alerter_events_cleared_total", "nofly_alerter_missing")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["nofly_alerter_events_raised_total"] != 1523 || got["nofly_alerter_events_cleared_total"] != 1500 {
		t.Fatalf("got %v", got)
	}
	if _, err := MetricValues("nofly_x abc\n", "nofly_x"); err == nil {
		t.Error("a value that is not a number was read")
	}
}

func TestAcceptLog(t *testing.T) {
	l := newAcceptLog()
	l.add("A", 5, 100)
	l.add("A", 7, 300)
	l.add("A", 7, 900) // a re-send keeps the first time
	l.add("A", 3, 50)  // below the first seq seen
	l.add("B", 1, 0)   // accepted at the very start still counts
	other := newAcceptLog()
	other.add("C", 2, 42)
	l.merge(other)
	for _, tc := range []struct {
		drone string
		seq   int64
		want  int64
		ok    bool
	}{
		{"A", 5, 100, true}, {"A", 7, 300, true}, {"A", 3, 50, true}, {"A", 6, 0, false}, {"A", 8, 0, false},
		{"A", 4, 0, false}, {"B", 1, 1, true}, {"C", 2, 42, true}, {"D", 1, 0, false},
	} {
		got, ok := l.at(tc.drone, tc.seq)
		if got != tc.want || ok != tc.ok {
			t.Errorf("at(%s, %d) = %d, %v; want %d, %v", tc.drone, tc.seq, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTogglersCrossOneZone runs the togglers' fixes through the alerter's
// real engine over the default zone set: each toggler raises and clears
// EDDF-ATZ alone, at the first fix of each phase (a fix is inside for
// `every` fixes, then outside for as many).
func TestTogglersCrossOneZone(t *testing.T) {
	set, err := geofence.LoadFile(filepath.Join("..", "..", "testdata", "zones", "airports.geojson"))
	if err != nil {
		t.Fatal(err)
	}
	zs, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	tog := &togglers{n: 4, every: 3}
	var recs []alerts.Record
	ts := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	for range 12 {
		for _, p := range tog.step(ts) {
			recs = append(recs, alerts.Record{Offset: int64(len(recs)), Value: p.AppendJSON(nil)})
		}
		ts = ts.Add(time.Second)
	}
	out := e.Apply(zs, recs)
	var got []string
	for _, ev := range out.Events {
		got = append(got, fmt.Sprintf("%s %s %s %d", ev.DroneID, ev.Type, ev.ZoneID, ev.Seq))
	}
	// Toggler j is inside at seq s when ((s-1+j)/3) is odd.
	want := []string{
		"TGL-0001 raised EDDF-ATZ 4", "TGL-0001 cleared EDDF-ATZ 7", "TGL-0001 raised EDDF-ATZ 10",
		"TGL-0002 raised EDDF-ATZ 3", "TGL-0002 cleared EDDF-ATZ 6", "TGL-0002 raised EDDF-ATZ 9", "TGL-0002 cleared EDDF-ATZ 12",
		"TGL-0003 raised EDDF-ATZ 2", "TGL-0003 cleared EDDF-ATZ 5", "TGL-0003 raised EDDF-ATZ 8", "TGL-0003 cleared EDDF-ATZ 11",
		"TGL-0004 raised EDDF-ATZ 1", "TGL-0004 cleared EDDF-ATZ 4", "TGL-0004 raised EDDF-ATZ 7", "TGL-0004 cleared EDDF-ATZ 10",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTrafficTick(t *testing.T) {
	tr := newTraffic(50, 10, 4, 3, 0.2, 7)
	client := map[string]int{}
	lastSeq := map[string]int64{}
	ts := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	total := 0
	for k := range 5 {
		bs, n := tr.tick(ts, 0)
		if len(bs) != 3 {
			t.Fatalf("%d batches, want one per client", len(bs))
		}
		if n < 50 {
			t.Fatalf("tick %d: %d records, want one per drone at least", k, n)
		}
		seen := 0
		for c, b := range bs {
			lines := bytes.Split(bytes.TrimSuffix(b.body, []byte("\n")), []byte("\n"))
			if len(b.recs) > 0 && len(lines) != len(b.recs) {
				t.Fatalf("client %d: %d lines for %d records", c, len(lines), len(b.recs))
			}
			for i, r := range b.recs {
				var p struct {
					Drone string    `json:"drone_id"`
					Seq   int64     `json:"seq"`
					TS    time.Time `json:"ts"`
				}
				if err := json.Unmarshal(lines[i], &p); err != nil {
					t.Fatal(err)
				}
				if p.Drone != r.drone || p.Seq != r.seq || !p.TS.Equal(ts) {
					t.Fatalf("line %q is not record %+v at %v", lines[i], r, ts)
				}
				if prev, ok := client[r.drone]; ok && prev != c {
					t.Fatalf("drone %s on clients %d and %d", r.drone, prev, c)
				}
				client[r.drone] = c
				if r.seq < lastSeq[r.drone] {
					t.Fatalf("drone %s: seq %d after %d", r.drone, r.seq, lastSeq[r.drone])
				}
				lastSeq[r.drone] = r.seq
			}
			seen += len(b.recs)
		}
		if seen != n {
			t.Fatalf("batches hold %d records, tick said %d", seen, n)
		}
		total += n
		ts = ts.Add(time.Second)
	}
	if len(client) != 50 {
		t.Errorf("%d drones sent, want 50", len(client))
	}
	if total == 250 {
		t.Error("no re-send at dup rate 0.2")
	}
	if _, n := tr.tick(ts, 7); n != 7 {
		t.Errorf("tick with limit 7 gave %d records", n)
	}
}

func TestE2EConfigValidate(t *testing.T) {
	ok := E2EConfig{Rate: 5000, Duration: time.Minute, Drones: 1000, TogglerShare: 0.1, ToggleEvery: 10, Clients: 10, Partitions: 12}
	for _, tc := range []struct {
		name string
		edit func(*E2EConfig)
		bad  bool
	}{
		{"defaults", func(*E2EConfig) {}, false},
		{"flat out", func(c *E2EConfig) { c.Rate = 0 }, false},
		{"positions only", func(c *E2EConfig) { c.Duration, c.Positions = 0, 1000 }, false},
		{"no bound", func(c *E2EConfig) { c.Duration = 0 }, true},
		{"negative rate", func(c *E2EConfig) { c.Rate = -1 }, true},
		{"no drone", func(c *E2EConfig) { c.Drones = 0 }, true},
		{"no client", func(c *E2EConfig) { c.Clients = 0 }, true},
		{"share above 1", func(c *E2EConfig) { c.TogglerShare = 1.5 }, true},
		{"toggle every 0", func(c *E2EConfig) { c.ToggleEvery = 0 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if err := c.Validate(); (err != nil) != tc.bad {
				t.Fatalf("Validate = %v, want error %v", err, tc.bad)
			}
		})
	}
	if n := ok.togglers(); n != 100 {
		t.Errorf("togglers = %d, want 100", n)
	}
}

func TestLagSummary(t *testing.T) {
	l := &lagSeries{}
	start := time.Now()
	for i, v := range []int64{0, 300, 1200, 500, 80, 0} {
		l.add(start, start.Add(time.Duration(i+1)*time.Second), 1000*int64(i+1), 1000*int64(i+1)-v)
	}
	s := l.summary(3.5)
	if s.Max != 1200 || s.MaxAt != 3 || s.AtSendEnd != 500 || len(s.Series) != 6 || s.Series[1].Processed != 1700 {
		t.Fatalf("summary = %+v", s)
	}
	if got := (&lagSeries{}).summary(1); got.AtSendEnd != -1 || got.Max != 0 {
		t.Fatalf("empty summary = %+v", got)
	}
}

func sampleResult() *E2EResult {
	return &E2EResult{
		Config: E2EConfig{Rate: 5000, Duration: time.Minute, Drones: 1000, TogglerShare: 0.1, ToggleEvery: 10, Clients: 10,
			Partitions: 12, Zones: "testdata/zones/airports.geojson", Seed: 1, Command: "go run ./cmd/bench --rate 5000"},
		Machine:  Machine{CPUs: 2, GoVersion: "go1.26.0", RedisVersion: "7.0.15", LoadStart: "1.00 2.00 3.00", LoadEnd: "2.50 2.00 3.00"},
		RunID:    "bench-x1",
		Started:  time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC),
		Accepted: 300000, Requests: 3000, Produced: 300000, SendSeconds: 60, ProcessedSeconds: 60.25, EventsSeconds: 60.5,
		Answer202: Latency{N: 3000, P50: 2 * time.Millisecond, P90: 3 * time.Millisecond, P99: 7500 * time.Microsecond, Max: 40 * time.Millisecond},
		Events:    3000, AlerterEvents: 3000,
		Latency: Latency{N: 3000, Min: 8 * time.Millisecond, P50: 31250 * time.Microsecond, P90: 45 * time.Millisecond,
			P99: 80 * time.Millisecond, Max: 120 * time.Millisecond, Mean: 33 * time.Millisecond},
		Redis:                      RedisStats{Commands: 36000, Writes: 750, Reads: 900, ByCommand: map[string]int64{"evalsha": 600, "hset": 30000, "xadd": 3000}},
		RedisIdleCommandsPerSecond: 12.5,
		CPU: []ProcessCPU{{Name: "ingest", Seconds: 12, Cores: 0.2}, {Name: "alerter", Seconds: 24, Cores: 0.4},
			{Name: "kafka", Seconds: 30, Cores: 0.5, IdleCores: 0.05}, {Name: "redis", Seconds: -1}, {Name: "bench", Seconds: 6, Cores: 0.1}},
		Lag: Lag{Every: 1, Max: 1234, MaxAt: 12, AtSendEnd: 200, Series: []LagSample{{T: 1, Lag: 10}, {T: 2, Lag: 1234}, {T: 3, Lag: 0}}},
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"## nofly end to end (cmd/bench), run bench-x1\n",
		"    go run ./cmd/bench --rate 5000\n",
		"rate 5000/s, for 1m0s (whichever first); 1,000 drones: 100 togglers crossing EDDF-ATZ every 10 fixes, 900 of internal/fleet",
		"2 CPUs; load average 1.00 2.00 3.00 at the start, 2.50 2.00 3.00 at the end",
		"| positions accepted (202) | 300,000 in 60.00 s: **5,000/s** (3,000 requests) |\n",
		"| ingest's answer, request → 202 (the broker's acknowledgement included): p50 / p90 / p99 / max | 2.0 / 3.0 / 7.5 / 40.0 ms (n 3,000) |\n",
		"| processed by the alerter end to end (group lag 0) | 300,000 in 60.25 s: **4,979/s**, 0.25 s after the last 202 |\n",
		"3,000 (1.00 % of positions; the alerter committed 3,000; read twice 0; no accepted record 0), the last 0.50 s after the last 202; 0 fetches to read them",
		"| **31.2 / 45.0 / 80.0 / 120.0 ms** (n 3,000; min 8.0, mean 33.0) |\n",
		"| Redis round trips / 1,000 positions (replies written) | **2.50** (reads 3.00) |\n",
		"| 120.0; script calls 2.00; idle before: 12.5 commands/s |\n",
		"| 1,234 at 12 s / 200 |\n",
		"| ingest | 12.00 | 0.0400 | 0.20 | 0.00 |\n",
		"| kafka | 30.00 | 0.1000 | 0.50 | 0.05 |\n",
		"| redis | – | – | – | – |\n",
		"| bench (traffic and clients; not counted) | 6.00 | 0.0200 | 0.10 | 0.00 |\n",
		"| **pipeline** (ingest + alerter + kafka + redis) | 66.00 | **0.2200** | | |\n",
		"by command (INFO commandstats): hset 100.0, xadd 10.0, evalsha 2.0\n",
		"Lag over time (s: records): 1.0: 10, 2.0: 1,234, 3.0: 0\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	r := sampleResult()
	r.Latency = Latency{}
	b.Reset()
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| latency 202 → alerts.events | no event: not measured |") {
		t.Errorf("a run without events reports a latency:\n%s", b.String())
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Config struct {
			Rate     float64 `json:"rate"`
			Duration int64   `json:"duration_ns"`
			Command  string  `json:"command"`
		} `json:"config"`
		Machine struct {
			CPUs      int    `json:"nproc"`
			LoadStart string `json:"loadavg_start"`
		} `json:"machine"`
		Accepted int64 `json:"accepted"`
		Latency  struct {
			P99 int64 `json:"p99_ns"`
		} `json:"latency"`
		Redis struct {
			Writes int64 `json:"total_writes_processed"`
		} `json:"redis"`
		CPU []ProcessCPU `json:"cpu"`
		Lag struct {
			Max    int64       `json:"max"`
			Series []LagSample `json:"series"`
		} `json:"lag"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Config.Rate != 5000 || got.Config.Duration != int64(time.Minute) || got.Config.Command == "" ||
		got.Machine.CPUs != 2 || got.Machine.LoadStart != "1.00 2.00 3.00" || got.Accepted != 300000 ||
		got.Latency.P99 != int64(80*time.Millisecond) || got.Redis.Writes != 750 || len(got.CPU) != 5 ||
		got.CPU[1].Seconds != 24 || got.Lag.Max != 1234 || len(got.Lag.Series) != 3 {
		t.Fatalf("JSON read back as %+v\n%s", got, b.String())
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45000: "-45,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestStreamIDMillis(t *testing.T) {
	for id, want := range map[string]int64{"1733300000000-3": 1733300000000, "1733300000000": 1733300000000,
		"": 0, "abc-1": 0, "-5-1": 0} {
		if got := streamIDMillis(id); got != want {
			t.Errorf("streamIDMillis(%q) = %d, want %d", id, got, want)
		}
	}
}

func TestMatchEvents(t *testing.T) {
	start := time.UnixMilli(1_800_000_000_000)
	acc := newAcceptLog()
	acc.add("A", 4, int64(10*time.Millisecond))
	acc.add("B", 2, int64(20*time.Millisecond))
	ms := func(d int64) int64 { return start.UnixMilli() + d }
	f := &eventFollower{events: []seenEvent{
		{id: "a4:raised", drone: "A", seq: 4, at: int64(40 * time.Millisecond), outbox: ms(25), produced: ms(30)},
		{id: "b2:raised", drone: "B", seq: 2, at: int64(70 * time.Millisecond), outbox: ms(45), produced: ms(60)},
		{id: "a4:raised", drone: "A", seq: 4, at: int64(90 * time.Millisecond)}, // read twice
		{id: "c9:raised", drone: "C", seq: 9, at: int64(95 * time.Millisecond)}, // no accepted record
	}, polls: 7}
	r := &E2EResult{Started: start}
	r.matchEvents(f, acc)
	if r.Events != 3 || r.DuplicateEvents != 1 || r.UnmatchedEvents != 1 || r.EventPolls != 7 {
		t.Fatalf("events %d, duplicates %d, unmatched %d, polls %d", r.Events, r.DuplicateEvents, r.UnmatchedEvents, r.EventPolls)
	}
	if want := (Latency{N: 2, Min: 30 * time.Millisecond, P50: 30 * time.Millisecond, P90: 50 * time.Millisecond,
		P99: 50 * time.Millisecond, Max: 50 * time.Millisecond, Mean: 40 * time.Millisecond}); r.Latency != want {
		t.Errorf("latency %+v, want %+v", r.Latency, want)
	}
	if r.LatencyToOutbox.P50 != 15*time.Millisecond || r.LatencyToOutbox.Max != 25*time.Millisecond ||
		r.LatencyToProduced.P50 != 20*time.Millisecond || r.LatencyToProduced.Max != 40*time.Millisecond {
		t.Errorf("stages: to outbox %+v, to produced %+v", r.LatencyToOutbox, r.LatencyToProduced)
	}
}

func TestLagLine(t *testing.T) {
	var series []LagSample
	for i := range 10 {
		series = append(series, LagSample{T: float64(i), Lag: int64(i * 100)})
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{24, "0.0: 0, 1.0: 100, 2.0: 200, 3.0: 300, 4.0: 400, 5.0: 500, 6.0: 600, 7.0: 700, 8.0: 800, 9.0: 900"},
		{4, "0.0: 0, 3.0: 300, 6.0: 600, 9.0: 900"},
		{3, "0.0: 0, 4.0: 400, 9.0: 900"},
	} {
		if got := lagLine(series, tc.n); got != tc.want {
			t.Errorf("lagLine(n=%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if lagLine(nil, 5) != "" {
		t.Error("a line for no sample")
	}
}

// TestHeaderOutboxID: the benchmark reads the header the dispatcher writes.
func TestHeaderOutboxID(t *testing.T) {
	if headerOutboxID != outbox.HeaderOutboxID {
		t.Fatalf("headerOutboxID = %q, alerts/outbox writes %q", headerOutboxID, outbox.HeaderOutboxID)
	}
}
