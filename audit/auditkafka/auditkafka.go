// Package auditkafka sends the audit trail (package audit) to the Kafka
// topic audit.events exactly once for read_committed readers, the way
// alerts/outbox sends alarm events to alerts.events: one writer of the
// topic's one partition, each batch a Kafka transaction under a fixed
// transactional id (a new writer fences the old one and settles what it
// left open), and Kafka itself the cursor. Every record carries the
// header nofly-audit-positions, every audit stream's last id sent as of
// that record, so a dispatcher that starts (or restarts after a produce
// error or a crash) reads the last committed record and resumes after
// those positions: nothing already there is sent again, nothing missing
// is skipped.
//
// The audit streams are one per store hash tag (audit.Sources), so no
// command spans slots on a Redis Cluster: each round reads every stream
// with its own XRANGE, in one pipeline, and polls (Options.Poll) when
// nothing is new. The alerter runs the dispatcher where it owns
// telemetry partition 0, so one instance writes at a time.
package auditkafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/producer"
)

// DefaultTopic is the topic of the audit trail.
const DefaultTopic = "audit.events"

// Record headers.
const (
	// HeaderPositions is "<source>=<stream id>,..." of every source as
	// of this record (it included).
	HeaderPositions = "nofly-audit-positions"
	// HeaderID is the entry's id (audit.Entry.ID).
	HeaderID = "nofly-audit-id"
	// HeaderTrail names the trail the record is of (its streams' keys'
	// prefix, the last source's key): a dispatcher resumes only from a
	// record of its own trail.
	HeaderTrail = "nofly-audit-trail"
)

// ErrOtherTrail: the topic's last record is of another deployment's trail
// (another Redis prefix or telemetry topic). Its positions mean nothing
// here, and writing would mix two trails: the dispatcher retries, logging
// this, until the topic is given to one deployment (--audit-topic).
var ErrOtherTrail = errors.New("auditkafka: the audit topic's last record is of another deployment's audit trail; give each deployment its own --audit-topic")

// ErrNoPositions: the topic's last record has no HeaderPositions header,
// so the dispatcher cannot know where to resume; it retries rather than
// guess.
var ErrNoPositions = errors.New("auditkafka: last record of the topic has no " + HeaderPositions + " header")

// Options configure a Dispatcher. Redis, Sources, NewProducer and Tail
// are required.
type Options struct {
	Redis   redis.UniversalClient
	Sources []audit.Source
	// NewProducer returns the topic's writer of partition 0, fencing any
	// earlier one before it returns (producer.NewTxnWriter does); Tail
	// reads the topic's committed end. NewKafka makes both.
	NewProducer func(ctx context.Context) (outbox.Producer, error)
	Tail        outbox.TailReader
	// Cursor is the Redis key of the advisory cursor (the positions last
	// sent): read only when retention emptied the topic.
	Cursor string
	// Poll is the wait when no stream has a new entry (500ms); Batch the
	// most entries read from each stream per round (500); Backoff the
	// first wait after an error, doubled up to 30s (1s).
	Poll    time.Duration
	Batch   int
	Backoff time.Duration
	Log     *slog.Logger
}

// TransactionalID is the transactional id of the writer of topic: a new
// writer fences the old one. One per topic, as one deployment's trail is
// the topic's (ErrOtherTrail); the Kafka ACLs name it
// (docs/operations.md).
func TransactionalID(topic string) string { return "nofly-audit:" + topic }

// NewKafka returns the producer and tail reader of topic for Options: a
// transactional writer of partition 0 under TransactionalID(topic). cfg's
// Brokers and Topic are set from the arguments.
func NewKafka(brokers []string, topic string, cfg producer.Config) (func(ctx context.Context) (outbox.Producer, error), outbox.TailReader) {
	cfg.Brokers, cfg.Topic = brokers, topic
	return func(ctx context.Context) (outbox.Producer, error) {
		return producer.NewTxnWriter(ctx, cfg, producer.TxnOptions{Partition: 0, TransactionalID: TransactionalID(topic)})
	}, &outbox.KafkaTail{Brokers: brokers, Topic: topic, TLS: cfg.TLS, SASL: cfg.SASL}
}

// Dispatcher sends the audit streams to Kafka.
type Dispatcher struct{ o Options }

// New returns a dispatcher of o.
func New(o Options) (*Dispatcher, error) {
	if o.Redis == nil || len(o.Sources) == 0 || o.NewProducer == nil || o.Tail == nil {
		return nil, errors.New("auditkafka: Options need Redis, Sources, NewProducer and Tail")
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Dispatcher{o: o}, nil
}

// positions are each source's last id sent ("" : none yet).
type positions map[string]string

func (p positions) String() string {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n + "=" + p[n])
	}
	return b.String()
}

func parsePositions(s string) (positions, error) {
	p := positions{}
	if s == "" {
		return p, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		n, id, ok := strings.Cut(f, "=")
		if !ok || n == "" {
			return nil, fmt.Errorf("auditkafka: positions %q", s)
		}
		if _, err := audit.Decode(n, id, "{}"); err != nil {
			return nil, fmt.Errorf("auditkafka: positions %q: %w", s, err)
		}
		p[n] = id
	}
	return p, nil
}

