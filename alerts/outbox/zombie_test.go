package outbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// TestKafkaTwoWriters runs two dispatchers on the same partition at once (a
// zombie beside the new owner) against the real broker. Exactly once does not
// hold then (see the package doc), but the end-offset check bounds the
// damage: nothing is missing, and only batches the two sent at the same
// moment are doubled — not every event, as without the check — because a
// writer that finds the end moved backs off, and the other carries on.
func TestKafkaTwoWriters(t *testing.T) {
	brokers := testenv.Kafka(t)
	rdb := testenv.RedisClient(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	const total = 2000
	prefix := testenv.RedisPrefix(t, "outbox")
	k := newKeys(prefix, "t", 0)
	ctx := context.Background()
	t.Cleanup(func() { rdb.Del(ctx, k.outbox(), k.cursor(kafkaOutputName)) })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	for range 2 {
		cfg := Config{Prefix: prefix, Topic: "t", BatchSize: 20, Block: 20 * time.Millisecond,
			Backoff: 50 * time.Millisecond, BackoffMax: 2 * time.Second, Registerer: prometheus.NewRegistry(), Logger: testLogger()}
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
	t.Logf("two writers: %d records for %d events (%d doubled)", len(recs), len(ids), dups)
	if dups > total/5 { // measured 18-105; without the check every event is doubled
		t.Fatalf("%d of %d events doubled: the end-offset check is not working", dups, total)
	}
}
