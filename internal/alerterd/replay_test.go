package alerterd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ref "github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func zonesPath() string { return filepath.Join(testenv.RepoRoot(), scenario.ZonesFile) }

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// runReplay runs `alerter replay` on the scenario and returns its stdout.
func runReplay(t *testing.T, sc *scenario.Scenario, extra ...string) []byte {
	t.Helper()
	in := filepath.Join(t.TempDir(), "telemetry.ndjson")
	if err := os.WriteFile(in, sc.NDJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"replay", "--zones", zonesPath(), "--input", in}, extra...)
	if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("replay exited %d: %s", code, stderr.String())
	}
	return stdout.Bytes()
}

// runReplayPartitions replays each partition's records on its own, as
// `alerter replay --partition p` over a dump of partition p: each with the
// log's clock of its own partition, as live. Its output is the replays'
// events, partition by partition.
func runReplayPartitions(t *testing.T, sc *scenario.Scenario, partitions int) []byte {
	t.Helper()
	var out []byte
	for q := range partitions {
		part := &scenario.Scenario{}
		for i := range sc.Records {
			if ref.PartitionOf(sc.Records[i].DroneID, partitions) == q {
				part.Records = append(part.Records, sc.Records[i])
				part.Received = append(part.Received, sc.Received[i])
			}
		}
		out = append(out, runReplay(t, part)...)
	}
	return out
}

func TestReplayEqualsReference(t *testing.T) {
	t.Parallel()
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 1) // replayed as one partition, one clock
	if len(want) < 500 {
		t.Fatalf("the scenario raises only %d events: it does not exercise the zones", len(want))
	}
	perZone := map[string]int{}
	for _, e := range want {
		perZone[e.ZoneID+" "+e.Type]++
	}
	for _, z := range []string{"POLY", "HOLE", "CIRC", "BAND", "TIME", "AGLC", "MULTI"} {
		if perZone[z+" raised"] < 10 || perZone[z+" cleared"] < 10 {
			t.Errorf("zone %s: %d raised, %d cleared: too few crossings", z, perZone[z+" raised"], perZone[z+" cleared"])
		}
	}
	t.Logf("reference per zone and type: %v", perZone)
	for _, batch := range []string{"1", "500", "100000"} {
		t.Run("batch="+batch, func(t *testing.T) {
			out := runReplay(t, sc, "--batch", batch)
			compareEvents(t, "replay", want, eventsFromNDJSON(t, splitLines(out)))
		})
	}
}

// TestReplayBadLineNamesFileAndLine: with --strict a bad line stops the
// audit, naming file and line (TestReplayToleratesBadLines: without it).
func TestReplayBadLineNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bad.ndjson")
	good := `{"drone_id":"A","seq":1,"ts":"2026-12-02T10:00:00Z","lat":51.47,"lon":-0.47}`
	tests := []struct{ name, content, want string }{
		{"missing field", good + "\n\n" + `{"drone_id":"A","seq":2,"lat":51.47,"lon":-0.47}` + "\n", "bad.ndjson:3: ts: required"},
		{"not json", good + "\nhello\n", "bad.ndjson:2: malformed JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(in, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"replay", "--strict", "--zones", zonesPath(), "--input", in}, func(string) string { return "" }, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit 1 and %q", code, stderr.String(), stdout.String(), tc.want)
			}
		})
	}
}
