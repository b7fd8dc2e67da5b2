package ingestd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nofly-dev/nofly/feeds/mavlink"
	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/internal/httpserve/hostiletest"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
	"github.com/nofly-dev/nofly/telemetry"
)

// The hostile-client suite of issue 26 against ingest: each test is one
// attack on the real `ingest serve` (and the MAVLink relay), with the
// numbers that show it no longer works.

// hostileService starts ingest on a real topic with the server's timeouts
// short enough to watch them act.
func hostileService(t *testing.T, mod func(*Config)) *runningService {
	t.Helper()
	brokers := testenv.Kafka(t)
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	cfg.Topic = testenv.CreateTopic(t, brokers, 3)
	cfg.Partitions = 3
	cfg.ProduceTimeout = 2 * time.Second
	cfg.HTTPReadHeaderTimeout, cfg.HTTPReadTimeout = time.Second, 3*time.Second
	cfg.LogLevel = "warn"
	if mod != nil {
		mod(&cfg)
	}
	return startService(t, cfg)
}

func hostOf(url string) string { return url[len("http://"):] }

// TestHostileMadeUpMethodsDoNotGrowMetrics: 5,000 requests with made-up
// methods, and to made-up paths, leave the number of request series
// where it was.
func TestHostileMadeUpMethodsDoNotGrowMetrics(t *testing.T) {
	rs := hostileService(t, nil)
	metrics := rs.url + "/metrics"
	paths := []string{"/v1/telemetry", "/v1/telemetry/rid", "/healthz", "/no/such/route"}
	for _, p := range paths {
		hostiletest.MadeUpMethods(t, rs.url+p, 5)
	}
	if res, err := http.Get(rs.url + "/v1/x"); err == nil { // the series of a made-up path's 404
		res.Body.Close()
	}
	hostiletest.Series(t, metrics, "nofly_ingest_")
	before := hostiletest.Series(t, metrics, "nofly_ingest_")
	for _, p := range paths {
		hostiletest.MadeUpMethods(t, rs.url+p, 1250)
	}
	for i := range 500 { // and made-up paths
		res, err := http.Get(fmt.Sprintf("%s/v1/x%d", rs.url, i))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	after := hostiletest.Series(t, metrics, "nofly_ingest_")
	t.Logf("ingest series: %d before 5,000 made-up methods and 500 made-up paths, %d after", before, after)
	if before == 0 || after != before {
		t.Fatalf("ingest series %d before, %d after: want the same, not 0", before, after)
	}
}

// slowBodiesHeapBound is the most the live heap may grow while 500
// bodies that declare the 8 MiB limit and never come are held: a buffer
// grown up to ingest.MaxPreGrow for each, and 32 MB for the rest (500 ×
// 8 MiB = 4 GiB before issue 26).
const slowBodiesHeapBound = 500*ingest.MaxPreGrow + 32<<20

// TestHostileSlowBodiesAreClosed: 500 telemetry bodies that declare the
// body limit and never finish, and 100 headers that never end, are closed
// within the read (header) timeout and a little, hold no more memory than
// they sent (slowBodiesHeapBound), while a feed's request is accepted
// (202) beside them.
func TestHostileSlowBodiesAreClosed(t *testing.T) {
	rs := hostileService(t, nil)
	addr := hostOf(rs.url)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := sampleLiveHeap()
	bodies := hostiletest.SlowBodies(t, addr, "POST", "/v1/telemetry", int(rs.cfg.MaxBodyBytes), "Content-Type: application/x-ndjson")
	headers := hostiletest.Slowloris(t, addr, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, _, err := postNDJSON(ctx, http.DefaultClient, rs.url, []telemetry.Position{position("UAV-1", 1), position("UAV-1", 2)})
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("a feed's request beside the attack: %d %v", code, err)
	}
	lastBody, answers := bodies.Closed(t, rs.cfg.HTTPReadTimeout+hostiletest.Slack)
	lastHeader, _ := headers.Closed(t, rs.cfg.HTTPReadHeaderTimeout+hostiletest.Slack)
	grew := int64(peak()) - int64(base.HeapAlloc)
	t.Logf("500 slow bodies of %d bytes declared closed within %v (read timeout %v), answers %v; 100 slow headers within %v (header timeout %v); live heap grew %.1f MB at most (bound %.1f MB)",
		rs.cfg.MaxBodyBytes, lastBody, rs.cfg.HTTPReadTimeout, answers, lastHeader, rs.cfg.HTTPReadHeaderTimeout, float64(grew)/1e6, float64(slowBodiesHeapBound)/1e6)
	if grew > slowBodiesHeapBound {
		t.Errorf("the live heap grew by %.1f MB while the bodies were held, more than %.1f MB", float64(grew)/1e6, float64(slowBodiesHeapBound)/1e6)
	}
}

// sampleLiveHeap samples the live heap (as of each GC) every few
// milliseconds until the returned function is called, which returns the
// peak.
func sampleLiveHeap() func() uint64 {
	stop, done := make(chan struct{}), make(chan struct{})
	var peak uint64
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak
	}
}

