package consume

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func scenarioZones(tb testing.TB) *geofence.Index {
	tb.Helper()
	set, err := geofence.Loader{}.LoadFile(filepath.Join(testenv.RepoRoot(), scenario.ZonesFile))
	if err != nil {
		tb.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		tb.Fatal(err)
	}
	return ix
}

// writeScenario writes chunks of scenario traffic (cfg, seeds 1, 2, ...)
// as NDJSON: the same fleet flying on, each chunk's seqs above the
// previous chunk's, so that every chunk is applied like the first.
func writeScenario(w io.Writer, cfg scenario.Config, chunks int) (records int, err error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var b []byte
	def := scenario.DefaultConfig()
	span := time.Duration(max(cfg.Positions, def.Positions)+1) * max(cfg.Interval, def.Interval)
	for k := range chunks {
		cfg.Seed = uint64(k + 1)
		for _, p := range scenario.Generate(cfg).Records {
			// Each chunk flies the same drones later: a drone's records
			// are ordered by ts, so chunk k's come after chunk k-1's.
			p.TS = p.TS.Add(time.Duration(k) * span)
			b = append(p.AppendJSON(b[:0]), '\n')
			if _, err := bw.Write(b); err != nil {
				return records, err
			}
			records++
		}
	}
	return records, bw.Flush()
}

func scenarioInput(tb testing.TB, cfg scenario.Config, chunks int) ([]byte, int) {
	tb.Helper()
	var buf bytes.Buffer
	n, err := writeScenario(&buf, cfg, chunks)
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), n
}

// BenchmarkReplay replays scenario traffic (4 chunks of the reference
// scenario, 100 drones × 500 positions each, 4 % duplicates, 1 % stale)
// from memory to io.Discard at the alerter's default batch of 500.
//
//	go test -run '^$' -bench Replay -benchmem -cpu 1 ./alerts/consume
func BenchmarkReplay(b *testing.B) {
	input, n := scenarioInput(b, scenario.DefaultConfig(), 4)
	zones := scenarioZones(b)
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Replay(context.Background(), zones, bytes.NewReader(input), io.Discard, ReplayOptions{Name: "bench", Batch: 500})
		if err != nil || res.Records != n {
			b.Fatalf("%d of %d records: %v", res.Records, n, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op") // per replay of the whole input: records/s says it
}
