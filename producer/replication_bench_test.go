//go:build cluster

package producer

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkClusterReplication is the cost of the replication safeguards on
// one 3-node cluster (scripts/kafka-cluster.sh): the same producer, records
// and callers on a topic of replication factor 1 (min.insync.replicas 1)
// and on one of replication factor 3 (min.insync.replicas 2, the cluster's
// default), acks=all on both, run alternately in one process. It reports
// each side's records/s and the p50/p99 of one Produce call (benchCallSize
// records), and the ratio rf3/rf1 of the rates. The three nodes share this
// machine's cores, so replication's CPU is paid here too, as it would not
// be on three machines; the network hop between brokers is loopback.
//
//	go test -tags cluster -run '^$' -bench BenchmarkClusterReplication -benchtime 4x ./producer
func BenchmarkClusterReplication(b *testing.B) {
	const perSide = 50_000
	c := testenv.StartKafkaCluster(b)
	rf1 := testenv.UniqueName("bench-rf1")
	ctx := context.Background()
	kc := &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: 30 * time.Second}
	res, err := kc.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: rf1, NumPartitions: benchPartitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: "1"}},
	}}})
	if err == nil {
		err = res.Errors[rf1]
	}
	if err != nil {
		b.Fatalf("create %s: %v", rf1, err)
	}
	// Its leaders (kafkatopic.Ensure waits for them; the topic exists).
	if _, err := kafkatopic.Ensure(ctx, c.Brokers(), kafkatopic.Spec{Name: rf1, Partitions: benchPartitions}); err != nil {
		b.Fatal(err)
	}
	rf3 := c.CreateTopic(b, benchPartitions)
	keys, values := benchRecords(perSide)
	side := func(topic string) *timedSide {
		p := newTestProducer(b, Config{Brokers: c.Brokers(), Topic: topic, BatchMaxRecords: benchBatch, Linger: benchLinger})
		ts := &timedSide{}
		ts.send = func(ctx context.Context, from, to int) error {
			recs := make([]Record, 0, to-from)
			for i := from; i < to; i++ {
				recs = append(recs, NewRecord(keys[i], values[i]))
			}
			start := time.Now()
			err := p.Produce(ctx, recs)
			ts.mu.Lock()
			ts.calls = append(ts.calls, time.Since(start))
			ts.mu.Unlock()
			return err
		}
		return ts
	}
	one, three := side(rf1), side(rf3)
	// Warm both: connections, metadata, producer id, the topics' leaders.
	runCallers(b, 4*benchCallSize, one.send)
	runCallers(b, 4*benchCallSize, three.send)
	one.calls, three.calls = nil, nil
	b.ReportAllocs()
	b.ResetTimer()
	var d1, d3 time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			d1 += runCallers(b, perSide, one.send)
			d3 += runCallers(b, perSide, three.send)
		} else {
			d3 += runCallers(b, perSide, three.send)
			d1 += runCallers(b, perSide, one.send)
		}
	}
	b.StopTimer()
	n := float64(b.N * perSide)
	b.ReportMetric(n/d1.Seconds(), "rf1_records/s")
	b.ReportMetric(n/d3.Seconds(), "rf3_records/s")
	b.ReportMetric(d1.Seconds()/d3.Seconds(), "rf3/rf1_rate")
	b.ReportMetric(one.quantile(0.5), "rf1_p50_ms")
	b.ReportMetric(three.quantile(0.5), "rf3_p50_ms")
	b.ReportMetric(one.quantile(0.99), "rf1_p99_ms")
	b.ReportMetric(three.quantile(0.99), "rf3_p99_ms")
}

// timedSide is one side of BenchmarkClusterReplication with the duration
// of each of its Produce calls.
type timedSide struct {
	send  sendFunc
	mu    sync.Mutex
	calls []time.Duration
}

func (s *timedSide) quantile(q float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		return 0
	}
	c := slices.Clone(s.calls)
	slices.Sort(c)
	return float64(c[int(q*float64(len(c)-1))]) / float64(time.Millisecond)
}
