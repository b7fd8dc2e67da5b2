package alerterd

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/audit/auditkafka"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/producer"
)

// auditLog is the audit trail on rdb (--audit-retention).
func (c Config) auditLog(rdb redis.UniversalClient, partitions int) *audit.Log {
	return audit.NewLog(rdb, audit.Sources(c.RedisPrefix, c.Topic, partitions), c.AuditRetention, nil)
}

// newAuditDispatch returns the sender of the audit trail to --audit-topic
// (nil when it is empty), creating the topic with one partition (one
// writer, one order) and retention.ms = --audit-retention. It runs beside partition 0's engine (withAudit).
func newAuditDispatch(ctx context.Context, cfg Config, kc kafkaconn.Conn, rdb redis.UniversalClient, partitions int, log *slog.Logger) (*auditkafka.Dispatcher, error) {
	if cfg.AuditTopic == "" {
		log.Warn("audit trail kept in Redis only: no --audit-topic")
		return nil, nil
	}
	// Kept in Kafka as long as in Redis, when this creates it (an existing
	// topic keeps its own retention).
	spec := kafkatopic.Spec{Name: cfg.AuditTopic, Partitions: 1,
		Configs: map[string]string{"retention.ms": strconv.FormatInt(cfg.AuditRetention.Milliseconds(), 10)}}
	if _, err := ensureTopic(ctx, cfg.Brokers, kc, spec); err != nil {
		return nil, fmt.Errorf("audit topic: %w", err)
	}
	newProducer, tail := auditkafka.NewKafka(cfg.Brokers, cfg.AuditTopic, producer.Config{ClientID: "nofly-audit", Logger: log, TLS: kc.TLS, SASL: kc.SASL})
	return auditkafka.New(auditkafka.Options{Redis: rdb, Sources: cfg.auditLog(rdb, partitions).Sources(),
		NewProducer: newProducer, Tail: tail, Cursor: audit.Tag(cfg.RedisPrefix) + ":cursor:kafka", Log: log.With("component", "audit")})
}

// withAudit is the group's dispatcher: next (nil: none) for every
// partition, and the audit trail's sender while the instance owns
// partition 0, so one instance at a time writes the audit topic (a new
// owner's producer fences the old one's).
type withAudit struct {
	next  consume.Dispatcher
	audit *auditkafka.Dispatcher
}

func (w withAudit) Run(ctx context.Context, partition int) error {
	if partition != 0 {
		if w.next == nil {
			return nil
		}
		return w.next.Run(ctx, partition)
	}
	done := make(chan error, 1)
	go func() { done <- w.audit.Run(ctx) }()
	var err error
	if w.next != nil {
		err = w.next.Run(ctx, partition)
	} else {
		<-ctx.Done()
	}
	if aerr := <-done; err == nil {
		err = aerr
	}
	return err
}

// auditAuth records each sign-in and sign-out of the dashboard's single
// sign-on (api.Options.AuditAuth).
func auditAuth(rec audit.Recorder, log *slog.Logger) func(context.Context, api.AuthEvent) {
	return func(ctx context.Context, e api.AuthEvent) {
		outcome := audit.OutcomeOK
		if e.Outcome != "" {
			outcome = e.Outcome
		}
		err := rec.Record(ctx, audit.Entry{Who: e.Name, Role: e.Role, Via: e.Via, Action: e.Action, Client: e.Remote, Outcome: outcome, Status: e.Status})
		if err != nil {
			log.Error("audit: record a "+e.Action, "who", e.Name, "error", err)
		}
	}
}
