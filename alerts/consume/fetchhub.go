package consume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// The member's partitions are fetched together: one Fetch request per
// leader broker holds every partition that broker leads, instead of one
// kafka-go Reader (and one Fetch request) per partition. A Reader per
// partition was 57 % of the broker's requests at 5,000 positions/s
// (BENCHMARKS.md, "One fetch per broker"): twelve long polls each
// answered with the few records of one produce request.
//
// Nothing exactly-once rests on how records are fetched: a partition's
// engine still sees its records in offset order from the offset it asked
// for, and any fetch error ends the partition's loop, which reloads from
// Redis and reopens its feed (runPartition), exactly as a Reader's error
// did.
const (
	// fetchMaxWait is the long poll while every open feed has room.
	fetchMaxWait = 250 * time.Millisecond
	// fetchShortWait is the poll while a feed is left out for being full:
	// the loop must come back for it soon, not after a quarter second of
	// the other partitions' silence.
	fetchShortWait = 5 * time.Millisecond
	// partitionMaxBytes bounds one partition's share of a fetch (the
	// broker still returns a first batch larger than it); requestMaxBytes
	// one answer. A feed holds at most its limit of records (the hub's
	// maxBuffered) plus one such share.
	partitionMaxBytes = 1 << 20
	requestMaxBytes   = 16 << 20
	// leadersTTL is how long a leader map is trusted without an error.
	leadersTTL = 30 * time.Second
)

// fetchHub runs one fetch loop per leader broker for the feeds open on it.
type fetchHub struct {
	topic     string
	client    *kafka.Client
	transport *kafka.Transport
	log       *slog.Logger
	lost      func(n int64) // records deleted before they were fetched
	// maxBuffered is how many fetched records a feed holds before the
	// loop leaves its partition out of the next fetch: backpressure on
	// that partition alone. Counted in records, not answers: under a
	// flood answers are small and frequent, and a limit of answers left
	// partitions out (and the loop polling) with a few dozen records
	// each.
	maxBuffered int

	ctx  context.Context // the loops' life
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	loops   map[int]*leaderLoop // by broker id
	leaders map[int]int         // partition -> leader broker id
	fresh   time.Time           // when leaders was read; zero: read again
}

func newFetchHub(d *kafka.Dialer, brokers []string, topic string, maxBuffered int, log *slog.Logger, lost func(int64)) *fetchHub {
	if d == nil {
		d = kafka.DefaultDialer
	}
	tr := &kafka.Transport{ClientID: d.ClientID, TLS: d.TLS, SASL: d.SASLMechanism, DialTimeout: d.Timeout,
		// The transport routes each request by its own metadata, which it
		// otherwise refreshes only every 6 s: after a leader moves, the
		// feeds' reloads would fail that long.
		MetadataTTL: time.Second}
	ctx, stop := context.WithCancel(context.Background())
	return &fetchHub{topic: topic, transport: tr, log: log, lost: lost, maxBuffered: max(maxBuffered, 1), ctx: ctx, stop: stop,
		client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr},
		loops:  make(map[int]*leaderLoop)}
}

// close ends every loop and waits for them.
func (h *fetchHub) close() {
	h.stop()
	h.wg.Wait()
	h.transport.CloseIdleConnections()
}

// feed is one partition's records, as fetched by its leader's loop, read
// by the partition's consume loop through FetchMessage.
type feed struct {
	partition int
	cur       []kafka.Message // being read (the reader's own)
	loop      *leaderLoop     // the loop fetching it
	wake      chan struct{}   // its loop's: records taken make room
	notify    chan struct{}   // cap 1: something was queued

	mu       sync.Mutex
	queue    [][]kafka.Message // fetched, not yet taken
	buffered int               // records in queue
	err      error             // the fetch failed: after queue, the reader gets it

	// owned by the loop
	next    int64 // the next offset to fetch
	fetched bool  // a fetch answered for it (out of range at the first is the start's own, already reported)
}

