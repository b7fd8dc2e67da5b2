package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// Producer is an idempotent Kafka producer for one topic: a producer id and
// epoch from InitProducerId, a sequence number per partition, v2 record
// batches encoded here and sent, every partition's ready batch of one
// leader in one Produce request (request.go), acks=all.
// It is safe for concurrent use.
type Producer struct {
	cfg       Config
	log       *slog.Logger
	transport *kafka.Transport
	client    *kafka.Client
	part      *partitioner
	parts     []*partState
	sess      session
	rr        atomic.Uint32 // round robin for nil keys

	ctx    context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc

	closeMu sync.RWMutex // Produce enqueues under R; Close flips closed under W
	closed  bool
	closing chan struct{} // closed by Close: partitions flush without lingering, then exit
	wg      sync.WaitGroup

	lastRefresh atomic.Int64 // unix nanos of the last forced metadata refresh

	sender     sender        // the batches ready to go, one Produce request per leader (request.go)
	senderDone chan struct{} // closed when runSender returns (after cancel)

	stats struct {
		records, batches, requests, retries, duplicates, bumps, failed atomic.Int64
	}
}

// Stats are cumulative counters since New.
type Stats struct {
	Records    int64 // records acknowledged by the broker
	Batches    int64 // batches acknowledged
	Requests   int64 // Produce requests sent: one per leader and send, holding every partition's batch queued then
	Retries    int64 // produce attempts after a batch's first
	Duplicates int64 // batches the broker had already written (DUPLICATE_SEQUENCE_NUMBER, or a retry answered with the original offset)
	EpochBumps int64 // epoch bumps or re-initialisations after a sequence was lost
	Failed     int64 // records reported as not acknowledged
	ProducerID int64
	Epoch      int16
}

// Stats returns the counters.
func (p *Producer) Stats() Stats {
	cur := p.sess.current()
	return Stats{
		Records:    p.stats.records.Load(),
		Batches:    p.stats.batches.Load(),
		Requests:   p.stats.requests.Load(),
		Retries:    p.stats.retries.Load(),
		Duplicates: p.stats.duplicates.Load(),
		EpochBumps: p.stats.bumps.Load(),
		Failed:     p.stats.failed.Load(),
		ProducerID: cur.producerID,
		Epoch:      cur.epoch,
	}
}

// New checks that the topic exists, obtains a producer id and starts one
// sender per partition. ctx bounds only this set-up.
func New(ctx context.Context, cfg Config) (*Producer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Producer{
		cfg: cfg,
		log: cfg.Logger.With("component", "producer", "topic", cfg.Topic),
		transport: &kafka.Transport{
			Dial:           cfg.Dial,
			TLS:            cfg.TLS,
			SASL:           cfg.SASL,
			ClientID:       cfg.ClientID,
			MetadataTTL:    cfg.MetadataTTL,
			MetadataTopics: []string{cfg.Topic},
		},
		closing: make(chan struct{}),
	}
	p.client = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: p.transport, Timeout: cfg.RequestTimeout}
	p.sess.changed = make(chan struct{})

	n, err := p.partitionCount(ctx)
	if err != nil {
		p.transport.CloseIdleConnections()
		return nil, err
	}
	s, err := p.initWithRetry(ctx)
	if err != nil {
		p.transport.CloseIdleConnections()
		return nil, err
	}
	p.sess.cur = s
	p.log.Info("producer id obtained", "producer_id", s.producerID, "epoch", s.epoch, "partitions", n)

	p.part = newPartitioner(n)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.sender.wake = make(chan struct{}, 1)
	p.sender.prep = make([]bool, n)
	p.senderDone = make(chan struct{})
	go p.runSender()
	p.parts = make([]*partState, n)
	for i := range p.parts {
		ps := &partState{id: i, wake: make(chan struct{}, 1)}
		p.parts[i] = ps
		p.wg.Add(1)
		go p.runPartition(ps)
	}
	return p, nil
}

