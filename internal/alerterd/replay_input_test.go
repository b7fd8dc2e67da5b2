package alerterd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ref "github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
)

// TestReplayToleratesBadLines: replay reads its file as ingest reads a
// request. A BOM at the start is skipped, an optional field outside every
// convention is dropped with a warning and the position replayed, a bad
// required field skips its line and is reported at the end with exit 1;
// --strict stops at the first bad line with no event. Before, any of these
// stopped the whole audit. The events are compared with the independent
// reference over the records as they should have been read.
func TestReplayToleratesBadLines(t *testing.T) {
	t.Parallel()
	cfg := scenario.DefaultConfig()
	cfg.Drones, cfg.Positions = 40, 300
	sc := scenario.Generate(cfg)
	lines := bytes.Split(bytes.TrimRight(sc.NDJSON(), "\n"), []byte("\n"))
	if len(lines) != len(sc.Records) {
		t.Fatalf("%d lines for %d records", len(lines), len(sc.Records))
	}
	var kept []ref.Rec // as the replay should read them, on the log's clock
	var bad []int      // line numbers
	dropped := 0
	for i := range lines {
		l := lines[i]
		switch {
		case i%97 == 5: // a bad required field: its time still moves the clock
			lines[i] = bytes.Replace(l, []byte(`"ts":`), []byte(`"tz":`), 1)
			bad = append(bad, i+1)
			kept = append(kept, ref.Rec{At: sc.Received[i], Tick: true, Partition: -1})
			continue
		case i%13 == 1: // optional fields beyond every convention
			lines[i] = append(l[:len(l)-1:len(l)-1], `,"heading_deg":1000,"speed_mps":-3}`...)
			dropped += 2
		case i%29 == 2 && sc.Records[i].AltM != nil: // an unknown alt_ref: alt_m goes with it
			lines[i] = append(l[:len(l)-1:len(l)-1], `,"alt_ref":"XYZ"}`...)
			p := sc.Records[i]
			p.AltM, p.AltRef = nil, ""
			kept = append(kept, ref.Rec{Pos: p, At: sc.Received[i]})
			dropped += 2
			continue
		}
		kept = append(kept, ref.Rec{Pos: sc.Records[i], At: sc.Received[i]})
	}
	want := ref.Run(ref.Input{Sets: [][]refZone{loadRefZones(t, zonesPath())}, Recs: kept, Partitions: 1, Approach: defaultApproach()})
	if len(want) < 100 || len(bad) < 5 {
		t.Fatalf("%d reference events, %d bad lines: the test exercises too little", len(want), len(bad))
	}
	in := filepath.Join(t.TempDir(), "telemetry.ndjson")
	content := append([]byte("\uFEFF"), bytes.Join(lines, []byte("\n"))...)
	if err := os.WriteFile(in, content, 0o644); err != nil {
		t.Fatal(err)
	}
	replayOf := func(extra ...string) (int, []byte, string) {
		var stdout, stderr bytes.Buffer
		args := append([]string{"replay", "--zones", zonesPath(), "--input", in}, extra...)
		code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
		return code, stdout.Bytes(), stderr.String()
	}

	code, out, errOut := replayOf()
	firstBad := fmt.Sprintf("telemetry.ndjson:%d: ts: required", bad[0])
	for _, w := range []string{
		fmt.Sprintf("completed with %d bad line(s) skipped", len(bad)),
		firstBad,
		fmt.Sprintf(`"bad_lines":%d`, len(bad)),
		"telemetry.ndjson:2: heading_deg: 1000 is outside",
		`"fields_dropped":{`,
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q", w)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1 for an audit that skipped lines", code)
	}
	compareEvents(t, "replay over bad lines", want, eventsFromNDJSON(t, splitLines(out)))
	if t.Failed() {
		t.Logf("stderr:\n%s", errOut)
	}

	code, out, errOut = replayOf("--strict")
	if code != 1 || len(out) != 0 || !strings.Contains(errOut, firstBad) {
		t.Errorf("--strict: exit %d, %d bytes of events, stderr %q; want exit 1, none, and %q", code, len(out), errOut, firstBad)
	}
}

// TestReplayInputClean: a file without a bad line exits 0 and reports no
// bad line, also when a field was dropped.
func TestReplayInputClean(t *testing.T) {
	in := filepath.Join(t.TempDir(), "t.ndjson")
	body := "\uFEFF" + `{"drone_id":"A","seq":1,"ts":"2026-12-02T10:00:00Z","lat":51.47,"lon":-0.47,"heading_deg":360}` + "\n" +
		`{"drone_id":"A","seq":2,"ts":"2026-12-02T10:00:01Z","lat":51.47,"lon":-0.47,"heading_deg":-1}` + "\n"
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"replay", "--zones", zonesPath(), "--input", in}, func(string) string { return "" }, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), `"bad_lines":0`) {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}
