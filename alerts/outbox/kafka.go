package outbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/producer"
)

// Record headers of alerts.events.
const (
	HeaderOutboxID = "nofly-outbox-id"
	HeaderEventID  = "nofly-event-id"
)

// kafkaOutputName names the Kafka output in metrics and Redis keys.
const kafkaOutputName = redislayout.KafkaOutput

// Producer is what the Kafka output needs of producer.TxnWriter: Produce
// returns once the records are committed, and after an error the producer
// is dropped and a new one made, whose start settles the old one's work.
type Producer interface {
	Produce(ctx context.Context, recs []producer.Record) error
	Close(ctx context.Context) error
}

// TailReader reads the committed end of a partition of alerts.events.
type TailReader interface {
	// Tail reads the partition's last committed record.
	Tail(ctx context.Context, partition int) (Tail, error)
}

// Tail describes the committed end of a partition.
type Tail struct {
	// Start is the log start offset: above 0 once retention deleted records.
	Start int64
	// End is the last stable offset: below it every transaction is decided.
	End int64
	// Found reports whether a committed record is left; false when the
	// partition holds none (never written, only aborted writes, or
	// retention deleted them).
	Found bool
	// Offset and Headers of the last committed record, when Found.
	Offset  int64
	Headers []producer.Header
}

// KafkaOutput is the Kafka side of a Dispatcher: a producer per running
// partition and a reader of the partition's committed tail.
type KafkaOutput struct {
	// NewProducer returns a writer of partition p of alerts.events. It is
	// called when the partition starts and again after each produce error
	// (the old one is closed first). The Kafka output reads the tail only
	// after it returned, so the producer must fence earlier writers of p,
	// and leave nothing of theirs undecided on p, before it returns, as
	// producer.NewTxnWriter does.
	NewProducer func(ctx context.Context, partition int) (Producer, error)
	// Tail reads the last committed record of a partition of alerts.events.
	Tail TailReader
}

// TransactionalID is the transactional id of the writer of partition p of
// topic: one per partition, so that a new owner fences the old one.
func TransactionalID(topic string, partition int) string {
	return "nofly-outbox:" + topic + ":" + strconv.Itoa(partition)
}

// NewKafkaOutput writes to topic through producer.TxnWriter, one
// transaction per batch under TransactionalID(topic, p). cfg's Brokers and
// Topic are set from the arguments.
func NewKafkaOutput(brokers []string, topic string, cfg producer.Config) *KafkaOutput {
	cfg.Brokers, cfg.Topic = brokers, topic
	return &KafkaOutput{
		NewProducer: func(ctx context.Context, partition int) (Producer, error) {
			return producer.NewTxnWriter(ctx, cfg, producer.TxnOptions{
				Partition: partition, TransactionalID: TransactionalID(topic, partition),
			})
		},
		Tail: &KafkaTail{Brokers: brokers, Topic: topic, TLS: cfg.TLS, SASL: cfg.SASL},
	}
}

// KafkaTail reads the last committed record of a partition, as a
// read_committed consumer sees the partition (internal/committed).
type KafkaTail struct {
	Brokers []string
	Topic   string
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// TLS and SASL secure its connections as the writer's are (nil: off).
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// Tail implements TailReader. It uses a fresh transport each call (called
// once per start or error, and a pooled connection may be stale after a
// broker restart).
func (k *KafkaTail) Tail(ctx context.Context, partition int) (Tail, error) {
	tr := &kafka.Transport{TLS: k.TLS, SASL: k.SASL}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(k.Brokers...), Topic: k.Topic, Transport: tr, Timeout: k.Timeout}
	last, ok, start, stable, err := r.Last(ctx, partition)
	if err != nil {
		return Tail{}, fmt.Errorf("outbox: read the tail of %s/%d: %w", k.Topic, partition, err)
	}
	t := Tail{Start: start, End: stable, Found: ok}
	if ok {
		t.Offset = last.Offset
		for _, h := range last.Headers {
			t.Headers = append(t.Headers, producer.Header{Key: h.Key, Value: h.Value})
		}
	}
	return t, nil
}

// ErrNoOutboxID: the last record of the partition has no nofly-outbox-id
// header, so the Kafka output cannot know where to resume. Something other
// than the dispatcher writes the partition; the output stops sending (it
// retries, logging this error) rather than guess.
var ErrNoOutboxID = errors.New("outbox: last record of the partition has no " + HeaderOutboxID + " header")

