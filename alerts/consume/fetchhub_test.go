package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestFetchHub: feeds of a shared fetch see their partition's records in
// offset order from the offset they opened at, a feed nobody reads holds
// no other partition back, a reopened feed sees nothing of the feed
// before it, and past the end a feed fails with OffsetOutOfRange. On the
// real broker and on the embedded one.
func TestFetchHub(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name    string
		brokers func(t *testing.T) []string
	}{
		{"real", func(t *testing.T) []string { return testenv.Kafka(t) }},
		{"embedded", func(t *testing.T) []string { return testenv.Embedded(t).Brokers() }},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			brokers := st.brokers(t)
			const parts, per = 4, 300
			topic := testenv.CreateTopic(t, brokers, parts)
			produceEach(t, brokers, topic, parts, 0, per)

			var lost atomic.Int64
			h := newFetchHub(nil, brokers, topic, limit, slog.Default(), func(n int64) { lost.Add(n) })
			defer h.close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			// Partition 3 is opened and never read: the others must still
			// be fetched to their end (it is left out of the fetches once
			// it holds its limit).
			idle, err := h.open(ctx, 3, 0)
			if err != nil {
				t.Fatal(err)
			}
			starts := []int64{kafka.FirstOffset, 0, 123}
			feeds := make([]*feed, 3)
			for p, s := range starts {
				if feeds[p], err = h.open(ctx, p, s); err != nil {
					t.Fatal(err)
				}
			}
			for p, f := range feeds {
				from := max(starts[p], 0)
				readExpect(ctx, t, f, p, from, per)
			}

			// More records while the feeds wait: they arrive (the long poll
			// answers them) in rounds, while the idle partition holds its
			// limit and is left out; then it is read to its end.
			for r := int64(1); r <= 3; r++ {
				produceEach(t, brokers, topic, parts, r*per, (r+1)*per)
				for p, f := range feeds {
					readExpect(ctx, t, f, p, r*per, (r+1)*per)
				}
			}
			if n := idle.held(); n < limit || n >= 4*per {
				t.Errorf("the unread feed holds %d records, want its limit %d or more but not all %d (left out of the fetches once full)", n, limit, 4*per)
			}
			readExpect(ctx, t, idle, 3, 0, 4*per)

			// Reopened at another offset: nothing of the old feed's fetches.
			h.release(feeds[1])
			again, err := h.open(ctx, 1, 450)
			if err != nil {
				t.Fatal(err)
			}
			readExpect(ctx, t, again, 1, 450, 4*per)
			h.release(again)

			// Opened twice: refused, the first keeps going.
			if _, err := h.open(ctx, 0, 0); err == nil {
				t.Error("a second feed of partition 0 was opened")
			}

			// Past the end: the feed fails as a Reader did.
			h.release(feeds[2])
			past, err := h.open(ctx, 2, 4*per+50)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := past.FetchMessage(ctx); !errors.Is(err, kafka.OffsetOutOfRange) {
				t.Errorf("feed past the end: %v, want OffsetOutOfRange", err)
			}
			if n := lost.Load(); n != 0 {
				t.Errorf("%d records reported lost, want 0", n)
			}
		})
	}
}

// TestFetchHubWakesWhenDrained: a loop whose every feed is full sleeps;
// reading a feed must wake it, or the partition stalls for good (it did,
// under the load of the whole alerterd package).
func TestFetchHubWakesWhenDrained(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	h := newFetchHub(nil, brokers, topic, limit, slog.Default(), func(int64) {})
	defer h.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := h.open(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const per = 100
	var r int64 // rounds of per records: three fill the feed
	for ; f.held() < limit; r++ {
		if r == 20 {
			t.Fatalf("the feed holds %d records after %d rounds, never full", f.held(), r)
		}
		produceOne(t, brokers, topic, r*per, (r+1)*per)
		time.Sleep(100 * time.Millisecond) // let the loop fetch the round on its own
	}
	produceOne(t, brokers, topic, r*per, (r+2)*per) // fetched only once the feed has room
	readExpect(ctx, t, f, 0, 0, (r+2)*per)
}

func produceOne(t *testing.T, brokers []string, topic string, from, to int64) {
	t.Helper()
	produceEach(t, brokers, topic, 1, from, to)
}

// limit is the tests' feed limit: 300 records a round fill it at once.
const limit = 250

// readExpect reads offsets [from, to) of partition p from f, in order,
// each with the value produceEach gave it.
func readExpect(ctx context.Context, t *testing.T, f *feed, p int, from, to int64) {
	t.Helper()
	for o := from; o < to; o++ {
		m, err := f.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("partition %d: reading offset %d: %v", p, o, err)
		}
		if want := fmt.Sprintf("p%d-%d", p, o); m.Offset != o || string(m.Value) != want {
			t.Fatalf("partition %d: got offset %d %q, want %d %q", p, m.Offset, m.Value, o, want)
		}
	}
}

// produceEach writes records [from, to) to every partition, each valued
// "p<partition>-<offset>" (the topic is new: offsets are the counts).
func produceEach(t *testing.T, brokers []string, topic string, parts int, from, to int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range parts {
		for o := from; o < to; o++ {
			recs = append(recs, &kgo.Record{Partition: int32(p), Value: fmt.Appendf(nil, "p%d-%d", p, o)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
