package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
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
// API over the pipeline's keys, each keeping the id (cursor) of every event
// it reads, in order.
type sseClients struct {
	ts     *httptest.Server
	rdb    *redis.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	counts []atomic.Int64
	ids    [][]byte // client i's ids, each ended by '\n'; read after close
	errs   chan error
	closed sync.Once
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
	c := &sseClients{ts: httptest.NewServer(s.Handler()), rdb: rdb, counts: make([]atomic.Int64, n),
		ids: make([][]byte, n), errs: make(chan error, n)}
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
			// Keep each frame's id in whole reads with a byte scan, as
			// cheaply as a client can: the clients share the process and
			// the machine with the alerter. A frame is "id: <cursor>\n",
			// then event and data lines (no raw newline in the JSON), then
			// an empty line, so "\nid: " only begins an id line.
			buf := make([]byte, 256<<10)
			carry, first := 0, true
			for {
				k, err := res.Body.Read(buf[carry:])
				if k > 0 && first {
					first = false
					ready <- struct{}{}
				}
				chunk := buf[:carry+k]
				pos, found := 0, int64(0)
				rest := -1 // start of an id line not complete in chunk
				for {
					j := bytes.Index(chunk[pos:], sseIDLine)
					if j < 0 {
						break
					}
					from := pos + j + len(sseIDLine)
					e := bytes.IndexByte(chunk[from:], '\n')
					if e < 0 {
						rest = pos + j
						break
					}
					c.ids[i] = append(c.ids[i], chunk[from:from+e+1]...)
					found++
					pos = from + e // the '\n' ending the id line: never one before "id: "
				}
				c.counts[i].Add(found)
				if rest < 0 {
					rest = max(pos, len(chunk)-len(sseIDLine)+1) // may begin a split "\nid: "
				}
				if len(chunk)-rest > len(buf)/2 {
					c.errs <- fmt.Errorf("SSE client %d: an id line longer than %d bytes", i, len(buf)/2)
					return
				}
				carry = copy(buf, chunk[rest:])
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

var sseIDLine = []byte("\nid: ")

// waitAll waits until every client i read as many events as want(i) holds,
// closes the clients, then checks that each read exactly want(i): the same
// cursors in the same order (so no gap, no repeat, no reordering).
func (c *sseClients) waitAll(b *testing.B, want func(i int) []byte) {
	deadline := time.Now().Add(60 * time.Second)
	for i := range c.counts {
		n := int64(bytes.Count(want(i), []byte("\n")))
		for c.counts[i].Load() < n {
			if time.Now().After(deadline) {
				b.Fatalf("SSE client %d read %d of %d events", i, c.counts[i].Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	c.close()
	select {
	case err := <-c.errs:
		b.Fatal(err)
	default:
	}
	for i := range c.ids {
		if w := want(i); !bytes.Equal(c.ids[i], w) {
			b.Fatalf("SSE client %d read %d events, not the %d of GET /v1/events in order: at %s (live: GET, replay: stream)",
				i, bytes.Count(c.ids[i], []byte("\n")), bytes.Count(w, []byte("\n")), firstDiff(w, c.ids[i]))
		}
	}
}

// expected returns, from GET /v1/events of the same API (outbox reads,
// not the hub), every event's cursor, each ended by '\n', and its zone. It
// reads after the streams' start: every partition at 0-0 (they began on
// empty outboxes), a cursor of version 1 with a zero id per partition.
func (c *sseClients) expected(b *testing.B, partitions int) (all []byte, zones []string) {
	start := binary.AppendUvarint([]byte{1}, uint64(partitions))
	start = append(start, make([]byte, 2*partitions)...)
	after := "&after=" + base64.RawURLEncoding.EncodeToString(start)
	for {
		res, err := http.Get(c.ts.URL + "/v1/events?limit=10000" + after)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("GET /v1/events: %s %v %s", res.Status, err, body)
		}
		lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
		if len(body) == 0 {
			return all, zones
		}
		var ev struct {
			Cursor string `json:"cursor"`
			ZoneID string `json:"zone_id"`
		}
		for _, l := range lines {
			if err := json.Unmarshal(l, &ev); err != nil {
				b.Fatal(err)
			}
			all = append(append(all, ev.Cursor...), '\n')
			zones = append(zones, ev.ZoneID)
		}
		after = "&after=" + url.QueryEscape(ev.Cursor)
	}
}

func (c *sseClients) close() {
	c.closed.Do(func() {
		c.cancel()
		c.ts.CloseClientConnections()
		c.wg.Wait()
		c.ts.Close()
		_ = c.rdb.Close()
	})
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
		all, zoneOfEvent := clients.expected(b, p.partitions)
		if len(zoneOfEvent) != len(p.outbox()) {
			b.Fatalf("GET /v1/events gave %d events, the outboxes hold %d", len(zoneOfEvent), len(p.outbox()))
		}
		perZone := map[string][]byte{}
		for k, line := range bytes.SplitAfter(all, []byte("\n"))[:len(zoneOfEvent)] {
			perZone[zoneOfEvent[k]] = append(perZone[zoneOfEvent[k]], line...)
		}
		clients.waitAll(b, func(i int) []byte {
			if oneZone {
				return perZone[zoneOf(i)]
			}
			return all
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
