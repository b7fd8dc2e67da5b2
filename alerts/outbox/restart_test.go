package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// TestKafkaBrokerRestart stops a private broker while events flow, until the
// Kafka output has failed several times (end-offset checks, and a produce in
// flight if the stop caught one: DeliveryTimeout is short), and starts it
// again: the partition holds every event exactly once, in order.
func TestKafkaBrokerRestart(t *testing.T) {
	t.Parallel() // mostly waiting for a JVM: run it beside the outage test
	kp := testenv.StartKafka(t)
	brokers := kp.Brokers()
	rdb := testenv.RedisClient(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	reg := prometheus.NewRegistry()
	cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "telemetry.positions", BatchSize: 50,
		Block: 50 * time.Millisecond, Backoff: 50 * time.Millisecond, BackoffMax: time.Second, CloseTimeout: 20 * time.Second,
		Registerer: reg, Logger: testLogger()}
	k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
	ctx := context.Background()
	t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(kafkaOutputName)) })
	pcfg := producer.Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second, Logger: testLogger()}
	d, err := NewDispatcher(cfg, rdb, NewKafkaOutput(brokers, topic, pcfg))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(runCtx, 0) }()

	var (
		mu       sync.Mutex
		ids      []string
		loadStop = make(chan struct{})
		loadDone = make(chan error, 1)
		appended atomic.Int64
	)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n += 2 {
			select {
			case <-loadStop:
				loadDone <- nil
				return
			case <-tick.C:
			}
			more, err := appendEvents(ctx, rdb, k, n, 2)
			mu.Lock()
			ids = append(ids, more...)
			mu.Unlock()
			appended.Add(int64(len(more)))
			if err != nil {
				loadDone <- err
				return
			}
		}
	}()
	delivered := func() float64 { return metricValue(t, reg, "nofly_outbox_delivered_total", "0", kafkaOutputName) }
	testenv.CheckFor(t, 30*time.Second, func() error {
		if delivered() < 200 {
			return errors.New("kafka output not flowing yet")
		}
		return nil
	})
	if err := kp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Down until the output has failed a few times (a produce in flight,
	// and each new transactional writer's start, fail after
	// DeliveryTimeout, 3 s).
	testenv.CheckFor(t, 60*time.Second, func() error {
		if metricValue(t, reg, "nofly_outbox_errors_total", "0", kafkaOutputName) < 3 {
			return errors.New("the kafka output has not failed 3 times yet")
		}
		return nil
	})
	if err := kp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Events keep flowing after the restart, then the load stops.
	atRestart := float64(appended.Load())
	testenv.CheckFor(t, 60*time.Second, func() error {
		if n := delivered(); n < atRestart+100 {
			return fmt.Errorf("kafka output: %.0f delivered, %.0f appended before the restart", n, atRestart)
		}
		return nil
	})
	close(loadStop)
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	total := int(appended.Load())
	testenv.CheckFor(t, 60*time.Second, func() error {
		recs, err := partitionRecords(ctx, brokers, topic, 0)
		if err != nil {
			return err
		}
		if len(recs) < total {
			return fmt.Errorf("%d of %d records", len(recs), total)
		}
		return nil
	})
	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := append([]string(nil), ids...)
	mu.Unlock()
	checkKafkaPartition(t, brokers, topic, 0, want, 0)
	t.Logf("%d events; during the restart %v produce calls failed, %v operations in all", total,
		metricValue(t, reg, "nofly_outbox_retries_total", "0", kafkaOutputName),
		metricValue(t, reg, "nofly_outbox_errors_total", "0", kafkaOutputName))
}
