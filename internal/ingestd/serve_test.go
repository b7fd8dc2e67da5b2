package ingestd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestServeRealKafka: records POSTed to the intake are in the topic with
// key = drone_id, value = canonical JSON, time = the receive time, in the partition the
// Java client's murmur2 partitioner picks, in request order per drone.
func TestServeRealKafka(t *testing.T) {
	brokers := testenv.Kafka(t)
	const partitions = 6
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	cfg.Topic = testenv.UniqueName("ingest-serve") // created by the service itself
	cfg.Partitions = partitions
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{cfg.Topic}})
	})
	rs := startService(t, cfg)

	var sent []telemetry.Position
	before := time.Now().Truncate(time.Millisecond) // Kafka's record time is in ms
	for req := range 5 {
		var ps []telemetry.Position
		for d := range 20 {
			for s := range 3 {
				ps = append(ps, position(fmt.Sprintf("UAV-%03d", d), req*3+s))
			}
		}
		code, _, err := postNDJSON(context.Background(), http.DefaultClient, rs.url, ps)
		if err != nil || code != http.StatusAccepted {
			t.Fatalf("request %d: %d %v", req, code, err)
		}
		sent = append(sent, ps...)
	}
	after := time.Now()

	msgs := readTopic(t, brokers, cfg.Topic, partitions)
	if len(msgs) != len(sent) {
		t.Fatalf("topic holds %d records, %d were accepted", len(msgs), len(sent))
	}
	want := map[string]telemetry.Position{}
	for _, p := range sent {
		want[fmt.Sprintf("%s/%d", p.DroneID, p.Seq)] = p
	}
	lastSeq := map[string]int64{}
	partitionsOf := map[int]bool{}
	for _, m := range msgs {
		got, err := telemetry.Decode(m.Value)
		if err != nil {
			t.Fatalf("offset %d of partition %d: %v", m.Offset, m.Partition, err)
		}
		p, ok := want[fmt.Sprintf("%s/%d", got.DroneID, got.Seq)]
		if !ok {
			t.Fatalf("unexpected record %s", m.Value)
		}
		delete(want, fmt.Sprintf("%s/%d", got.DroneID, got.Seq))
		if string(m.Key) != p.DroneID {
			t.Errorf("key %q, want %q", m.Key, p.DroneID)
		}
		if w := p.AppendJSON(nil); string(m.Value) != string(w) {
			t.Errorf("value %s, want %s", m.Value, w)
		}
		if m.Time.Before(before) || m.Time.After(after) {
			t.Errorf("%s/%d: time %v, want the receive time, in [%v, %v] (ts %v)", p.DroneID, p.Seq, m.Time, before, after, p.TS)
		}
		all := make([]int, partitions)
		for i := range all {
			all[i] = i
		}
		if wp := (kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: m.Key}, all...); m.Partition != wp {
			t.Errorf("%s in partition %d, murmur2 says %d", p.DroneID, m.Partition, wp)
		}
		if last, ok := lastSeq[p.DroneID]; ok && p.Seq <= last {
			t.Errorf("%s: seq %d after %d: out of order", p.DroneID, p.Seq, last)
		}
		lastSeq[p.DroneID] = p.Seq
		partitionsOf[m.Partition] = true
	}
	if len(want) != 0 {
		t.Errorf("%d accepted records missing", len(want))
	}
	if len(partitionsOf) < 2 {
		t.Errorf("20 drones all in %d partition(s)", len(partitionsOf))
	}
	if err := rs.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestServeWrongPartitionCount: an existing topic with another partition
