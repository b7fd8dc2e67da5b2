package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// The requests: the batches queued when the sender wakes (a Produce
// call's batches of every partition, gathered) go in one Produce request
// per leader (the Java client's Sender and franz-go's drain do the same),
// each request on its own. A broker's cost is mostly per request, not per
// record: at ingest's 8 records a partition batch, one request per
// partition cost it 6.7-9.8 µs a record (BENCHMARKS.md, "One request per
// broker").
//
// What keeps the guarantees: a partition still has one batch in flight
// (runPartition waits for its answer before it takes the next), every
// attempt of a batch sends the same bytes and sequence, and an attempt
// whose caller gave up is dropped unless already sent, so a batch is never
// twice in one request. An attempt already sent when its caller gave up
// may still be in flight beside the retry, on another connection, as it
// could beside a retry of the request-per-batch producer before: the
// broker writes the first to arrive and recognises the other's sequence (a
// duplicate, or out of order once later batches are in). Each partition's
// answer is its own (error code, base offset): classify and sendBatch see
// exactly what they saw of a request of one partition. A failure of the
// whole request (network, routing) is every batch's failure; each retries
// on its own backoff.

// job is one attempt of one partition's batch, waiting to be sent.
type job struct {
	partition int
	encoded   []byte
	deadline  time.Time
	done      chan jobResult // buffered: the sender never waits for a caller that gave up
	// abandoned: its caller gave up before the answer. It is dropped
	// unless already sent, so the batch's retry (a new job) cannot travel
	// beside it in one request.
	abandoned atomic.Bool
}

type jobResult struct {
	res *kafka.ProduceResponse
	err error
}

// sender gathers jobs and sends them, a request per leader.
type sender struct {
	mu      sync.Mutex
	queue   []*job
	wake    chan struct{} // 1-buffered: the queue has a job
	leaders map[int]int   // partition -> leader id, from the last metadata
	fresh   time.Time     // when leaders was read; zero: read it again
	reading bool          // a read of the leaders is under way

	// prep[i]: partition i has records it takes at once (marked by
	// Produce when the partition had nothing in flight) or is encoding its
	// batch, so the sender waits for its job (at most gatherWait) rather
	// than send without it: one Produce call's batches of 12 partitions
	// then go in one request, not in several.
	prep  []bool
	nprep int
}

// gatherWait bounds how long the sender waits for partitions that are
// encoding a batch (microseconds of work; more only when one waits for an
// epoch bump).
const gatherWait = 200 * time.Microsecond

// preparing marks partition id as about to queue a batch.
func (r *sender) preparing(id int) {
	r.mu.Lock()
	if !r.prep[id] {
		r.prep[id] = true
		r.nprep++
	}
	r.mu.Unlock()
}

// readyLocked unmarks partition id: its job is queued, or it has none.
// It reports whether the partition was marked.
func (r *sender) readyLocked(id int) bool {
	if !r.prep[id] {
		return false
	}
	r.prep[id] = false
	r.nprep--
	return true
}

// ready unmarks partition id, and wakes the sender only if a gather may
// have been waiting for it (not after every batch).
func (r *sender) ready(id int) {
	r.mu.Lock()
	was := r.readyLocked(id)
	r.mu.Unlock()
	if was {
		r.signal()
	}
}

func (r *sender) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// rawProduce sends one attempt of partition's encoded batch in the next
// request the sender makes and returns its partition's answer. It gives
// up when ctx ends (the attempt may still be sent: the caller treats that
// as "may be in the log", as it does a timeout).
func (p *Producer) rawProduce(ctx context.Context, partition int, encoded []byte) (*kafka.ProduceResponse, error) {
	if p.cfg.perPartitionRequests {
		return p.produceOne(ctx, partition, encoded)
	}
	j := &job{partition: partition, encoded: encoded, done: make(chan jobResult, 1)}
	j.deadline, _ = ctx.Deadline()
	r := &p.sender
	r.mu.Lock()
	r.queue = append(r.queue, j)
	r.readyLocked(partition)
	r.mu.Unlock()
	r.signal()
	select {
	case out := <-j.done:
		return out.res, out.err
	case <-ctx.Done():
		j.abandoned.Store(true)
		return nil, ctx.Err()
	}
}

