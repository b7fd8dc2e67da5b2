package alerterd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/internal/redisconn"
	"github.com/nofly-dev/nofly/internal/redisperm"
	"github.com/nofly-dev/nofly/producer"
)

func serveCmd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, newLogger(stderr, cfg.LogLevel), nil)
}

// serve runs the live alerter until ctx ends. started, if not nil, is
// called with the metrics address once everything is up (tests).
func serve(ctx context.Context, cfg Config, log *slog.Logger, started func(metricsAddr string)) error {
	// A bad token file is a configuration error before anything starts.
	auth, err := cfg.loadAPIAuth()
	if err != nil {
		return err
	}
	// SIGHUP is taken from here on (its default ends the process); one
	// that comes while the alerter starts is handled once it runs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	src := cfg.zoneSource()
	ix, rep, err := src.load()
	if err != nil {
		return err
	}
	var zones geofence.Current
	zones.Store(ix)
	logZoneReport(log, "zones loaded", rep, ix.Version())
	// The authorisations in use: filled by startAuthSync below, before the
	// group runs; until then (and with nothing stored) none.
	var auths authorization.Current

	kc, err := cfg.openKafka(ctx, log)
	if err != nil {
		return err
	}
	rc, err := cfg.openRedis(ctx, storeTuning("nofly-alerter:"+cfg.Group))
	if err != nil {
		return err
	}
	defer rc.Close()
	// A Redis user short of a command or of the prefix's keys stops the
	// start here, named (docs/operations.md, Least privilege).
	if err := redisperm.Check(ctx, rc, cfg.RedisUser, cfg.RedisPrefix); err != nil {
		return err
	}
	// The telemetry topic is taken with whatever count it has (ingest
	// checks it); the events topic must match it.
	partitions, err := ensureTopic(ctx, cfg.Brokers, kc, kafkatopic.Spec{Name: cfg.Topic, Partitions: cfg.Partitions, AnyCount: true})
	if err != nil {
		return err
	}
	m := newMetrics()
	d, err := newDispatcher(ctx, cfg, kc, partitions, m, log)
	if err != nil {
		return err
	}
	if d != nil {
		defer d.close()
	}
	o := cfg.groupOptions(rc, &zones, log)
	o.Authorizations = &auths // decided with at every batch
	o.Dialer = kc.Dialer("nofly-alerter")
	o.Registerer = m.reg
	o.BeforeCommit = faultsFromEnv(os.Getenv, log).hook(log)
	if d != nil { // a nil *outbox.Dispatcher in the interface would not be nil
		o.Dispatcher = d.d
	}
	// The audit trail to Kafka, beside partition 0's engine (audit.go).
	ad, err := newAuditDispatch(ctx, cfg, kc, rc, partitions, log)
	if err != nil {
		return err
	}
	if ad != nil {
		o.Dispatcher = withAudit{next: o.Dispatcher, audit: ad}
	}
	// Every topic exists now: a missing ACL stops the start here, named.
	if err := checkKafkaPermissions(ctx, cfg, kc, partitions, log); err != nil {
		return err
	}
	g, err := consume.New(o)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// nofly_alerter_redis_up and nofly_alerter_kafka_up (probe.go).
	probes, closeProbes := newProbes(m.reg, rc, kc, cfg.Brokers, cfg.Topic)
	defer closeProbes()
	go runProbes(ctx, probeInterval, probes, log)
	addr := ""
	if cfg.HTTPAddr != "" {
		healthy := func(ctx context.Context) error {
			if !g.Joined() {
				return errors.New("not in the consumer group yet")
			}
			return rc.Ping(ctx).Err()
		}
		ready := func(ctx context.Context) error {
			if err := healthy(ctx); err != nil {
				return err
			}
			return kafkaReachable(ctx, cfg.Brokers)
		}
		h, err := newAPI(ctx, cfg, auth, partitions, m.reg, healthy, ready, log)
		if err != nil {
			return err
		}
		na, err := serveHTTP(ctx, cfg.HTTPAddr, h, cfg.Limits, m.reg, log)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
		}
		addr = na.String()
		log.Info("http", "addr", addr)
		auth.log(log, addr)
	}

	// The zones from the versioned zone store (zonesync.go): seeded from
	// --zones when empty, followed every second; SIGHUP stores the file.
	zsync, err := startZoneSync(ctx, cfg, rc, &zones, m, log)
	if err != nil {
		return err
	}
	// The authorisations from their versioned store (authsync.go): loaded
	// before the group runs, followed every second.
	if _, err := startAuthSync(ctx, cfg, rc, &auths, m, log); err != nil {
		return err
	}
	// SIGHUP also reads --api-tokens again (tokenreload.go), each reload
	// an entry of the audit trail.
	auditLog := cfg.auditLog(rc, partitions) // --audit-retention
	tokens := newTokenReloader(auth.store, m.reg, log).withAudit(auditLog)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				tokens.reload(ctx)
				zsync.reload(ctx)
			}
		}
	}()
	if started != nil {
		started(addr)
	}
	return g.Run(ctx)
}