// Run sends until ctx ends; it returns only after its producer is closed.
func (d *Dispatcher) Run(ctx context.Context) error {
	var prod outbox.Producer
	defer func() {
		if prod != nil {
			d.closeProducer(prod)
		}
	}()
	var at positions
	failures := 0
	fail := func(msg string, err error) {
		failures++
		wait := min(d.o.Backoff<<min(failures-1, 5), 30*time.Second)
		d.o.Log.Error("audit dispatch: "+msg, "error", err, "attempt", failures, "retry_in", wait)
		sleep(ctx, wait)
	}
	for ctx.Err() == nil {
		if prod == nil {
			p, err := d.o.NewProducer(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fail("new producer", err)
				}
				continue
			}
			prod, at = p, nil
		}
		if at == nil {
			p, err := d.resume(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fail("read the tail of the audit topic", err)
				}
				continue
			}
			at = p
			d.o.Log.Info("audit dispatch resumes", "after", at.String())
		}
		recs, next, err := d.read(ctx, at)
		if err != nil {
			if ctx.Err() == nil {
				fail("read the audit streams", err)
			}
			continue
		}
		if len(recs) == 0 {
			sleep(ctx, d.o.Poll)
			continue
		}
		if err := prod.Produce(ctx, recs); err != nil {
			// Its outcome is unknown: the next producer settles it, and
			// the tail says where to go on.
			d.closeProducer(prod)
			prod = nil
			if ctx.Err() == nil {
				fail("produce", err)
			}
			continue
		}
		failures = 0
		at = next
		if d.o.Cursor != "" {
			if err := d.o.Redis.Set(ctx, d.o.Cursor, at.String(), 0).Err(); err != nil && ctx.Err() == nil {
				d.o.Log.Warn("audit dispatch: save the advisory cursor", "error", err)
			}
		}
	}
	return nil
}

// resume reads where to go on: the positions of the topic's last committed
// record; the advisory cursor when retention emptied the topic; every
// stream from its start when it never held a record.
func (d *Dispatcher) resume(ctx context.Context) (positions, error) {
	t, err := d.o.Tail.Tail(ctx, 0)
	if err != nil {
		return nil, err
	}
	if t.Found {
		var pos, trail string
		var hasPos bool
		for _, h := range t.Headers {
			switch h.Key {
			case HeaderPositions:
				pos, hasPos = string(h.Value), true
			case HeaderTrail:
				trail = string(h.Value)
			}
		}
		if !hasPos {
			return nil, fmt.Errorf("offset %d: %w", t.Offset, ErrNoPositions)
		}
		if trail != d.trail() {
			return nil, fmt.Errorf("offset %d is of %q, not %q: %w", t.Offset, trail, d.trail(), ErrOtherTrail)
		}
		return parsePositions(pos)
	}
	if t.Start == 0 || d.o.Cursor == "" {
		return positions{}, nil
	}
	cur, err := d.o.Redis.Get(ctx, d.o.Cursor).Result()
	switch {
	case errors.Is(err, redis.Nil):
		d.o.Log.Warn("audit topic holds no committed record but retention deleted some, and no cursor in Redis: resending the audit streams")
		return positions{}, nil
	case err != nil:
		return nil, fmt.Errorf("get %s: %w", d.o.Cursor, err)
	}
	return parsePositions(cur)
}

// read returns the records of the entries after at, oldest first, each
// with the positions as of it, and the positions after them all.
func (d *Dispatcher) read(ctx context.Context, at positions) ([]producer.Record, positions, error) {
	cmds := make([]*redis.XMessageSliceCmd, len(d.o.Sources))
	_, err := d.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, s := range d.o.Sources {
			start := "-"
			if id := at[s.Name]; id != "" {
				start = "(" + id
			}
			cmds[i] = pl.XRangeN(ctx, s.Key, start, "+", int64(d.o.Batch))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	type got struct {
		ms, seq uint64
		src     int
		msg     redis.XMessage
	}
	var all []got
	for i, c := range cmds {
		msgs, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, fmt.Errorf("xrange %s: %w", d.o.Sources[i].Key, err)
		}
		for _, m := range msgs {
			ms, seq, err := splitID(m.ID)
			if err != nil {
				return nil, nil, err
			}
			all = append(all, got{ms, seq, i, m})
		}
	}
	// Oldest first across streams; each stream's own order is kept.
	slices.SortStableFunc(all, func(a, b got) int {
		if a.ms != b.ms {
			return cmpU(a.ms, b.ms)
		}
		if a.seq != b.seq {
			return cmpU(a.seq, b.seq)
		}
		return a.src - b.src
	})
	next := positions{}
	for n, id := range at {
		next[n] = id
	}
	recs := make([]producer.Record, 0, len(all))
	for _, g := range all {
		src := d.o.Sources[g.src].Name
		raw, _ := g.msg.Values[audit.FieldEntry].(string)
		e, err := audit.Decode(src, g.msg.ID, raw)
		if err != nil {
			// Sent as it is, so the trail keeps it; its id still says where.
			d.o.Log.Warn("audit dispatch: entry not JSON, sent as stored", "id", src+"-"+g.msg.ID, "error", err)
		}
		val := []byte(raw)
		if err == nil {
			val, _ = json.Marshal(e)
		}
		next[src] = g.msg.ID
		id := src + "-" + g.msg.ID
		recs = append(recs, producer.Record{Key: []byte(id), Value: val, Partition: 0, Headers: []producer.Header{
			{Key: HeaderID, Value: []byte(id)},
			{Key: HeaderPositions, Value: []byte(next.String())},
			{Key: HeaderTrail, Value: []byte(d.trail())},
		}})
	}
	return recs, next, nil
}

// trail names the trail: the key of its last source, the one of the
// entries tied to no store ({prefix:audit}:audit), which holds the Redis
// prefix.
func (d *Dispatcher) trail() string { return d.o.Sources[len(d.o.Sources)-1].Key }

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

func splitID(id string) (ms, seq uint64, err error) {
	m, s, ok := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(m, 10, 64)
	seq, err2 := strconv.ParseUint(s, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("auditkafka: stream id %q", id)
	}
	return ms, seq, nil
}

func (d *Dispatcher) closeProducer(p outbox.Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		d.o.Log.Error("audit dispatch: close producer: a batch may still be in flight", "error", err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
