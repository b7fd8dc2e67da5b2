package dedup_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// redisUsage is what Redis reports of its main thread's CPU
// (used_cpu_{user,sys}_main_thread) and of its AOF's size.
type redisUsage struct {
	cpu time.Duration
	aof int64
}

func sampleRedis(b *testing.B, rc *redis.Client) redisUsage {
	info, err := rc.Info(context.Background(), "cpu", "persistence").Result()
	if err != nil {
		b.Fatal(err)
	}
	return parseUsage(info)
}

func parseUsage(info string) redisUsage {
	var u redisUsage
	for _, l := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
			f, _ := strconv.ParseFloat(v, 64)
			u.cpu += time.Duration(f * float64(time.Second))
		case "aof_current_size":
			u.aof, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return u
}

// BenchmarkCommitLayouts commits batches shaped like the alerter's at 20 %
// transitions (per partition a batch of 500 records: 33 drones' states and
// 100 new events of 420 bytes; and the same with 500 drones, and with no
// events) with the earlier layout's script (a SET NX EX key per event) and
// the bucket layout's, alternating blocks of 20 batches of each in one run,
// and reports for each Redis's main-thread CPU per event (per batch when
// there are none), events/s through one client, and AOF bytes per event.
// One op = one block of each layout. Run it against a Redis of its own
// (NOFLY_REDIS_ADDR) to keep other tests' commands out of the CPU figures.
func BenchmarkCommitLayouts(b *testing.B) {
	shapes := []struct {
		name           string
		drones, events int
	}{
		{"drones=33/events=100", 33, 100},
		{"drones=500/events=100", 500, 100},
		{"drones=33/events=0", 33, 0},
	}
	state := []byte(`{"seq":123456,"in":[{"zone":"POLY","alarm":"0123456789abcdef0123456789abcdef","fp":"0123456789abcdef0123456789abcdef","rseq":1200,"name":"Runway","cat":"restricted"}]}`)
	event := []byte(`{"event_id":"0123456789abcdef0123456789abcdef:raised","alarm_id":"0123456789abcdef0123456789abcdef","type":"raised","drone_id":"UAV-0001","zone_id":"POLY","zone_name":"Runway","category":"restricted","seq":123456,"ts":"2026-12-02T10:00:00Z","lat":51.47001,"lon":-0.49,"alt_m":80,"alt_ref":"agl","height_assumed":false,"partition":3,"offset":1234567,"pad":"` + strings.Repeat("x", 90) + `"}`)
	const block = 20
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			ctx := context.Background()
			rc := testenv.RedisClient(b)
			type layout struct {
				name    string
				commit  func(context.Context, int, int64, dedup.Batch) (dedup.Result, error)
				version int64
				took    time.Duration
				used    redisUsage
				events  int
				batches int
			}
			var ls []*layout
			for _, name := range []string{"old", "new"} {
				s, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: testenv.RedisPrefix(b, "layouts-"+name), Topic: "t"})
				if err != nil {
					b.Fatal(err)
				}
				l := &layout{name: name, commit: s.Commit, version: dedup.NoVersion}
				if name == "old" {
					l.commit = s.LegacyCommit
				}
				ls = append(ls, l)
			}
			seq := 0
			run := func(l *layout) {
				batches := make([]dedup.Batch, block)
				for i := range batches {
					bt := dedup.Batch{Drones: make(map[string][]byte, sh.drones), Applied: l.version + int64(500*(i+1))}
					for d := 0; d < sh.drones; d++ {
						bt.Drones[fmt.Sprintf("UAV-%04d", d)] = state
					}
					for e := 0; e < sh.events; e++ {
						seq++
						bt.Events = append(bt.Events, dedup.Event{ID: fmt.Sprintf("%032x:raised", seq), JSON: event})
					}
					batches[i] = bt
				}
				u0, t0 := sampleRedis(b, rc), time.Now()
				for _, bt := range batches {
					res, err := l.commit(ctx, 0, l.version, bt)
					if err != nil {
						b.Fatal(err)
					}
					if res.Appended != sh.events {
						b.Fatalf("%s: appended %d of %d", l.name, res.Appended, sh.events)
					}
					l.version = bt.Applied
				}
				l.took += time.Since(t0)
				u := sampleRedis(b, rc)
				l.used.cpu += u.cpu - u0.cpu
				if d := u.aof - u0.aof; d > 0 { // an AOF rewrite in between shrinks it: skip that block's bytes
					l.used.aof += d
				}
				l.events += block * sh.events
				l.batches += block
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Alternate the order: the machine is shared and its load drifts.
				run(ls[i%2])
				run(ls[1-i%2])
			}
			for _, l := range ls {
				if sh.events > 0 {
					n := float64(l.events)
					b.ReportMetric(float64(l.used.cpu.Nanoseconds())/n/1e3, l.name+"_redis_cpu_us/event")
					b.ReportMetric(n/l.took.Seconds(), l.name+"_events/s")
					b.ReportMetric(float64(l.used.aof)/n, l.name+"_aof_B/event")
				} else {
					n := float64(l.batches)
					b.ReportMetric(float64(l.used.cpu.Nanoseconds())/n/1e3, l.name+"_redis_cpu_us/batch")
					b.ReportMetric(float64(l.used.aof)/n, l.name+"_aof_B/batch")
				}
			}
		})
	}
}
