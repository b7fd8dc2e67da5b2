package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
)

// Alerter is the live consumer: a kafka-go ConsumerGroup whose generations
// start one goroutine per assigned partition; each runs an alerts.Engine
// over its own kafka.Reader (no group: offsets are ours) and commits every
// batch to Redis in one script before committing the offset to Kafka.
type Alerter struct {
	cfg   Config
	log   *slog.Logger
	store dedup.Store
	zones *geofence.Current
	m     *metrics
	// dispatch, when not nil, drains the outbox of every partition this
	// alerter owns, for exactly the time its engine runs.
	dispatch *outbox.Dispatcher
	running  atomic.Int32 // partitions running now
	joined   atomic.Bool
	done     atomic.Int64 // records committed (applied, duplicate, invalid or skipped)
	// faults is test-only fault injection (faults.go), nil unless
	// NOFLY_FAULT_STOP_BEFORE_COMMIT is set.
	faults *faults
}

// NewAlerter returns an alerter over store with the zone holder zones,
// without outbox dispatch (see withDispatch).
func NewAlerter(cfg Config, store dedup.Store, zones *geofence.Current, m *metrics, log *slog.Logger) *Alerter {
	return &Alerter{cfg: cfg, log: log, store: store, zones: zones, m: m, faults: faultsFromEnv(os.Getenv, log)}
}

// withDispatch makes the alerter run d for each partition it owns; nil
// turns dispatch off. Call it before Run.
func (a *Alerter) withDispatch(d *outbox.Dispatcher) *Alerter {
	a.dispatch = d
	return a
}

// loadZones reads the zone file with the default options and builds its
// index (tests and benchmarks; serve and replay use Config.zoneSource).
func loadZones(path string) (*geofence.Index, error) {
	ix, _, err := zoneSource{path: path}.load()
	return ix, err
}

// errPartitionCount: the events topic exists with another partition count
// than the telemetry topic. Partition p's outbox goes to partition p, so the
// counts must match.
var errPartitionCount = errors.New("partition counts differ")

// ensureTopic creates topic with partitions partitions unless it exists,
// waits until every partition has a leader, and returns the topic's
// partition count. With exact, an existing topic with another count is an
// error (errPartitionCount), reported at once.
func ensureTopic(ctx context.Context, brokers []string, topic string, partitions int, exact bool) (int, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 15 * time.Second, Transport: tr}
	deadline := time.Now().Add(60 * time.Second)
	created := false
	for {
		n, err := func() (int, error) {
			if !created {
				res, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
					Topic: topic, NumPartitions: partitions, ReplicationFactor: -1}}})
				if err != nil {
					return 0, fmt.Errorf("create topic %s: %w", topic, err)
				}
				if err := res.Errors[topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
					return 0, fmt.Errorf("create topic %s: %w", topic, err)
				}
				created = true
			}
			md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
			if err != nil {
				return 0, err
			}
			if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
				return 0, fmt.Errorf("topic %s not in metadata yet", topic)
			}
			n := len(md.Topics[0].Partitions)
			if exact && n != partitions {
				return n, fmt.Errorf("topic %s has %d partitions, want %d: %w", topic, n, partitions, errPartitionCount)
			}
			for _, p := range md.Topics[0].Partitions {
				if p.Error != nil || p.Leader.Host == "" {
					return n, fmt.Errorf("topic %s partition %d has no leader yet", topic, p.ID)
				}
			}
			return n, nil
		}()
		if err == nil || errors.Is(err, errPartitionCount) {
			return n, err
		}
		if time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type slogKafka struct {
	log   *slog.Logger
	level slog.Level
}

func (l slogKafka) Printf(format string, args ...any) {
	l.log.Log(context.Background(), l.level, fmt.Sprintf(format, args...), "component", "kafka-go")
}

