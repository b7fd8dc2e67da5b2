package dedup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// roundTrips counts a client's round trips: each command, and each
// pipeline, is one.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// serverStats is what Redis reports of its main thread's CPU, of the
// commands it ran (INFO commandstats: calls, scripts' inner commands
// included, and EVALSHA's own usec) and of its AOF's size.
type serverStats struct {
	cpu       time.Duration
	calls     int64 // every command but INFO
	evalshaUS int64
	aof       int64
	byCommand map[string]int64
}

func readServerStats(b *testing.B, rc *redis.Client) serverStats {
	b.Helper()
	info, err := rc.Info(context.Background(), "cpu", "persistence", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	s := serverStats{byCommand: map[string]int64{}}
	for _, l := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(l, ":")
		switch {
		case k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += time.Duration(f * float64(time.Second))
		case k == "aof_current_size":
			s.aof, _ = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(k, "cmdstat_"):
			name := strings.TrimPrefix(k, "cmdstat_")
			var calls, usec int64
			for _, kv := range strings.Split(v, ",") {
				f, x, _ := strings.Cut(kv, "=")
				switch f {
				case "calls":
					calls, _ = strconv.ParseInt(x, 10, 64)
				case "usec":
					usec, _ = strconv.ParseInt(x, 10, 64)
				}
			}
			if name == "info" {
				continue
			}
			s.byCommand[name] = calls
			s.calls += calls
			if name == "evalsha" {
				s.evalshaUS = usec
			}
		}
	}
	return s
}

// fleet returns the records, in ts order, of n drones each reporting at
// 1 Hz (drone d at d/n s into each second), drone d joining d mod 10 s
// after the first: once all have joined, n records per second, their 10 s
// track samples spread evenly (as drones that took off at different
// times), not all in one batch. Every drone stays outside every zone (no
// alarm events), so the figures are the drone states' and tracks' alone.
func fleet(n int) func() telemetry.Position {
	k, d := 0, 0
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	return func() telemetry.Position {
		for d%10 > k { // not joined yet
			if d++; d == n {
				k, d = k+1, 0
			}
		}
		p := telemetry.Position{DroneID: fmt.Sprintf("UAV-%05d", d), Seq: int64(k + 1),
			TS:  base.Add(time.Duration(k)*time.Second + time.Duration(d)*time.Second/time.Duration(n)),
			Lat: 51.30 + float64(k%600)*1e-5, Lon: -0.80 + float64(d)*1e-4, AltM: telemetry.Float(80), AltRef: telemetry.RefAGL}
		if d++; d == n {
			k, d = k+1, 0
		}
		return p
	}
}

