package producer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("PRODUCER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func newTestProducer(t testing.TB, cfg Config) *Producer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// fetched is one record read back from the log.
type fetched struct {
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kafka.Header
	Time      time.Time
}

// readAllRecords reads every record of topic with kafka-go's Client.Fetch,
// partition by partition, up to the high watermark seen at the start.
func readAllRecords(t testing.TB, brokers []string, topic string, partitions int) []fetched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A transport of its own: kafka-go's shared DefaultTransport may hold a
	// metadata snapshot from before the topic was created.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 20 * time.Second, Transport: tr}
	var out []fetched
	for pt := 0; pt < partitions; pt++ {
		offs, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(pt)}}})
		if err != nil {
			t.Fatalf("list offsets of partition %d: %v", pt, err)
		}
		last := offs.Topics[topic][0].LastOffset
		for next := int64(0); next < last; {
			res, err := c.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: pt, Offset: next, MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 200 * time.Millisecond})
			if err == nil {
				err = res.Error
			}
			if err != nil {
				t.Fatalf("fetch partition %d at %d: %v", pt, next, err)
			}
			for {
				r, err := res.Records.ReadRecord()
				if err != nil {
					break
				}
				if r.Offset < next {
					continue // a fetch returns whole batches
				}
				out = append(out, fetched{Partition: pt, Offset: r.Offset, Key: readBytes(t, r.Key), Value: readBytes(t, r.Value), Headers: r.Headers, Time: r.Time})
				next = r.Offset + 1
			}
		}
	}
	return out
}

func readBytes(t testing.TB, b protocol.Bytes) []byte {
	t.Helper()
	if b == nil {
		return nil
	}
	out := make([]byte, b.Len())
	if _, err := io.ReadFull(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProduceRoundTrip(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 3)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []Record
	for i := 0; i < 1000; i++ {
		recs = append(recs, NewRecord([]byte(fmt.Sprintf("drone-%d", i%17)), []byte(fmt.Sprintf("v%d", i))))
	}
	start := time.Now()
	if err := p.Produce(ctx, recs); err != nil {
		t.Fatal(err)
	}
	t.Logf("produce took %v", time.Since(start))
	start = time.Now()
	got := readAllRecords(t, brokers, topic, 3)
	t.Logf("read took %v", time.Since(start))
	if len(got) != len(recs) {
		t.Fatalf("read %d records, produced %d", len(got), len(recs))
	}
	seen := make(map[string]int)
	for _, r := range got {
		if want := p.part.partition(r.Key); r.Partition != want {
			t.Errorf("record %s in partition %d, murmur2 says %d", r.Key, r.Partition, want)
		}
		seen[string(r.Value)]++
	}
	for i := 0; i < 1000; i++ {
		if n := seen[fmt.Sprintf("v%d", i)]; n != 1 {
			t.Errorf("v%d found %d times", i, n)
		}
	}
	st := p.Stats()
	if st.Records != 1000 || st.ProducerID < 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestKafkaGoInitProducerIDOnRealBroker checks, against the real broker,
// kafka-go's own Client.InitProducerID for an idempotent producer (no
// transactional id, producer id and epoch -1). kafka-go routes it through a
// FindCoordinator lookup for the empty transactional id; Kafka 4.4 answers
// that, and hands out an id. The producer does not depend on it (it sends
// InitProducerId to a broker directly), but if this breaks, the trap in
// doc.go has changed.
func TestKafkaGoInitProducerIDOnRealBroker(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
	res, err := c.InitProducerID(ctx, &kafka.InitProducerIDRequest{ProducerID: -1, ProducerEpoch: -1})
	if err != nil || res.Error != nil {
		t.Fatalf("kafka-go InitProducerID: %v / %+v", err, res)
	}
	if res.Producer.ProducerID < 0 || res.Producer.ProducerEpoch != 0 {
		t.Fatalf("kafka-go InitProducerID: %+v", res.Producer)
	}
}
