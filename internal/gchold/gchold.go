// Package gchold holds the garbage collector off while a large, short
// burst of allocation runs — parsing and indexing a national zone set
// (100,000 zones, tens of MB of JSON, about 12 bytes of garbage per byte
// of input) — so that the collection it would trigger again and again does
// not make every other goroutine of the process pay for it: with the
// collector running, each goroutine that allocates helps it mark (GC
// assists), and the alerter's batch loop stalled for up to 1.4 s while a
// set built beside it. Held, the heap grows by the burst's garbage, bounded
// by a memory limit (the burst's budget above the heap at the start, or
// the process's own limit when lower); past it the collector runs anyway.
// The first Do of concurrent ones holds, the last one releases.
package gchold

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

var (
	mu        sync.Mutex
	holders   int
	pct       int   // GOGC before the first holder
	limit     int64 // the memory limit before the first holder
	heldLimit int64
)

// Do runs fn with the collector held off, the heap allowed to grow by
// budget bytes at most (a concurrent Do widens the allowance by its own).
func Do(budget int64, fn func()) {
	hold(budget)
	defer release()
	fn()
}

func hold(budget int64) {
	mu.Lock()
	defer mu.Unlock()
	if holders == 0 {
		limit = debug.SetMemoryLimit(-1)
		heldLimit = heapNow()
	}
	holders++
	heldLimit = min(limit, addSat(heldLimit, budget))
	debug.SetMemoryLimit(heldLimit)
	if holders == 1 {
		pct = debug.SetGCPercent(-1)
	}
}

func release() {
	mu.Lock()
	defer mu.Unlock()
	if holders--; holders == 0 {
		// Collect the burst's garbage while the collector is still held:
		// its goal is the memory limit, far off, so the goroutines that
		// allocate meanwhile assist little. Given back GOGC first, the
		// heap would be many times over its goal and every allocating
		// goroutine would help mark it.
		runtime.GC()
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	}
}

// heapNow is the bytes the heap's objects hold now (live and not yet
// swept), without stopping the world.
func heapNow() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(min(s[0].Value.Uint64(), math.MaxInt64))
}

func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Held reports whether a Do is running (for tests).
func Held() bool {
	mu.Lock()
	defer mu.Unlock()
	return holders > 0
}

// Budget is the allowance for parsing and indexing a zone document of n
// bytes: the parse makes about 12 bytes of garbage per byte of input
// (BENCHMARKS.md, "National zone sets"), plus room for the rest of the
// process meanwhile.
func Budget(n int) int64 { return 16*int64(n) + 256<<20 }
