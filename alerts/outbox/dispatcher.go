package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// Dispatcher drains the outboxes of the partitions it is told to run.
type Dispatcher struct {
	cfg   Config
	rdb   redis.UniversalClient
	kafka *KafkaOutput
	m     *metrics

	mu      sync.Mutex
	running map[int]bool
}

// NewDispatcher checks cfg (after defaults) and registers the metrics. kafka
// may be nil for no Kafka output (tests, webhook-only deployments). rdb
// should be a client of its own (see the package doc).
func NewDispatcher(cfg Config, rdb redis.UniversalClient, kafka *KafkaOutput) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	if kafka != nil && (kafka.NewProducer == nil || kafka.Tail == nil) {
		return nil, fmt.Errorf("%w: KafkaOutput needs NewProducer and Tail", ErrInvalidConfig)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("outbox: register metrics: %w", err)
	}
	return &Dispatcher{cfg: cfg, rdb: rdb, kafka: kafka, m: m, running: make(map[int]bool)}, nil
}

// output is one output of one partition.
type output struct {
	name      string // "kafka" or "webhook:<name>"
	partition int
	cfg       *Config
	rdb       redis.UniversalClient
	keys      redislayout.Keys
	kafka     *KafkaOutput // Kafka output only
	hook      Webhook      // webhook outputs only
	am        *amTarget    // Alertmanager outputs only
	m         outputMetrics
	log       *slog.Logger
	prog      progress
	backlog   atomic.Int64 // the lag gauge's value, for the Alertmanager output's bound
}

// Run drains partition's outbox into every output, each on its own
// goroutine, until ctx ends; then it waits for them (the Kafka output closes
// its producer, waiting up to Config.CloseTimeout for batches in flight; a
// webhook POST in flight finishes, within Webhook.Timeout, and its answer is
// recorded) and returns nil. Outputs never give up: errors are logged, counted and retried
// with backoff. Run returns ErrRunning if the partition already runs in this
// Dispatcher. Run a partition only while this instance owns it (from the
// consumer group's assignment to its revocation).
func (d *Dispatcher) Run(ctx context.Context, partition int) error {
	if partition < 0 {
		return fmt.Errorf("outbox: partition %d: must not be negative", partition)
	}
	d.mu.Lock()
	if d.running[partition] {
		d.mu.Unlock()
		return fmt.Errorf("%w: %d", ErrRunning, partition)
	}
	d.running[partition] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.running, partition)
		d.mu.Unlock()
	}()

	k := redislayout.Of(d.cfg.Prefix, d.cfg.Topic, partition)
	pl := strconv.Itoa(partition)
	newOutput := func(name string) *output {
		return &output{
			name: name, partition: partition, cfg: &d.cfg, rdb: d.rdb, keys: k,
			m:   d.m.output(pl, name),
			log: d.cfg.Logger.With("component", "outbox", "partition", partition, "output", name),
		}
	}
	var outs []*output
	var wg sync.WaitGroup
	if d.kafka != nil {
		o := newOutput(kafkaOutputName)
		o.kafka = d.kafka
		outs = append(outs, o)
		wg.Go(func() { o.runKafka(ctx) })
	}
	for _, h := range d.cfg.Webhooks {
		o := newOutput(redislayout.WebhookOutput(h.Name))
		o.hook = h
		outs = append(outs, o)
		wg.Go(func() { o.runWebhook(ctx) })
	}
	for _, u := range d.cfg.Alertmanager.URLs {
		o := newOutput(alertmanagerOutput(u))
		o.am = &amTarget{url: strings.TrimRight(u, "/"), cfg: &d.cfg.Alertmanager, m: d.m.alertmanager(AlertmanagerName(u))}
		outs = append(outs, o)
		wg.Go(func() { o.runAlertmanager(ctx) })
	}
	wg.Go(func() { d.trackLag(ctx, k, outs) })
	if d.cfg.Retention >= 0 && len(outs) > 0 {
		wg.Go(func() { d.trimLoop(ctx, k, pl, outs) })
	}
	wg.Wait()
	return nil
}

// trackLag refreshes the lag gauges every LagInterval.
func (d *Dispatcher) trackLag(ctx context.Context, k redislayout.Keys, outs []*output) {
	bases := make([]lagBase, len(outs))
	for {
		if !sleep(ctx, d.cfg.LagInterval) {
			return
		}
		added, err := entriesAdded(ctx, d.rdb, k.Outbox())
		if err != nil {
			continue
		}
		for i, o := range outs {
			gen, start, advanced := o.prog.snapshot()
			if gen == 0 {
				continue // not started yet
			}
			if bases[i].gen != gen {
				a0, c0, err := measureBase(ctx, d.rdb, k.Outbox(), start)
				if err != nil {
					continue
				}
				bases[i] = lagBase{gen: gen, added: a0, count: c0}
				if added < a0 {
					added = a0
				}
			}
			b := bases[i]
			lag := max(0, b.count+(added-b.added)-advanced)
			o.backlog.Store(lag)
			o.m.lag.Set(float64(lag))
		}
	}
}

// trimLoop trims the partition's outbox every TrimInterval.
func (d *Dispatcher) trimLoop(ctx context.Context, k redislayout.Keys, partition string, outs []*output) {
	names := make([]string, len(outs))
	for i, o := range outs {
		names[i] = o.name
	}
	log := d.cfg.Logger.With("component", "outbox", "partition", partition)
	trimmed, entries := d.m.trimmed.WithLabelValues(partition), d.m.entries.WithLabelValues(partition)
	for sleep(ctx, d.cfg.TrimInterval) {
		n, left, err := trimOutbox(ctx, d.rdb, k, names, d.cfg.Retention, time.Now())
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("outbox: trim", "error", err)
			}
			continue
		}
		trimmed.Add(float64(n))
		entries.Set(float64(left))
		if n > 0 {
			log.Debug("outbox trimmed", "entries", n, "left", left)
		}
	}
}