func (p *Producer) partitionCount(ctx context.Context) (int, error) {
	md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.cfg.Topic}})
	if err != nil {
		if refusedConnection(err) {
			return 0, fmt.Errorf("producer: metadata: %w", err)
		}
		return 0, fmt.Errorf("producer: metadata: %w: %w", ErrBrokerUnavailable, err)
	}
	for _, t := range md.Topics {
		if t.Name != p.cfg.Topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("producer: topic %q: %w", p.cfg.Topic, t.Error)
		}
		if len(t.Partitions) == 0 {
			return 0, fmt.Errorf("producer: topic %q has no partitions", p.cfg.Topic)
		}
		p.sender.mu.Lock() // the sender's first leaders (request.go)
		p.sender.setLeadersLocked(md, p.cfg.Topic)
		p.sender.mu.Unlock()
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("producer: topic %q: %w", p.cfg.Topic, kafka.UnknownTopicOrPartition)
}

// initWithRetry retries InitProducerId while the error is retriable (a
// broker just started answers COORDINATOR_LOAD_IN_PROGRESS for a while).
func (p *Producer) initWithRetry(ctx context.Context) (batchSession, error) {
	for attempt := 0; ; attempt++ {
		s, err := p.initProducerID(ctx)
		if err == nil {
			return s, nil
		}
		var ke kafka.Error
		if (errors.As(err, &ke) && !ke.Temporary() && ke != codeConcurrentTxns) || refusedConnection(err) {
			return batchSession{}, fmt.Errorf("producer: %w", err)
		}
		p.log.Debug("init producer id failed, retrying", "error", err, "attempt", attempt)
		if !sleepCtx(ctx, p.backoff(attempt)) {
			return batchSession{}, fmt.Errorf("producer: %w: %w (last: %w)", ErrBrokerUnavailable, ctx.Err(), err)
		}
	}
}

// Produce sends recs and returns when every one of them is acknowledged
// (acks=all), or returns a *ProduceError naming the records that were not.
// Records of one partition are written in the order given, after those of
// earlier Produce calls that returned. If ctx ends first, Produce returns a
// *ProduceError wrapping ctx.Err() for the records not yet acknowledged;
// those may still be written (exactly once) after it returns.
func (p *Producer) Produce(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	n := len(p.parts)
	targets := make([]int32, len(recs))
	var invalid map[int]error
	nilKey := -1
	for i := range recs {
		r := &recs[i]
		pt := r.Partition
		switch {
		case pt >= n || pt < AnyPartition:
			invalid = addErr(invalid, i, fmt.Errorf("%w: partition %d of %d", ErrInvalidRecord, pt, n))
			continue
		case pt == AnyPartition && r.Key == nil:
			if nilKey < 0 {
				nilKey = int(p.rr.Add(1) % uint32(n))
			}
			pt = nilKey
		case pt == AnyPartition:
			pt = p.part.partition(r.Key)
		}
		if sz := tailSize(r) + recordOverhead; sz > p.cfg.BatchMaxBytes {
			invalid = addErr(invalid, i, fmt.Errorf("%w: %d bytes, BatchMaxBytes is %d", ErrInvalidRecord, sz, p.cfg.BatchMaxBytes))
			continue
		}
		targets[i] = int32(pt)
	}
	if invalid != nil {
		return newProduceError(invalid)
	}

	c := newCall(len(recs), time.Now().Add(p.cfg.DeliveryTimeout))
	p.closeMu.RLock()
	if p.closed {
		p.closeMu.RUnlock()
		return ErrClosed
	}
	p.enqueue(c, recs, targets)
	p.closeMu.RUnlock()

	select {
	case <-c.done:
		return c.err()
	case <-ctx.Done():
		return c.abandon(ctx.Err())
	}
}

// recordOverhead bounds the per-record framing around a tail: length,
// attributes, timestamp delta and offset delta varints.
const recordOverhead = 5 + 1 + 10 + 5

func addErr(m map[int]error, i int, err error) map[int]error {
	if m == nil {
		m = make(map[int]error)
	}
	m[i] = err
	return m
}

