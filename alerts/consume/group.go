package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// Dispatcher drains the outbox of one partition for as long as ctx lives
// (alerts/outbox.Dispatcher is one).
type Dispatcher interface {
	Run(ctx context.Context, partition int) error
}

// Options configure a Group. Brokers, Topic, Group, Redis and Zones are
// required; zero durations take the defaults below.
type Options struct {
	Brokers []string
	// Dialer connects the consumer group and the partitions' fetches
	// (fetchhub.go); nil is kafka-go's default dialer.
	Dialer *kafka.Dialer
	Topic  string // the telemetry topic
	Group  string // the consumer group id

	// Batch is the most records one batch (one Redis script) holds; Linger
	// how long a batch waits to fill after its first record (0: it takes
	// what has been fetched); LingerIdle, when set and shorter, ends the
	// wait as soon as no record has come for that long (the flow paused).
	Batch      int
	Linger     time.Duration
	LingerIdle time.Duration

	SessionTimeout    time.Duration // DefaultSessionTimeout when 0
	HeartbeatInterval time.Duration // DefaultHeartbeatInterval when 0
	RebalanceTimeout  time.Duration // DefaultRebalanceTimeout when 0

	// Redis holds the partitions' state, outbox and unique keys. It must not
	// retry commands itself (MaxRetries -1): the outcome of a failed batch
	// script is unknown, and only a reload from Redis tells it.
	Redis    redis.UniversalClient
	Prefix   string        // first part of every key's hash tag; dedup.DefaultPrefix when empty
	EventTTL time.Duration // lifetime of an event's unique key; dedup.DefaultEventTTL when 0
	// AlarmRetention is how long a cleared alarm stays in the alarm index
	// (the API's history); dedup.DefaultAlarmRetention when 0.
	AlarmRetention time.Duration
	// Replicas, when on, makes each batch count (Kafka offset commit, the
	// next batch) only once the partition's Redis primary has that many
	// replicas holding it (dedup.RedisOptions.Replicas).
	Replicas redisreplica.Wait

	// Zones are read at every batch, so a reload (Zones.Store) applies from
	// the next batch of every partition.
	Zones *geofence.Current
	// Authorizations, when not nil, are read at every batch like Zones
	// (nil, or holding nil: no authorisation, version 0).
	Authorizations *authorization.Current

	// Timing sets the decisions made by the log's clock (signal lost,
	// drones forgotten: alerts.Timing); zero fields take the defaults, and
	// KeepAfterRaise, when zero, is EventTTL.
	Timing alerts.Timing
	// Approach sets the approaching warnings (alerts.ApproachSettings; the
	// zero value: off).
	Approach alerts.ApproachSettings

	// Dispatcher, when not nil, runs for each partition this member owns,
	// for exactly the time its engine runs.
	Dispatcher Dispatcher

	// Registerer receives the nofly_alerter_* metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	Logger     *slog.Logger // slog.Default() when nil

	// BeforeCommit, when not nil, is called before each batch's Redis
	// commit (fault injection: the zombie proof freezes the process there).
	BeforeCommit func(CommitPoint)
}

// CommitPoint is a batch about to be committed: its partition, the
// generation that owns it, and the version it was applied on.
type CommitPoint struct {
	Partition  int
	Generation int32
	Expected   int64
	// Events are the batch's events, in order.
	Events []alerts.Event
}

// Defaults of the group timeouts.
const (
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
	DefaultRebalanceTimeout  = 30 * time.Second
)

// ErrOptions is wrapped by every error of Validate.
var ErrOptions = errors.New("consume: invalid options")

// Validate reports the first unusable option.
func (o Options) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, a...))
	}
	switch {
	case len(o.Brokers) == 0:
		return bad("Brokers is empty")
	case o.Topic == "":
		return bad("Topic is empty")
	case o.Group == "":
		return bad("Group is empty")
	case o.Batch < 1:
		return bad("Batch is %d, must be at least 1", o.Batch)
	case o.Linger < 0:
		return bad("Linger is %v, must not be negative", o.Linger)
	case o.LingerIdle < 0:
		return bad("LingerIdle is %v, must not be negative", o.LingerIdle)
	case o.SessionTimeout < 0, o.HeartbeatInterval < 0, o.RebalanceTimeout < 0:
		return bad("group timeouts must not be negative")
	case o.EventTTL < 0:
		return bad("EventTTL is %v, must not be negative", o.EventTTL)
	case o.Redis == nil:
		return bad("Redis is nil")
	case o.Zones == nil || o.Zones.Load() == nil:
		return bad("Zones holds no zone index")
	}
	if n, ok := maxRetries(o.Redis); !ok {
		return bad("Redis is a %T, whose retries cannot be checked: use a *redis.Client or *redis.ClusterClient", o.Redis)
	} else if n != 0 { // go-redis stores MaxRetries -1 as 0, and 0 as its default 3
		return bad("Redis retries failed commands (%d retries): set MaxRetries to -1, since a retried batch script of unknown outcome could run twice", n)
	}
	return nil
}

func maxRetries(c redis.UniversalClient) (int, bool) {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().MaxRetries, true
	case *redis.ClusterClient:
		// The cluster client stores "none" as -1 and hands it to its node
		// clients; the batch script goes to a node client (dedup.Redis),
		// never through the cluster client's own network-error retries.
		if n := c.Options().MaxRetries; n != -1 {
			return n, true
		}
		return 0, true
	}
	return 0, false
}

