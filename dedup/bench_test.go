package dedup_test

import (
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
			state := []byte(`{"seq":123456,"in":[{"zone":"POLY","alarm":"0123456789abcdef0123456789abcdef","fp":"0123456789abcdef0123456789abcdef","rseq":1200,"name":"Runway","cat":"restricted"}]}`)
			event := make([]byte, 420)
			for i := range event {
				event[i] = 'x'
			}
			ctx := context.Background()
			version := dedup.NoVersion
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch := dedup.Batch{Drones: make(map[string][]byte, 500), Applied: version + 500}
				for d := 0; d < 500; d++ {
					batch.Drones[fmt.Sprintf("UAV-%04d", d)] = state
				}
				for e := 0; e < int(500*rate); e++ {
					batch.Events = append(batch.Events, dedup.Event{ID: fmt.Sprintf("%d-%d:raised", i, e), JSON: event})
				}
				if _, err := s.Commit(ctx, 0, version, batch); err != nil {
					b.Fatal(err)
				}
				version = batch.Applied
			}
			b.ReportMetric(float64(b.N*500)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