// enqueue appends the records to their partitions' queues, one lock per
// partition touched, keeping the caller's order within a partition. Keys,
// values and headers are copied, so the caller's buffers are free on return.
func (p *Producer) enqueue(c *call, recs []Record, targets []int32) {
	nowMs := time.Now().UnixMilli()
	for start := 0; start < len(recs); {
		pt := targets[start]
		ps := p.parts[pt]
		ps.mu.Lock()
		for i := start; i < len(recs); i++ {
			if targets[i] != pt {
				continue
			}
			r := &recs[i]
			ts := nowMs
			if !r.Time.IsZero() {
				ts = r.Time.UnixMilli()
			}
			off := len(ps.arena)
			ps.arena = appendRecordTail(ps.arena, r)
			ps.pend = append(ps.pend, pending{off: int32(off), n: int32(len(ps.arena) - off), ts: ts, call: c, idx: int32(i)})
			ps.pendBytes += len(ps.arena) - off + recordOverhead
			targets[i] = -1 // enqueued
		}
		ps.mu.Unlock()
		if !p.cfg.AlwaysLinger && ps.idle.Load() {
			// It takes these at once: the sender's gather waits for its
			// batch, so the call's batches go in one request.
			p.sender.preparing(ps.id)
		}
		ps.signal()
		for start < len(recs) && targets[start] < 0 {
			start++
		}
	}
}

// Close stops accepting records, sends what is queued and waits for every
// batch in flight, until ctx ends; then it abandons what is left (those
// records fail with ErrClosed) and releases the connections.
func (p *Producer) Close(ctx context.Context) error {
	p.closeMu.Lock()
	already := p.closed
	p.closed = true
	p.closeMu.Unlock()
	if already {
		return nil
	}
	close(p.closing)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("producer: close: %w", ctx.Err())
		p.cancel()
		<-done
	}
	p.cancel()
	<-p.senderDone
	p.transport.CloseIdleConnections()
	return err
}

func (p *Producer) backoff(attempt int) time.Duration {
	return backoff(p.cfg.RetryBackoff, p.cfg.RetryBackoffMax, attempt)
}

// backoff doubles base per attempt up to ceiling, with jitter.
func backoff(base, ceiling time.Duration, attempt int) time.Duration {
	d := base << min(attempt, 16)
	if d > ceiling || d <= 0 {
		d = ceiling
	}
	// ±20% jitter, like the Java client, so partitions do not retry in step.
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refreshMetadata drops kafka-go's cached cluster layout so that the next
// request fetches it anew (kafka-go's Client has no explicit refresh; a new
// connection pool starts with a metadata request). Rate-limited: many
// partitions see the same leader change at once.
func (p *Producer) refreshMetadata() {
	now := time.Now().UnixNano()
	last := p.lastRefresh.Load()
	if now-last < int64(p.cfg.RetryBackoff) || !p.lastRefresh.CompareAndSwap(last, now) {
		return
	}
	p.transport.CloseIdleConnections()
}

// logEndOffset returns the partition's high watermark, or -1 if it cannot
// be read now. Used only to tell a retried batch that the broker had already
// written (answered with its original offset) from one written by the retry.
func (p *Producer) logEndOffset(ctx context.Context, partition int) int64 {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	res, err := p.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{p.cfg.Topic: {kafka.LastOffsetOf(partition)}},
	})
	if err != nil {
		return -1
	}
	for _, po := range res.Topics[p.cfg.Topic] {
		if po.Partition == partition && po.Error == nil {
			return po.LastOffset
		}
	}
	return -1
}

// incrementSequence adds n to seq, wrapping to 0 after MaxInt32 as the
// broker does (DefaultRecordBatch.incrementSequence).
func incrementSequence(seq int32, n int) int32 {
	if int64(seq)+int64(n) > math.MaxInt32 {
		return int32(int64(seq) + int64(n) - math.MaxInt32 - 1)
	}
	return seq + int32(n)
}