// BenchmarkDroneStateCost measures what the batch script costs Redis per
// 1,000 positions when it writes each seen drone's state (and, from the
// drones API on, its last position and a track point per drone per 10 s
// of ts): batches of 500 records of a fleet of 100 or 500 drones at 1 Hz
// through the real engine (alerts.Engine, default track interval) and
// dedup.Redis.Commit. It reports round trips of the committing client,
// Redis main-thread CPU, EVALSHA's own time (INFO commandstats), commands
// Redis ran (scripts' inner ones included), AOF bytes, and the drone
// states and track points the batches carried, each per 1,000 positions,
// and the memory of a drone's state (MEMORY USAGE of the hash over the
// drones) and of its full track.
// The drones fly 510 s of ts before the measured batches, so every
// track is full, as in steady state. One op = one batch. It runs as is in an earlier tree (copy the file into
// its dedup/), so the same stream measures both; run it against a Redis of
// its own (NOFLY_REDIS_ADDR) to keep other clients out of the figures.
func BenchmarkDroneStateCost(b *testing.B) {
	set, err := geofence.LoadFile(filepath.Join("..", scenario.ZonesFile))
	if err != nil {
		b.Fatal(err)
	}
	zs, err := geofence.NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	// 100 and 500 drones: one drone hash of at most 512 fields, which Redis
	// keeps as a listpack while every value is at most 64 bytes (the states
	// before they kept a position) and as a hash table otherwise; 2000: a
	// hash table either way. "tracks=off" (where the engine samples
	// tracks at all) splits the cost of the bigger states from the
	// tracks'.
	for _, sh := range []struct {
		n      int
		tracks bool
	}{{100, true}, {500, true}, {2000, true}, {2000, false}, {50000, true}} {
		n := sh.n
		name := fmt.Sprintf("drones=%d", n)
		if !sh.tracks {
			name += "/tracks=off"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			stats := testenv.RedisClient(b)
			var rt roundTrips
			rc := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
			defer rc.Close()
			rc.AddHook(&rt)
			prefix := testenv.RedisPrefix(b, "dronecost")
			s, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "t"})
			if err != nil {
				b.Fatal(err)
			}
			e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
			if err != nil {
				b.Fatal(err)
			}
			if !sh.tracks {
				// Asserted, not called: the file also builds in trees
				// whose engine has no tracks.
				st, ok := any(e).(interface{ SetTrackInterval(time.Duration) })
				if !ok {
					b.Skip("this engine samples no tracks")
				}
				st.SetTrackInterval(0)
			}
			gen, next := fleet(n), 0
			var states, tracks int
			step := func() {
				recs := make([]alerts.Record, batch)
				for j := range recs {
					p := gen()
					recs[j] = alerts.Record{Offset: int64(next), Value: p.AppendJSON(nil)}
					next++
				}
				out := e.Apply(zs, recs)
				if out == nil || len(out.Events) != 0 {
					b.Fatalf("batch at record %d: %v", next, out)
				}
				if _, err := s.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
					b.Fatal(err)
				}
				states += len(out.Batch.Drones)
				tracks += len(out.Batch.Tracks)
			}
			// Warm up past the fleet's joining (10 s of ts), the filling of
			// every track (50 samples, 500 s: from then on each point also
			// trims) and the script's first EVAL.
			// At national scale (50,000 drones) every drone is seen twice
			// instead: the tracks are not full, the indexes are.
			warm := 510*n/batch + 4
			if n > 2000 {
				warm = 2*n/batch + 4
			}
			for range warm {
				step()
			}
			states, tracks = 0, 0
			rt0, u0 := rt.n.Load(), readServerStats(b, stats)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.StopTimer()
			u := readServerStats(b, stats)
			per := 1000 / float64(b.N*batch)
			b.ReportMetric(float64(rt.n.Load()-rt0)*per, "round_trips/1kpos")
			b.ReportMetric(float64((u.cpu-u0.cpu).Microseconds())*per, "redis_cpu_us/1kpos")
			b.ReportMetric(float64(u.evalshaUS-u0.evalshaUS)*per, "evalsha_us/1kpos")
			b.ReportMetric(float64(u.calls-u0.calls)*per, "redis_cmds/1kpos")
			b.ReportMetric(float64(max(0, u.aof-u0.aof))*per, "aof_B/1kpos") // 0 when an AOF rewrite ran in between
			b.ReportMetric(float64(states)*per, "states/1kpos")
			b.ReportMetric(float64(tracks)*per, "tracks/1kpos")
			hash, err := stats.MemoryUsage(ctx, s.Keys(0).Drones(), 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			// The tracks are the lists (the zone switches' list is absent:
			// the zone set is not versioned here).
			var track int64
			it := stats.Scan(ctx, 0, redislayout.Match(prefix), 1000).Iterator()
			for it.Next(ctx) {
				if typ, err := stats.Type(ctx, it.Val()).Result(); err != nil {
					b.Fatal(err)
				} else if typ == "list" {
					m, err := stats.MemoryUsage(ctx, it.Val(), 0).Result()
					if err != nil {
						b.Fatal(err)
					}
					track += m
				}
			}
			if err := it.Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(hash)/float64(n), "state_B/drone")
			// The drone indexes (issue 29), by name: the file also builds in
			// trees without them (0 there).
			var index int64
			for _, suffix := range []string{":ids", ":geo", ":changed"} {
				if m, err := stats.MemoryUsage(ctx, s.Keys(0).Drones()+suffix, 0).Result(); err == nil {
					index += m
				}
			}
			b.ReportMetric(float64(index)/float64(n), "index_B/drone")
			b.ReportMetric(float64(track)/float64(n), "track_B/drone")
			if testing.Verbose() {
				var cmds []string
				for c, calls := range u.byCommand {
					if d := calls - u0.byCommand[c]; d > 0 {
						cmds = append(cmds, fmt.Sprintf("%s=%.1f", c, float64(d)*per))
					}
				}
				b.Logf("commands per 1,000 positions: %s", strings.Join(cmds, " "))
			}
		})
	}
}
