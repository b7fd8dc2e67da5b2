package alerterd

import (
	"context"
	"log/slog"
	"time"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/kafkaperm"
)

// kafkaNeed is what the alerter does on Kafka, the grants of
// docs/operations.md "Least privilege": read the telemetry in its group,
// write (and read back the tail of) the events and audit topics under
// their transactional ids.
func (c Config) kafkaNeed(partitions int) kafkaperm.Need {
	n := kafkaperm.Need{
		Topics: map[string][]kafkaperm.Op{c.Topic: {kafkaperm.Describe, kafkaperm.Read}},
		Groups: []string{c.Group},
	}
	if c.EventsTopic != "" {
		n.Topics[c.EventsTopic] = []kafkaperm.Op{kafkaperm.Describe, kafkaperm.Read, kafkaperm.Write}
		for p := range partitions {
			n.TransactionalIDs = append(n.TransactionalIDs, outbox.TransactionalID(c.EventsTopic, p))
		}
	}
	if c.AuditTopic != "" {
		n.Topics[c.AuditTopic] = []kafkaperm.Op{kafkaperm.Describe, kafkaperm.Read, kafkaperm.Write}
		// auditkafka.NewKafka's transactional id.
		n.TransactionalIDs = append(n.TransactionalIDs, "nofly-audit:"+c.AuditTopic)
	}
	return n
}

// checkKafkaPermissions stops the start when the principal lacks one of
// kafkaNeed's operations (kafkaperm: asked of the broker, no side effects).
func checkKafkaPermissions(ctx context.Context, cfg Config, kc kafkaconn.Conn, partitions int, log *slog.Logger) error {
	tr := kc.Transport("nofly-alerter-admin")
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	need := cfg.kafkaNeed(partitions)
	c := kafkaperm.Conn{Brokers: cfg.Brokers, TLS: kc.TLS, SASL: kc.SASL, Transport: tr}
	if err := kafkaperm.Check(ctx, c, kafkaperm.Principal(cfg.KafkaSASLUser), need); err != nil {
		if kafkaperm.IsDenied(err) {
			return err
		}
		// Not an answer (a broker or a coordinator down while the
		// alerter starts): the operations themselves wait it out, as
		// before this check.
		log.Warn("kafka permissions not checked", "err", err)
		return nil
	}
	log.Debug("kafka permissions checked", "principal", kafkaperm.Principal(cfg.KafkaSASLUser),
		"topics", len(need.Topics), "transactional_ids", len(need.TransactionalIDs), "took", time.Since(start).Round(time.Millisecond))
	return nil
}
