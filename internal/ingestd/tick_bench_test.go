package ingestd

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkTickCost: what ingest's clock ticks cost the broker. An ingest
// on a 12-partition topic, no telemetry, ticking every second, against the
// broker idle, in alternating windows of the same length: the broker's CPU
// in each (from /proc, scripts/kafka.sh's broker), and the ticks written.
// b.N is ignored.
//
//	go test -run '^$' -bench BenchmarkTickCost -benchtime 1x ./internal/ingestd
func BenchmarkTickCost(b *testing.B) {
	const (
		partitions = 12
		window     = 20 * time.Second
		rounds     = 3
	)
	brokers := testenv.Kafka(b)
	pid, err := benchcompare.KafkaPID()
	if err != nil {
		b.Fatal(err)
	}
	cpu := func() time.Duration {
		c, err := benchcompare.ProcCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	var idle, ticking time.Duration
	var ticks float64
	for range rounds {
		c0 := cpu()
		time.Sleep(window)
		idle += cpu() - c0

		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions = brokers, testenv.CreateTopic(b, brokers, partitions), partitions
		rs := startService(b, cfg)
		n0 := testutil.ToFloat64(rs.ticks.written)
		c0 = cpu()
		time.Sleep(window)
		ticking += cpu() - c0
		ticks += testutil.ToFloat64(rs.ticks.written) - n0
		_ = rs.stop()
	}
	secs := (window * rounds).Seconds()
	extra := (ticking - idle).Seconds() / secs
	b.ReportMetric(ticks/secs, "ticks/s")
	b.ReportMetric(extra*1000, "broker-cpu-ms/s")
	b.ReportMetric((ticking-idle).Seconds()/ticks*1e6, "broker-cpu-µs/tick")
	b.Logf("%d partitions, ticks every 1 s, %d windows of %v: broker CPU idle %.1f ms/s, ticking %.1f ms/s (+%.2f ms/s, %.0f µs a tick); %.1f ticks/s",
		partitions, rounds, window, idle.Seconds()/secs*1000, ticking.Seconds()/secs*1000, extra*1000, (ticking-idle).Seconds()/ticks*1e6, ticks/secs)
}
