package dronestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkDronesAtScale (issue 29): what a drones page and a positions
// producer's tick cost at national scale — 50,000 drones known over the
// UK on 12 partitions, written by the batch script — from the drone
// indexes ("indexed") and, side by side in the same run, by reading every
// state as before them ("scan": the partitions' marks removed, which is
// how a reader sees a partition no alerter has indexed yet). One op = one
// page or one tick.
func BenchmarkDronesAtScale(b *testing.B) {
	const drones, partitions = 50000, 12
	ctx := context.Background()
	rdb := testenv.RedisClient(b)
	prefix := testenv.RedisPrefix(b, "dronescale")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		b.Fatal(err)
	}
	st, err := dronestore.New(dronestore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: partitions})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(29, 5))
	now := time.Now().UTC()
	version := make([]int64, partitions)
	for p := range version {
		version[p] = dedup.NoVersion
	}
	place := func(i int) (float64, float64) { return 50 + rng.Float64()*5, -5 + rng.Float64()*6 }
	// commit writes the states of drones ids (by index) at new places.
	known := make([]bool, drones)
	commit := func(ids []int, ts time.Time) {
		batches := make([]dedup.Batch, partitions)
		for _, i := range ids {
			p := i % partitions
			id := fmt.Sprintf("UAV-%06d", i)
			lat, lon := place(i)
			raw, err := json.Marshal(alerts.DroneState{Seq: ts.Unix(), Pos: alerts.Fix{TS: ts, Lat: lat, Lon: lon}, Seen: ts.UnixMilli()})
			if err != nil {
				b.Fatal(err)
			}
			if batches[p].Drones == nil {
				batches[p].Drones = map[string][]byte{}
			}
			batches[p].Drones[id] = raw
			batches[p].Placed = append(batches[p].Placed, dedup.Placed{ID: id, Lon: lon, Lat: lat})
			if !known[i] {
				known[i] = true
				batches[p].New = append(batches[p].New, id)
			}
		}
		for p, bt := range batches {
			if bt.Drones == nil {
				continue
			}
			bt.Applied = version[p] + int64(len(bt.Drones))
			if _, err := ds.Commit(ctx, p, version[p], bt); err != nil {
				b.Fatal(err)
			}
			version[p] = bt.Applied
		}
	}
	all := make([]int, drones)
	for i := range all {
		all[i] = i
	}
	for a := 0; a < drones; a += 6000 {
		commit(all[a:min(drones, a+6000)], now)
	}
	marks := func(on bool) {
		for p := range partitions {
			k := ds.Keys(p).DroneIndexed()
			var err error
			if on {
				err = rdb.Set(ctx, k, "1", 0).Err()
			} else {
				err = rdb.Del(ctx, k).Err()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	var cmds cmdCount
	rdb.AddHook(&cmds)
	modes := []struct {
		name    string
		indexed bool
	}{{"indexed", true}, {"scan", false}}
	lists := []struct {
		name string
		f    dronestore.Filter
	}{
		{"page=100", dronestore.Filter{Limit: 100}},
		{"bbox=airport", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -0.55, MinLat: 51.42, MaxLon: -0.35, MaxLat: 51.52}}},
		{"bbox=country", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -5, MinLat: 50, MaxLon: 1, MaxLat: 55}}},
		{"active_since=recent", dronestore.Filter{ActiveSince: now.Add(time.Second)}},
	}
	for _, l := range lists {
		for _, m := range modes {
			b.Run("list/"+l.name+"/"+m.name, func(b *testing.B) {
				marks(m.indexed)
				defer marks(true)
				c0 := cmds.n.Load()
				var got int
				for b.Loop() {
					page, _, err := st.List(ctx, l.f)
					if err != nil {
						b.Fatal(err)
					}
					got = len(page)
				}
				b.ReportMetric(float64(got), "drones/page")
				b.ReportMetric(float64(cmds.n.Load()-c0)/float64(b.N), "redis_cmds/op")
			})
		}
	}
	// A producer's tick: quiet (nothing written since the last), and with
	// 1,000 drones moved since (1,000 positions a second of 50,000 known:
	// a quiet national picture) and 50,000 (every drone at 1 Hz); the
	// Feed (the changes stream) against the Scanner the producer used
	// before it (every state read, only the changed ones decoded).
	type activer interface {
		Active(context.Context, time.Time) ([]dronestore.Drone, error)
	}
	for _, moved := range []int{0, 1000, 50000} {
		for _, m := range []string{"feed", "scanner"} {
			b.Run(fmt.Sprintf("tick/moved=%d/%s", moved, m), func(b *testing.B) {
				var fd activer = st.Scanner()
				feed := st.Feed()
				if m == "feed" {
					fd = feed
				}
				since := now.Add(-2 * time.Minute)
				if _, err := fd.Active(ctx, since); err != nil { // the first, full read
					b.Fatal(err)
				}
				var reads int64
				var cmdsIn int64
				for b.Loop() {
					b.StopTimer()
					if moved > 0 {
						ids := make([]int, moved)
						for j := range ids {
							ids[j] = rng.IntN(drones)
						}
						commit(ids, now.Add(time.Second))
					}
					c0 := cmds.n.Load()
					b.StartTimer()
					if _, err := fd.Active(ctx, since); err != nil {
						b.Fatal(err)
					}
					cmdsIn += cmds.n.Load() - c0
					reads += feed.Reads()
				}
				b.ReportMetric(float64(cmdsIn)/float64(b.N), "redis_cmds/op")
				if m == "feed" {
					b.ReportMetric(float64(reads)/float64(b.N), "states_read/op")
				}
			})
		}
	}
}

// cmdCount counts the commands a client sends (a pipeline's each).
type cmdCount struct{ n atomic.Int64 }

func (c *cmdCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *cmdCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *cmdCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}
