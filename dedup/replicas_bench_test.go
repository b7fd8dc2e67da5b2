package dedup_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkRedisCommitReplicas: the cost of --redis-min-replicas. The
// batch of BenchmarkRedisCommit (500 drone states, events for 1% of them)
// committed on a private primary with one attached replica (both AOF
// appendfsync always) by two stores side by side: Replicas 0 (the script
// alone) and Replicas 1 (the script, then WAIT 1 on the same connection).
// Each op commits one batch on each, in alternating order, so both see the
// same machine; it reports each side's records/s, commit p50 and p99, and
// the ratio of the rates.
func BenchmarkRedisCommitReplicas(b *testing.B) {
	pair := testenv.StartRedisPair(b)
	type side struct {
		s       *dedup.Redis
		version int64
		took    []time.Duration
		total   time.Duration
	}
	newSide := func(n int) *side {
		c := redis.NewClient(&redis.Options{Addr: pair.Primary.Addr(), MaxRetries: -1})
		b.Cleanup(func() { _ = c.Close() })
		s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(b, fmt.Sprintf("bench-r%d", n)), Topic: "t",
			Replicas: redisreplica.Wait{Replicas: n, Timeout: time.Second}})
		if err != nil {
			b.Fatal(err)
		}
		return &side{s: s, version: dedup.NoVersion}
	}
	ctx := context.Background()
	commit := func(sd *side, i int) {
		batch := benchBatch(sd.version, i, 5)
		began := time.Now()
		if _, err := sd.s.Commit(ctx, 0, sd.version, batch); err != nil {
			b.Fatal(err)
		}
		d := time.Since(began)
		sd.took = append(sd.took, d)
		sd.total += d
		sd.version = batch.Applied
	}
	r0, r1 := newSide(0), newSide(1)
	for i := 0; i < 20; i++ { // warm: connections, the script cache
		commit(r0, -1-i)
		commit(r1, -1-i)
	}
	r0.took, r1.took, r0.total, r1.total = nil, nil, 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			commit(r0, i)
			commit(r1, i)
		} else {
			commit(r1, i)
			commit(r0, i)
		}
	}
	b.StopTimer()
	q := func(sd *side, f float64) float64 {
		slices.Sort(sd.took)
		return float64(benchcompare.Percentile(sd.took, f).Microseconds()) / 1000
	}
	n := float64(b.N * 500)
	b.ReportMetric(n/r0.total.Seconds(), "r0_records/s")
	b.ReportMetric(n/r1.total.Seconds(), "r1_records/s")
	b.ReportMetric(r0.total.Seconds()/r1.total.Seconds(), "r1/r0_rate")
	b.ReportMetric(q(r0, 0.50), "r0_p50-ms")
	b.ReportMetric(q(r1, 0.50), "r1_p50-ms")
	b.ReportMetric(q(r0, 0.99), "r0_p99-ms")
	b.ReportMetric(q(r1, 0.99), "r1_p99-ms")
}