// resumeAfter reads where the Kafka output of partition p resumes: after
// the outbox id of the partition's last committed record; after the Redis
// cursor when retention emptied the partition; from the start when it never
// held a committed record.
func (o *output) resumeAfter(ctx context.Context) (string, Tail, error) {
	t, err := o.kafka.Tail.Tail(ctx, o.partition)
	if err != nil {
		return "", t, err
	}
	if t.Found {
		for _, h := range t.Headers {
			if h.Key == HeaderOutboxID {
				id := string(h.Value)
				if _, _, err := parseID(id); err != nil {
					return "", t, fmt.Errorf("outbox: partition %d offset %d: %w", o.partition, t.Offset, err)
				}
				return id, t, nil
			}
		}
		return "", t, fmt.Errorf("outbox: partition %d offset %d: %w", o.partition, t.Offset, ErrNoOutboxID)
	}
	if t.Start == 0 {
		return redislayout.StartID, t, nil // nothing committed was ever deleted: none ever was
	}
	cur, err := o.rdb.Get(ctx, o.keys.Cursor(o.name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		o.log.Warn("alerts.events partition holds no committed record but retention deleted some, and no cursor in Redis: resending the whole outbox",
			"log_start_offset", t.Start)
		return redislayout.StartID, t, nil
	case err != nil:
		return "", t, fmt.Errorf("outbox: get %s: %w", o.keys.Cursor(o.name), err)
	}
	o.log.Warn("alerts.events partition holds no committed record but retention deleted some: resuming after the Redis cursor",
		"log_start_offset", t.Start, "cursor", cur)
	return cur, t, nil
}

// runKafka drains the outbox into alerts.events partition p until ctx ends.
// Each batch is one transaction. Any produce error leaves the batch's
// outcome unknown: the producer is dropped, and the next one's start
// settles it (commits or aborts), fencing whoever else writes p, before the
// committed tail is read again. Fenced means another dispatcher of p started
// after this one (a new owner, or this one's zombie twin): back off and
// start again; ownership settles with the consumer group, and whichever
// writer starts last reads the committed tail first, so nothing is doubled.
func (o *output) runKafka(ctx context.Context) {
	var prod Producer
	defer func() {
		if prod != nil {
			o.closeProducer(prod)
		}
	}()
	var after string
	synced := false
	failures := 0
	fail := func(msg string, err error) {
		failures++
		o.m.errors.Inc()
		d := jittered(o.cfg.Backoff, o.cfg.BackoffMax, failures)
		o.log.Error(msg, "error", err, "attempt", failures, "retry_in", d)
		sleep(ctx, d)
	}
	for ctx.Err() == nil {
		if prod == nil {
			p, err := o.kafka.NewProducer(ctx, o.partition)
			if err != nil {
				if ctx.Err() == nil {
					fail("kafka output: new producer", err)
				}
				continue
			}
			prod, synced = p, false
		}
		if !synced {
			id, _, err := o.resumeAfter(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fail("kafka output: read the tail of alerts.events", err)
				}
				continue
			}
			after, synced = id, true
			o.prog.restart(after)
			// Catch the advisory cursor up (a crash may have come between an
			// ack and its update).
			if err := advance(ctx, o.rdb, o.keys, o.name, after, nil); err != nil && ctx.Err() == nil {
				o.m.errors.Inc()
				o.log.Warn("kafka output: save cursor", "error", err)
			}
			o.log.Info("kafka output resumes", "after", after)
		}
		entries, err := redislayout.ReadOutbox(ctx, o.rdb, o.keys, after, o.cfg.BatchSize, o.cfg.Block)
		if err != nil {
			if ctx.Err() == nil {
				fail("kafka output: read outbox", err)
			}
			continue
		}
		if len(entries) == 0 {
			continue
		}
		if err := o.confirm(ctx, entries); err != nil {
			if ctx.Err() == nil {
				fail("kafka output: outbox entries not yet on enough Redis replicas; holding them", err)
			}
			continue
		}
		if err := prod.Produce(ctx, o.records(entries)); err != nil {
			o.closeProducer(prod)
			prod = nil
			if ctx.Err() != nil {
				continue
			}
			if errors.Is(err, producer.ErrFenced) {
				o.m.fenced.Inc()
				fail("kafka output: fenced by a newer writer of this partition of alerts.events", err)
				continue
			}
			o.m.retries.Inc()
			fail("kafka output: produce", err)
			continue
		}
		failures = 0
		after = entries[len(entries)-1].ID
		o.m.delivered.Add(float64(len(entries)))
		o.prog.add(len(entries))
		if err := advance(ctx, o.rdb, o.keys, o.name, after, nil); err != nil && ctx.Err() == nil {
			// Advisory only (Kafka is the cursor); keep going.
			o.m.errors.Inc()
			o.log.Warn("kafka output: save cursor", "error", err)
		}
	}
}

func (o *output) closeProducer(p Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.CloseTimeout)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		o.log.Error("kafka output: close producer: batches may still be in flight", "error", err)
	}
}

// records builds one record per entry, in stream order, all to partition p.
func (o *output) records(entries []redislayout.Entry) []producer.Record {
	recs := make([]producer.Record, len(entries))
	for i, e := range entries {
		var ev struct {
			DroneID string `json:"drone_id"`
		}
		if err := json.Unmarshal(e.Event, &ev); err != nil || ev.DroneID == "" {
			o.log.Warn("kafka output: event without drone_id, sent without a key", "outbox_id", e.ID, "error", err)
		}
		var key []byte
		if ev.DroneID != "" {
			key = []byte(ev.DroneID)
		}
		recs[i] = producer.Record{
			Key:   key,
			Value: e.Event,
			Headers: []producer.Header{
				{Key: HeaderOutboxID, Value: []byte(e.ID)},
				{Key: HeaderEventID, Value: []byte(e.EventID)},
			},
			Partition: o.partition,
		}
	}
	return recs
}

// confirm returns once the partition's primary has cfg.Replicas replicas
// holding entries (at once when that is off): a failover cannot then take
// back what is about to be sent.
func (o *output) confirm(ctx context.Context, entries []redislayout.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	return o.cfg.Replicas.Confirm(ctx, o.rdb, o.keys.ReplCheck(), entries[len(entries)-1].ID)
}
