package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkAlarmsList: GET /v1/alarms (default: active, limit 100; and
// limit 1000; and a drone filter that scans every alarm) with 10,000 active
// alarms over 12 partitions, written by the real batch script, while two
// goroutines commit batches flat out on the same Redis, as the alerter
// does (per batch 500 drone states and 100 new raised events of the
// alerter's shape, one script call; on keys of their own). One op = one
// request, sequential; p50/p99 are of the op latencies.
func BenchmarkAlarmsList(b *testing.B) {
	ctx := context.Background()
	rdb := testenv.RedisClient(b)
	prefix := testenv.RedisPrefix(b, "bench-alarms")
	const partitions, alarms = 12, 10000
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		b.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i := 0; i < alarms; i++ {
		w.Add(storetest.Raised(i%partitions, fmt.Sprintf("UAV-%05d", i%3000), fmt.Sprintf("Z%d", i%48), "restricted", int64(i), base.Add(time.Duration(i)*time.Millisecond*7)))
		if i%500 == 499 {
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: partitions})
	if err != nil {
		b.Fatal(err)
	}
	r := chi.NewRouter()
	s.mountAlarms(r)
	srv := httptest.NewServer(r)
	defer srv.Close()

	// The load: the batch script flat out on two partitions of another prefix.
	loadCtx, stop := context.WithCancel(ctx)
	var load sync.WaitGroup
	var batches atomic.Int64
	ls, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix + "-load", Topic: "pos"})
	if err != nil {
		b.Fatal(err)
	}
	state := []byte(`{"seq":123456,"in":[{"zone":"POLY","alarm":"0123456789abcdef0123456789abcdef","fp":"0123456789abcdef0123456789abcdef","rseq":1200,"name":"Runway","cat":"restricted"}]}`)
	for p := 0; p < 2; p++ {
		load.Add(1)
		go func() {
			defer load.Done()
			v := dedup.NoVersion
			for n := 0; loadCtx.Err() == nil; n++ {
				bt := dedup.Batch{Drones: make(map[string][]byte, 500), Applied: v + 500}
				for d := 0; d < 500; d++ {
					bt.Drones[fmt.Sprintf("UAV-%04d", d)] = state
				}
				for e := 0; e < 100; e++ {
					ev := storetest.Raised(p, fmt.Sprintf("UAV-%04d", e), "Z", "restricted", int64(n*100+e), base.Add(time.Duration(n*100+e)*time.Millisecond))
					bt.Events = append(bt.Events, dedup.Event{ID: ev.EventID, JSON: ev.AppendJSON(nil)})
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

	for _, q := range []string{"", "?limit=1000", "?drone=UAV-00007&state=all"} {
		b.Run("query="+strings.TrimPrefix(q, "?"), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b0 := batches.Load()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				resp, err := http.Get(srv.URL + "/v1/alarms" + q)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50_ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1e3, "p99_ms")
			b.ReportMetric(float64(batches.Load()-b0)*100/b.Elapsed().Seconds(), "load_events/s")
		})
	}
	_ = alerts.Raised
}