// groupOptions are the runtime's options for cfg over the Redis client rc
// (newRedisClient: no retries) and the zone holder zones; metrics, fault
// injection and dispatch are the caller's to add.
func (c Config) groupOptions(rc redis.UniversalClient, zones *geofence.Current, log *slog.Logger) consume.Options {
	return consume.Options{
		Brokers: c.Brokers, Topic: c.Topic, Group: c.Group,
		Batch: c.Batch, Linger: c.Linger, LingerIdle: c.LingerIdle,
		SessionTimeout: c.SessionTimeout, HeartbeatInterval: c.HeartbeatInterval, RebalanceTimeout: c.RebalanceTimeout,
		Redis: rc, Prefix: c.RedisPrefix, EventTTL: c.EventTTL, AlarmRetention: c.AlarmRetention, Replicas: c.replicas(),
		Zones: zones, Logger: log, Timing: c.timing(), Approach: c.approach(),
	}
}

// approach is the engines' approaching warnings from the flags (checked
// by Validate).
func (c Config) approach() alerts.ApproachSettings {
	a, _ := alerts.ParseApproachBefore(c.ApproachBefore)
	return alerts.ApproachSettings{Before: a, BufferM: float64(c.ApproachBufferM)}
}

// timing is the engines' clock settings from the flags.
func (c Config) timing() alerts.Timing {
	return alerts.Timing{SignalLostAfter: c.SignalLostAfter, DroneTTL: c.DroneTTL, KeepAfterRaise: c.EventTTL}
}

// dispatch is the outbox dispatcher of a serving alerter and its Redis
// client.
type dispatch struct {
	d   *outbox.Dispatcher
	rdb redis.UniversalClient
}

func (d *dispatch) close() { _ = d.rdb.Close() }

// newDispatcher returns the outbox dispatcher the alerter runs for each
// partition it owns, or nil when no output is configured. It creates the
// events topic with the telemetry topic's partition count (partition p's
// outbox goes to its partition p) and fails if it exists with another.
// The dispatcher has its own Redis client: each output of each running
// partition holds one connection in XREAD BLOCK.
func newDispatcher(ctx context.Context, cfg Config, kc kafkaconn.Conn, partitions int, m *metrics, log *slog.Logger) (*dispatch, error) {
	if !cfg.dispatching() {
		log.Warn("outbox dispatch is off: no events topic and no webhook")
		return nil, nil
	}
	var ko *outbox.KafkaOutput
	if cfg.EventsTopic != "" {
		if _, err := ensureTopic(ctx, cfg.Brokers, kc, kafkatopic.Spec{Name: cfg.EventsTopic, Partitions: partitions}); err != nil {
			if errors.Is(err, kafkatopic.ErrPartitionCount) {
				return nil, fmt.Errorf("events topic %s must have the partition count of the telemetry topic %s (%d), since partition p's events go to its partition p; recreate it or choose another --events-topic: %w",
					cfg.EventsTopic, cfg.Topic, partitions, err)
			}
			return nil, fmt.Errorf("events topic: %w", err)
		}
		ko = outbox.NewKafkaOutput(cfg.Brokers, cfg.EventsTopic, producer.Config{ClientID: "nofly-outbox", Logger: log, TLS: kc.TLS, SASL: kc.SASL})
	}
	outputs := len(cfg.Webhooks) + len(cfg.Alertmanagers)
	if ko != nil {
		outputs++
	}
	rdb, err := cfg.openRedis(ctx, redisconn.Tuning{Name: "nofly-outbox:" + cfg.Group,
		// Every output of every partition blocks one connection in XREAD;
		// the lag gauges and cursor writes need a few more. (Per node on
		// a cluster, so a little more than needed there.)
		PoolSize: partitions*(outputs+1) + 4, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	oc := cfg.dispatchConfig()
	oc.Registerer = m.reg
	oc.Logger = log
	d, err := outbox.NewDispatcher(oc, rdb, ko)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("outbox dispatcher: %w", err)
	}
	hooks := make([]string, len(cfg.Webhooks))
	for i, w := range cfg.Webhooks {
		hooks[i] = w.Name
	}
	log.Info("outbox dispatch", "events_topic", cfg.EventsTopic, "partitions", partitions, "webhooks", hooks, "alertmanagers", cfg.Alertmanagers)
	return &dispatch{d: d, rdb: rdb}, nil
}

// reloadZones swaps in the zone file's current content; a bad file, or one
// that leaves no zone without --allow-empty-zones, keeps the zones in use.
// Alarms of removed or changed zones clear at their drone's next position.
func reloadZones(src zoneSource, zones *geofence.Current, m *metrics, log *slog.Logger) {
	ix, rep, err := src.load()
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		log.Error("zone reload failed; keeping the zones in use", "err", err, "zones_in_use", len(zones.Load().Zones()))
		return
	}
	logZoneReport(log, "zone file reloaded", rep, ix.Version())
	old := zones.Store(ix)
	ch := geofence.Diff(old, ix)
	m.reloads.WithLabelValues("ok").Inc()
	log.Info("zones reloaded", "version", ix.Version(), "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
}

// ensureTopic is kafkatopic.Ensure over kc's TLS and SASL settings.
func ensureTopic(ctx context.Context, brokers []string, kc kafkaconn.Conn, s kafkatopic.Spec) (int, error) {
	tr := kc.Transport("nofly-alerter-admin")
	defer tr.CloseIdleConnections()
	s.Transport = tr
	return kafkatopic.Ensure(ctx, brokers, s)
}