// TestHostileConnectionCap: with the cap's connections held, one more is
// answered 503 too_many_connections in ingest's error shape and closed;
// the producer's Kafka connections are not in the count, so once a slot
// frees a feed's request is accepted.
func TestHostileConnectionCap(t *testing.T) {
	const capConns = 50
	rs := hostileService(t, func(c *Config) {
		c.HTTPMaxConns = capConns
		c.HTTPReadHeaderTimeout, c.HTTPReadTimeout = time.Minute, time.Minute // held connections stay held
	})
	addr := hostOf(rs.url)
	held := hostiletest.Hold(t, addr, capConns)
	testenv.CheckFor(t, 30*time.Second, func() error {
		res, body := hostiletest.Refused(t, addr, "/healthz")
		var e struct{ Error, Code string }
		if res.StatusCode != 503 || json.Unmarshal(body, &e) != nil || e.Error == "" || e.Code != "too_many_connections" ||
			res.Header.Get("Retry-After") == "" || !res.Close {
			return fmt.Errorf("over the cap: %d %v %s", res.StatusCode, res.Header, body)
		}
		return nil
	})
	held.CloseFirst(1)
	testenv.CheckFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		code, _, err := postNDJSON(ctx, c, rs.url, []telemetry.Position{position("UAV-2", 1)})
		if err != nil {
			return err
		}
		if code != http.StatusAccepted {
			return fmt.Errorf("status %d once a slot is free", code)
		}
		return nil
	})
}

// stuckProducer never acknowledges: Kafka lagging for ever.
type stuckProducer struct{}

func (stuckProducer) Produce(ctx context.Context, _ []producer.Record) error {
	<-ctx.Done()
	return ctx.Err()
}
func (stuckProducer) Close(context.Context) error { return nil }

// TestHostileMAVLinkStateIsBounded: MAVLink datagrams from 20 sources
// naming every system id, while Kafka never acknowledges, leave the relay
// with one clock per system id (256 at most, whatever the sources) and its
// queue at its capacity; the positions past it are counted as dropped,
// not held.
func TestHostileMAVLinkStateIsBounded(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := mavlink.NewDecoder("ops")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := &mavRelay{conn: conn, dec: dec, p: stuckProducer{}, log: testLogger(t), m: newMavMetrics(reg),
		batch: 10, linger: time.Millisecond, shutdown: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	value := func(name, label string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if label == "" || labelIs(m, label) {
					if m.Counter != nil {
						return m.Counter.GetValue()
					}
					return m.Gauge.GetValue()
				}
			}
		}
		return -1
	}
	const sources, rounds = 20, 2
	sent := 0
	for src := range sources {
		c, err := net.Dial("udp", conn.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		for round := range rounds {
			for sys := range 256 {
				sendGPI(t, c, uint8(round), uint8(sys), mavlink.GlobalPositionInt{TimeBootMS: uint32(1000 * (src*rounds + round + 1)),
					Lat: 514700000, Lon: -4610000, Alt: 85250, RelativeAlt: 40100, Hdg: 27000})
				sent++
			}
			// Paced by the relay: a socket buffer that overflows would drop
			// datagrams before the relay sees them.
			testenv.CheckFor(t, 30*time.Second, func() error {
				if n := value("nofly_mavlink_datagrams_total", ""); n != float64(sent) {
					return fmt.Errorf("%v of %d datagrams read", n, sent)
				}
				return nil
			})
		}
		c.Close()
	}
	queued := queueBatches * r.batch
	dropped := value("nofly_mavlink_positions_total", "queue_full")
	t.Logf("%d datagrams from %d sources: %d vehicles, %v positions dropped with the queue (%d) full", sent, sources, dec.Vehicles(), dropped, queued)
	if dec.Vehicles() != 256 || value("nofly_mavlink_vehicles", "") != 256 {
		t.Errorf("%d vehicles known, want 256 (one per system id)", dec.Vehicles())
	}
	// What the queue and the one batch in Produce hold; the rest dropped.
	if held := float64(sent) - dropped; held < float64(queued) || held > float64(queued+r.batch) {
		t.Errorf("%v positions held, want the queue's %d and at most a batch more", held, queued)
	}
}

func labelIs(m *dto.Metric, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == v {
			return true
		}
	}
	return false
}
