package consume

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// recorder is a commit function whose commits a test holds and releases.
type recorder struct {
	mu        sync.Mutex
	committed []int
	fail      map[int]error // batch -> its commit's error
	hold      chan struct{} // when not nil, each commit waits for a receive
	started   chan int      // each commit's batch, as it starts
}

func (r *recorder) commit(ctx context.Context, b int) error {
	if r.started != nil {
		r.started <- b
	}
	if r.hold != nil {
		<-r.hold
	}
	if err := r.fail[b]; err != nil {
		return err
	}
	r.mu.Lock()
	r.committed = append(r.committed, b)
	r.mu.Unlock()
	return nil
}

func (r *recorder) got() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.committed...)
}

var errCommit = errors.New("commit: outcome unknown")

// TestSequencerInvariant: batches commit in submit order; after the first
// failure no later batch commits, and every later submit and failure()
// report that failure. The committing goroutine takes batch k+1 only after
// batch k committed, so the submit right after the failing batch is the
// first to see the failure, whatever the timing.
func TestSequencerInvariant(t *testing.T) {
	tests := []struct {
		name     string
		batches  int
		failAt   int // 0: none
		wantDone []int
	}{
		{"in order", 50, 0, seq(1, 50)},
		{"first fails", 5, 1, nil},
		{"middle fails", 10, 4, seq(1, 3)},
		{"last fails", 6, 6, seq(1, 5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{fail: map[int]error{}}
			if tc.failAt > 0 {
				r.fail[tc.failAt] = errCommit
			}
			s := startSequencer(context.Background(), r.commit, func() {})
			for b := 1; b <= tc.batches; b++ {
				err := s.submit(context.Background(), b)
				switch {
				case tc.failAt == 0 || b <= tc.failAt:
					if err != nil {
						t.Fatalf("submit %d = %v, before the failing batch %d could have failed", b, err, tc.failAt)
					}
				case !errors.Is(err, errCommit):
					t.Fatalf("submit %d = %v, want the failure of batch %d", b, err, tc.failAt)
				}
			}
			s.close()
			err := s.failure()
			if tc.failAt > 0 && !errors.Is(err, errCommit) || tc.failAt == 0 && err != nil {
				t.Fatalf("failure() = %v after close", err)
			}
			if got := r.got(); !equal(got, tc.wantDone) {
				t.Fatalf("committed %v, want %v", got, tc.wantDone)
			}
		})
	}
}

// TestSequencerAtMostTwoAhead: while a commit is in flight, one more batch
// can be handed over and the next submit waits; close waits for the commit
// in flight.
func TestSequencerAtMostTwoAhead(t *testing.T) {
	r := &recorder{hold: make(chan struct{}), started: make(chan int, 10)}
	s := startSequencer(context.Background(), r.commit, func() {})
	if err := s.submit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if b := <-r.started; b != 1 {
		t.Fatalf("started %d", b)
	}
	// Batch 1 is committing and held: batch 2 cannot be handed over (no
	// buffer), so a submit with a short deadline times out.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.submit(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("submit while a commit is held = %v, want the deadline", err)
	}
	handed := make(chan error, 1)
	go func() { handed <- s.submit(context.Background(), 3) }()
	select {
	case err := <-handed:
		t.Fatalf("submit returned %v while batch 1 was still committing", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.hold <- struct{}{} // batch 1 commits
	if err := <-handed; err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { s.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while batch 3 was committing")
	case <-time.After(50 * time.Millisecond):
	}
	r.hold <- struct{}{} // batch 3 commits
	<-closed
	if got := r.got(); !equal(got, []int{1, 3}) {
		t.Fatalf("committed %v, want [1 3] (2 was dropped with its context)", got)
	}
}

// TestSequencerFailureStopsFetch: the failure calls onFail once, so the
// loop's blocked fetch returns, and failure() then names the commit's
// error rather than the fetch's cancellation.
func TestSequencerFailureStopsFetch(t *testing.T) {
	r := &recorder{fail: map[int]error{1: errCommit}}
	fctx, stopFetch := context.WithCancel(context.Background())
	calls := 0
	s := startSequencer(context.Background(), r.commit, func() { calls++; stopFetch() })
	if err := s.submit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	<-fctx.Done() // a fetch blocked on fctx returns
	if err := s.failure(); !errors.Is(err, errCommit) {
		t.Fatalf("failure() = %v", err)
	}
	s.close()
	if calls != 1 {
		t.Fatalf("onFail called %d times", calls)
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSequencerCommitting: committing is true from a submit until that
// batch's commit returned (fetchBatch lets the next batch fill meanwhile),
// and false when nothing is in flight.
func TestSequencerCommitting(t *testing.T) {
	release := make(chan struct{})
	seq := startSequencer(context.Background(), func(ctx context.Context, b int) error {
		<-release
		return nil
	}, func() {})
	defer seq.close()
	if seq.committing() {
		t.Fatal("committing before any submit")
	}
	if err := seq.submit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !seq.committing() {
		t.Fatal("not committing while the commit is held")
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for seq.committing() {
		if time.Now().After(deadline) {
			t.Fatal("still committing 5 s after the commit returned")
		}
		time.Sleep(time.Millisecond)
	}
}