// Group is one member of the alerter consumer group: Run joins the group
// and, for each generation, runs every assigned partition until the
// generation ends.
type Group struct {
	o     Options
	log   *slog.Logger
	store dedup.Store
	m     *metrics
	hub   *fetchHub // the partitions' fetches, while Run runs

	running   atomic.Int32 // partitions running now
	joined    atomic.Bool
	processed atomic.Int64 // records committed (applied, duplicate, invalid or skipped)
}

// New validates o and returns a member that has not joined yet.
func New(o Options) (*Group, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.RebalanceTimeout == 0 {
		o.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	store, err := dedup.NewRedis(o.Redis, dedup.RedisOptions{Prefix: o.Prefix, Topic: o.Topic, EventTTL: o.EventTTL,
		AlarmRetention: o.AlarmRetention, Replicas: o.Replicas})
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Group{o: o, log: o.Logger, store: store, m: m}, nil
}

// Joined reports whether the member has joined the group once.
func (g *Group) Joined() bool { return g.joined.Load() }

// Partitions is the number of partitions the member runs now.
func (g *Group) Partitions() int { return int(g.running.Load()) }

// Processed is the number of records whose batch committed (applied,
// duplicate, invalid, or skipped at or below the applied offset).
func (g *Group) Processed() int64 { return g.processed.Load() }

// Run is a member of the group until ctx ends; it returns nil then, or the
// error that ended the group.
func (g *Group) Run(ctx context.Context) error {
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                g.o.Group,
		Brokers:           g.o.Brokers,
		Dialer:            g.o.Dialer,
		Topics:            []string{g.o.Topic},
		HeartbeatInterval: g.o.HeartbeatInterval,
		SessionTimeout:    g.o.SessionTimeout,
		RebalanceTimeout:  g.o.RebalanceTimeout,
		JoinGroupBackoff:  time.Second,
		StartOffset:       kafka.FirstOffset,
		// WatchPartitionChanges is off: a partition count change moves
		// drones between partitions, which docs/exactly-once.md rules out.
		ErrorLogger: slogKafka{g.log, slog.LevelWarn},
	})
	if err != nil {
		return fmt.Errorf("consumer group: %w", err)
	}
	// Closed after the group (defers run last first): the generation's
	// partitions end before their fetches do.
	g.hub = newFetchHub(g.o.Dialer, g.o.Brokers, g.o.Topic, max(2*g.o.Batch, 1000), g.log, func(n int64) { g.m.lost.Add(float64(n)) })
	defer g.hub.close()
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
			g.log.Warn("join consumer group", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		g.joined.Store(true)
		parts := gen.Assignments[g.o.Topic]
		ids := make([]int, len(parts))
		for i, p := range parts {
			ids[i] = p.ID
		}
		g.log.Info("assigned", "generation", gen.ID, "member", gen.MemberID, "partitions", ids)
		oc := newOffsetCommitter()
		gen.Start(func(gctx context.Context) { oc.run(gctx, gen, g.o.Topic, g.log) })
		for _, p := range parts {
			gen.Start(func(gctx context.Context) { g.ownPartition(gctx, oc, p.ID, p.Offset, gen.ID) })
		}
	}
}

// ownPartition runs the partition's engine and, when dispatch is on, its
// outbox dispatcher, for as long as this member owns the partition: both
// start on assignment and end together when the generation ends (revoke,
// rebalance, shutdown) or the engine is fenced (another member owns the
// partition). The generation, and so the next assignment, waits for both:
// the dispatcher returns only after its producer closed, so the next
// owner's dispatcher reads a final tail of the events topic.
func (g *Group) ownPartition(ctx context.Context, oc *offsetCommitter, partition int, committed int64, genID int32) {
	if g.o.Dispatcher == nil {
		g.runPartition(ctx, oc, partition, committed, genID)
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.o.Dispatcher.Run(pctx, partition); err != nil {
			g.log.Error("outbox dispatch", "partition", partition, "generation", genID, "err", err)
		}
	})
	g.runPartition(pctx, oc, partition, committed, genID)
	cancel()
	wg.Wait()
}

// runPartition processes one partition for the generation's lifetime:
// load, read, apply, commit; on an error of unknown outcome it reloads from
// Redis and goes on; when fenced it stops (a later generation reloads).
func (g *Group) runPartition(ctx context.Context, oc *offsetCommitter, partition int, committed int64, genID int32) {
	g.running.Add(1)
	g.m.assigned.Inc()
	defer func() {
		g.running.Add(-1)
		g.m.assigned.Dec()
		// Another member runs it now: its gauges are that member's.
		label := strconv.Itoa(partition)
		g.m.drones.DeleteLabelValues(label)
		g.m.clockLag.DeleteLabelValues(label)
	}()
	log := g.log.With("partition", partition, "generation", genID)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := g.consume(ctx, oc, partition, genID, committed, log)
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

type slogKafka struct {
	log   *slog.Logger
	level slog.Level
}

func (l slogKafka) Printf(format string, args ...any) {
	l.log.Log(context.Background(), l.level, fmt.Sprintf(format, args...), "component", "kafka-go")
}

// timing is the engines' clock settings: Options.Timing, keeping a drone
// that raised for the unique keys' life (EventTTL) unless set otherwise.
func (g *Group) timing() alerts.Timing {
	t := g.o.Timing
	if t.KeepAfterRaise == 0 {
		t.KeepAfterRaise = g.o.EventTTL
		if t.KeepAfterRaise == 0 {
			t.KeepAfterRaise = dedup.DefaultEventTTL
		}
	}
	return t
}
