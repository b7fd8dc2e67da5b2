package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestBrokerUnreachableIsErrBrokerUnavailable: what the ingest service turns
// into 503. While the broker cannot be reached, Produce fails after the
// delivery timeout with ErrBrokerUnavailable for every record; once it is
// back, the producer carries on and nothing is in the log twice.
func TestBrokerUnreachableIsErrBrokerUnavailable(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 2)
	proxy := newDropProxy(0)
	defer proxy.Close()
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, Dial: proxy.Dial,
		DeliveryTimeout: time.Second, RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond})
	recs := func(prefix string) []Record {
		out := make([]Record, 6)
		for i := range out {
			out[i] = NewRecord([]byte(fmt.Sprintf("UAV-%d", i)), []byte(fmt.Sprintf("%s-%d", prefix, i)))
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Produce(ctx, recs("up")); err != nil {
		t.Fatal(err)
	}

	proxy.setDown(true)
	err := p.Produce(ctx, recs("down"))
	var pe *ProduceError
	if !errors.As(err, &pe) || len(pe.Records) != 6 || !errors.Is(err, ErrBrokerUnavailable) || !Retriable(err) {
		t.Fatalf("want ErrBrokerUnavailable for all 6 records, got %v", err)
	}

	proxy.setDown(false)
	if err := p.Produce(ctx, recs("again")); err != nil {
		t.Fatalf("after the broker came back: %v", err)
	}
	seen := make(map[string]int)
	for _, r := range readAllRecords(t, brokers, topic, 2) {
		seen[string(r.Value)]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s is in the log %d times", v, n)
		}
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct records in the log, want 12 (up and again)", len(seen))
	}
	t.Logf("stats %+v", p.Stats())
}

// TestNewWithoutBrokerIsErrBrokerUnavailable: New cannot reach any broker.
func TestNewWithoutBrokerIsErrBrokerUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := New(ctx, Config{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}, Topic: "t", Logger: testLogger(t)})
	if !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("want ErrBrokerUnavailable, got %v", err)
	}
}
