package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// cmdCounter is a go-redis hook counting the commands a client sends,
// pipelined ones each.
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// seedDrones writes n drone states spread over partitions, their last
// position at ts: what the batch script leaves for drones that flew.
func seedDrones(t testing.TB, rdb *redis.Client, prefix, topic string, partitions, n int, ts time.Time) {
	t.Helper()
	ctx := context.Background()
	for p := range partitions {
		var kv []any
		for i := p; i < n; i += partitions {
			st := alerts.DroneState{Seq: 1, Pos: alerts.Fix{TS: ts, Lat: 51 + float64(i%1000)*1e-3, Lon: -1 + float64(i/1000)*1e-3}}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			kv = append(kv, fmt.Sprintf("UAV-%06d", i), b)
			if len(kv) == 2000 || i+partitions >= n {
				if err := rdb.HSet(ctx, redislayout.Of(prefix, topic, p).Drones(), kv...).Err(); err != nil {
					t.Fatal(err)
				}
				kv = kv[:0]
			}
		}
	}
	// As an alerter does when it loads the partitions: the drone indexes
	// the batch script keeps from then on.
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if _, err := ds.IndexDrones(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPositionsStreams: what positions streams cost the alerter per
// tick (one second): Redis commands its API client sends and the
// process's CPU, with 1 and 5 streams open over 50,000 drones known and
// none flying (the idle pipeline) and 5,000 flying. One iteration
// is one tick: every stream has read its next frame. BENCHMARKS.md has
// the figures:
//
//	go test -run '^$' -bench BenchmarkPositionsStreams -benchtime 5x ./api
func BenchmarkPositionsStreams(b *testing.B) {
	for _, tt := range []struct {
		name   string
		drones int
		idle   bool
	}{{"idle_50000", 50000, true}, {"flying_5000", 5000, false}} {
		for _, streams := range []int{1, 5} {
			b.Run(fmt.Sprintf("%s/streams_%d", tt.name, streams), func(b *testing.B) {
				rdb := testenv.RedisClient(b)
				cc := &cmdCounter{}
				rdb.AddHook(cc)
				prefix := testenv.RedisPrefix(b, "api-posbench")
				ts := time.Now().UTC()
				if tt.idle {
					ts = ts.Add(-time.Hour)
				}
				seedDrones(b, rdb, prefix, "pos", 12, tt.drones, ts)
				s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 12})
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(s.Handler())
				defer srv.Close()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				frames := make(chan int, 1000)
				for range streams {
					req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/map/positions", nil)
					res, err := http.DefaultClient.Do(req)
					if err != nil || res.StatusCode != 200 {
						b.Fatalf("stream: %v %v", res, err)
					}
					go func() {
						defer res.Body.Close()
						sc := bufio.NewScanner(res.Body)
						sc.Buffer(nil, 64<<20)
						for sc.Scan() {
							if l := sc.Text(); strings.HasPrefix(l, "data: ") {
								var f posFrame
								if json.Unmarshal([]byte(l[len("data: "):]), &f) == nil {
									frames <- len(f.Drones)
								}
							}
						}
					}()
				}
				// The first frames (full) first; then a tick at a time. An
				// idle stream writes at least every 5 s: count ticks by
				// time, not by frames.
				for range streams {
					<-frames
				}
				cmd0, cpu0 := cc.n.Load(), cpuTime()
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					time.Sleep(positionsEvery) // a tick of the streams, which is what is measured
				}
				b.StopTimer()
				ticks := time.Since(start).Seconds()
				b.ReportMetric(float64(cc.n.Load()-cmd0)/ticks, "redis-cmds/s")
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/ticks, "cpu-ms/s")
			})
		}
	}
}
