package alerterd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// BenchmarkChurnDay: a day of Remote ID session ids, each drone seen for one
// flight and never again (ASTM F3411 ID type 4) — 1,000,000 distinct ids, a
// new one about every 86 ms of the log's clock, each flying about 7 minutes
// with a fix every 30 s, so about 5,000 are in the air at any time — through
// one partition's engine and the real batch script, on a Redis of its own,
// with a tick every second. With --drone-ttl 2h the engine's memory and
// Redis's used_memory stop growing after the first two hours: the state
// follows the fleet in the air, not history. It prints the hourly table of
// BENCHMARKS.md ("Drones forgotten"); b.N is ignored (one day a run).
//
//	go test -run '^$' -bench BenchmarkChurnDay -benchtime 1x -timeout 30m ./internal/alerterd
func BenchmarkChurnDay(b *testing.B) {
	const (
		ids      = 1_000_000
		day      = 24 * time.Hour
		flight   = 7 * time.Minute
		fixEvery = 30 * time.Second
		ttl      = 2 * time.Hour
		batch    = 2000
	)
	r := testenv.StartRedis(b)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	b.Cleanup(func() { _ = rc.Close() })
	store, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: "churn", Topic: "t"})
	if err != nil {
		b.Fatal(err)
	}
	set, err := geofence.LoadFile(zonesPath())
	if err != nil {
		b.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	eng, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		b.Fatal(err)
	}
	eng.SetTiming(alerts.Timing{DroneTTL: ttl})
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 7))
	// Flights outside every zone (no alarm keeps a drone past its TTL):
	// north of the scenario's zones.
	type flying struct {
		id        string
		from, end time.Duration
		seq       int64
		lat, lon  float64
	}
	every := day / ids
	var air []*flying
	next, off := 0, int64(0)
	var recs []alerts.Record
	commit := func() {
		if len(recs) == 0 {
			return
		}
		out := eng.Apply(ix, recs)
		if out != nil {
			if _, err := store.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
				b.Fatal(err)
			}
		}
		recs = recs[:0]
	}
	usedMemory := func() int64 {
		info, err := rc.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO memory")
		return 0
	}
	var rows []string
	began := time.Now()
	positions := 0
	for sec := time.Duration(0); sec <= day; sec += time.Second {
		at := start.Add(sec)
		for next < ids && time.Duration(next)*every <= sec {
			air = append(air, &flying{id: fmt.Sprintf("RID-%07d", next), from: sec, end: sec + flight/2 + time.Duration(rng.Int64N(int64(flight))),
				lat: 51.60 + rng.Float64()*0.3, lon: -0.8 + rng.Float64()*0.6})
			next++
		}
		kept := air[:0]
		for _, f := range air {
			if (sec-f.from)%fixEvery == 0 {
				f.seq++
				p := telemetry.Position{DroneID: f.id, Seq: f.seq, TS: at, Lat: f.lat, Lon: f.lon, AltM: telemetry.Float(80)}
				recs = append(recs, alerts.Record{Offset: off, Time: at, Value: p.AppendJSON(nil)})
				off++
				positions++
			}
			if sec < f.end {
				kept = append(kept, f)
			}
		}
		clear(air[len(kept):])
		air = kept
		recs = append(recs, alerts.Record{Offset: off, Time: at, Value: (&telemetry.Tick{At: at}).AppendJSON(nil)})
		off++
		if len(recs) >= batch {
			commit()
		}
		if sec%time.Hour == 0 {
			commit()
			snap, err := store.Load(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if eng.Drones() != len(snap.Drones) {
				b.Fatalf("at %v the engine holds %d drones, Redis %d", sec, eng.Drones(), len(snap.Drones))
			}
			rows = append(rows, fmt.Sprintf("| %2dh | %9d | %6d | %7d | %8.1f | %8.1f |", int(sec.Hours()), next, len(air), len(snap.Drones),
				float64(ms.HeapAlloc)/(1<<20), float64(usedMemory())/(1<<20)))
			fmt.Fprintf(os.Stderr, "churn %s (%v)\n", rows[len(rows)-1], time.Since(began).Round(time.Second))
		}
	}
	commit()
	b.ReportMetric(float64(positions)/time.Since(began).Seconds(), "positions/s")
	b.Logf("one simulated day: %d distinct drones, %d positions and %d ticks in %v; --drone-ttl %v\n"+
		"| log clock | drones seen | in the air | known (engine = Redis hash) | Go heap MiB | Redis used_memory MiB |\n| --- | --- | --- | --- | --- | --- |\n%s",
		next, positions, int(day/time.Second)+1, time.Since(began).Round(time.Second), ttl, strings.Join(rows, "\n"))
}