// produceOne is a request of one partition's batch (kafka-go's
// RawProduce): the old way, kept for the side-by-side benchmark.
func (p *Producer) produceOne(ctx context.Context, partition int, encoded []byte) (*kafka.ProduceResponse, error) {
	p.stats.requests.Add(1)
	res, err := p.client.RawProduce(ctx, &kafka.RawProduceRequest{
		Topic:        p.cfg.Topic,
		Partition:    partition,
		RequiredAcks: kafka.RequireAll,
		RawRecords:   protocol.RawRecordSet{Reader: rawReader(encoded)},
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("producer: no produce response")
	}
	return res, res.Error
}

// runSender sends what is queued whenever a job comes: gathered (see
// gather), one request per leader, each on its own, until the producer's
// context ends. No request waits for another: a slow or unreachable
// broker holds only the partitions it leads (as with a request per batch),
// and the broker still sees one request per Produce call and leader, not
// one per partition, since a call queues its records of every partition
// together and gather takes them together.
func (p *Producer) runSender() {
	defer close(p.senderDone)
	r := &p.sender
	var inFlight sync.WaitGroup
	defer inFlight.Wait() // they end with p.ctx
	for {
		select {
		case <-p.ctx.Done():
			r.failAll(p.ctx.Err())
			return
		case <-r.wake:
		}
		for _, g := range p.groupByLeader(live(p.gather())) {
			inFlight.Go(func() {
				if err := p.sendGroup(g); err != nil {
					// The layout may have moved (a leader died, or kafka-go's
					// cached layout disagrees with ours): read it again.
					p.sender.stale()
				}
			})
		}
	}
}

// gather takes the queued jobs once no partition is still encoding a
// batch, or gatherWait after the first call.
func (p *Producer) gather() []*job {
	r := &p.sender
	var timer *time.Timer
	for {
		r.mu.Lock()
		if r.nprep == 0 || len(r.queue) == 0 {
			jobs := r.queue
			r.queue = nil
			r.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return jobs
		}
		r.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(gatherWait)
		}
		select {
		case <-r.wake:
		case <-timer.C:
			r.mu.Lock()
			jobs := r.queue
			r.queue = nil
			r.mu.Unlock()
			return jobs
		case <-p.ctx.Done():
			timer.Stop()
			return nil
		}
	}
}

func (r *sender) failAll(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.queue {
		j.done <- jobResult{err: err}
	}
	r.queue = nil
}

// live is jobs without those whose caller gave up before they were sent.
func live(jobs []*job) []*job {
	out := jobs[:0]
	for _, j := range jobs {
		if !j.abandoned.Load() {
			out = append(out, j)
		}
	}
	return out
}

// groupByLeader splits jobs by their partition's leader as last read; a
// partition of unknown leader goes alone (kafka-go routes it).
func (p *Producer) groupByLeader(jobs []*job) [][]*job {
	leaders := p.leaders()
	by := make(map[int][]*job)
	var alone [][]*job
	for _, j := range jobs {
		l, ok := leaders[j.partition]
		if !ok {
			alone = append(alone, []*job{j})
			continue
		}
		by[l] = append(by[l], j)
	}
	for _, g := range by {
		alone = append(alone, g)
	}
	return alone
}

func (r *sender) stale() {
	r.mu.Lock()
	r.fresh = time.Time{}
	r.mu.Unlock()
}

