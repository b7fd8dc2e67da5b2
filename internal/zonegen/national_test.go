package zonegen

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/internal/versionstore"
)

// The national sets of issue 29, measured stage by stage (BENCHMARKS.md,
// "National zone sets"):
//
//	go test ./internal/zonegen/ -run '^$' -bench 'National' -benchtime 1x -timeout 30m
//
// BenchmarkNationalZoneSet: for each format at 100,000 zones, what a PUT
// /v1/zones and each alerter's switch to it cost: the body's size, the
// validation (zonestore's Normalize: the whole set parsed, normalized and
// parsed again, what the API does before storing), the store's write and
// read of the version in Redis, the parse and the index build an alerter
// does (zonestore's Index), the heap the index keeps, and the peak heap of
// a validation.
func BenchmarkNationalZoneSet(b *testing.B) {
	for _, g := range []struct {
		name string
		gen  func(uint64, int) *Set
	}{{"faa-grid", FAAGrid}, {"ed269", ED269}} {
		b.Run(g.name, func(b *testing.B) {
			s := g.gen(29, 100_000)
			v := zonestore.Validator{Loader: geofence.Loader{Strict: true}}
			store := zonestore.New(testenv.RedisClient(b), zonestore.Options{Prefix: testenv.RedisPrefix(b, "zonegen")})
			ctx := context.Background()
			var st nationalStages
			for i := 0; b.Loop(); i++ {
				st = measureNational(b, ctx, s, v, store, int64(i))
			}
			b.ReportMetric(float64(len(s.Doc))/1e6, "body_MB")
			b.ReportMetric(st.validate.Seconds(), "validate_s")
			b.ReportMetric(st.write.Seconds(), "redis_write_s")
			b.ReportMetric(st.read.Seconds(), "redis_read_s")
			b.ReportMetric(st.parse.Seconds(), "parse_s")
			b.ReportMetric(st.build.Seconds(), "build_s")
			b.ReportMetric(float64(st.indexHeap)/(1<<20), "index_MiB")
			b.ReportMetric(float64(st.peakHeap)/(1<<20), "validate_peak_MiB")
		})
	}
}

type nationalStages struct {
	validate, write, read, parse, build time.Duration
	indexHeap, peakHeap                 uint64
}

func measureNational(b *testing.B, ctx context.Context, s *Set, v zonestore.Validator, store *zonestore.Store, expected int64) nationalStages {
	var st nationalStages
	t0 := time.Now()
	format, norm, _, err := v.Normalize(s.Doc)
	if err != nil {
		b.Fatal(err)
	}
	st.validate = time.Since(t0)
	t0 = time.Now()
	if _, err := store.Put(ctx, expected, string(format), norm, "bench"); err != nil {
		b.Fatal(err)
	}
	st.write = time.Since(t0)
	t0 = time.Now()
	e, err := store.Current(ctx)
	if err != nil {
		b.Fatal(err)
	}
	st.read = time.Since(t0)
	norm = nil
	// What an alerter does with the version: parse it, then build. The
	// document is dropped once parsed: what stays is the zones and their
	// index.
	doc := e.Zones
	e = zonestore.Entry{}
	base := heapInUse() - uint64(len(doc))
	t0 = time.Now()
	set, _, err := v.Loader.Parse(bytes.NewReader(doc))
	if err != nil {
		b.Fatal(err)
	}
	st.parse = time.Since(t0)
	doc = nil
	t0 = time.Now()
	ix, err := geofence.NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	st.build = time.Since(t0)
	set = nil
	st.indexHeap = heapInUse() - base
	runtime.KeepAlive(ix)
	ix = nil
	st.peakHeap = peakDuring(func() {
		if _, _, _, err := v.Normalize(s.Doc); err != nil {
			b.Fatal(err)
		}
	})
	return st
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// peakDuring is the most heap in use while f ran above what was in use
// before, sampled every 20 ms.
func peakDuring(f func()) uint64 {
	base := heapInUse()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// BenchmarkQueryNational: the index's cost per position at 1,000 and
// 100,000 zones of each generator, positions drawn where the zones are
// (within the airports' and cities' areas): the grid keeps the cost per
// position when the set grows a hundredfold?
func BenchmarkQueryNational(b *testing.B) {
	for _, g := range []struct {
		name string
		gen  func(uint64, int) *Set
	}{{"faa-grid", FAAGrid}, {"ed269", ED269}} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/zones=%d", g.name, n), func(b *testing.B) {
				s := g.gen(29, n)
				set, _, err := geofence.Loader{Strict: true}.Parse(bytes.NewReader(s.Doc))
				if err != nil {
					b.Fatal(err)
				}
				ix, err := geofence.NewIndex(set)
				if err != nil {
					b.Fatal(err)
				}
				ps := s.Positions(1, 1<<16)
				at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
				var hits []geofence.Hit
				total := 0
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					p := ps[i&(len(ps)-1)]
					hits = ix.Query(geofence.Point{Lon: p[0], Lat: p[1], Time: at, Heights: geofence.Heights{AGL: 60, HasAGL: true}}, hits[:0])
					total += len(hits)
				}
				b.ReportMetric(float64(total)/float64(b.N), "hits/op")
			})
		}
	}
}

