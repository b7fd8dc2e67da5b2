package alerterd

import (
	"bufio"
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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// it reads, in order. The clients run in this process, or in a child
// process (this test binary, whose TestMain runs sseClientChild) so that their
// reads are not this process's CPU nor its garbage; the child still shares
// the machine.
type sseClients struct {
	ts     *httptest.Server
	rdb    *redis.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	counts []atomic.Int64
	ids    [][]byte // client i's ids, each ended by '\n'; read after close
	errs   chan error
	closed sync.Once

	child    *exec.Cmd // with the clients in a child process
	childIn  io.WriteCloser
	childDir string
	childOut lockedBuffer // its stdout and stderr
	childCPU time.Duration
}

// Environment of the child process of the clients.
const (
	sseChildURL     = "NOFLY_BENCH_SSE_URL"     // the API
	sseChildQueries = "NOFLY_BENCH_SSE_QUERIES" // one stream's query a line
	sseChildDir     = "NOFLY_BENCH_SSE_DIR"     // where client i writes its ids, file i
	sseChildIDsCap  = "NOFLY_BENCH_SSE_IDS_CAP" // bytes of ids a client makes room for
	sseChildReady   = "sse-clients: ready"
)

// connectSSE starts the API on the pipeline's keys and connects n streams
// (at new events; stream i with query(i)), in this process or in a child,
// returning once each got its first comment.
func connectSSE(b *testing.B, p *pipeline, n int, query func(i int) string, child bool, idsCap int) *sseClients {
	rdb := redis.NewClient(&redis.Options{Addr: p.redisAddr, ClientName: "bench-api"})
	// All n streams are the one anonymous token's (no token file): the
	// per-token cap is raised to them.
	s, err := api.New(api.Options{Redis: rdb, Prefix: p.prefix, Topic: p.topic, Partitions: p.partitions,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		MaxStreamsPerToken: max(n, api.DefaultMaxStreamsPerToken), MaxStreams: max(n, api.DefaultMaxStreams)})
	if err != nil {
		b.Fatal(err)
	}
	c := &sseClients{ts: httptest.NewServer(s.Handler()), rdb: rdb, counts: make([]atomic.Int64, n),
		ids: make([][]byte, n), errs: make(chan error, n)}
	if child {
		c.startChild(b, n, query, idsCap)
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	ready := make(chan struct{}, n)
	for i := range n {
		c.wg.Go(func() {
			c.ids[i] = make([]byte, 0, idsCap)
			err := streamIDs(ctx, &http.Client{Transport: tr}, c.ts.URL+"/v1/events/stream?"+query(i),
				func() { ready <- struct{}{} }, &c.counts[i], &c.ids[i])
			if err != nil {
				c.errs <- fmt.Errorf("SSE client %d: %w", i, err)
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

// streamIDs reads one stream until ctx ends, appending each frame's id and
// a '\n' to *ids (made large enough before: no growth while the alerter
// runs) and counting them in count; ready is called once, on the
// first read (the ": connected" comment) or on failure. It keeps the ids
// with a byte scan of whole reads, as cheaply as a client can: in-process
// clients share the process and the machine with the alerter. A frame is
// "id: <cursor>\n", then event and data lines (no raw newline in the
// JSON), then an empty line, so "\nid: " only begins an id line.
func streamIDs(ctx context.Context, hc *http.Client, url string, ready func(), count *atomic.Int64, ids *[]byte) error {
	first := true
	defer func() {
		if first {
			ready()
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("stream: %s", res.Status)
	}
	buf := make([]byte, 64<<10)
	carry := 0
	for {
		k, err := res.Body.Read(buf[carry:])
		if k > 0 && first {
			first = false
			ready()
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
			*ids = append(*ids, chunk[from:from+e+1]...)
			found++
			pos = from + e // the '\n' ending the id line: never one before "id: "
		}
		count.Add(found)
		if rest < 0 {
			rest = max(pos, len(chunk)-len(sseIDLine)+1) // may begin a split "\nid: "
		}
		if len(chunk)-rest > len(buf)/2 {
			return fmt.Errorf("an id line longer than %d bytes", len(buf)/2)
		}
		carry = copy(buf, chunk[rest:])
		if err != nil {
			if ctx.Err() != nil || err == io.EOF {
				return nil
			}
			return err
		}
	}
}

var sseIDLine = []byte("\nid: ")

// startChild runs the clients in a child process and waits until they are
// all connected.
func (c *sseClients) startChild(b *testing.B, n int, query func(i int) string, idsCap int) {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = query(i)
	}
	c.childDir = b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), sseChildURL+"="+c.ts.URL, sseChildQueries+"="+strings.Join(qs, "\n"),
		sseChildDir+"="+c.childDir, sseChildIDsCap+"="+strconv.Itoa(idsCap))
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = &c.childOut
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c.child, c.childIn = cmd, in
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == sseChildReady {
			go func() { _, _ = io.Copy(&c.childOut, out) }()
			return
		}
		_, _ = c.childOut.Write([]byte(sc.Text() + "\n"))
	}
	_ = cmd.Wait()
	b.Fatalf("SSE client process ended before its clients connected:\n%s", c.childOut.String())
}

// lockedBuffer gets the child's stderr (from exec's copy) and stdout (from
// ours, which may still run when it is read).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sseClientChild is the child process of the benchmark's clients
// (connectSSE with child; TestMain runs it instead of the tests when
// NOFLY_BENCH_SSE_URL is set): it connects a stream per line of
// NOFLY_BENCH_SSE_QUERIES, says it is ready, reads from stdin how many
// events each stream must read, waits for them (60 s at most), then writes
// stream i's ids to file i.
func sseClientChild(base string) error {
	qs := strings.Split(os.Getenv(sseChildQueries), "\n")
	n := len(qs)
	idsCap, err := strconv.Atoi(os.Getenv(sseChildIDsCap))
	if err != nil {
		return err
	}
	counts, ids := make([]atomic.Int64, n), make([][]byte, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ready := make(chan struct{}, n)
	for i := range n {
		ids[i] = make([]byte, 0, idsCap)
		wg.Go(func() {
			if err := streamIDs(ctx, &http.Client{Transport: tr}, base+"/v1/events/stream?"+qs[i],
				func() { ready <- struct{}{} }, &counts[i], &ids[i]); err != nil {
				errs <- fmt.Errorf("SSE client %d: %w", i, err)
			}
		})
	}
	for range n {
		<-ready
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Println(sseChildReady)
	var want []int64
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the counts: %w", err)
	}
	for _, f := range strings.Fields(line) {
		k, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return err
		}
		want = append(want, k)
	}
	if len(want) != n {
		return fmt.Errorf("%d counts for %d streams", len(want), n)
	}
	deadline := time.Now().Add(60 * time.Second)
	for i := range counts {
		for counts[i].Load() < want[i] {
			if time.Now().After(deadline) {
				return fmt.Errorf("SSE client %d read %d of %d events", i, counts[i].Load(), want[i])
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	dir := os.Getenv(sseChildDir)
	for i := range ids {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), ids[i], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// waitAll waits until every client i read as many events as want(i) holds,
// closes the clients, then checks that each read exactly want(i): the same
// cursors in the same order (so no gap, no repeat, no reordering).
func (c *sseClients) waitAll(b *testing.B, want func(i int) []byte) {
	counts := make([]string, len(c.counts))
	for i := range c.counts {
		counts[i] = strconv.Itoa(bytes.Count(want(i), []byte("\n")))
	}
	if c.child != nil {
		if _, err := io.WriteString(c.childIn, strings.Join(counts, " ")+"\n"); err != nil {
			b.Fatal(err)
		}
		err := c.child.Wait()
		c.childCPU = c.child.ProcessState.UserTime() + c.child.ProcessState.SystemTime()
		if err != nil {
			b.Fatalf("SSE client process: %v\n%s", err, c.childOut.String())
		}
		for i := range c.ids {
			var err error
			if c.ids[i], err = os.ReadFile(filepath.Join(c.childDir, strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		deadline := time.Now().Add(60 * time.Second)
		for i := range c.counts {
			n, _ := strconv.ParseInt(counts[i], 10, 64)
			for c.counts[i].Load() < n {
				if time.Now().After(deadline) {
					b.Fatalf("SSE client %d read %d of %d events", i, c.counts[i].Load(), n)
				}
				time.Sleep(5 * time.Millisecond)
			}
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
		if c.child != nil {
			_ = c.childIn.Close()
			if c.child.ProcessState == nil {
				_ = c.child.Process.Kill()
				_ = c.child.Wait()
			}
		} else {
			c.cancel()
		}
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
func runAlerterWithSSE(b *testing.B, p *pipeline, total int64, n int, oneZone, child bool) (took time.Duration, cpu cpuSample, childCPU time.Duration) {
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
	// Room for the ids a client reads (3,517 events, cursors of ≈ 65 bytes).
	idsCap := 4096 * 72
	if oneZone {
		idsCap = 256 * 72
	}
	if n > 0 {
		clients = connectSSE(b, p, n, func(i int) string {
			if oneZone {
				return "zone=" + url.QueryEscape(zoneOf(i))
			}
			return ""
		}, child, idsCap)
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
	took, cpu = time.Since(began), sampleCPU(p.rc).sub(c0)
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
		childCPU = clients.childCPU
	}
	return took, cpu, childCPU
}

// BenchmarkAlerterSSEClients: the alerter flat out over a topic already
// filled, with 0 and with 100 clients of GET /v1/events/stream connected
// to an API in the same process (one hub reading the outboxes), alternating
// in the same run. Issue 11's target: ratio (records/s with 100 clients
// over records/s without) ≥ 0.95. all-events: every client reads every
// event; one-zone-each: client i follows zone i mod 48 (zone=). The
// clients are in the alerter's process, or (…-clients-in-child) in a child
// process on the same machine: their reads are then not the alerter's CPU
// nor garbage, but they still take the same 2 cores.
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
		name           string
		oneZone, child bool
	}{
		{"all-events", false, false}, {"one-zone-each", true, false},
		{"all-events-clients-in-child", false, true}, {"one-zone-each-clients-in-child", true, true},
	} {
		b.Run(tc.name, func(b *testing.B) { benchSSEClients(b, p, recs, tc.oneZone, tc.child) })
	}
}

func benchSSEClients(b *testing.B, p *pipeline, recs []telemetry.Position, oneZone, child bool) {
	p.t = b
	const clients = 100
	var without, with, childCPU time.Duration
	var events int
	var pairs []float64
	var cpu0, cpu100 cpuSample // while the alerter ran, in-process clients' reads included
	for i := 0; i < b.N; i++ {
		// Alternate the order: the machine is shared and its load drifts.
		var d0, d100 time.Duration
		for j := range 2 {
			if (i+j)%2 == 0 {
				var c cpuSample
				d0, c, _ = runAlerterWithSSE(b, p, int64(len(recs)), 0, oneZone, child)
				cpu0 = cpu0.add(c)
			} else {
				var c cpuSample
				var cc time.Duration
				d100, c, cc = runAlerterWithSSE(b, p, int64(len(recs)), clients, oneZone, child)
				cpu100, childCPU = cpu100.add(c), childCPU+cc
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
	// median and range of the pairs (each pair back to back, less exposed
	// to drift).
	b.ReportMetric(without.Seconds()/with.Seconds(), "ratio")
	b.ReportMetric(pairs[len(pairs)/2], "median_pair_ratio")
	b.ReportMetric(pairs[0], "min_pair_ratio")
	b.ReportMetric(pairs[len(pairs)-1], "max_pair_ratio")
	b.ReportMetric(float64(events), "events/run")
	b.ReportMetric(float64(cpu0.self.Milliseconds())/float64(b.N), "go_cpu_ms/run_0")
	b.ReportMetric(float64(cpu100.self.Milliseconds())/float64(b.N), "go_cpu_ms/run_100")
	b.ReportMetric(float64(cpu0.redis.Milliseconds())/float64(b.N), "redis_cpu_ms/run_0")
	b.ReportMetric(float64(cpu100.redis.Milliseconds())/float64(b.N), "redis_cpu_ms/run_100")
	if child {
		// The whole life of the child: connecting, the run, the wait.
		b.ReportMetric(float64(childCPU.Milliseconds())/float64(b.N), "client_proc_cpu_ms/run")
	}
}