// leaders returns the partition -> leader map as last read. When it is
// stale or older than MetadataTTL a read starts beside the sends, which
// go on with the map they have: a send never waits for metadata (a
// synchronous read every MetadataTTL held every partition's batches for
// its round trip). A wrong leader costs a failed request, retried after
// the read.
func (p *Producer) leaders() map[int]int {
	r := &p.sender
	r.mu.Lock()
	defer r.mu.Unlock()
	if (r.fresh.IsZero() || time.Since(r.fresh) >= p.cfg.MetadataTTL) && !r.reading {
		r.reading = true
		go p.readLeaders()
	}
	return r.leaders
}

// readLeaders reads the topic's leaders into the sender's map.
func (p *Producer) readLeaders() {
	r := &p.sender
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
	defer cancel()
	md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.cfg.Topic}})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reading = false
	if err != nil {
		return // the map in use stays; the next send asks again
	}
	r.setLeadersLocked(md, p.cfg.Topic)
}

// setLeadersLocked takes topic's leaders from md.
func (r *sender) setLeadersLocked(md *kafka.MetadataResponse, topic string) {
	next := make(map[int]int)
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		for _, pt := range t.Partitions {
			if pt.Error == nil && pt.Leader.Host != "" {
				next[pt.ID] = pt.Leader.ID
			}
		}
	}
	r.leaders, r.fresh = next, time.Now()
}

// sendGroup sends one Produce request holding every job of g (one leader)
// and hands out the answers; it returns the request's error, if any.
func (p *Producer) sendGroup(g []*job) error {
	deadline := g[0].deadline
	for _, j := range g[1:] {
		if !j.deadline.IsZero() && (deadline.IsZero() || j.deadline.Before(deadline)) {
			deadline = j.deadline
		}
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(p.cfg.RequestTimeout)
	}
	ctx, cancel := context.WithDeadline(p.ctx, deadline)
	defer cancel()
	parts := make([]rawproduce.RequestPartition, len(g))
	for i, j := range g {
		parts[i] = rawproduce.RequestPartition{Partition: int32(j.partition),
			RecordSet: protocol.RawRecordSet{Reader: rawReader(j.encoded)}}
	}
	p.stats.requests.Add(1)
	m, err := p.transport.RoundTrip(ctx, p.client.Addr, &rawproduce.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(max(time.Until(deadline).Milliseconds(), 1)),
		Topics:  []rawproduce.RequestTopic{{Topic: p.cfg.Topic, Partitions: parts}},
	})
	if err != nil {
		for _, j := range g {
			j.done <- jobResult{err: fmt.Errorf("produce request of %d partitions: %w", len(g), err)}
		}
		return err
	}
	res, ok := m.(*produce.Response)
	if !ok {
		err := fmt.Errorf("producer: produce answered with %T", m)
		for _, j := range g {
			j.done <- jobResult{err: err}
		}
		return err
	}
	answers := make(map[int32]*produce.ResponsePartition, len(g))
	for ti := range res.Topics {
		if res.Topics[ti].Topic != p.cfg.Topic {
			continue
		}
		for pi := range res.Topics[ti].Partitions {
			a := &res.Topics[ti].Partitions[pi]
			answers[a.Partition] = a
		}
	}
	var failed error
	for _, j := range g {
		a, ok := answers[int32(j.partition)]
		if !ok {
			failed = fmt.Errorf("producer: no answer for partition %d: %w", j.partition, protocol.ErrNoPartition)
			j.done <- jobResult{err: failed}
			continue
		}
		out := &kafka.ProduceResponse{BaseOffset: a.BaseOffset, LogStartOffset: a.LogStartOffset}
		if a.ErrorCode != 0 {
			out.Error = kafka.Error(a.ErrorCode)
			if a.ErrorMessage != "" {
				out.Error = fmt.Errorf("%w: %s", kafka.Error(a.ErrorCode), a.ErrorMessage)
			}
			if classify(out.Error) == outcomeRetryMeta {
				failed = out.Error
			}
		}
		j.done <- jobResult{res: out, err: out.Error}
	}
	return failed
}
