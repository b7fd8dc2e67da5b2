package gchold

import (
	"runtime/debug"
	"sync"
	"testing"
)

// TestDoHoldsAndRestores: inside Do the collector is off and a memory
// limit bounds the heap; nested and concurrent Dos keep it off until the
// last ends; after, GOGC and the limit are what they were.
func TestDoHoldsAndRestores(t *testing.T) {
	beforePct := debug.SetGCPercent(150)
	defer debug.SetGCPercent(beforePct)
	beforeLimit := debug.SetMemoryLimit(8 << 30)
	defer debug.SetMemoryLimit(beforeLimit)

	var wg sync.WaitGroup
	inner := make(chan struct{})
	Do(64<<20, func() {
		if p := debug.SetGCPercent(-1); p != -1 {
			t.Errorf("inside Do GOGC = %d, want off (-1)", p)
		}
		l := debug.SetMemoryLimit(-1)
		if l >= 8<<30 || l < 64<<20 {
			t.Errorf("inside Do the memory limit = %d, want the heap now + 64 MiB, below the process's 8 GiB", l)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			Do(1<<20, func() { close(inner); <-inner })
		}()
		<-inner
	})
	wg.Wait()
	if Held() {
		t.Fatal("held after every Do ended")
	}
	if p := debug.SetGCPercent(150); p != 150 {
		t.Errorf("after Do GOGC = %d, want 150 back", p)
	}
	if l := debug.SetMemoryLimit(8 << 30); l != 8<<30 {
		t.Errorf("after Do the memory limit = %d, want 8 GiB back", l)
	}
}
