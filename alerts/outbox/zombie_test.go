package outbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// TestKafkaTwoWriters runs two dispatchers on the same partition at once (a
// zombie beside the new owner) against the real broker, for as long as the
// outbox keeps growing. They fence each other in turn through the
// partition's transactional id; whichever starts last reads the committed
// tail first, so a read_committed reader sees every event exactly once, in
// outbox order, and both writers are seen to be fenced.
func TestKafkaTwoWriters(t *testing.T) {
	brokers := testenv.Kafka(t)
	rdb := testenv.RedisClient(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	const total = 2000
	prefix := testenv.RedisPrefix(t, "outbox")
	k := redislayout.Of(prefix, "t", 0)
	ctx := context.Background()
	t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(kafkaOutputName)) })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	var regs []*prometheus.Registry
	for range 2 {
		reg := prometheus.NewRegistry()
		regs = append(regs, reg)
		cfg := Config{Prefix: prefix, Topic: "t", BatchSize: 20, Block: 20 * time.Millisecond,
			Backoff: 50 * time.Millisecond, BackoffMax: 2 * time.Second, Registerer: reg, Logger: testLogger()}
		d, err := NewDispatcher(cfg, rdb, NewKafkaOutput(brokers, topic, producer.Config{Logger: testLogger()}))
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- d.Run(runCtx, 0) }()
	}
	var ids []string
	tick := time.NewTicker(5 * time.Millisecond)
	for i := 0; i < total; i += 10 {
		<-tick.C
		more, err := appendEvents(ctx, rdb, k, i, 10)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, more...)
	}
	tick.Stop()
	last := ids[len(ids)-1]
	testenv.CheckFor(t, 60*time.Second, func() error {
		recs, err := partitionRecords(ctx, brokers, topic, 0)
		if err != nil {
			return err
		}
		if len(recs) == 0 || header(recs[len(recs)-1], HeaderOutboxID) != last {
			return errors.New("not drained yet")
		}
		return nil
	})
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	recs, err := partitionRecords(ctx, brokers, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]int)
	var order []string
	for _, r := range recs {
		id := header(r, HeaderOutboxID)
		if seen[id] == 0 {
			order = append(order, id)
		}
		seen[id]++
	}
	if fmt.Sprint(order) != fmt.Sprint(ids) {
		t.Fatalf("first appearances are not the outbox in order: %d distinct of %d", len(order), len(ids))
	}
	dups := len(recs) - len(ids)
	fenced := 0.0
	for _, reg := range regs {
		fenced += metricValue(t, reg, "nofly_outbox_fenced_total", "0", "kafka")
	}
	t.Logf("two writers: %d committed records for %d events (%d doubled), %v batches fenced", len(recs), len(ids), dups, fenced)
	if dups != 0 {
		t.Fatalf("%d of %d events doubled in the committed log", dups, total)
	}
	if fenced == 0 {
		t.Fatal("no batch was fenced: the two writers never overlapped, the test proved nothing")
	}
}
