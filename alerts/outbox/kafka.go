package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/producer"
)

// Record headers of alerts.events.
const (
	HeaderOutboxID = "nofly-outbox-id"
	HeaderEventID  = "nofly-event-id"
)

// kafkaOutputName names the Kafka output in metrics and Redis keys.
const kafkaOutputName = "kafka"

// Producer is what the Kafka output needs of producer.Producer: Produce
// returns once every record is acknowledged, and Close waits for every batch
// in flight, so that after it returns the topic's tail is final.
type Producer interface {
	Produce(ctx context.Context, recs []producer.Record) error
	Close(ctx context.Context) error
}

// TailReader reads the end of a partition of alerts.events.
type TailReader interface {
	// Tail reads the partition's last record.
	Tail(ctx context.Context, partition int) (Tail, error)
	// EndOffset returns the partition's high watermark. The Kafka output
	// checks it before each produce: the end offset is the version of the
	// partition, and one it did not expect means another writer (a zombie
	// dispatcher, a new owner) appended, so it re-reads the tail instead
	// of sending what may already be there.
	EndOffset(ctx context.Context, partition int) (int64, error)
}

// Tail describes the end of a partition.
type Tail struct {
	// End is the high watermark: the offset the next record will get.
	End int64
	// Found reports whether the last record (offset End-1) could be read;
	// false when the partition is empty or retention deleted every record.
	Found bool
	// Headers of the last record, when Found.
	Headers []producer.Header
}

// KafkaOutput is the Kafka side of a Dispatcher: a producer per running
// partition and a reader of the partition's last record.
type KafkaOutput struct {
	// NewProducer returns a producer of alerts.events. It is called when a
	// partition starts and again after each produce error (the old one is
	// closed first).
	NewProducer func(ctx context.Context) (Producer, error)
	// Tail reads the last record of a partition of alerts.events.
	Tail TailReader
}

// NewKafkaOutput writes to topic through our idempotent producer. cfg's
// Brokers and Topic are set from the arguments; its Linger defaults to none
// (the dispatcher hands a whole batch to each Produce and waits for it).
func NewKafkaOutput(brokers []string, topic string, cfg producer.Config) *KafkaOutput {
	cfg.Brokers, cfg.Topic = brokers, topic
	if cfg.Linger == 0 {
		cfg.Linger = -1
	}
	return &KafkaOutput{
		NewProducer: func(ctx context.Context) (Producer, error) {
			return producer.New(ctx, cfg)
		},
		Tail: &KafkaTail{Brokers: brokers, Topic: topic},
	}
}

// KafkaTail reads the last record of a partition with kafka-go's Client:
// ListOffsets for the high watermark, then a Fetch at End-1.
type KafkaTail struct {
	Brokers []string
	Topic   string
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration

	mu sync.Mutex
	tr *kafka.Transport // EndOffset's pooled connections
}

func (k *KafkaTail) client(tr *kafka.Transport) *kafka.Client {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	return &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: timeout, Transport: tr}
}

func (k *KafkaTail) offsets(ctx context.Context, c *kafka.Client, partition int) (kafka.PartitionOffsets, error) {
	res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{k.Topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}},
	})
	if err != nil {
		return kafka.PartitionOffsets{}, fmt.Errorf("outbox: list offsets of %s/%d: %w", k.Topic, partition, err)
	}
	for _, po := range res.Topics[k.Topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return kafka.PartitionOffsets{}, fmt.Errorf("outbox: list offsets of %s/%d: %w", k.Topic, partition, po.Error)
		}
		return po, nil
	}
	return kafka.PartitionOffsets{}, fmt.Errorf("outbox: list offsets of %s/%d: partition not in the answer", k.Topic, partition)
}

// EndOffset implements TailReader, on pooled connections that are dropped
// after an error (they may be stale after a broker restart).
func (k *KafkaTail) EndOffset(ctx context.Context, partition int) (int64, error) {
	k.mu.Lock()
	if k.tr == nil {
		k.tr = &kafka.Transport{}
	}
	tr := k.tr
	k.mu.Unlock()
	po, err := k.offsets(ctx, k.client(tr), partition)
	if err != nil {
		tr.CloseIdleConnections()
		return 0, err
	}
	return po.LastOffset, nil
}

// CloseIdleConnections drops EndOffset's pooled connections; the Kafka
// output calls it when it stops.
func (k *KafkaTail) CloseIdleConnections() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tr != nil {
		k.tr.CloseIdleConnections()
	}
}

