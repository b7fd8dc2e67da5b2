package dedup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkAlarmIndexCost weighs the alarm index's secondary sets (issue
// 29) in the batch script: the script without their lines
// (CommitWithoutSecondarySets: the same script otherwise) against the
// script, alternating blocks of 20 batches of each in one run, on one
// partition each. A batch is shaped like the
// alerter's: 500 drone states and, per alarm shape, 50 raises (of 20,000
// drones, 300 zones, two categories) and the clears of 50 earlier alarms,
// with a 1 ms retention so that every batch also deletes the alarms the
// batch before cleared (the GC); and 500 drone states with no events.
// Reported per event (raise or clear, the GC of the cleared alarms
// included): Redis's main-thread CPU and events/s through one client; per
// batch without events. One op = one block of each. Run it against a
// Redis of its own (NOFLY_REDIS_ADDR) to keep other commands out of the
// CPU figures.
func BenchmarkAlarmIndexCost(b *testing.B) {
	shapes := []struct {
		name   string
		events bool
	}{
		{"drones=500/raises=50/clears=50", true},
		{"drones=500/events=0", false},
	}
	state := []byte(`{"seq":123456,"in":[{"zone":"POLY","alarm":"0123456789abcdef0123456789abcdef","fp":"0123456789abcdef0123456789abcdef","rseq":1200,"name":"Runway","cat":"restricted"}]}`)
	base := time.Now()
	const block = 20
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			ctx := context.Background()
			rc := testenv.RedisClient(b)
			type script struct {
				name    string
				commit  func(context.Context, int, int64, dedup.Batch) (dedup.Result, error)
				version int64
				open    []alerts.Event
				took    time.Duration
				cpu     time.Duration
				events  int
				batches int
			}
			var ss []*script
			for _, name := range []string{"before", "after"} {
				s, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: testenv.RedisPrefix(b, "ixcost-"+name), Topic: "t", AlarmRetention: time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				sc := &script{name: name, commit: s.Commit, version: dedup.NoVersion}
				if name == "before" {
					sc.commit = s.CommitWithoutSecondarySets
				}
				ss = append(ss, sc)
			}
			seq := int64(0)
			run := func(sc *script) {
				batches := make([]dedup.Batch, block)
				for i := range batches {
					bt := dedup.Batch{Drones: make(map[string][]byte, 500), Applied: sc.version + int64(500*(i+1))}
					for d := 0; d < 500; d++ {
						bt.Drones[fmt.Sprintf("UAV-%05d", (int(seq)+d)%20000)] = state
					}
					if sh.events {
						for _, e := range sc.open {
							c := storetest.ClearedOf(e, e.Seq+1, e.TS.Add(time.Minute), alerts.ReasonExited)
							bt.Events = append(bt.Events, dedup.Event{ID: c.EventID, JSON: c.AppendJSON(nil)})
						}
						sc.open = sc.open[:0]
						for e := 0; e < 50; e++ {
							seq++
							z := int(seq*7) % 300
							ev := storetest.Raised(0, fmt.Sprintf("UAV-%05d", seq%20000), fmt.Sprintf("ZONE-%03d", z), []string{"warning", "restricted"}[min(z%5, 1)],
								seq, base.Add(time.Duration(seq)*time.Millisecond))
							bt.Events = append(bt.Events, dedup.Event{ID: ev.EventID, JSON: ev.AppendJSON(nil)})
							sc.open = append(sc.open, ev)
						}
					}
					batches[i] = bt
				}
				u0, t0 := sampleRedis(b, rc), time.Now()
				for _, bt := range batches {
					res, err := sc.commit(ctx, 0, sc.version, bt)
					if err != nil {
						b.Fatal(err)
					}
					if res.Appended != len(bt.Events) {
						b.Fatalf("%s: appended %d of %d", sc.name, res.Appended, len(bt.Events))
					}
					sc.version = bt.Applied
					sc.events += len(bt.Events)
				}
				sc.took += time.Since(t0)
				sc.cpu += sampleRedis(b, rc).cpu - u0.cpu
				sc.batches += block
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Alternate the order: the machine is shared and its load drifts.
				run(ss[i%2])
				run(ss[1-i%2])
			}
			for _, sc := range ss {
				if sh.events {
					n := float64(sc.events)
					b.ReportMetric(float64(sc.cpu.Nanoseconds())/n/1e3, sc.name+"_redis_cpu_us/event")
					b.ReportMetric(n/sc.took.Seconds(), sc.name+"_events/s")
				} else {
					b.ReportMetric(float64(sc.cpu.Nanoseconds())/float64(sc.batches)/1e3, sc.name+"_redis_cpu_us/batch")
				}
			}
		})
	}
}
