package dedup_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkRedisCommit: one batch of 500 records' effects (500 drone
// states, events for 1% or 20% of them) in one script on the shared Redis.
// One op = one batch = one round trip.
func BenchmarkRedisCommit(b *testing.B) {
	for _, rate := range []float64{0.01, 0.20} {
		b.Run(fmt.Sprintf("transitions=%g%%", rate*100), func(b *testing.B) {
			s, err := dedup.NewRedis(testenv.RedisClient(b), dedup.RedisOptions{Prefix: testenv.RedisPrefix(b, "bench"), Topic: "t"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			version := dedup.NoVersion
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch := benchBatch(version, i, int(500*rate))
				if _, err := s.Commit(ctx, 0, version, batch); err != nil {
					b.Fatal(err)
				}
				version = batch.Applied
			}
			b.ReportMetric(float64(b.N*500)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// benchBatch is the batch the commit benchmarks write: 500 drone states
// (one inside a zone, the size the alerter stores) after version, and
// events events of 420 bytes named after op i.
func benchBatch(version int64, i, events int) dedup.Batch {
	batch := dedup.Batch{Drones: make(map[string][]byte, 500), Applied: version + 500}
	for d := 0; d < 500; d++ {
		batch.Drones[fmt.Sprintf("UAV-%04d", d)] = benchState
	}
	for e := 0; e < events; e++ {
		batch.Events = append(batch.Events, dedup.Event{ID: fmt.Sprintf("%d-%d:raised", i, e), JSON: benchEvent})
	}
	return batch
}

var (
	benchState = []byte(`{"seq":123456,"in":[{"zone":"POLY","alarm":"0123456789abcdef0123456789abcdef","fp":"0123456789abcdef0123456789abcdef","rseq":1200,"name":"Runway","cat":"restricted"}]}`)
	benchEvent = bytes.Repeat([]byte{'x'}, 420)
)
