package alerts_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/scenario"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// BenchmarkEngineApply: records (decode, state machine, zone queries,
// batch encoding) through one engine in batches of 500, no I/O. One op =
// one record. "scenario" is the reference proof's traffic (~1.6% of records
// cause an event); "transitions-20pct" crosses a zone boundary every 5th
// record of each drone.
func BenchmarkEngineApply(b *testing.B) {
	set, err := geofence.LoadFile(filepath.Join("..", scenario.ZonesFile))
	if err != nil {
		b.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	toggling := func(every int) []telemetry.Position {
		var out []telemetry.Position
		start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		for s := 0; s < 500; s++ {
			for d := 0; d < 100; d++ {
				lon := -0.49
				if (s/every)%2 == 1 {
					lon = -0.52
				}
				out = append(out, telemetry.Position{DroneID: fmt.Sprintf("UAV-%04d", d), Seq: int64(s + 1),
					TS: start.Add(time.Duration(s) * time.Second), Lat: 51.47, Lon: lon, AltM: telemetry.Float(80)})
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		recs []telemetry.Position
	}{
		{"scenario", scenario.Generate(scenario.DefaultConfig()).Records},
		{"transitions-20pct", toggling(5)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			recs := make([]alerts.Record, len(tc.recs))
			for i := range tc.recs {
				recs[i] = alerts.Record{Offset: int64(i), Value: tc.recs[i].AppendJSON(nil)}
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
		})
	}
}
