package alerts_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

// BenchmarkEngineApply: records (decode, state machine, zone queries,
// batch encoding) through one engine in batches of 500, no I/O. One op =
// one record. "scenario" is the reference proof's traffic (~1.6% of records
// cause an event); "transitions-Npct" cross a zone boundary every 100/N
// records of each drone (0pct: every drone stays inside POLY, its alarm
// raised once at the start and never cleared).
func BenchmarkEngineApply(b *testing.B) {
	set, err := geofence.LoadFile(filepath.Join("..", scenario.ZonesFile))
	if err != nil {
		b.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		b.Fatal(err)
	}
	toggling := func(every int, pilots bool) []telemetry.Position {
		var out []telemetry.Position
		start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		for s := 0; s < 500; s++ {
			for d := 0; d < 100; d++ {
				lon := -0.49
				if every > 0 && (s/every)%2 == 1 {
					lon = -0.52
				}
				p := telemetry.Position{DroneID: fmt.Sprintf("UAV-%04d", d), Seq: int64(s + 1),
					TS: start.Add(time.Duration(s) * time.Second), Lat: 51.47, Lon: lon, AltM: telemetry.Float(80)}
				if pilots { // every record with its live pilot, moving: the most a feed can send
					p.Operator = &telemetry.Operator{Lat: 51.465 + float64(s)*1e-6, Lon: -0.5, AltM: telemetry.Float(30), Type: telemetry.OperatorLive}
				}
				out = append(out, p)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		recs []telemetry.Position
	}{
		{"scenario", scenario.Generate(scenario.DefaultConfig()).Records},
		// The scenario with pilots (scenario.WithOperators: a third of the drones
		// with a live pilot on every record, a third on every fifth):
		// beside "scenario", the cost of keeping and carrying them.
		{"scenario-pilots", scenario.WithOperators(scenario.Generate(scenario.DefaultConfig()).Records)},
		{"transitions-0pct", toggling(0, false)},
		{"transitions-1pct", toggling(100, false)},
		{"transitions-1pct-pilots", toggling(100, true)},
		{"transitions-20pct", toggling(5, false)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			recs := make([]alerts.Record, len(tc.recs))
			for i := range tc.recs {
				recs[i] = alerts.Record{Offset: int64(i), Value: tc.recs[i].AppendJSON(nil)}
			}
			// "apply" with approaching warnings off, "apply-approaching" with
			// the alerter's default (30 s, 50 m): side by side, the cost of
			// the warnings.
			for _, ap := range []struct {
				name string
				on   alerts.ApproachSettings
			}{{"apply", alerts.ApproachSettings{}},
				{"apply-approaching", alerts.ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}, BufferM: 50}}} {
				b.Run(ap.name, func(b *testing.B) {
					b.ReportAllocs()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					mallocs := ms.Mallocs
					var e *alerts.Engine
					for i := 0; i < b.N; {
						if i%len(recs) == 0 {
							e, _ = alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
							e.SetApproach(ap.on)
						}
						start := i % len(recs)
						end := min(start+500, len(recs), start+b.N-i)
						e.Apply(ix, recs[start:end])
						i += end - start
					}
					runtime.ReadMemStats(&ms)
					b.ReportMetric(float64(ms.Mallocs-mallocs)/float64(b.N)*1000, "allocs/1000rec")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				})
			}
			// The baseline: telemetry.Decode of the same records, all the
			// plain consumer does; Apply's cost above it is the engine's own.
			b.Run("decode-only", func(b *testing.B) {
				b.ReportAllocs()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mallocs := ms.Mallocs
				for i := 0; i < b.N; i++ {
					if _, err := telemetry.Decode(recs[i%len(recs)].Value); err != nil {
						b.Fatal(err)
					}
				}
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.Mallocs-mallocs)/float64(b.N)*1000, "allocs/1000rec")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		})
	}
}
