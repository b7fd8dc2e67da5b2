package ingestd

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/ingest/feedkey"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/kafkaperm"
	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/producer"
)

//go:embed openapi.yaml
var openapiYAML []byte

func serveCmd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := newFlagSet("ingest serve")
	fs.SetOutput(stderr)
	fs.kafkaFlags(&cfg)
	fs.serveFlags(&cfg)
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	svc, err := newService(cfg, newLogger(stderr, cfg.LogLevel))
	if err != nil {
		return err
	}
	return svc.run(ctx)
}

// service is the HTTP intake wired to the idempotent producer.
type service struct {
	cfg   Config
	log   *slog.Logger
	ln    net.Listener
	http  *http.Server
	api   *ingest.Server
	prod  lazyProducer
	admin *kafka.Client  // topic creation and readiness; its own transport
	kc    kafkaconn.Conn // TLS and SASL of every Kafka connection
	// dial ensures the topic and makes the producer; tests replace it.
	dial  func(ctx context.Context) (kafkaProducer, error)
	feeds *feedkey.Set // nil without --feed-keys
	ticks *ticker      // the clock ticks, once connected
	lag   *lagWatcher  // Kafka's up-ness and the consumer groups' lag (lag.go)
	// reloader reads --feed-keys again on SIGHUP (nil without it).
	reloader *feedReloader
}

// kafkaProducer is what the service uses of *producer.Producer.
type kafkaProducer interface {
	Produce(ctx context.Context, recs []producer.Record) error
	Stats() producer.Stats
	Close(ctx context.Context) error
}

// noBound maps a flag's 0 (no bound) to ingest's negative.
func noBound(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// newService listens on cfg.Addr and builds the handler. Kafka is reached
// in run: the process serves /healthz (and 503s) while the broker is away.
func newService(cfg Config, log *slog.Logger) (*service, error) {
	// Unreadable TLS or password files are configuration errors: the
	// process does not start (a refused password is found in connect).
	kc, err := cfg.Security.Load()
	if err != nil {
		return nil, err
	}
	s := &service{cfg: cfg, log: log, kc: kc}
	s.dial = s.dialKafka
	tr := kc.Transport("nofly-ingest-admin")
	tr.MetadataTTL = 5 * time.Second
	s.admin = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		ingest.NewStatsCollector(s.prod.Stats))
	if err := s.loadFeeds(); err != nil {
		return nil, err
	}
	s.ticks = newTicker(&s.prod, cfg.Partitions, cfg.TickInterval, reg, log)
	s.lag = newLagWatcher(s.admin, cfg.Topic, cfg.LagGroups, reg, log)
	api, err := ingest.NewServer(ingest.Options{
		Producer: &s.prod,
		Limits: ingest.Limits{MaxBodyBytes: cfg.MaxBodyBytes, MaxRecords: cfg.MaxRecords,
			MaxLineBytes: cfg.MaxLineBytes},
		ProduceTimeout: cfg.ProduceTimeout,
		RetryAfter:     cfg.RetryAfter,
		Ready:          s.ready,
		Registry:       reg,
		Logger:         log,

		Feeds:              s.feeds,
		InsecureOpenIntake: cfg.InsecureOpenIntake,
		Web:                httpguard.Config{Listen: cfg.Addr, PublicURLs: cfg.PublicURLs, TrustedProxies: cfg.TrustedProxies},

		MaxClockSkewAhead: noBound(cfg.MaxClockSkewAhead),
		MaxRecordAge:      cfg.MaxRecordAge,
	})
	if err != nil {
		return nil, err
	}
	api.Router().Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapiYAML)
	})
	s.api = api
	s.reloader = newFeedReloader(s, reg)
	// Timeouts, a header bound and a connection cap (internal/httpserve):
	// no client may hold ingest's connections or descriptors, which its
	// producer needs for Kafka.
	s.http = httpserve.NewServer(api, cfg.Limits, log)
	s.ln, err = cfg.Limits.Listen(cfg.Addr, func(n int) []byte {
		b, _ := json.Marshal(map[string]string{"error": fmt.Sprintf("ingest has %d connections open, the most it takes (--http-max-conns); retry later", n),
			"code": "too_many_connections"})
		return b
	}, httpserve.NewMetrics(reg), log)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	return s, nil
}

// Addr is the address the service listens on.
func (s *service) Addr() string { return s.ln.Addr().String() }

// run serves until ctx ends, then shuts down gracefully: /readyz turns 503,
// the listener closes, in-flight requests finish (their Produce calls
// complete or time out), then the producer sends what is queued and closes.
func (s *service) run(ctx context.Context) error {
	s.log.Info("ingest listening", "addr", s.Addr(), "brokers", s.cfg.Brokers, "topic", s.cfg.Topic,
		"partitions", s.cfg.Partitions)
	s.logIntake()
	s.reloadOnHUP(ctx)
	connCtx, stopConnect := context.WithCancel(ctx)
	defer stopConnect()
	fatal := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.lag.run(connCtx, lagInterval) // from the start: a Kafka never reached shows as down
	}()
	go func() {
		defer wg.Done()
		if err := s.connect(connCtx); err != nil {
			fatal <- err
			return
		}
		if connCtx.Err() == nil {
			s.ticks.run(connCtx) // until shutdown begins
		}
	}()
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fatal <- err
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: draining in-flight requests", "timeout", s.cfg.ShutdownTimeout)
	case runErr = <-fatal:
		s.log.Error("ingest stopping", "error", runErr)
	}
	s.api.Drain()
	stopConnect()
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests did not finish in time", "error", err)
		_ = s.http.Close()
	}
	if p := s.prod.get(); p != nil {
		if err := p.Close(sctx); err != nil {
			s.log.Warn("producer close", "error", err)
		}
		st := p.Stats()
		s.log.Info("producer closed", "records", st.Records, "batches", st.Batches, "retries", st.Retries,
			"duplicates", st.Duplicates, "failed", st.Failed)
	}
	if t, ok := s.admin.Transport.(*kafka.Transport); ok {
		t.CloseIdleConnections()
	}
	s.log.Info("ingest stopped")
	return runErr
}