// BenchmarkNationalStoreWrite: how long one write of a 100,000-zone
// ED-269 version (83 MB) holds Redis, measured as the longest round trip of
// a PING sent every millisecond beside it: written whole by the change
// script (current and the history, 166 MB in one command) and staged in
// 1 MiB pieces (the store's way above 1 MiB, versionstore's StageAbove).
// Redis runs with appendfsync always, as nofly's does.
func BenchmarkNationalStoreWrite(b *testing.B) {
	s := ED269(29, 100_000)
	_, norm, _, err := zonestore.Validator{Loader: geofence.Loader{Strict: true}}.Normalize(s.Doc)
	if err != nil {
		b.Fatal(err)
	}
	entry := append(append([]byte(`{"version":1,"zones":`), norm...), '}')
	for _, tc := range []struct {
		name  string
		stage int64
	}{{"whole", 0}, {"staged", 1 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			rc := testenv.RedisClient(b)
			ctx := context.Background()
			var worstW, worstR, took time.Duration
			for i := 0; b.Loop(); i++ {
				vs := versionstore.New(rc, versionstore.KeysOf("{"+testenv.RedisPrefix(b, "zgwrite")+"}"), versionstore.Options{Name: "bench", StageAbove: tc.stage})
				var err error
				worstW = max(worstW, longestPing(ctx, rc, func() {
					t0 := time.Now()
					err = vs.Put(ctx, 0, entry, time.Now())
					took = time.Since(t0)
				}))
				if err != nil {
					b.Fatal(err)
				}
				worstR = max(worstR, longestPing(ctx, rc, func() {
					if got, ok, err := vs.Current(ctx); err != nil || !ok || len(got) != len(entry) {
						b.Fatalf("read back %d bytes, %v %v", len(got), ok, err)
					}
				}))
			}
			b.ReportMetric(float64(len(entry))/1e6, "entry_MB")
			b.ReportMetric(took.Seconds(), "write_s")
			b.ReportMetric(float64(worstW.Microseconds())/1000, "write_longest_ping_ms")
			b.ReportMetric(float64(worstR.Microseconds())/1000, "read_longest_ping_ms")
		})
	}
}

// longestPing runs f while a PING goes to Redis every millisecond, and
// returns the longest PING's round trip: how long f held Redis at most.
func longestPing(ctx context.Context, rc redis.UniversalClient, f func()) time.Duration {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var longest time.Duration
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			t0 := time.Now()
			_ = rc.Ping(ctx).Err()
			longest = max(longest, time.Since(t0))
		}
	})
	f()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	return longest
}