// Tail implements TailReader. It uses a fresh transport each call (called
// once per start or error, and a pooled connection may be stale after a
// broker restart).
func (k *KafkaTail) Tail(ctx context.Context, partition int) (Tail, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := k.client(tr)
	po, err := k.offsets(ctx, c, partition)
	if err != nil {
		return Tail{}, err
	}
	t := Tail{End: po.LastOffset}
	if po.LastOffset <= po.FirstOffset {
		return t, nil // empty, or every record deleted
	}
	fr, err := c.Fetch(ctx, &kafka.FetchRequest{
		Topic: k.Topic, Partition: partition, Offset: po.LastOffset - 1,
		MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 500 * time.Millisecond,
	})
	if err != nil {
		return Tail{}, fmt.Errorf("outbox: fetch %s/%d@%d: %w", k.Topic, partition, po.LastOffset-1, err)
	}
	if fr.Error != nil {
		return Tail{}, fmt.Errorf("outbox: fetch %s/%d@%d: %w", k.Topic, partition, po.LastOffset-1, fr.Error)
	}
	if fr.Records == nil {
		return Tail{}, fmt.Errorf("outbox: fetch %s/%d@%d: no records", k.Topic, partition, po.LastOffset-1)
	}
	// The answer starts at the batch holding End-1; the last record read is
	// the partition's last (later ones, if any, are later still).
	var last *kafka.Record
	for {
		r, err := fr.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Tail{}, fmt.Errorf("outbox: read %s/%d@%d: %w", k.Topic, partition, po.LastOffset-1, err)
		}
		if r.Offset >= po.LastOffset-1 && (last == nil || r.Offset > last.Offset) {
			last = r
		}
	}
	if last == nil {
		return Tail{}, fmt.Errorf("outbox: fetch %s/%d@%d: the last record was not returned", k.Topic, partition, po.LastOffset-1)
	}
	t.Found = true
	t.End = max(t.End, last.Offset+1)
	for _, h := range last.Headers {
		t.Headers = append(t.Headers, producer.Header{Key: h.Key, Value: h.Value})
	}
	return t, nil
}

// ErrNoOutboxID: the last record of the partition has no nofly-outbox-id
// header, so the Kafka output cannot know where to resume. Something other
// than the dispatcher writes the partition; the output stops sending (it
// retries, logging this error) rather than guess.
var ErrNoOutboxID = errors.New("outbox: last record of the partition has no " + HeaderOutboxID + " header")

// ErrOtherWriter: the partition's end offset moved without this output
// writing: another dispatcher runs the same partition. The output re-reads
// the tail and goes on from there.
var ErrOtherWriter = errors.New("outbox: another writer appended to the alerts.events partition")

// resumeID reads where the Kafka output of partition p resumes: after the
// outbox id of the partition's last record; after the Redis cursor when
// retention emptied the partition; from the start when it never held a record.
func (o *output) resumeID(ctx context.Context) (string, int64, error) {
	id, t, err := o.resumeAfter(ctx)
	return id, t.End, err
}

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
					return "", t, fmt.Errorf("outbox: partition %d offset %d: %w", o.partition, t.End-1, err)
				}
				return id, t, nil
			}
		}
		return "", t, fmt.Errorf("outbox: partition %d offset %d: %w", o.partition, t.End-1, ErrNoOutboxID)
	}
	if t.End == 0 {
		return startID, t, nil
	}
	cur, err := o.rdb.Get(ctx, o.keys.cursor(o.name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		o.log.Warn("alerts.events partition holds no record but had some, and no cursor in Redis: resending the whole outbox",
			"end_offset", t.End)
		return startID, t, nil
	case err != nil:
		return "", t, fmt.Errorf("outbox: get kafka cursor: %w", err)
	}
	o.log.Warn("alerts.events partition holds no record but had some (retention?): resuming after the Redis cursor",
		"end_offset", t.End, "cursor", cur)
	return cur, t, nil
}

// runKafka drains the outbox into alerts.events partition p until ctx ends.
// Any produce error leaves the batch's outcome unknown: the producer is
// closed (waiting for what is in flight) and the tail read again.
func (o *output) runKafka(ctx context.Context) {
	var prod Producer
	defer func() {
		if prod != nil {
			o.closeProducer(prod)
		}
		if c, ok := o.kafka.Tail.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}()
	var after string
	var end int64 // the partition's end offset as this output expects it
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
			p, err := o.kafka.NewProducer(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fail("kafka output: new producer", err)
				}
				continue
			}
			prod = p
		}
		if !synced {
			id, e, err := o.resumeID(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fail("kafka output: read the tail of alerts.events", err)
				}
				continue
			}
			after, end, synced = id, e, true
			o.prog.restart(after)
			// Catch the advisory cursor up (a crash may have come between an
			// ack and its update).
			if err := advance(ctx, o.rdb, o.keys, o.name, after, nil); err != nil && ctx.Err() == nil {
				o.m.errors.Inc()
				o.log.Warn("kafka output: save cursor", "error", err)
			}
			o.log.Info("kafka output resumes", "after", after)
		}
		entries, err := readEntries(ctx, o.rdb, o.keys.outbox(), after, o.cfg.BatchSize, o.cfg.Block)
		if err != nil {
			if ctx.Err() == nil {
				fail("kafka output: read outbox", err)
			}
			continue
		}
		if len(entries) == 0 {
			continue
		}
		if e, err := o.kafka.Tail.EndOffset(ctx, o.partition); err != nil || e != end {
			if ctx.Err() != nil {
				continue
			}
			if err == nil {
				// Another writer appended: trust the tail, not our position.
				err = fmt.Errorf("%w: end offset %d, expected %d", ErrOtherWriter, e, end)
				synced = false
			}
			fail("kafka output: check the end offset of alerts.events", err)
			continue
		}
		if err := prod.Produce(ctx, o.records(entries)); err != nil {
			// Unknown outcome: settle what is in flight, then trust Kafka.
			o.closeProducer(prod)
			prod, synced = nil, false
			if ctx.Err() == nil {
				o.m.retries.Inc()
				fail("kafka output: produce", err)
			}
			continue
		}
		failures = 0
		after = entries[len(entries)-1].ID
		end += int64(len(entries))
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
func (o *output) records(entries []entry) []producer.Record {
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
