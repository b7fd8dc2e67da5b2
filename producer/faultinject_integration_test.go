package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/segmentio/kafka-go"
)

// The seeds' scenario: the broker writes a batch, the ACK is lost, the
// producer retries. 50,000 telemetry records go through a proxy that drops
// the response of every 10th produce request, first with kafka-go's plain
// Writer (duplicates expected), then with our producer (none, none missing).
const (
	faultRecords    = 50_000
	faultDrones     = 50
	faultPartitions = 6
	faultCallSize   = 1000 // records per Produce / WriteMessages call, like an HTTP request
	faultBatch      = 100  // records per batch, both producers
	faultDropEvery  = 10
)

type telemetryKey struct {
	DroneID string `json:"drone_id"`
	Seq     int    `json:"seq"`
}

func faultValue(drone string, seq int) []byte {
	b, _ := json.Marshal(map[string]any{"drone_id": drone, "seq": seq, "ts": "2026-12-02T10:15:03.250Z", "lat": 51.4706, "lon": -0.4619, "alt_m": 85.0})
	return b
}

// faultData returns the records in the order a fleet would send them.
func faultData() (keys, values [][]byte) {
	for i := 0; i < faultRecords; i++ {
		drone := fmt.Sprintf("UAV-%04d", i%faultDrones)
		keys = append(keys, []byte(drone))
		values = append(values, faultValue(drone, i/faultDrones))
	}
	return keys, values
}

// countLog reads the topic back and counts records per (drone_id, seq).
func countLog(t *testing.T, brokers []string, topic string) (dups, missing int) {
	t.Helper()
	seen := make(map[telemetryKey]int)
	for _, r := range readAllRecords(t, brokers, topic, faultPartitions) {
		var k telemetryKey
		if err := json.Unmarshal(r.Value, &k); err != nil {
			t.Fatalf("record at %d/%d: %v", r.Partition, r.Offset, err)
		}
		seen[k]++
	}
	for _, n := range seen {
		dups += n - 1
	}
	for i := 0; i < faultRecords; i++ {
		if seen[telemetryKey{fmt.Sprintf("UAV-%04d", i%faultDrones), i / faultDrones}] == 0 {
			missing++
		}
	}
	return dups, missing
}

func TestFaultInjectionPlainWriterDuplicates(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, faultPartitions)
	proxy := newDropProxy(faultDropEvery)
	defer proxy.Close()

	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, // a Writer literal defaults to acks=none
		MaxAttempts:  20,
		BatchSize:    faultBatch,
		BatchTimeout: 5 * time.Millisecond,
		Transport:    &kafka.Transport{Dial: proxy.Dial},
	}
	defer w.Close()

	keys, values := faultData()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for start := 0; start < faultRecords; start += faultCallSize {
		msgs := make([]kafka.Message, 0, faultCallSize)
		for i := start; i < start+faultCallSize; i++ {
			msgs = append(msgs, kafka.Message{Key: keys[i], Value: values[i]})
		}
		// At-least-once: a call that failed is sent again, as a feed would.
		for attempt := 0; ; attempt++ {
			err := w.WriteMessages(ctx, msgs...)
			if err == nil {
				break
			}
			if attempt == 5 || ctx.Err() != nil {
				t.Fatalf("writer call at %d: %v", start, err)
			}
		}
	}
	dups, missing := countLog(t, brokers, topic)
	t.Logf("plain kafka-go Writer (acks=all, MaxAttempts 20): %d duplicates, %d missing of %d records; proxy dropped %d of %d produce responses",
		dups, missing, faultRecords, proxy.dropped.Load(), proxy.produces.Load())
	if proxy.dropped.Load() == 0 {
		t.Fatal("the proxy dropped no response: the test did not test anything")
	}
	if dups == 0 {
		t.Fatal("the plain Writer wrote no duplicates although responses were dropped")
	}
	if missing != 0 {
		t.Errorf("the plain Writer lost %d records", missing)
	}
}

func TestFaultInjectionIdempotentProducerExactlyOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, faultPartitions)
	proxy := newDropProxy(faultDropEvery)
	defer proxy.Close()

	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, Dial: proxy.Dial, BatchMaxRecords: faultBatch})
	keys, values := faultData()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for start := 0; start < faultRecords; start += faultCallSize {
		recs := make([]Record, 0, faultCallSize)
		for i := start; i < start+faultCallSize; i++ {
			recs = append(recs, NewRecord(keys[i], values[i]))
		}
		if err := p.Produce(ctx, recs); err != nil {
			t.Fatalf("Produce at %d: %v", start, err)
		}
	}
	st := p.Stats()
	dups, missing := countLog(t, brokers, topic)
	t.Logf("idempotent producer: %d duplicates, %d missing of %d records; proxy dropped %d of %d produce responses; stats %+v",
		dups, missing, faultRecords, proxy.dropped.Load(), proxy.produces.Load(), st)
	if proxy.dropped.Load() == 0 {
		t.Fatal("the proxy dropped no response: the test did not test anything")
	}
	if dups != 0 || missing != 0 {
		t.Fatalf("want 0 duplicates and 0 missing, got %d and %d", dups, missing)
	}
	if st.Retries == 0 || st.Duplicates == 0 {
		t.Errorf("stats should show the retries and the duplicates the broker dropped: %+v", st)
	}
	if st.Records != faultRecords || st.Failed != 0 || st.EpochBumps != 0 {
		t.Errorf("stats %+v", st)
	}
}
