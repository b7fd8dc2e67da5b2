package consume

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// TestOffsetCommitterPace: offers after every batch (here every
// millisecond for a second) become at most one commit per commitEvery,
// and the last offset of each partition is committed in the end.
func TestOffsetCommitterPace(t *testing.T) {
	oc := newOffsetCommitter()
	var mu sync.Mutex
	commits := 0
	last := map[int]int64{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		oc.loop(ctx, func(p map[int]int64) error {
			mu.Lock()
			defer mu.Unlock()
			commits++
			for k, v := range p {
				last[k] = v
			}
			return nil
		}, slog.New(slog.DiscardHandler))
	}()
	began := time.Now()
	var n int64
	for time.Since(began) < time.Second {
		n++
		oc.offer(int(n%3), n)
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(began)
	// The offers' last values must arrive within a pause of the last offer.
	deadline := time.Now().Add(2 * commitEvery)
	for {
		mu.Lock()
		ok := last[int(n%3)] == n && last[int((n-1)%3)] == n-1 && last[int((n-2)%3)] == n-2
		c := commits
		mu.Unlock()
		if ok {
			if most := int(elapsed/commitEvery) + 2; c > most {
				t.Fatalf("%d commits for %d offers in %v: want at most %d", c, n, elapsed, most)
			}
			t.Logf("%d offers in %v: %d commits", n, elapsed.Round(time.Millisecond), c)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last offsets not committed: got %v, want partition %d at %d", last, n%3, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
