package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// sseClients is a set of GET /v1/events/stream clients of an in-process
// API over the pipeline's keys, each counting the events it reads.
type sseClients struct {
	ts     *httptest.Server
	rdb    *redis.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	counts []atomic.Int64
	errs   chan error
}

// connectSSE starts the API on the pipeline's keys and connects n streams
// (at new events; stream i with query(i)), returning once each got its
// first comment.
func connectSSE(b *testing.B, p *pipeline, n int, query func(i int) string) *sseClients {
	rdb := redis.NewClient(&redis.Options{Addr: p.redisAddr, ClientName: "bench-api"})
	s, err := api.New(api.Options{Redis: rdb, Prefix: p.prefix, Topic: p.topic, Partitions: p.partitions,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	c := &sseClients{ts: httptest.NewServer(s.Handler()), rdb: rdb, counts: make([]atomic.Int64, n), errs: make(chan error, n)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	ready := make(chan struct{}, n)
	for i := range n {
		c.wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.ts.URL+"/v1/events/stream?"+query(i), nil)
			res, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				c.errs <- err
				ready <- struct{}{}
				return
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				c.errs <- fmt.Errorf("stream: %s", res.Status)
				ready <- struct{}{}
				return
			}
			// Count the frames' "id: " lines in whole reads, as cheaply as a
			// client can: the clients share the machine with the alerter.
			buf := make([]byte, 256<<10)
			var carry []byte
			first := true
			for {
				k, err := res.Body.Read(buf[len(carry):])
				if k > 0 && first {
					first = false
					ready <- struct{}{}
				}
				chunk := buf[:len(carry)+k]
				c.counts[i].Add(int64(bytes.Count(chunk, []byte("\nid: "))))
				// Keep the tail that may begin a split "\nid: ".
				tail := chunk[max(0, len(chunk)-4):]
				carry = buf[:copy(buf, tail)]
				if err != nil {
					if ctx.Err() == nil && err != io.EOF {
						c.errs <- err
					}
					return
				}
			}
		})
	}
	for range n {
		<-ready
	}
	select {
	case err := <-c.errs:
		b.Fatal(err)
	default:
	}
	return c
}