// Run consumes until ctx ends.
func (a *Alerter) Run(ctx context.Context) error {
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                a.cfg.Group,
		Brokers:           a.cfg.Brokers,
		Topics:            []string{a.cfg.Topic},
		HeartbeatInterval: a.cfg.HeartbeatInterval,
		SessionTimeout:    a.cfg.SessionTimeout,
		RebalanceTimeout:  a.cfg.RebalanceTimeout,
		JoinGroupBackoff:  time.Second,
		StartOffset:       kafka.FirstOffset,
		// WatchPartitionChanges is off: a partition count change moves
		// drones between partitions, which docs/exactly-once.md rules out.
		ErrorLogger: slogKafka{a.log, slog.LevelWarn},
	})
	if err != nil {
		return fmt.Errorf("consumer group: %w", err)
	}
	defer cg.Close()
	for {
		gen, err := cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, kafka.ErrGroupClosed) {
				return err
			}
			a.log.Warn("join consumer group", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		a.joined.Store(true)
		parts := gen.Assignments[a.cfg.Topic]
		ids := make([]int, len(parts))
		for i, p := range parts {
			ids[i] = p.ID
		}
		a.log.Info("assigned", "generation", gen.ID, "member", gen.MemberID, "partitions", ids)
		oc := newOffsetCommitter()
		gen.Start(func(gctx context.Context) { oc.run(gctx, gen, a.cfg.Topic, a.log) })
		for _, p := range parts {
			gen.Start(func(gctx context.Context) { a.ownPartition(gctx, oc, p.ID, p.Offset, gen.ID) })
		}
	}
}

// ownPartition runs the partition's engine and, when dispatch is on, its
// outbox dispatcher, for as long as this alerter owns the partition: both
// start on assignment and end together when the generation ends (revoke,
// rebalance, shutdown) or the engine is fenced (another alerter owns the
// partition). The generation, and so the next assignment, waits for both:
// the dispatcher returns only after its producer closed, so the next
// owner's dispatcher reads a final tail of the events topic.
func (a *Alerter) ownPartition(ctx context.Context, oc *offsetCommitter, partition int, committed int64, genID int32) {
	if a.dispatch == nil {
		a.runPartition(ctx, oc, partition, committed, genID)
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.dispatch.Run(pctx, partition); err != nil {
			a.log.Error("outbox dispatch", "partition", partition, "generation", genID, "err", err)
		}
	})
	a.runPartition(pctx, oc, partition, committed, genID)
	cancel()
	wg.Wait()
}

// runPartition processes one partition for the generation's lifetime:
// load, read, apply, commit; on an error of unknown outcome it reloads from
// Redis and goes on; when fenced it stops (a later generation reloads).
func (a *Alerter) runPartition(ctx context.Context, oc *offsetCommitter, partition int, committed int64, genID int32) {
	a.running.Add(1)
	a.m.assigned.Inc()
	defer func() { a.running.Add(-1); a.m.assigned.Dec() }()
	log := a.log.With("partition", partition, "generation", genID)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := a.consume(ctx, oc, partition, committed, log)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, dedup.ErrFenced) {
			log.Warn("fenced: another alerter owns the partition; stopping until the next assignment", "err", err)
			return
		}
		log.Warn("partition loop failed; reloading from Redis", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (a *Alerter) consume(ctx context.Context, oc *offsetCommitter, partition int, committed int64, log *slog.Logger) error {
	snap, err := a.store.Load(ctx, partition)
	if err != nil {
		return err
	}
	eng, err := alerts.NewEngine(partition, snap)
	if err != nil {
		return err
	}
	start := snap.Applied + 1
	if snap.Applied == dedup.NoVersion {
		start = committed // Kafka's committed offset, or FirstOffset
		if start < 0 {
			start = kafka.FirstOffset
		}
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   a.cfg.Brokers,
		Topic:     a.cfg.Topic,
		Partition: partition,
		MinBytes:  1,
		MaxBytes:  8 << 20,
		MaxWait:   250 * time.Millisecond,
		// A queue of a whole batch: the reader's goroutine hands records
		// over through it one by one; with room for a batch it and this
		// loop wake each other less often than with the default 100.
		QueueCapacity: max(a.cfg.Batch, 100),
		ErrorLogger:   slogKafka{log, slog.LevelWarn},
	})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		return fmt.Errorf("seek to %d: %w", start, err)
	}
	log.Info("partition started", "applied", snap.Applied, "from", start, "drones", len(snap.Drones))

	// One batch commits while the next is fetched and applied. Commits stay
	// strictly sequential — each names the version the previous one set —
	// and the first failure ends the partition loop: the batches after it
	// are dropped and the caller reloads from Redis.
	type pending struct {
		out   *alerts.Outcome
		began time.Time
	}
	fctx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	queue := make(chan pending) // unbuffered: one commit in flight, one batch waiting
	failed := make(chan error, 1)
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		for b := range queue {
			if err := a.commit(ctx, oc, partition, b.out, b.began, log); err != nil {
				failed <- err
				stopFetch()
				return
			}
		}
	}()
	defer func() { close(queue); <-committerDone }()

	recs := make([]alerts.Record, 0, a.cfg.Batch)
	for {
		recs, err = fetchBatch(fctx, r, recs[:0], a.cfg.Batch, a.cfg.Linger)
		if err != nil {
			select {
			case cerr := <-failed:
				return cerr
			default:
				return err
			}
		}
		began := time.Now()
		out := eng.Apply(a.zones.Load(), recs)
		if out == nil {
			continue
		}
		for _, b := range out.Bad {
			log.Warn("skipping a bad record", "offset", b.Offset, "err", b.Err)
		}
		select {
		case queue <- pending{out, began}:
		case err := <-failed:
			return err // the engine is ahead of Redis: discard it
		case <-ctx.Done():
			return ctx.Err() // the generation ended: drop the batch
		}
	}
}

