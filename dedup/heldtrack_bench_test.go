package dedup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkAlarmedTrackCost is BenchmarkDroneStateCost's fleet (500 drones
// at 1 Hz, batches of 500 records) with a share of the drones inside a
// restricted zone the whole time, so in alarm: what the incident track
// (a point a second while alarmed, the track held at 1,200 points) costs
// Redis per 1,000 positions and in memory, beside alarmed=0%. The zone is
// entered during the warm-up, so the raises are not measured. It uses only
// the engine's and the store's public API: copied into a tree before the
// incident track, it measures the same fleet there.
func BenchmarkAlarmedTrackCost(b *testing.B) {
	const n, batch = 500, 500
	for _, pct := range []int{0, 10} {
		b.Run(fmt.Sprintf("alarmed=%d%%", pct), func(b *testing.B) {
			// fleet's drone d flies at lon -0.80 + d·1e-4, lat 51.30 to
			// 51.306: a zone over the first pct% of them.
			hi := -0.80 + float64(n*pct/100)*1e-4 - 0.5e-4
			zones := fmt.Sprintf(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"HELD","name":"held","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-0.81,51.29],[%[1]g,51.29],[%[1]g,51.32],[-0.81,51.32],[-0.81,51.29]]]}}]}`, hi)
			set, err := geofence.ParseGeoJSON(strings.NewReader(zones))
			if err != nil {
				b.Fatal(err)
			}
			zs, err := geofence.NewIndex(set)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			stats := testenv.RedisClient(b)
			rc := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
			defer rc.Close()
			prefix := testenv.RedisPrefix(b, "heldcost")
			s, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "t"})
			if err != nil {
				b.Fatal(err)
			}
			e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
			if err != nil {
				b.Fatal(err)
			}
			gen, next := fleet(n), 0
			var tracks int
			step := func() {
				recs := make([]alerts.Record, batch)
				for j := range recs {
					p := gen()
					recs[j] = alerts.Record{Offset: int64(next), Value: p.AppendJSON(nil), Time: p.TS}
					next++
				}
				out := e.Apply(zs, recs)
				if out == nil {
					b.Fatalf("batch at record %d: nothing to commit", next)
				}
				if _, err := s.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
					b.Fatal(err)
				}
				tracks += len(out.Batch.Tracks)
			}
			// 1,300 s of ts: every normal track full (50 points), every
			// alarmed one past its 1,200.
			for range 1300*n/batch + 4 {
				step()
			}
			tracks = 0
			u0 := readServerStats(b, stats)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.StopTimer()
			u := readServerStats(b, stats)
			per := 1000 / float64(b.N*batch)
			b.ReportMetric(float64((u.cpu-u0.cpu).Microseconds())*per, "redis_cpu_us/1kpos")
			b.ReportMetric(float64(u.evalshaUS-u0.evalshaUS)*per, "evalsha_us/1kpos")
			b.ReportMetric(float64(u.calls-u0.calls)*per, "redis_cmds/1kpos")
			b.ReportMetric(float64(max(0, u.aof-u0.aof))*per, "aof_B/1kpos")
			b.ReportMetric(float64(tracks)*per, "tracks/1kpos")
			var track, held int64
			var nHeld int
			it := stats.Scan(ctx, 0, redislayout.Match(prefix), 1000).Iterator()
			for it.Next(ctx) {
				if typ, _ := stats.Type(ctx, it.Val()).Result(); typ != "list" || !strings.Contains(it.Val(), ":track:") {
					continue
				}
				m, err := stats.MemoryUsage(ctx, it.Val(), 0).Result()
				if err != nil {
					b.Fatal(err)
				}
				track += m
				if l := stats.LLen(ctx, it.Val()).Val(); l > 50 {
					held += m
					nHeld++
				}
			}
			b.ReportMetric(float64(track)/float64(n), "track_B/drone")
			if nHeld > 0 {
				b.ReportMetric(float64(held)/float64(nHeld), "held_track_B/held_drone")
			}
			b.ReportMetric(float64(nHeld), "held_drones")
		})
	}
}
