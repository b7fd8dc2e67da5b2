package alerts_test

import (
	"path/filepath"
	"testing"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/scenario"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
)

// BenchmarkEngineApply: the reference scenario's records (decode, state
// machine, zone queries, batch encoding) through one engine in batches of
// 500, no I/O. One op = one record.
func BenchmarkEngineApply(b *testing.B) {
	set, err := geofence.LoadFile(filepath.Join("..", scenario.ZonesFile))
	if err != nil {
		b.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	sc := scenario.Generate(scenario.DefaultConfig())
	recs := make([]alerts.Record, len(sc.Records))
	for i := range sc.Records {
		recs[i] = alerts.Record{Offset: int64(i), Value: sc.Records[i].AppendJSON(nil)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var e *alerts.Engine
	for i := 0; i < b.N; {
		if i%len(recs) == 0 {
			e, _ = alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
		}
		start := i % len(recs)
		end := min(start+500, len(recs), start+b.N-i)
		e.Apply(ix, recs[start:end])
		i += end - start
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