// waitAll waits until every client i read want(i) events.
func (c *sseClients) waitAll(b *testing.B, want func(i int) int64) {
	deadline := time.Now().Add(60 * time.Second)
	for i := range c.counts {
		want := want(i)
		for c.counts[i].Load() < want {
			if time.Now().After(deadline) {
				b.Fatalf("SSE client %d read %d of %d events", i, c.counts[i].Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if n := c.counts[i].Load(); n != want {
			b.Fatalf("SSE client %d read %d events, the outboxes hold %d", i, n, want)
		}
	}
}

func (c *sseClients) close() {
	c.cancel()
	c.ts.CloseClientConnections()
	c.wg.Wait()
	c.ts.Close()
	_ = c.rdb.Close()
}

// runAlerterWithSSE runs an alerter (own group and prefix) with n SSE
// clients of the API connected, timing from the moment it joined the
// group until it applied every record; every client must then read every
// event.
func runAlerterWithSSE(b *testing.B, p *pipeline, total int64, n int, oneZone bool) (time.Duration, cpuSample) {
	p.group = testenv.UniqueName("bench")
	p.prefix = testenv.RedisPrefix(b, "bench")
	cfg := p.config()
	cfg.Batch = 500
	cfg.Linger = 20 * time.Millisecond
	ix, err := loadZones(cfg.Zones)
	if err != nil {
		b.Fatal(err)
	}
	zoneOf := func(i int) string { return ix.Zones()[i%len(ix.Zones())].ID }
	var clients *sseClients
	if n > 0 {
		clients = connectSSE(b, p, n, func(i int) string {
			if oneZone {
				return "zone=" + url.QueryEscape(zoneOf(i))
			}
			return ""
		})
		defer clients.close()
	}
	rc := newRedisClient(cfg.RedisAddr, "bench")
	defer rc.Close()
	var zones geofence.Current
	zones.Store(ix)
	a, err := consume.New(cfg.groupOptions(rc, &zones, slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !a.Joined() {
		<-tick.C
	}
	began, c0 := time.Now(), sampleCPU(p.rc)
	for a.Processed() < total {
		<-tick.C
	}
	took, cpu := time.Since(began), sampleCPU(p.rc).sub(c0)
	if err := p.caughtUp(); err != nil {
		b.Fatal(err)
	}
	if clients != nil {
		perZone := map[string]int64{}
		all := p.outbox()
		for _, e := range all {
			var ev struct {
				ZoneID string `json:"zone_id"`
			}
			if err := json.Unmarshal(e, &ev); err != nil {
				b.Fatal(err)
			}
			perZone[ev.ZoneID]++
		}
		clients.waitAll(b, func(i int) int64 {
			if oneZone {
				return perZone[zoneOf(i)]
			}
			return int64(len(all))
		})
	}
	return took, cpu
}

// BenchmarkAlerterSSEClients: the alerter flat out over a topic already
// filled, with 0 and with 100 clients of GET /v1/events/stream connected
// to an API in the same process (one hub reading the outboxes), alternating
// in the same run. Issue 11's target: ratio (records/s with 100 clients
// over records/s without) ≥ 0.95. all-events: every client reads every
// event; one-zone-each: client i follows zone i mod 48 (zone=).
func BenchmarkAlerterSSEClients(b *testing.B) {
	brokers, raddr := testenv.Kafka(b), testenv.Redis(b)
	recs := scenario.Generate(scenario.Config{Seed: 1, Drones: 400, Positions: 500, DupRate: 0.04, StaleRate: 0.01}).Records
	p := &pipeline{t: b, brokers: brokers, redisAddr: raddr, partitions: 12, topic: testenv.CreateTopic(b, brokers, 12)}
	p.rc = redis.NewClient(&redis.Options{Addr: raddr})
	defer p.rc.Close()
	if err := p.produceErr(recs); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		oneZone bool
	}{{"all-events", false}, {"one-zone-each", true}} {
		b.Run(tc.name, func(b *testing.B) { benchSSEClients(b, p, recs, tc.oneZone) })
	}
}

func benchSSEClients(b *testing.B, p *pipeline, recs []telemetry.Position, oneZone bool) {
	p.t = b
	const clients = 100
	var without, with time.Duration
	var events int
	var pairs []float64
	var cpu0, cpu100 cpuSample // while the alerter ran, clients' reads included
	for i := 0; i < b.N; i++ {
		// Alternate the order: the machine is shared and its load drifts.
		var d0, d100 time.Duration
		for j := range 2 {
			if (i+j)%2 == 0 {
				var c cpuSample
				d0, c = runAlerterWithSSE(b, p, int64(len(recs)), 0, oneZone)
				cpu0 = cpu0.add(c)
			} else {
				var c cpuSample
				d100, c = runAlerterWithSSE(b, p, int64(len(recs)), clients, oneZone)
				cpu100 = cpu100.add(c)
				events = len(p.outbox())
			}
		}
		without, with = without+d0, with+d100
		pairs = append(pairs, d0.Seconds()/d100.Seconds())
	}
	slices.Sort(pairs)
	n := float64(len(recs) * b.N)
	b.ReportMetric(n/without.Seconds(), "records/s_0_clients")
	b.ReportMetric(n/with.Seconds(), "records/s_100_clients")
	// Rate with the clients over the rate without: of the totals, and the
	// median of the pairs (each pair back to back, less exposed to drift).
	b.ReportMetric(without.Seconds()/with.Seconds(), "ratio")
	b.ReportMetric(pairs[len(pairs)/2], "median_pair_ratio")
	b.ReportMetric(float64(events), "events/run")
	b.ReportMetric(float64(cpu0.self.Milliseconds())/float64(b.N), "go_cpu_ms/run_0")
	b.ReportMetric(float64(cpu100.self.Milliseconds())/float64(b.N), "go_cpu_ms/run_100")
	b.ReportMetric(float64(cpu0.redis.Milliseconds())/float64(b.N), "redis_cpu_ms/run_0")
	b.ReportMetric(float64(cpu100.redis.Milliseconds())/float64(b.N), "redis_cpu_ms/run_100")
}
