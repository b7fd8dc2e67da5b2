package producer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// batchSizes collects the record counts of the batches one producer had
// acknowledged.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (s *batchSizes) add(n int) {
	s.mu.Lock()
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
}

func (s *batchSizes) take() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sizes
	s.sizes = nil
	return out
}

// OnProduceBatchWritten makes batchSizes a franz-go hook.
func (s *batchSizes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	s.add(m.NumRecords)
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProduceLinger runs, alternately in one process against one
// topic, our producer with AlwaysLinger (every call waits out the 5 ms
// linger: the behaviour before it became an option), our producer by
// default (a waiting caller's records go out once queued), kafka-go's
// Writer and franz-go's ProduceSync (which stops lingering once a call's
// records are queued), all at linger 5 ms, acks=all, 6 partitions, 4
// callers x 500 records. It reports each side's records/s, Go CPU per
// record (the whole process's, while that side ran) and records per
// acknowledged batch (mean and p50; the Writer's mean from its Stats).
func BenchmarkProduceLinger(b *testing.B) {
	const perSide = 100_000
	brokers := testenv.Kafka(b)
	topic := testenv.CreateTopic(b, brokers, benchPartitions)
	keys, values := benchRecords(perSide)
	records := func(from, to int) []Record {
		recs := make([]Record, 0, to-from)
		for i := from; i < to; i++ {
			recs = append(recs, NewRecord(keys[i], values[i]))
		}
		return recs
	}

	type side struct {
		name  string
		send  sendFunc
		sizes *batchSizes
		stats func() (records, batches int64) // when sizes is nil
		d     time.Duration
		cpu   time.Duration
		all   []int
		n     int
	}
	ours := func(name string, always bool) *side {
		s := &side{name: name, sizes: &batchSizes{}}
		cfg := WithBatchAcked(Config{Brokers: brokers, Topic: topic, BatchMaxRecords: benchBatch,
			Linger: benchLinger, AlwaysLinger: always}, s.sizes.add)
		p := newTestProducer(b, cfg)
		s.send = func(ctx context.Context, from, to int) error { return p.Produce(ctx, records(from, to)) }
		return s
	}
	sides := []*side{ours("linger", true), ours("ours", false)}

	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchSize: benchBatch, BatchBytes: 1_000_000,
		BatchTimeout: benchLinger, Transport: &kafka.Transport{},
	}
	b.Cleanup(func() { w.Close() })
	var wBase kafka.WriterStats
	sides = append(sides, &side{name: "writer",
		send: func(ctx context.Context, from, to int) error {
			msgs := make([]kafka.Message, 0, to-from)
			for i := from; i < to; i++ {
				msgs = append(msgs, kafka.Message{Key: keys[i], Value: values[i]})
			}
			return w.WriteMessages(ctx, msgs...)
		},
		stats: func() (int64, int64) {
			st := w.Stats() // counters since the last call
			wBase.Messages += st.Messages
			wBase.Writes += st.Writes
			return wBase.Messages, wBase.Writes
		},
	})

	kSizes := &batchSizes{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(benchLinger), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.WithHooks(kSizes))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	sides = append(sides, &side{name: "kgo_sync", sizes: kSizes,
		send: func(ctx context.Context, from, to int) error {
			rs := make([]*kgo.Record, 0, to-from)
			for i := from; i < to; i++ {
				rs = append(rs, &kgo.Record{Key: keys[i], Value: values[i]})
			}
			return cl.ProduceSync(ctx, rs...).FirstErr()
		},
	})

	// Warm up: connections, metadata, producer ids.
	for _, s := range sides {
		runCallers(b, 2*benchCallSize, s.send)
		if s.sizes != nil {
			s.sizes.take()
		} else {
			s.stats()
		}
	}
	var wRec0, wBat0 int64
	for _, s := range sides {
		if s.stats != nil {
			wRec0, wBat0 = s.stats()
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range sides {
			s := sides[(i+k)%len(sides)] // rotate who goes first
			c0 := cpuTime()
			s.d += runCallers(b, perSide, s.send)
			s.cpu += cpuTime() - c0
			s.n += perSide
			if s.sizes != nil {
				s.all = append(s.all, s.sizes.take()...)
			}
		}
	}
	b.StopTimer()
	rate := map[string]float64{}
	for _, s := range sides {
		rate[s.name] = float64(s.n) / s.d.Seconds()
		b.ReportMetric(rate[s.name], s.name+"_records/s")
		b.ReportMetric(float64(s.cpu.Nanoseconds())/float64(s.n), s.name+"_cpu_ns/record")
		if s.sizes != nil {
			slices.Sort(s.all)
			sum := 0
			for _, n := range s.all {
				sum += n
			}
			if len(s.all) > 0 {
				b.ReportMetric(float64(sum)/float64(len(s.all)), s.name+"_batch_mean")
				b.ReportMetric(float64(s.all[len(s.all)/2]), s.name+"_batch_p50")
			}
		} else {
			recs, bats := s.stats()
			if bats > wBat0 {
				b.ReportMetric(float64(recs-wRec0)/float64(bats-wBat0), s.name+"_batch_mean")
			}
		}
	}
	b.ReportMetric(rate["ours"]/rate["linger"], "ours/linger")
	b.ReportMetric(rate["ours"]/rate["writer"], "ours/writer")
	b.ReportMetric(rate["ours"]/rate["kgo_sync"], "ours/kgo_sync")
	if testing.Verbose() {
		for _, s := range sides {
			fmt.Printf("%s: %d records in %v, %d batches\n", s.name, s.n, s.d.Round(time.Millisecond), len(s.all))
		}
	}
}
