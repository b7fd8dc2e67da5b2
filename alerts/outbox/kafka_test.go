package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// countingProducer counts the Produce calls that returned an error (a run
// cancelled in the middle of a produce).
type countingProducer struct {
	Producer
	failed *atomic.Int64
}

func (c *countingProducer) Produce(ctx context.Context, recs []producer.Record) error {
	err := c.Producer.Produce(ctx, recs)
	if err != nil {
		c.failed.Add(1)
	}
	return err
}

// crashingProducer simulates a process that dies right after the broker
// acknowledged a batch, before the dispatcher could do anything else: on the
// call chosen by crashAt it lets the real Produce finish, then ends the run
// and reports nothing but a cancelled context.
type crashingProducer struct {
	Producer
	calls   atomic.Int64
	crashAt int64
	crash   func() // nil: the ack is lost, the run goes on
	crashed *atomic.Int64
}

func (c *crashingProducer) Produce(ctx context.Context, recs []producer.Record) error {
	if err := c.Producer.Produce(ctx, recs); err != nil {
		return err
	}
	if c.calls.Add(1) == c.crashAt {
		if c.crash == nil {
			return errors.New("test: acknowledgement lost")
		}
		c.crashed.Add(1)
		c.crash()
		return context.Canceled
	}
	return nil
}

// TestKafkaExactlyOnce runs the Kafka output of one partition against the
// real broker and Redis, stopping it over and over while entries keep being
// appended, and checks that alerts.events holds every entry exactly once, in
// stream order, in the same partition.
func TestKafkaExactlyOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	cases := []struct {
		name     string
		restarts int
		// crash: kill right after an acknowledged produce instead of at a
		// random moment.
		crash bool
	}{
		{name: "cancel at random moments", restarts: 15},
		{name: "crash between produce ack and anything else", restarts: 6, crash: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const partitions, partition, initial = 3, 1, 1000 // events there before the first run; more come during the runs
			rdb := testenv.RedisClient(t)
			topic := testenv.CreateTopic(t, brokers, partitions)
			cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "telemetry.positions",
				BatchSize: 40, Block: 50 * time.Millisecond, Backoff: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
				Logger: testLogger()}
			k := redislayout.Of(cfg.Prefix, cfg.Topic, partition)
			t.Cleanup(func() { rdb.Del(context.Background(), k.Outbox(), k.Cursor(kafkaOutputName)) })

			real := NewKafkaOutput(brokers, topic, producer.Config{Logger: testLogger()})
			var crashed, failed atomic.Int64
			var runCancel context.CancelFunc
			var mu sync.Mutex
			out := &KafkaOutput{Tail: real.Tail, NewProducer: func(ctx context.Context, partition int) (Producer, error) {
				p, err := real.NewProducer(ctx, partition)
				if err != nil {
					return nil, err
				}
				// The random stop is timed from here, once the run has a
				// producer and is about to send: timed from the run's start
				// it fell in the start-up (reading the tail, the producer's
				// session) on a loaded machine, and 98 of 100 runs were
				// stopped before any produce.
				mu.Lock()
				cancel := runCancel
				mu.Unlock()
				if cancel != nil {
					time.AfterFunc(time.Duration(rand.IntN(100))*time.Millisecond, cancel)
				}
				return &countingProducer{Producer: p, failed: &failed}, nil
			}}
			if tc.crash {
				out.NewProducer = func(ctx context.Context, partition int) (Producer, error) {
					p, err := real.NewProducer(ctx, partition)
					if err != nil {
						return nil, err
					}
					mu.Lock()
					cancel := runCancel
					mu.Unlock()
					return &crashingProducer{Producer: p, crashAt: 1 + rand.Int64N(8), crash: cancel, crashed: &crashed}, nil
				}
			}
			reg := prometheus.NewRegistry()
			cfg.Registerer = reg
			d, err := NewDispatcher(cfg, rdb, out)
			if err != nil {
				t.Fatal(err)
			}

			ctx := context.Background()
			ids, err := appendEvents(ctx, rdb, k, 0, initial)
			if err != nil {
				t.Fatal(err)
			}
			// The rest arrive while the dispatcher is stopped and started,
			// so that the stops find it busy.
			var idsMu sync.Mutex
			appendStop := make(chan struct{})
			appendDone := make(chan error, 1)
			go func() {
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for i := initial; ; i += 5 {
					select {
					case <-appendStop:
						appendDone <- nil
						return
					case <-tick.C:
					}
					more, err := appendEvents(ctx, rdb, k, i, 5)
					idsMu.Lock()
					ids = append(ids, more...)
					idsMu.Unlock()
					if err != nil {
						appendDone <- err
						return
					}
				}
			}()

			// Random stops must cut some produce calls short: keep going
			// until at least 3 did.
			runs := 0
			for i := 0; i < tc.restarts || (!tc.crash && failed.Load() < 3 && i < 100); i++ {
				runs++
				runCtx, cancel := context.WithCancel(ctx)
				mu.Lock()
				runCancel = cancel
				mu.Unlock()
				if !tc.crash {
					// The stop proper is timed from the producer's making
					// (above); this one ends a run that never made one.
					time.AfterFunc(5*time.Second, cancel)
				}
				if err := d.Run(runCtx, partition); err != nil {
					t.Fatalf("run %d: %v", i, err)
				}
				cancel()
			}
			close(appendStop)
			if err := <-appendDone; err != nil {
				t.Fatal(err)
			}
			idsMu.Lock()
			n := len(ids)
			idsMu.Unlock()
			if tc.crash && crashed.Load() < int64(tc.restarts) {
				t.Fatalf("only %d of %d runs crashed after an ack", crashed.Load(), tc.restarts)
			}
			if !tc.crash && failed.Load() < 3 {
				t.Fatalf("only %d of %d runs were stopped during a produce", failed.Load(), runs)
			}

			// A last run, without faults, drains the rest.
			runCtx, cancel := context.WithCancel(ctx)
			mu.Lock()
			runCancel = nil // the last run loses acks instead of crashing
			mu.Unlock()
			done := make(chan error, 1)
			go func() { done <- d.Run(runCtx, partition) }()
			testenv.CheckFor(t, 60*time.Second, func() error {
				recs, err := partitionRecords(ctx, brokers, topic, partition)
				if err != nil {
					return err
				}
				if len(recs) < n {
					return errors.New("not drained yet")
				}
				// The cursor follows the acknowledgement: stopped between
				// the two, the run would leave it behind (the next run's
				// tail read would mend it, but this is the last run).
				if cur, _ := rdb.Get(ctx, k.Cursor(kafkaOutputName)).Result(); cur != ids[len(ids)-1] {
					return fmt.Errorf("kafka cursor %q, not yet the last entry %q", cur, ids[len(ids)-1])
				}
				return nil
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			checkKafkaPartition(t, brokers, topic, partition, ids, 0)
			for _, p := range []int{0, 2} {
				checkKafkaPartition(t, brokers, topic, p, nil, 0)
			}
			cur, err := rdb.Get(ctx, k.Cursor(kafkaOutputName)).Result()
			if err != nil || cur != ids[len(ids)-1] {
				t.Fatalf("kafka cursor %q (%v), want %q", cur, err, ids[len(ids)-1])
			}
			t.Logf("%d runs, %d crashes after an ack, %d produces cut short or failed, %v resyncs while running",
				runs+1, crashed.Load(), failed.Load(), metricValue(t, reg, "nofly_outbox_retries_total", "1", "kafka"))
		})
	}
}