// FetchMessage returns the next record, waiting as long as ctx allows.
func (f *feed) FetchMessage(ctx context.Context) (kafka.Message, error) {
	for len(f.cur) == 0 {
		f.mu.Lock()
		if len(f.queue) > 0 {
			f.cur = f.queue[0]
			f.queue[0] = nil
			f.queue = f.queue[1:]
			f.buffered -= len(f.cur)
			f.mu.Unlock()
			// The loop may be asleep with every feed full: room now.
			select {
			case f.wake <- struct{}{}:
			default:
			}
			continue
		}
		err := f.err
		f.mu.Unlock()
		if err != nil {
			return kafka.Message{}, err
		}
		select {
		case <-f.notify:
		case <-ctx.Done():
			return kafka.Message{}, ctx.Err()
		}
	}
	m := f.cur[0]
	f.cur[0] = kafka.Message{}
	f.cur = f.cur[1:]
	return m, nil
}

// open starts a feed of partition from start (an offset, or
// kafka.FirstOffset); close it with (*fetchHub).release.
func (h *fetchHub) open(ctx context.Context, partition int, start int64) (*feed, error) {
	if start < 0 {
		first, _, err := h.offsets(ctx, partition)
		if err != nil {
			return nil, err
		}
		start = first
	}
	leader, err := h.leaderOf(ctx, partition)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return nil, errors.New("fetch hub closed")
	}
	l := h.loops[leader]
	if l == nil {
		l = &leaderLoop{hub: h, broker: leader, feeds: make(map[int]*feed), wake: make(chan struct{}, 1)}
		h.loops[leader] = l
		h.wg.Go(l.run)
	}
	f := &feed{partition: partition, next: start, loop: l, wake: l.wake, notify: make(chan struct{}, 1)}
	l.mu.Lock()
	if old := l.feeds[partition]; old != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("partition %d already has an open feed", partition)
	}
	l.feeds[partition] = f
	l.mu.Unlock()
	l.poke()
	return f, nil
}

// release closes f: its partition leaves its loop's fetches, and what was
// in flight for it is dropped.
func (h *fetchHub) release(f *feed) {
	l := f.loop
	l.mu.Lock()
	if l.feeds[f.partition] == f {
		delete(l.feeds, f.partition)
	}
	l.mu.Unlock()
	l.poke() // a loop left without feeds leaves the hub
}

// leaderOf is partition's leader as last read, read again when unknown or
// stale.
func (h *fetchHub) leaderOf(ctx context.Context, partition int) (int, error) {
	h.mu.Lock()
	id, ok := h.leaders[partition]
	fresh := !h.fresh.IsZero() && time.Since(h.fresh) < leadersTTL
	h.mu.Unlock()
	if ok && fresh {
		return id, nil
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := h.client.Metadata(mctx, &kafka.MetadataRequest{Topics: []string{h.topic}})
	if err != nil {
		return 0, fmt.Errorf("leaders of %s: %w", h.topic, err)
	}
	next := make(map[int]int)
	for _, t := range md.Topics {
		if t.Name != h.topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("leaders of %s: %w", h.topic, t.Error)
		}
		for _, p := range t.Partitions {
			if p.Error == nil && p.Leader.ID >= 0 {
				next[p.ID] = p.Leader.ID
			}
		}
	}
	h.mu.Lock()
	h.leaders, h.fresh = next, time.Now()
	h.mu.Unlock()
	id, ok = next[partition]
	if !ok {
		return 0, fmt.Errorf("partition %s/%d has no leader now", h.topic, partition)
	}
	return id, nil
}

// stale makes the next open read the leaders again.
func (h *fetchHub) stale() {
	h.mu.Lock()
	h.fresh = time.Time{}
	h.mu.Unlock()
}

// offsets are partition's first retained offset and its end.
func (h *fetchHub) offsets(ctx context.Context, partition int) (first, end int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := h.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		h.topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}}})
	if err != nil {
		return 0, 0, fmt.Errorf("offsets of %s/%d: %w", h.topic, partition, err)
	}
	for _, p := range res.Topics[h.topic] {
		if p.Partition == partition {
			if p.Error != nil {
				return 0, 0, fmt.Errorf("offsets of %s/%d: %w", h.topic, partition, p.Error)
			}
			return p.FirstOffset, p.LastOffset, nil
		}
	}
	return 0, 0, fmt.Errorf("offsets of %s/%d: not in the answer", h.topic, partition)
}

// leaderLoop fetches the partitions one broker leads. A loop per leader,
// so a long poll of one broker (or a hung one) holds no other broker's
// partitions.
type leaderLoop struct {
	hub    *fetchHub
	broker int
	wake   chan struct{}

	mu    sync.Mutex
	feeds map[int]*feed
}