// count stops the service with an error naming the variable.
func TestServeWrongPartitionCount(t *testing.T) {
	brokers := testenv.Kafka(t)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.Addr = brokers, testenv.CreateTopic(t, brokers, 2), 3, "127.0.0.1:0"
	svc, err := newService(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = svc.run(ctx)
	if !errors.Is(err, errPartitionCount) {
		t.Fatalf("run returned %v, want the partition count error", err)
	}
	for _, want := range []string{"has 2 partitions, want 3", "NOFLY_TELEMETRY_PARTITIONS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// holdProducer blocks every Produce until release is closed, and records
// the order of Produce returning and Close.
type holdProducer struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	events  []string
	n       atomic.Int64
}

func (h *holdProducer) Produce(ctx context.Context, recs []producer.Record) error {
	h.entered <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: ctx.Err()}}}
	}
	h.n.Add(int64(len(recs)))
	h.event("produced")
	return nil
}

func (h *holdProducer) event(e string) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *holdProducer) Stats() producer.Stats { return producer.Stats{Records: h.n.Load()} }

func (h *holdProducer) Close(context.Context) error { h.event("closed"); return nil }

// TestGracefulShutdown: a request in flight when shutdown begins gets its
// 202 after its Produce returns; the producer is closed after that; new
// connections are refused.
func TestGracefulShutdown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	svc, err := newService(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	hp := &holdProducer{entered: make(chan struct{}, 1), release: make(chan struct{})}
	svc.dial = func(context.Context) (kafkaProducer, error) { return hp, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx) }()
	url := "http://" + svc.Addr()
	testenv.CheckFor(t, 10*time.Second, func() error {
		if svc.prod.get() == nil {
			return errors.New("not connected")
		}
		return nil
	})

	type answer struct {
		code int
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		code, _, err := postNDJSON(context.Background(), http.DefaultClient, url, []telemetry.Position{position("A", 1), position("A", 2)})
		got <- answer{code, err}
	}()
	<-hp.entered // the request is in Produce
	cancel()     // SIGTERM
	testenv.CheckFor(t, 10*time.Second, func() error {
		if _, err := http.Get(url + "/healthz"); err == nil {
			return errors.New("still accepting connections")
		}
		return nil
	})
	select {
	case a := <-got:
		t.Fatalf("in-flight request answered %d %v before its Produce returned", a.code, a.err)
	case err := <-done:
		t.Fatalf("run returned %v with a request in flight", err)
	default:
	}
	close(hp.release)
	if a := <-got; a.err != nil || a.code != http.StatusAccepted {
		t.Fatalf("in-flight request: %d %v, want 202", a.code, a.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if fmt.Sprint(hp.events) != "[produced closed]" {
		t.Fatalf("events %v, want [produced closed]", hp.events)
	}
	if l := svc.api.Limits(); l.MaxRecords != cfg.MaxRecords || l.MaxBodyBytes != cfg.MaxBodyBytes || l.MaxLineBytes != cfg.MaxLineBytes {
		t.Fatalf("limits %+v, config %+v", l, cfg)
	}
}

// TestKafkaUnreachable: with no broker the process is live, not ready, and
// answers intake requests 503 with Retry-After; it keeps trying to connect.
func TestKafkaUnreachable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}
	cfg.RetryAfter = 3 * time.Second
	svc, err := newService(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx) }()
	url := "http://" + svc.Addr()
	tests := []struct {
		name, method, path string
		wantCode           int
		wantRetryAfter     string
	}{
		{"live", http.MethodGet, "/healthz", 200, ""},
		{"not ready", http.MethodGet, "/readyz", 503, ""},
		{"intake 503", http.MethodPost, "/v1/telemetry", 503, "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var code int
			var h http.Header
			if tt.method == http.MethodPost {
				code, h, err = postNDJSON(context.Background(), http.DefaultClient, url, []telemetry.Position{position("A", 1)})
			} else {
				var res *http.Response
				res, err = http.Get(url + tt.path)
				if err == nil {
					code, h = res.StatusCode, res.Header
					res.Body.Close()
				}
			}
			if err != nil || code != tt.wantCode || h.Get("Retry-After") != tt.wantRetryAfter {
				t.Fatalf("%s %s: %d %v Retry-After %q; want %d %q", tt.method, tt.path, code, err, h.Get("Retry-After"), tt.wantCode, tt.wantRetryAfter)
			}
		})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
