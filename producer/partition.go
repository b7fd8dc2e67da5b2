package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// partState is one partition's queue and sequence. One goroutine
// (runPartition) sends its batches, one at a time: kafka-go's Client may put
// concurrent requests on separate connections, and only one request per
// partition in flight keeps the wire order equal to the sequence order.
type partState struct {
	id   int
	wake chan struct{} // capacity 1: "records were enqueued"
	// idle: the partition goroutine waits for records (no batch of it in
	// flight), so records enqueued now make a batch at once: Produce marks
	// it preparing for the sender's gather (request.go).
	idle atomic.Bool

	mu        sync.Mutex
	pend      []pending
	arena     []byte // record tails of pend, in order
	pendBytes int

	// Owned by the partition goroutine.
	seq        int32        // next base sequence under seqSession
	seqSession batchSession // the session seq counts in; another one starts at 0
}

type pending struct {
	off, n int32 // tail in arena
	ts     int64 // create time, ms
	call   *call
	idx    int32
}

func (ps *partState) signal() {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// batch is one encoded record batch and whose records it carries.
type batch struct {
	encoded  []byte
	records  int
	baseSeq  int32
	session  batchSession
	deadline time.Time
	owners   []owner
}

// owner is a run of consecutive records of one call in a batch.
type owner struct {
	call *call
	idxs []int32
}

func (b *batch) complete(err error) {
	for _, o := range b.owners {
		o.call.complete(o.idxs, err)
	}
}

func (p *Producer) runPartition(ps *partState) {
	defer p.wg.Done()
	for {
		ps.idle.Store(true)
		more := p.waitForRecords(ps)
		ps.idle.Store(false)
		if !more {
			p.sender.ready(ps.id)
			return
		}
		p.sender.preparing(ps.id)
		sess, err := p.sess.acquire(p.ctx)
		if err != nil {
			p.sender.ready(ps.id)
			p.failQueued(ps, ErrClosed)
			return
		}
		b, err := p.takeBatch(ps, sess)
		if err != nil || b == nil {
			p.sender.ready(ps.id)
			p.sess.release()
			if err != nil {
				p.log.Error("encode batch", "partition", ps.id, "error", err)
			}
			continue
		}
		res := p.sendBatch(ps.id, b)
		p.sender.ready(ps.id) // (sendBatch's first attempt did, unless it sent none)
		p.sess.release()
		p.settle(ps, b, res)
	}
}

// waitForRecords blocks until the partition has a batch worth sending: any
// record (every caller of Produce is waiting for its acknowledgement, so a
// linger would only add to its latency); with AlwaysLinger, a full batch or
// one whose oldest record has lingered long enough; or the producer is
// closing. It returns false when the goroutine should exit.
//
// Produce queues a call's records of one partition under one lock, so when
// this sees them, the call has queued all it has for the partition: the
// batch taken then holds them all, plus whatever other calls queued
// meanwhile.
func (p *Producer) waitForRecords(ps *partState) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ps.mu.Lock()
		n, bytes := len(ps.pend), ps.pendBytes
		var oldest time.Time
		if n > 0 {
			oldest = ps.pend[0].call.deadline.Add(-p.cfg.DeliveryTimeout)
		}
		ps.mu.Unlock()

		closing := isClosed(p.closing)
		switch {
		case p.ctx.Err() != nil:
			p.failQueued(ps, ErrClosed)
			return false
		case n == 0 && closing:
			return false
		case n > 0 && (!p.cfg.AlwaysLinger || closing):
			return true
		case n >= p.cfg.BatchMaxRecords || bytes >= p.cfg.BatchMaxBytes:
			return true
		case n > 0:
			wait := time.Until(oldest.Add(p.cfg.Linger))
			if wait <= 0 {
				return true
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
				return true
			case <-ps.wake:
			case <-p.closing:
			case <-p.ctx.Done():
			}
		default:
			select {
			case <-ps.wake:
			case <-p.closing:
			case <-p.ctx.Done():
			}
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// takeBatch removes up to a batch of records from the queue and encodes them
// under sess with the partition's next sequence. Records whose delivery
// timeout passed while queued fail here (never sent).
func (p *Producer) takeBatch(ps *partState, sess batchSession) (*batch, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.seqSession != sess {
		ps.seq, ps.seqSession = 0, sess
	}
	now := time.Now()
	expired := 0
	for expired < len(ps.pend) && now.After(ps.pend[expired].call.deadline) {
		expired++
	}
	if expired > 0 {
		// Expired records are the oldest; failing them keeps order: the
		// ones behind them go out later and the caller retries in order.
		err := fmt.Errorf("%w: delivery timeout passed before the records were sent", ErrBrokerUnavailable)
		p.dropLocked(ps, expired, err)
	}
	if len(ps.pend) == 0 {
		return nil, nil
	}

	k, bytes := 0, 0
	for k < len(ps.pend) && k < p.cfg.BatchMaxRecords {
		sz := int(ps.pend[k].n) + recordOverhead
		if k > 0 && bytes+sz > p.cfg.BatchMaxBytes {
			break
		}
		bytes += sz
		k++
	}
	tails := make([][]byte, k)
	times := make([]int64, k)
	b := &batch{records: k, baseSeq: ps.seq, session: sess, deadline: ps.pend[0].call.deadline}
	for i, pr := range ps.pend[:k] {
		tails[i] = ps.arena[pr.off : pr.off+pr.n]
		times[i] = pr.ts
		if len(b.owners) == 0 || b.owners[len(b.owners)-1].call != pr.call {
			b.owners = append(b.owners, owner{call: pr.call})
		}
		o := &b.owners[len(b.owners)-1]
		o.idxs = append(o.idxs, pr.idx)
	}
	enc, err := encodeBatch(make([]byte, 0, bytes+batchHeaderSize+4), sess, ps.seq, p.cfg.Compression, tails, times)
	if err != nil {
		b.complete(fmt.Errorf("%w: %w", ErrInvalidRecord, err))
		p.consumeLocked(ps, k)
		return nil, err
	}
	b.encoded = enc
	p.consumeLocked(ps, k)
	return b, nil
}

// consumeLocked removes the first k pending records and their tails.
func (p *Producer) consumeLocked(ps *partState, k int) {
	if k == len(ps.pend) {
		ps.pend = ps.pend[:0]
		ps.arena = ps.arena[:0]
		ps.pendBytes = 0
		return
	}
	cut := ps.pend[k].off
	rest := copy(ps.arena, ps.arena[cut:])
	ps.arena = ps.arena[:rest]
	n := copy(ps.pend, ps.pend[k:])
	clear(ps.pend[n:])
	ps.pend = ps.pend[:n]
	ps.pendBytes = 0
	for i := range ps.pend {
		ps.pend[i].off -= cut
		ps.pendBytes += int(ps.pend[i].n) + recordOverhead
	}
}

// dropLocked fails the first k pending records with err.
func (p *Producer) dropLocked(ps *partState, k int, err error) {
	for _, pr := range ps.pend[:k] {
		pr.call.complete([]int32{pr.idx}, err)
	}
	p.stats.failed.Add(int64(k))
	p.consumeLocked(ps, k)
}

func (p *Producer) failQueued(ps *partState, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.pend) > 0 {
		p.dropLocked(ps, len(ps.pend), err)
	}
}

// sendResult is how a batch ended.
type sendResult struct {
	err error // nil: acknowledged
	// bump: the partition's sequence under this session can no longer be
	// trusted (the batch may or may not be in the log, or the broker said the
	// session lost continuity): the epoch must change before the next batch.
	bump bool
	// reinit: the broker has a newer epoch of our producer id (something
	// else produced with it): bumping our epoch could collide; get a new id.
	reinit bool
}

// sendBatch sends b until it is acknowledged or fails for good. Every attempt
// sends the same bytes: same producer id, epoch and base sequence, so a batch
// the broker already wrote is recognised and not written again.
func (p *Producer) sendBatch(partition int, b *batch) sendResult {
	maybeWritten := false // an attempt may have reached the log
	hw := int64(-1)       // high watermark read before a retry, for duplicate detection
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			p.stats.retries.Add(1)
			if !sleepCtx(p.ctx, p.backoff(attempt-1)) {
				return sendResult{err: fmt.Errorf("%w (last: %w)", ErrClosed, lastErr), bump: maybeWritten}
			}
			if time.Now().After(b.deadline) {
				return sendResult{err: fmt.Errorf("%w: delivery timeout after %d attempts: %w", ErrBrokerUnavailable, attempt, lastErr), bump: maybeWritten}
			}
			if maybeWritten && hw < 0 {
				hw = p.logEndOffset(p.ctx, partition)
			}
		}
		ctx, cancel := context.WithDeadline(p.ctx, minTime(time.Now().Add(p.cfg.RequestTimeout), b.deadline))
		res, err := p.rawProduce(ctx, partition, b.encoded)
		cancel()

		switch classify(err) {
		case outcomeOK:
			if attempt > 0 {
				p.log.Debug("retry acknowledged", "partition", partition, "attempt", attempt,
					"base_offset", res.BaseOffset, "high_watermark_before_retry", hw)
			}
			if attempt > 0 && hw >= 0 && res.BaseOffset < hw {
				// Answered with the offset it already had: a duplicate
				// within the broker's window of the last 5 batches.
				p.stats.duplicates.Add(1)
			}
			return sendResult{}
		case outcomeDuplicate:
			p.stats.duplicates.Add(1)
			return sendResult{}
		case outcomeSequence:
			p.log.Warn("broker lost the sequence, failing the batch and bumping the epoch",
				"partition", partition, "base_sequence", b.baseSeq, "producer_id", b.session.producerID,
				"epoch", b.session.epoch, "error", err)
			return sendResult{err: fmt.Errorf("%w: %w", ErrSequence, err), bump: true}
		case outcomeFenced:
			p.log.Warn("broker has a newer epoch of our producer id, failing the batch and getting a new id",
				"partition", partition, "producer_id", b.session.producerID, "epoch", b.session.epoch, "error", err)
			return sendResult{err: fmt.Errorf("%w: %w", ErrSequence, err), bump: true, reinit: true}
		case outcomeRejected:
			return sendResult{err: fmt.Errorf("%w: %w", ErrRejected, err), bump: maybeWritten}
		case outcomeRetryMeta:
			p.refreshMetadata()
		case outcomeRetry:
			// A dropped or refused connection is most often a dead
			// leader: ask for the layout again now, as the Java client
			// does on a disconnect, rather than retry its address until
			// the metadata's TTL runs out (0.4-2.4 s more per leader
			// kill on the 3-node cluster).
			if isNetworkError(err) {
				p.refreshMetadata()
			}
		}
		if p.ctx.Err() != nil {
			return sendResult{err: fmt.Errorf("%w (last: %w)", ErrClosed, err), bump: true}
		}
		maybeWritten = true
		lastErr = err
		p.log.Debug("produce failed, retrying", "partition", partition, "attempt", attempt, "error", err)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// settle reports a batch's outcome to its callers and moves the partition on.
func (p *Producer) settle(ps *partState, b *batch, res sendResult) {
	if res.err == nil {
		ps.seq = incrementSequence(ps.seq, b.records)
		p.stats.records.Add(int64(b.records))
		p.stats.batches.Add(1)
		if p.cfg.batchAcked != nil {
			p.cfg.batchAcked(b.records)
		}
		b.complete(nil)
		return
	}
	p.stats.failed.Add(int64(b.records))
	b.complete(res.err)
	// Whatever is queued behind the failed batch must not overtake it: fail
	// it too, so the callers retry both in order. A definite rejection keeps
	// the sequence (the broker did not advance it).
	p.failQueued(ps, fmt.Errorf("%w: %w", ErrAborted, res.err))
	p.log.Warn("batch failed", "partition", ps.id, "records", b.records, "base_sequence", b.baseSeq, "error", res.err)
	if res.bump && !errors.Is(res.err, ErrClosed) {
		p.bumpEpoch(b.session, res.reinit)
	}
}

// bumpEpoch moves the producer to the next epoch of its id, as the Java
// idempotent producer does (KIP-360: the broker accepts a higher epoch
// starting at sequence 0 and fences the old one), or to a new id when the
// epoch is exhausted or reinit is set. It first waits for every batch in
// flight to finish: sequences restart at 0 on every partition, and nothing
// sent under the old epoch may be retried under the new one, where the
// broker could not recognise it as a duplicate.
func (p *Producer) bumpEpoch(seen batchSession, reinit bool) {
	if !p.sess.requestBump(seen) {
		return
	}
	if err := p.sess.waitIdle(p.ctx); err != nil {
		p.sess.finishBump(seen)
		return
	}
	next := batchSession{producerID: seen.producerID, epoch: seen.epoch + 1}
	if reinit || seen.epoch == math.MaxInt16 {
		// InitProducerId without a transactional id always returns a new id.
		var err error
		if next, err = p.initWithRetry(p.ctx); err != nil {
			// Only when closing: every later send fails anyway.
			p.sess.finishBump(seen)
			return
		}
	}
	p.stats.bumps.Add(1)
	p.log.Info("producer epoch bumped", "producer_id", next.producerID, "epoch", next.epoch,
		"previous_producer_id", seen.producerID, "previous_epoch", seen.epoch)
	p.sess.finishBump(next)
}
