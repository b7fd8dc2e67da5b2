package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// testLogger logs warnings and errors only, so test output stays readable.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testEvent is an event in the dedup store's shape.
func testEvent(i int) (eventID string, body []byte) {
	eventID = fmt.Sprintf("ev-%06d", i)
	typ := "raised"
	if i%2 == 1 {
		typ = "cleared"
	}
	body, _ = json.Marshal(map[string]any{
		"event_id": eventID, "alarm_id": fmt.Sprintf("al-%06d", i/2), "type": typ,
		"drone_id": fmt.Sprintf("UAV-%04d", i%37), "zone_id": "LHR", "category": "restricted",
		"seq": i, "ts": "2026-12-02T10:15:03.250Z", "lat": 51.4706, "lon": -0.4619,
		"partition": 1, "offset": i,
	})
	return eventID, body
}

// appendEvents XADDs events [from, from+n) to the outbox of k, as the dedup
// store does, and returns their stream ids.
func appendEvents(ctx context.Context, rdb redis.UniversalClient, k redislayout.Keys, from, n int) ([]string, error) {
	ids := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		evID, body := testEvent(i)
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: redislayout.Entry{EventID: evID, Event: body}.Values()}).Result()
		if err != nil {
			return ids, fmt.Errorf("xadd: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// runDispatcher runs partition in a new Dispatcher of cfg (no Kafka
// output) until stop, which waits for Run and fails the test if it failed.
// The test's cleanup stops it too.
func runDispatcher(t *testing.T, cfg Config, rdb redis.UniversalClient, partition int) (stop func()) {
	t.Helper()
	d, err := NewDispatcher(cfg, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, partition) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// partitionRecords reads every committed record of topic/partition, up to
// the last stable offset, as a read_committed consumer sees them.
func partitionRecords(ctx context.Context, brokers []string, topic string, partition int) ([]kafka.Record, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	recs, err := r.ReadAll(ctx, partition)
	if err != nil {
		return nil, err
	}
	out := make([]kafka.Record, len(recs))
	for i, rec := range recs {
		var key kafka.Bytes
		if rec.Key != nil {
			key = kafka.NewBytes(rec.Key)
		}
		out[i] = kafka.Record{Offset: rec.Offset, Key: key, Value: kafka.NewBytes(rec.Value), Headers: rec.Headers}
	}
	return out, nil
}

func header(r kafka.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func readAll(r interface{ Read([]byte) (int, error) }) []byte {
	if r == nil {
		return nil
	}
	b, _ := io.ReadAll(r)
	return b
}

// metricValue reads one sample of a registry, 0 when absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name, partition, output string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			var p, o string
			for _, l := range m.Label {
				switch l.GetName() {
				case "partition":
					p = l.GetValue()
				case "output":
					o = l.GetValue()
				}
			}
			if p != partition || o != output {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			if m.Gauge != nil {
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// checkKafkaPartition asserts that partition holds exactly the events whose
// stream ids are ids, once each, in order, with key, value and headers.
func checkKafkaPartition(t *testing.T, brokers []string, topic string, partition int, ids []string, firstEvent int) {
	t.Helper()
	recs, err := partitionRecords(context.Background(), brokers, topic, partition)
	if err != nil {
		t.Fatalf("read %s/%d: %v", topic, partition, err)
	}
	if len(recs) != len(ids) {
		seen := make(map[string]int)
		dups := 0
		for _, r := range recs {
			seen[header(r, HeaderOutboxID)]++
			if seen[header(r, HeaderOutboxID)] == 2 {
				dups++
			}
		}
		t.Fatalf("partition %d holds %d records, want %d (%d ids duplicated)", partition, len(recs), len(ids), dups)
	}
	for i, r := range recs {
		evID, body := testEvent(firstEvent + i)
		var ev struct {
			DroneID string `json:"drone_id"`
		}
		_ = json.Unmarshal(body, &ev)
		switch {
		case header(r, HeaderOutboxID) != ids[i]:
			t.Fatalf("record %d: outbox id %q, want %q", i, header(r, HeaderOutboxID), ids[i])
		case header(r, HeaderEventID) != evID:
			t.Fatalf("record %d: event id %q, want %q", i, header(r, HeaderEventID), evID)
		case string(readAll(r.Value)) != string(body):
			t.Fatalf("record %d: value %s, want %s", i, readAll(r.Value), body)
		case string(readAll(r.Key)) != ev.DroneID:
			t.Fatalf("record %d: key %q, want %q", i, readAll(r.Key), ev.DroneID)
		}
	}
}
