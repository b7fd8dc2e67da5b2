package ingestd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/producer"
	"github.com/nofly-dev/nofly/telemetry"
)

// DefaultTickInterval is how often ingest writes a clock tick to every
// partition of the telemetry topic.
const DefaultTickInterval = time.Second

// The alerter decides by the log's clock — the Kafka timestamps of a
// partition's records, which ingest sets to its receive time — so that a
// drone that falls silent is noticed without a wall clock of the alerter's
// (docs/design.md, "Time in the log"). A partition nobody sends to would
// have no clock: ingest writes a tick (telemetry.Tick) to each partition
// every TickInterval, through the same idempotent producer and with the
// same clock that stamps the positions, so a partition's clock is one
// clock whether positions flow or not. Ingest writes them, rather than a
// process of its own: ticks must flow exactly when telemetry can (an ingest
// that cannot reach Kafka writes neither), and a second process is one more
// to deploy, watch and forget. With several ingest instances each ticks;
// the alerter takes the highest time seen, so the clock never goes back.

// ticker writes the ticks while the service runs.
type ticker struct {
	prod       ingest.Producer
	partitions int
	every      time.Duration
	from       string
	log        *slog.Logger
	written    prometheus.Counter
	failed     prometheus.Counter
}

// newTicker returns the ticker of the service, its metrics registered on
// reg.
func newTicker(prod ingest.Producer, partitions int, every time.Duration, reg prometheus.Registerer, log *slog.Logger) *ticker {
	host, _ := os.Hostname()
	t := &ticker{prod: prod, partitions: partitions, every: every, from: fmt.Sprintf("ingest %s/%d", host, os.Getpid()), log: log,
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_ingest_ticks_total",
			Help: "Clock ticks written to the telemetry topic (one per partition per --tick-interval)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_ingest_tick_errors_total",
			Help: "Rounds of ticks Kafka did not acknowledge (the alerter's clock stands still for partitions without telemetry)."}),
	}
	reg.MustRegister(t.written, t.failed)
	return t
}

// run ticks until ctx ends. A round that Kafka does not acknowledge within
// the interval is given up (the next comes on time): ticks never queue.
func (t *ticker) run(ctx context.Context) {
	tk := time.NewTicker(t.every)
	defer tk.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		err := t.once(ctx)
		switch {
		case err != nil && !failing:
			failing = true
			t.log.Warn("clock ticks are not reaching Kafka; the alerter's clock stands still for partitions without telemetry", "error", err)
		case err == nil && failing:
			failing = false
			t.log.Info("clock ticks reach Kafka again")
		}
	}
}

// once writes one tick to each partition.
func (t *ticker) once(ctx context.Context) error {
	now := time.Now()
	v := (&telemetry.Tick{At: now, From: t.from}).AppendJSON(nil)
	recs := make([]producer.Record, t.partitions)
	for p := range recs {
		recs[p] = producer.Record{Value: v, Time: now, Partition: p}
	}
	pctx, cancel := context.WithTimeout(ctx, max(t.every, 500*time.Millisecond))
	defer cancel()
	if err := t.prod.Produce(pctx, recs); err != nil {
		if ctx.Err() == nil {
			t.failed.Inc()
		}
		return err
	}
	t.written.Add(float64(len(recs)))
	return nil
}
