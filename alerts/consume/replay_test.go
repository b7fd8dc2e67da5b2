package consume

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/scenario"
)

func smallScenario() scenario.Config {
	cfg := scenario.DefaultConfig()
	cfg.Drones, cfg.Positions = 30, 200
	return cfg
}

// TestReplayStreams: the events of the first records are written while the
// rest of the input has not been read yet — before, Replay read the whole
// input into memory, then wrote the outbox at the end.
func TestReplayStreams(t *testing.T) {
	defer func(n int) { outBuffer = n }(outBuffer)
	outBuffer = 64 // the events out as they are decided
	input, _ := scenarioInput(t, smallScenario(), 2)
	pr, pw := io.Pipe()
	out := &notifyWriter{first: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Replay(context.Background(), scenarioZones(t), pr, out, ReplayOptions{Name: "pipe", Batch: 50})
		done <- err
	}()
	// Feed lines until the first event comes out; the input stays open.
	lines := bytes.SplitAfter(input, []byte("\n"))
	fed := 0
	for ; fed < len(lines); fed++ {
		if _, err := pw.Write(lines[fed]); err != nil {
			t.Fatal(err)
		}
		select {
		case <-out.first:
		default:
			continue
		}
		break
	}
	if fed == len(lines) {
		t.Fatal("no event came out before the input ended")
	}
	if _, err := pw.Write(bytes.Join(lines[fed+1:], nil)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("first event out after %d of %d lines", fed+1, len(lines))
}

type notifyWriter struct {
	bytes.Buffer
	first chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	if w.Len() == 0 && len(p) > 0 {
		defer close(w.first)
	}
	return w.Buffer.Write(p)
}

// TestReplayStrictHoldsEvents: --strict writes no event when a bad line
// comes after the held events outgrew memory (a temporary file holds
// them, removed after), and writes the same events as a replay without
// --strict when there is no bad line.
func TestReplayStrictHoldsEvents(t *testing.T) {
	defer func(n int) { spoolMemory = n }(spoolMemory)
	spoolMemory = 4 << 10 // a few events, then the file
	t.Setenv("TMPDIR", t.TempDir())
	input, _ := scenarioInput(t, smallScenario(), 2)
	zones := scenarioZones(t)
	replay := func(in []byte, strict bool) ([]byte, error) {
		var out bytes.Buffer
		_, err := Replay(context.Background(), zones, bytes.NewReader(in), &out, ReplayOptions{Name: "in", Batch: 100, Strict: strict})
		return out.Bytes(), err
	}
	want, err := replay(input, false)
	if err != nil || len(want) < 4*spoolMemory {
		t.Fatalf("%d bytes of events, %v: too few to spill", len(want), err)
	}
	got, err := replay(input, true)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("strict: %d bytes, %v; want the %d bytes of the plain replay", len(got), err, len(want))
	}
	bad := append(append([]byte(nil), input...), "{\"drone_id\":\"A\"}\n"...)
	got, err = replay(bad, true)
	if !errors.Is(err, ErrInput) || len(got) != 0 {
		t.Errorf("strict over a bad last line: %d bytes of events, %v; want none and ErrInput", len(got), err)
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestReplayProgress: a long replay reports its progress between batches,
// the last report at most the whole input; a short one does not report.
func TestReplayProgress(t *testing.T) {
	input, n := scenarioInput(t, smallScenario(), 1)
	zones := scenarioZones(t)
	var got []ReplayProgress
	_, err := Replay(context.Background(), zones, &slowReader{r: bytes.NewReader(input)}, io.Discard, ReplayOptions{
		Name: "in", Batch: 100, ProgressEvery: time.Millisecond,
		Progress: func(p ReplayProgress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 {
		t.Fatalf("%d progress reports over %d records", len(got), n)
	}
	last := got[len(got)-1]
	if last.Records <= got[0].Records || last.Records > int64(n) || last.Bytes > int64(len(input)) || last.Elapsed <= 0 {
		t.Errorf("progress %+v ... %+v over %d records, %d bytes", got[0], last, n, len(input))
	}
	calls := 0
	if _, err := Replay(context.Background(), zones, bytes.NewReader(input), io.Discard, ReplayOptions{
		Name: "in", Batch: 100, ProgressEvery: time.Hour, Progress: func(ReplayProgress) { calls++ }}); err != nil || calls != 0 {
		t.Errorf("short replay: %d progress reports, %v", calls, err)
	}
}

// slowReader reads a few kB at a time, sleeping a little: a replay that
// takes long enough to report progress.
type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(200 * time.Microsecond)
	return s.r.Read(p[:min(len(p), 4<<10)])
}

// TestReplayLongLineEndsReplay: a line over 1 MiB ends the replay with an
// error naming it, strict or not.
func TestReplayLongLineEndsReplay(t *testing.T) {
	input, _ := scenarioInput(t, smallScenario(), 1)
	in := append(append(input, bytes.Repeat([]byte(" "), maxLine+1)...), '\n')
	for _, strict := range []bool{false, true} {
		_, err := Replay(context.Background(), scenarioZones(t), bytes.NewReader(in), io.Discard, ReplayOptions{Name: "in", Batch: 500, Strict: strict})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "token too long") {
			t.Errorf("strict=%v: %v", strict, err)
		}
	}
}
