package consume

import (
	"context"
	"sync/atomic"
)

// sequencer commits a partition's batches to Redis one at a time, in the
// order they were applied, while the partition loop fetches and applies the
// next one: the commit's round trip overlaps the next batch's fetch.
//
// Invariant: a batch is committed only after every batch submitted before
// it committed without error. Each batch names the version the previous one
// set, and the engine that applied it holds the state after the previous
// batches; so after the first failure — fenced, or of unknown outcome —
// nothing more is committed, every later submit returns that failure, and
// the caller reloads the partition from Redis (its batches in flight are
// dropped with the engine). Since submit blocks while a commit is in flight
// and the queue has no buffer, the engine is at most two batches ahead of
// Redis: one committing, one handed over.
//
// Kafka's offset is offered by the commit function itself, after Redis
// accepted the batch, so it follows Redis and never leads it.
type sequencer[B any] struct {
	queue  chan B
	failed chan error    // the first failure, once
	done   chan struct{} // closed when the committing goroutine returned
	err    error         // the failure, once received (owned by the loop)
	// busy is true from a submit until its batch's commit returned: the
	// next batch may go on filling meanwhile, as it could not commit
	// sooner (fetchBatch).
	busy atomic.Bool
}

// committing says whether a submitted batch is still being committed.
func (s *sequencer[B]) committing() bool { return s.busy.Load() }

// startSequencer starts committing submitted batches with commit. On the
// first failure it calls onFail (the loop stops fetching) and stops.
// commit is given ctx, and decides itself whether the end of ctx may cut a
// commit short (the alerter's may not: the next owner loads after it).
func startSequencer[B any](ctx context.Context, commit func(context.Context, B) error, onFail func()) *sequencer[B] {
	s := &sequencer[B]{queue: make(chan B), failed: make(chan error, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for b := range s.queue {
			err := commit(ctx, b)
			s.busy.Store(false)
			if err != nil {
				s.failed <- err
				onFail()
				return
			}
		}
	}()
	return s
}

// submit hands b to the committing goroutine, waiting while the previous
// batch commits. It returns the first commit failure instead (b is then
// never committed), or ctx's error when ctx ends first (b is dropped).
func (s *sequencer[B]) submit(ctx context.Context, b B) error {
	if s.err != nil {
		return s.err
	}
	// Set before the hand-over, so the flag is never false while b waits
	// to commit; the goroutine clears it after the commit.
	s.busy.Store(true)
	select {
	case s.queue <- b:
		return nil
	case err := <-s.failed:
		s.busy.Store(false)
		s.err = err
		return err
	case <-ctx.Done():
		s.busy.Store(false)
		return ctx.Err()
	}
}

// failure returns the first commit failure if there has been one, without
// waiting: an error of the fetch that the failure's onFail caused is
// reported as the failure that caused it.
func (s *sequencer[B]) failure() error {
	if s.err != nil {
		return s.err
	}
	select {
	case err := <-s.failed:
		s.err = err
	default:
	}
	return s.err
}

// close waits for the batch being committed, if any, and stops the
// committing goroutine. Call it once, after the last submit.
func (s *sequencer[B]) close() {
	close(s.queue)
	<-s.done
}