// commit makes one batch durable in Redis, then offers its offset to
// Kafka. The commit is not cut short by the end of the generation: the
// partition goroutine (and so the rejoin) waits for its outcome, so the
// next owner loads after it.
func (a *Alerter) commit(ctx context.Context, oc *offsetCommitter, partition int, out *alerts.Outcome, began time.Time, log *slog.Logger) error {
	a.faults.beforeCommit(out.Expected, log) // before the timeout starts
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	res, err := a.store.Commit(cctx, partition, out.Expected, out.Batch)
	cancel()
	if err != nil {
		// Counted here, not where the partition loop stops: a refused
		// commit whose generation ended meanwhile counts too.
		if errors.Is(err, dedup.ErrFenced) {
			a.m.fenced.Inc()
		} else {
			a.m.commitErrs.Inc()
		}
		return err
	}
	a.m.observe(out, res, time.Since(began))
	a.done.Add(int64(out.Stats.Records + out.Stats.Skipped))
	if res.Suppressed > 0 {
		log.Warn("events suppressed by their unique key (state was behind the outbox)", "suppressed", res.Suppressed)
	}
	// Kafka's committed offset follows Redis, never leads it.
	oc.offer(partition, out.Batch.Applied+1)
	return nil
}

// fetchBatch appends up to n records to recs: it waits for the first as
// long as ctx allows, then at most linger for the rest.
func fetchBatch(ctx context.Context, r *kafka.Reader, recs []alerts.Record, n int, linger time.Duration) ([]alerts.Record, error) {
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return recs, err
	}
	recs = append(recs, alerts.Record{Offset: m.Offset, Value: m.Value})
	if n == 1 {
		return recs, nil
	}
	lctx, cancel := context.WithTimeout(ctx, linger)
	defer cancel()
	for len(recs) < n {
		m, err := r.FetchMessage(lctx)
		if err != nil {
			if ctx.Err() != nil {
				return recs, ctx.Err()
			}
			if lctx.Err() != nil {
				return recs, nil
			}
			return recs, err
		}
		recs = append(recs, alerts.Record{Offset: m.Offset, Value: m.Value})
	}
	return recs, nil
}

// newRedisClient returns the store's client: no automatic retries, because
// the outcome of a failed script is unknown and only a reload tells it.
func newRedisClient(addr, name string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ClientName: name, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
}

// offsetCommitter commits the generation's offsets to Kafka, after Redis:
// partitions offer the offset after each committed batch, and one goroutine
// commits the latest of every partition in one OffsetCommit request as soon
// as the previous one is done. kafka-go's CommitOffsets is a synchronous
// round trip on the coordinator connection; doing it in each partition's
// loop halved the alerter's throughput, and the guarantee does not rest on
// it (the resume point is Redis's applied offset).
type offsetCommitter struct {
	mu      sync.Mutex
	pending map[int]int64
	wake    chan struct{}
}

func newOffsetCommitter() *offsetCommitter {
	return &offsetCommitter{pending: map[int]int64{}, wake: make(chan struct{}, 1)}
}

func (oc *offsetCommitter) offer(partition int, next int64) {
	oc.mu.Lock()
	oc.pending[partition] = next
	oc.mu.Unlock()
	select {
	case oc.wake <- struct{}{}:
	default:
	}
}

func (oc *offsetCommitter) take() map[int]int64 {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if len(oc.pending) == 0 {
		return nil
	}
	p := oc.pending
	oc.pending = map[int]int64{}
	return p
}

func (oc *offsetCommitter) run(ctx context.Context, gen *kafka.Generation, topic string, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-oc.wake:
		}
		if p := oc.take(); p != nil {
			if err := gen.CommitOffsets(map[string]map[int]int64{topic: p}); err != nil && ctx.Err() == nil {
				log.Debug("commit offsets to kafka", "err", err)
			}
		}
	}
}
