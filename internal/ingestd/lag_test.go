package ingestd

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// gauges returns the values of the registry's gauge family name by
// "group/partition" (or "" for an unlabelled gauge).
func gauges(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			k := ""
			for _, l := range m.GetLabel() {
				if k != "" {
					k += "/"
				}
				k += l.GetValue()
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestLagWatcher: on the real broker, the lag of each group that committed
// offsets on the topic, in records and in the age of its oldest record not
// committed (from the records' Kafka timestamps), a partition never
// committed counted from its first record, groups of other topics left
// out; and Kafka down reads as nofly_ingest_kafka_up 0 with no lag shown.
func TestLagWatcher(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 2)
	other := testenv.CreateTopic(t, brokers, 1)
	tr := &kafka.Transport{MetadataTTL: time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	produce := func(topic string, p int, ages ...int) {
		t.Helper()
		var recs []kafka.Record
		for _, a := range ages {
			recs = append(recs, kafka.Record{Time: now.Add(-time.Duration(a) * time.Second), Value: kafka.NewBytes([]byte(`{}`))})
		}
		// (Retried: a transport's metadata may not know a new topic yet.)
		testenv.CheckFor(t, 20*time.Second, func() error {
			res, err := c.Produce(ctx, &kafka.ProduceRequest{Topic: topic, Partition: p, RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
			if err == nil {
				err = res.Error
			}
			return err
		})
	}
	produce(topic, 0, 60, 50, 40) // offsets 0..2
	produce(topic, 1, 30, 20)     // offsets 0..1
	produce(other, 0, 10)
	commit := func(group, topic string, offs map[int]int64) {
		t.Helper()
		var oc []kafka.OffsetCommit
		for p, o := range offs {
			oc = append(oc, kafka.OffsetCommit{Partition: p, Offset: o})
		}
		res, err := c.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1,
			Topics: map[string][]kafka.OffsetCommit{topic: oc}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ps := range res.Topics {
			for _, p := range ps {
				if p.Error != nil {
					t.Fatal(p.Error)
				}
			}
		}
	}
	behind, half, elsewhere := testenv.UniqueName("lag-behind"), testenv.UniqueName("lag-half"), testenv.UniqueName("lag-elsewhere")

	reg := prometheus.NewRegistry()
	// Watched: the three groups and one that never commits; any other
	// group of the shared broker is not asked about.
	w := newLagWatcher(c, topic, []string{behind, half, elsewhere, testenv.UniqueName("lag-never")}, reg, testLogger(t))
	w.now = func() time.Time { return now }
	start := time.Now()
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("one poll of the shared broker: %v", time.Since(start))
	if got := gauges(t, reg, "nofly_ingest_kafka_up"); got[""] != 1 {
		t.Fatalf("kafka_up %v, want 1", got)
	}
	if got := gauges(t, reg, "nofly_ingest_consumer_lag_records"); len(got) != 0 {
		t.Fatalf("lag before any group committed on the topic: %v", got)
	}

	commit(behind, topic, map[int]int64{0: 1, 1: 2}) // p0: offsets 1, 2 to go (the oldest 50 s old); p1 at the end
	commit(half, topic, map[int]int64{0: 3})         // p0 at the end; p1 never committed: both of its records
	commit(elsewhere, other, map[int]int64{0: 0})    // another topic's consumer
	// OffsetFetch answers from the coordinator's cache at once; ListGroups
	// may list a group a moment after its first commit.
	testenv.CheckFor(t, 30*time.Second, func() error {
		if err := w.poll(ctx); err != nil {
			return err
		}
		recs := gauges(t, reg, "nofly_ingest_consumer_lag_records")
		secs := gauges(t, reg, "nofly_ingest_consumer_lag_seconds")
		want := map[string][2]float64{
			behind + "/0": {2, 50}, behind + "/1": {0, 0},
			half + "/0": {0, 0}, half + "/1": {2, 30},
		}
		for k, v := range want {
			if recs[k] != v[0] || secs[k] != v[1] {
				return fmt.Errorf("%s: %v records, %v s behind; want %v, %v (all: %v, %v)", k, recs[k], secs[k], v[0], v[1], recs, secs)
			}
		}
		for k := range recs {
			if strings.HasPrefix(k, elsewhere+"/") {
				return fmt.Errorf("a group of another topic measured: %s", k)
			}
		}
		return nil
	})

	// The group catches up: its series read 0 (not removed: it still
	// consumes the topic).
	commit(behind, topic, map[int]int64{0: 3})
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gauges(t, reg, "nofly_ingest_consumer_lag_seconds")[behind+"/0"]; got != 0 {
		t.Fatalf("caught up, still %v s behind", got)
	}

	// Kafka away: up 0, no lag series left.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	w.client = &kafka.Client{Addr: kafka.TCP(dead), Timeout: time.Second}
	if err := w.poll(ctx); err == nil {
		t.Fatal("a poll of a closed port succeeded")
	}
	if got := gauges(t, reg, "nofly_ingest_kafka_up"); got[""] != 0 {
		t.Fatalf("kafka_up %v with Kafka away, want 0", got)
	}
	if got := gauges(t, reg, "nofly_ingest_consumer_lag_seconds"); len(got) != 0 {
		t.Fatalf("lag series left with Kafka away: %v", got)
	}
}
