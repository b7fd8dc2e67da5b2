package api

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkAlarmsFilter (issue 29): GET /v1/alarms filtered by drone, zone
// and category, alone and combined, with 100,000 alarms in retention over
// 12 partitions, written by the real batch script: 20,000 drones (each on
// the partition its id hashes to), 300 zones (one in five a warning zone,
// the others restricted), raised over the last 7 days, 90 % cleared, one
// in ten acked. Meanwhile two goroutines commit batches flat out on the
// same Redis, as the alerter does: per batch 500 drone states and 100
// events, 50 raises and the clears of 50 earlier alarms, on keys of their
// own, so the secondary sets are written under the reads. Each op is one
// request, sequential, each for another drone or zone; p50/p99 are of the
// op latencies; listed/op is the mean page size; round_trips/op and
// redis_cmds/op are the API's own, counted on its client: what a request
// costs, whatever the machine's load. NOFLY_BENCH_NO_LOAD=1 runs it
// without the load.
func BenchmarkAlarmsFilter(b *testing.B) {
	loadWriters := 2
	if os.Getenv("NOFLY_BENCH_NO_LOAD") != "" {
		loadWriters = 0
	}
	ctx := context.Background()
	rdb := testenv.RedisClient(b)
	prefix := testenv.RedisPrefix(b, "bench-filter")
	const partitions, alarms, drones, zones = 12, 100000, 20000, 300
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		b.Fatal(err)
	}
	partitionOf := func(drone string) int {
		h := fnv.New32a()
		_, _ = h.Write([]byte(drone))
		return int(h.Sum32() % partitions)
	}
	category := func(z int) string {
		if z%5 == 0 {
			return "warning"
		}
		return "restricted"
	}
	rnd := rand.New(rand.NewPCG(29, 100000))
	now := time.Now()
	w := storetest.NewWriter(ds)
	var raised []alerts.Event
	t0 := time.Now()
	for i := 0; i < alarms; i++ {
		d, z := fmt.Sprintf("UAV-%05d", rnd.IntN(drones)), rnd.IntN(zones)
		e := storetest.Raised(partitionOf(d), d, fmt.Sprintf("ZONE-%03d", z), category(z), int64(i),
			now.Add(-time.Duration(rnd.Int64N(int64(7*24*time.Hour)))))
		w.Add(e)
		raised = append(raised, e)
		if i%1000 == 999 {
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i, e := range raised {
		if i%10 != 0 {
			w.Add(storetest.ClearedOf(e, e.Seq+alarms, e.TS.Add(10*time.Minute), alerts.ReasonExited))
		}
		if i%1000 == 999 {
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	// The API reads through a client of its own, counting its round
	// trips and commands.
	apiRedis := testenv.RedisClient(b)
	var trips, cmds atomic.Int64
	apiRedis.AddHook(countHook{&trips, &cmds})
	s, err := New(Options{Redis: apiRedis, Prefix: prefix, Topic: "pos", Partitions: partitions})
	if err != nil {
		b.Fatal(err)
	}
	r := chi.NewRouter()
	s.mountAlarms(r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	st, err := alarmstore.New(alarmstore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: partitions})
	if err != nil {
		b.Fatal(err)
	}
	for i := 3; i < alarms; i += 10 {
		if _, _, err := st.Ack(ctx, raised[i].AlarmID, "ops", ""); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d alarms (%d cleared) in %v", alarms, alarms-alarms/10, time.Since(t0).Round(time.Millisecond))

	// The load: the batch script flat out on two partitions of another
	// prefix, raising and clearing alarms.
	loadCtx, stop := context.WithCancel(ctx)
	var load sync.WaitGroup
	var batches atomic.Int64
	ls, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: testenv.RedisPrefix(b, "bench-filter-load"), Topic: "pos"})
	if err != nil {
		b.Fatal(err)
	}
	state := []byte(`{"seq":123456,"in":[{"zone":"POLY","alarm":"0123456789abcdef0123456789abcdef","fp":"0123456789abcdef0123456789abcdef","rseq":1200,"name":"Runway","cat":"restricted"}]}`)
	for p := 0; p < loadWriters; p++ {
		load.Add(1)
		go func() {
			defer load.Done()
			v := dedup.NoVersion
			var open []alerts.Event
			for n := 0; loadCtx.Err() == nil; n++ {
				bt := dedup.Batch{Drones: make(map[string][]byte, 500), Applied: v + 500}
				for d := 0; d < 500; d++ {
					bt.Drones[fmt.Sprintf("UAV-%04d", d)] = state
				}
				for e := 0; e < 50; e++ {
					ev := storetest.Raised(p, fmt.Sprintf("UAV-%04d", e), fmt.Sprintf("ZONE-%03d", (n+e)%zones), category((n+e)%zones), int64(n*100+e), now.Add(time.Duration(n*100+e)*time.Millisecond))
					bt.Events = append(bt.Events, dedup.Event{ID: ev.EventID, JSON: ev.AppendJSON(nil)})
					open = append(open, ev)
				}
				if len(open) >= 100 {
					for _, ev := range open[:50] {
						c := storetest.ClearedOf(ev, ev.Seq+1, ev.TS.Add(time.Second), alerts.ReasonExited)
						bt.Events = append(bt.Events, dedup.Event{ID: c.EventID, JSON: c.AppendJSON(nil)})
					}
					open = open[50:]
				}
				if _, err := ls.Commit(loadCtx, p, v, bt); err != nil {
					if loadCtx.Err() == nil {
						b.Error(err)
					}
					return
				}
				v = bt.Applied
				batches.Add(1)
			}
		}()
	}
	defer func() {
		stop()
		load.Wait()
	}()

	// Drones and zones to ask for, in a fixed shuffled order.
	var droneIDs []string
	for _, e := range raised[:2000] {
		droneIDs = append(droneIDs, e.DroneID)
	}
	zone := func(i int) string { return fmt.Sprintf("ZONE-%03d", (i*7)%zones) }
	queries := []struct {
		name string
		q    func(i int) string
	}{
		{"drone,state=all", func(i int) string { return "drone=" + droneIDs[i%len(droneIDs)] + "&state=all" }},
		{"drone", func(i int) string { return "drone=" + droneIDs[i%len(droneIDs)] }},
		{"zone,state=all", func(i int) string { return "zone=" + zone(i) + "&state=all" }},
		{"zone", func(i int) string { return "zone=" + zone(i) }},
		{"category,state=all", func(i int) string { return "category=" + category(i%2) + "&state=all" }},
		{"category,state=cleared,limit=1000", func(i int) string { return "category=" + category(i%2) + "&state=cleared&limit=1000" }},
		{"zone+category,state=all", func(i int) string { return "zone=" + zone(i) + "&category=" + category((i*7)%zones) + "&state=all" }},
		{"zone+other category,state=all", func(i int) string {
			other := "warning"
			if category((i*7)%zones) == other {
				other = "restricted"
			}
			return "zone=" + zone(i) + "&category=" + other + "&state=all"
		}},
		{"drone+zone,state=all", func(i int) string {
			e := raised[i%2000]
			return "drone=" + e.DroneID + "&zone=" + e.ZoneID + "&state=all"
		}},
		{"drone+category,state=all", func(i int) string {
			e := raised[i%2000]
			return "drone=" + e.DroneID + "&category=" + e.Category + "&state=all"
		}},
		{"zone+acked=false,state=all", func(i int) string { return "zone=" + zone(i) + "&acked=false&state=all" }},
		{"category+acked=true,state=all", func(i int) string { return "category=restricted&acked=true&state=all" }},
	}
	for _, qu := range queries {
		b.Run("query="+qu.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b0, listed := batches.Load(), 0
			t0, c0 := trips.Load(), cmds.Load()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				resp, err := http.Get(srv.URL + "/v1/alarms?" + qu.q(i))
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: status %d: %s", qu.q(i), resp.StatusCode, body)
				}
				lat = append(lat, time.Since(t0))
				listed += strings.Count(string(body), `"alarm_id"`)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50_ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1e3, "p99_ms")
			b.ReportMetric(float64(listed)/float64(b.N), "listed/op")
			b.ReportMetric(float64(trips.Load()-t0)/float64(b.N), "round_trips/op")
			b.ReportMetric(float64(cmds.Load()-c0)/float64(b.N), "redis_cmds/op")
			b.ReportMetric(float64(batches.Load()-b0)*100/b.Elapsed().Seconds(), "load_events/s")
		})
	}
}

// countHook counts a client's round trips (a command or a pipeline) and
// commands.
type countHook struct{ trips, cmds *atomic.Int64 }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cs)))
		return next(ctx, cs)
	}
}
