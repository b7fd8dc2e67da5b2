package alerterd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestRecordsLostToRetentionAreReported: Redis says offset 2 was applied,
// but Kafka has deleted offsets up to 5 (retention, or Redis restored from
// an older backup). kafka-go's reader would move to offset 6 without a
// word; the alerter must count the 3 records whose alarms were never
// decided, and apply the rest. On the real broker and the embedded one.
func TestRecordsLostToRetentionAreReported(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name  string
		start func(t *testing.T) ([]string, string)
	}{
		{"real", func(t *testing.T) ([]string, string) { return testenv.Kafka(t), testenv.Redis(t) }},
		{"embedded", func(t *testing.T) ([]string, string) {
			s := testenv.Embedded(t)
			return s.Brokers(), s.RedisAddr()
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			brokers, raddr := st.start(t)
			p := newPipeline(t, brokers, raddr, 1).withEvents()
			now := time.Now().UTC().Truncate(time.Second)
			var recs []telemetry.Position
			for i := range 10 {
				recs = append(recs, telemetry.Position{DroneID: fmt.Sprintf("R-%d", i), Seq: 1, TS: now, Lat: 10, Lon: 10})
			}
			p.produce(recs)
			ctx := context.Background()
			if _, err := p.store().Commit(ctx, 0, dedup.NoVersion, dedup.Batch{Applied: 2}); err != nil {
				t.Fatal(err)
			}
			deleteRecordsBefore(t, brokers, p.topic, 6)

			ix, err := loadZones(zonesPath())
			if err != nil {
				t.Fatal(err)
			}
			var zones geofence.Current
			zones.Store(ix)
			m := p.startMember("a", &zones)
			testenv.CheckFor(t, 60*time.Second, p.caughtUp)
			if got := m.counter(t, "nofly_alerter_records_lost_to_retention_total"); got != 3 {
				t.Errorf("records lost to retention = %v, want 3 (offsets 3, 4, 5)", got)
			}
			if got := m.g.Processed(); got != 4 {
				t.Errorf("processed %d records, want 4 (offsets 6 to 9)", got)
			}
		})
	}
}

// deleteRecordsBefore moves partition 0's log start to offset (DeleteRecords,
// as retention does).
func deleteRecordsBefore(t *testing.T, brokers []string, topic string, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shards := cl.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			t.Fatalf("delete records: %v", sh.Err)
		}
		for _, tp := range sh.Resp.(*kmsg.DeleteRecordsResponse).Topics {
			for _, pp := range tp.Partitions {
				if pp.ErrorCode != 0 || pp.LowWatermark != offset {
					t.Fatalf("delete records: partition %d error %d, low watermark %d, want %d", pp.Partition, pp.ErrorCode, pp.LowWatermark, offset)
				}
			}
		}
	}
}