func (l *leaderLoop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run fetches until the hub closes or no feed is left.
func (l *leaderLoop) run() {
	h := l.hub
	backoff := 50 * time.Millisecond
	for {
		parts, full, done := l.ready()
		if done {
			return
		}
		if len(parts) == 0 {
			select {
			case <-l.wake:
				continue
			case <-h.ctx.Done():
				return
			}
		}
		wait := fetchMaxWait
		if full {
			wait = fetchShortWait
		}
		if err := l.fetch(parts, wait); err != nil {
			if h.ctx.Err() != nil {
				return
			}
			// The request failed as a whole (a broker down, a leader
			// moved under the transport): every partition in it reloads
			// and reopens, finding its leader again.
			h.stale()
			for _, f := range parts {
				l.fail(f, err)
			}
			select {
			case <-time.After(backoff):
			case <-h.ctx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// ready is the feeds with room, whether any was left out for being full,
// and whether the loop is done (hub closed, or no feed left: then it has
// left the hub's map, so the next open starts a new loop).
func (l *leaderLoop) ready() (parts []*feed, full, done bool) {
	h := l.hub
	if h.ctx.Err() != nil {
		return nil, false, true
	}
	h.mu.Lock()
	l.mu.Lock()
	if len(l.feeds) == 0 {
		if h.loops[l.broker] == l {
			delete(h.loops, l.broker)
		}
		l.mu.Unlock()
		h.mu.Unlock()
		return nil, false, true
	}
	h.mu.Unlock()
	for _, f := range l.feeds {
		if f.room(h.maxBuffered) {
			parts = append(parts, f)
		} else {
			full = true
		}
	}
	l.mu.Unlock()
	return parts, full, false
}

// open reports whether f is still the partition's feed.
func (l *leaderLoop) open(f *feed) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.feeds[f.partition] == f
}

// fail hands err to f and takes it out of the loop: its consume loop
// returns the error and reopens.
func (l *leaderLoop) fail(f *feed, err error) {
	l.mu.Lock()
	if l.feeds[f.partition] == f {
		delete(l.feeds, f.partition)
	}
	l.mu.Unlock()
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
	f.signal()
}

// room reports whether f holds fewer than limit records.
func (f *feed) room(limit int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buffered < limit
}

// held is the number of fetched records f holds, not yet taken.
func (f *feed) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buffered
}

// put queues fetched records for the reader.
func (f *feed) put(msgs []kafka.Message) {
	f.mu.Lock()
	f.queue = append(f.queue, msgs)
	f.buffered += len(msgs)
	f.mu.Unlock()
	f.signal()
}

func (f *feed) signal() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

// fetch sends one Fetch request for parts and hands each its records.
func (l *leaderLoop) fetch(parts []*feed, wait time.Duration) error {
	h := l.hub
	req := &fetch.Request{ReplicaID: -1, MaxWaitTime: int32(wait / time.Millisecond), MinBytes: 1,
		MaxBytes: requestMaxBytes, IsolationLevel: 0, SessionID: -1, SessionEpoch: -1}
	rp := make([]fetch.RequestPartition, len(parts))
	byPart := make(map[int32]*feed, len(parts))
	for i, f := range parts {
		rp[i] = fetch.RequestPartition{Partition: int32(f.partition), CurrentLeaderEpoch: -1,
			FetchOffset: f.next, LogStartOffset: -1, PartitionMaxBytes: partitionMaxBytes}
		byPart[int32(f.partition)] = f
	}
	req.Topics = []fetch.RequestTopic{{Topic: h.topic, Partitions: rp}}
	ctx, cancel := context.WithTimeout(h.ctx, wait+30*time.Second)
	defer cancel()
	m, err := h.transport.RoundTrip(ctx, h.client.Addr, req)
	if err != nil {
		return fmt.Errorf("fetch %s from broker %d: %w", h.topic, l.broker, err)
	}
	res := m.(*fetch.Response)
	if res.ErrorCode != 0 {
		return fmt.Errorf("fetch %s from broker %d: %w", h.topic, l.broker, kafka.Error(res.ErrorCode))
	}
	for ti := range res.Topics {
		t := &res.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			f := byPart[p.Partition]
			if f == nil || t.Topic != h.topic {
				closeRecords(p.RecordSet.Records)
				continue
			}
			l.answer(f, p)
		}
	}
	return nil
}

// answer hands f its part of a fetch answer.
func (l *leaderLoop) answer(f *feed, p *fetch.ResponsePartition) {
	h := l.hub
	if !l.open(f) { // released while the fetch was in flight
		closeRecords(p.RecordSet.Records)
		return
	}
	first := !f.fetched
	f.fetched = true
	switch code := kafka.Error(p.ErrorCode); {
	case p.ErrorCode == 0:
	case code == kafka.OffsetOutOfRange:
		closeRecords(p.RecordSet.Records)
		l.outOfRange(f, first)
		return
	default:
		closeRecords(p.RecordSet.Records)
		if code.Temporary() {
			h.stale() // a leader moved: the reopen finds it
		}
		l.fail(f, fmt.Errorf("fetch %s/%d@%d: %w", h.topic, f.partition, f.next, code))
		return
	}
	msgs, next, err := readRecords(p.RecordSet.Records, f.partition, h.topic, f.next)
	if err != nil {
		l.fail(f, fmt.Errorf("read %s/%d@%d: %w", h.topic, f.partition, f.next, err))
		return
	}
	f.next = next
	if len(msgs) > 0 {
		f.put(msgs)
	}
}

// outOfRange moves f to the partition's first retained offset when its
// records were deleted before it fetched them (Kafka's retention passed
// them), reporting them lost — unless this is the feed's first fetch,
// whose start checkRetention has already reported. Past the end (Redis
// ahead of the topic) it fails, and the partition retries after its
// backoff, as with a Reader.
func (l *leaderLoop) outOfRange(f *feed, first bool) {
	h := l.hub
	lo, end, err := h.offsets(h.ctx, f.partition)
	if err != nil {
		l.fail(f, err)
		return
	}
	if f.next < lo {
		if !first {
			h.lost(lo - f.next)
			h.log.Error("RECORDS LOST: Kafka deleted records of this partition before the alerter fetched them (retention shorter than the alerter's lag); their alarms were never decided",
				"partition", f.partition, "from", f.next, "first_retained", lo, "records_lost", lo-f.next)
		}
		f.next = lo
		return
	}
	if f.next > end {
		l.fail(f, fmt.Errorf("fetch %s/%d@%d: %w (the topic ends at %d)", h.topic, f.partition, f.next, kafka.OffsetOutOfRange, end))
	}
	// Within the range now (the log moved meanwhile): the next fetch tries again.
}

// readRecords copies the records at or after from out of one partition's
// fetched batches, and returns the offset to fetch next. Control batches
// (transaction markers) are skipped; the telemetry topic is written by an
// idempotent, not a transactional, producer.
func readRecords(rr protocol.RecordReader, partition int, topic string, from int64) ([]kafka.Message, int64, error) {
	next := from
	if rr == nil {
		return nil, next, nil
	}
	var batches []protocol.RecordReader
	if s, ok := rr.(*protocol.RecordStream); ok {
		batches = s.Records
	} else {
		batches = []protocol.RecordReader{rr}
	}
	var msgs []kafka.Message
	for _, b := range batches {
		if cb, ok := b.(*protocol.ControlBatch); ok {
			for {
				cr, err := cb.ReadControlRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return nil, 0, fmt.Errorf("control record: %w", err)
				}
				next = max(next, cr.Offset+1)
			}
			continue
		}
		for {
			rec, err := b.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("record: %w", err)
			}
			if rec.Offset < from { // a batch starts before the offset asked for
				closeRecord(rec)
				continue
			}
			val, err := protocol.ReadAll(rec.Value)
			closeRecord(rec)
			if err != nil {
				return nil, 0, fmt.Errorf("record at %d: %w", rec.Offset, err)
			}
			msgs = append(msgs, kafka.Message{Topic: topic, Partition: partition, Offset: rec.Offset, Time: rec.Time, Value: val})
			next = max(next, rec.Offset+1)
		}
	}
	return msgs, next, nil
}

func closeRecord(r *protocol.Record) {
	if r.Key != nil {
		r.Key.Close()
	}
	if r.Value != nil {
		r.Value.Close()
	}
}

// closeRecords drains an answer's records nobody will read.
func closeRecords(rr protocol.RecordReader) {
	if rr == nil {
		return
	}
	for {
		rec, err := rr.ReadRecord()
		if err != nil {
			return
		}
		closeRecord(rec)
	}
}