// connect ensures the topic and starts the producer, retrying while Kafka is
// unreachable. A topic with another partition count is fatal: the murmur2
// mapping of drones to partitions, which the alerter's per-partition state
// relies on, would change under it.
func (s *service) connect(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		p, err := s.dial(ctx)
		// Retrying cannot fix another partition count, refused
		// credentials or a failed TLS handshake: the process stops and
		// says why, instead of looking like a broker outage.
		if errors.Is(err, errPartitionCount) || kafkaconn.Permanent(err) || kafkaperm.IsDenied(err) {
			return err
		}
		if err == nil {
			s.prod.set(p)
			s.log.Info("connected to kafka", "producer_id", p.Stats().ProducerID, "security", s.cfg.Security.Describe())
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		backoff := min(time.Duration(1<<min(attempt, 5))*250*time.Millisecond, 5*time.Second)
		s.log.Warn("kafka not reachable yet, retrying", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

func (s *service) dialKafka(ctx context.Context) (kafkaProducer, error) {
	if err := s.kc.Check(ctx, s.cfg.Brokers); err != nil {
		return nil, err
	}
	if err := ensureTopic(ctx, s.admin, s.cfg); err != nil {
		return nil, err
	}
	// A missing ACL (WRITE on the topic) stops the start, named, instead
	// of failing every batch later (docs/operations.md, Least privilege).
	need := kafkaperm.Need{Topics: map[string][]kafkaperm.Op{s.cfg.Topic: {kafkaperm.Describe, kafkaperm.Write}}}
	c := kafkaperm.Conn{Brokers: s.cfg.Brokers, TLS: s.kc.TLS, SASL: s.kc.SASL, Transport: s.admin.Transport}
	if err := kafkaperm.Check(ctx, c, kafkaperm.Principal(s.cfg.KafkaSASLUser), need); err != nil {
		return nil, err
	}
	return producer.New(ctx, producer.Config{Brokers: s.cfg.Brokers, Topic: s.cfg.Topic,
		ClientID: "nofly-ingest", Logger: s.log, TLS: s.kc.TLS, SASL: s.kc.SASL})
}

// ready: the producer is up and the broker answers metadata for the topic
// with a leader for every partition.
func (s *service) ready(ctx context.Context) error {
	if s.prod.get() == nil {
		return errors.New("not connected to kafka yet")
	}
	return topicReady(ctx, s.admin, s.cfg.Topic)
}

// errPartitionCount: the topic exists with another partition count than
// configured.
var errPartitionCount = kafkatopic.ErrPartitionCount

// topicWait bounds one ensureTopic: long enough for a new topic's leaders,
// short enough that connect logs its retries while Kafka is down.
const topicWait = 10 * time.Second

// ensureTopic creates the topic with the configured partition count and
// replication unless it exists (auto-creation is off on the broker), and waits
// until every partition has a leader. Another partition count fails at once,
// naming the setting.
func ensureTopic(ctx context.Context, c *kafka.Client, cfg Config) error {
	_, err := kafkatopic.Ensure(ctx, cfg.Brokers, kafkatopic.Spec{Name: cfg.Topic, Partitions: cfg.Partitions,
		Replication: cfg.Replication, Wait: topicWait, Transport: c.Transport})
	if errors.Is(err, errPartitionCount) {
		return fmt.Errorf("%w (the count wanted is NOFLY_TELEMETRY_PARTITIONS, --partitions)", err)
	}
	return err
}

// topicReady checks that the broker answers metadata for topic with a leader
// for every partition.
func topicReady(ctx context.Context, c *kafka.Client, topic string) error {
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		if len(md.Topics) == 1 {
			return fmt.Errorf("topic %s: %w", topic, md.Topics[0].Error)
		}
		return fmt.Errorf("topic %s not in metadata", topic)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Error != nil || p.Leader.Host == "" {
			return fmt.Errorf("partition %d of %s has no leader", p.ID, topic)
		}
	}
	return nil
}

// lazyProducer is the producer once connect has made it; until then every
// Produce fails as broker unavailable (503).
type lazyProducer struct{ p atomic.Pointer[kafkaProducer] }

func (l *lazyProducer) set(p kafkaProducer) { l.p.Store(&p) }

func (l *lazyProducer) get() kafkaProducer {
	if p := l.p.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *lazyProducer) Produce(ctx context.Context, recs []producer.Record) error {
	p := l.get()
	if p == nil {
		return fmt.Errorf("%w: not connected to kafka yet", producer.ErrBrokerUnavailable)
	}
	return p.Produce(ctx, recs)
}

func (l *lazyProducer) Stats() producer.Stats {
	if p := l.get(); p != nil {
		return p.Stats()
	}
	return producer.Stats{}
}
