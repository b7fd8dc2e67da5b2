package consume

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

// ErrInput is wrapped by errors about the replayed file's content.
var ErrInput = errors.New("bad input")

// maxReportedLines caps the bad lines and the dropped fields a report
// lists; the counts cover all of them.
const maxReportedLines = 20

// ReplayOptions configure Replay.
type ReplayOptions struct {
	Name   string // the input's name in errors ("file:line: ...")
	Batch  int    // records per engine batch, at least 1
	Strict bool   // the first bad line is an error and no event is written
}

// InputReport is what Replay found in its input beside the records: bad
// lines (skipped) and optional fields dropped (the record kept), each as
// "name:line: field: why", the first maxReportedLines of each listed.
type InputReport struct {
	Name                string
	Bad, Dropped        int
	BadLines, DropLines []string
	DroppedBy           map[string]int // by field
}

// ReplayResult is a replay's engine counts and its input report.
type ReplayResult struct {
	alerts.Stats
	Input InputReport
}

// Replay runs the NDJSON telemetry of in, in order, through the same engine
// as the live alerter — as one partition (0), in batches of o.Batch
// records, each committed to an in-memory store — and writes the outbox's
// events to out as NDJSON. The events equal the live pipeline's for the
// same records in the same order in every field but partition and offset.
//
// The input is read as ingest reads a request (readRecords). A run over bad
// lines completes, and Input.Err reports them; with o.Strict the first is
// an error and nothing is written.
func Replay(ctx context.Context, zones alerts.Zones, in io.Reader, out io.Writer, o ReplayOptions) (ReplayResult, error) {
	if o.Batch < 1 {
		return ReplayResult{}, fmt.Errorf("consume: replay batch %d, must be at least 1", o.Batch)
	}
	recs, rep, err := readRecords(o.Name, in, o.Strict)
	if err != nil {
		return ReplayResult{}, err
	}
	st, err := replayRecords(ctx, zones, recs, o.Batch, out)
	return ReplayResult{Stats: st, Input: *rep}, err
}

// readRecords reads an NDJSON telemetry file, one record per line, into
// records numbered by line (offset = line number - 1; blank lines are
// skipped, so offsets need not be contiguous), as ingest reads a request: a
// UTF-8 byte order mark at the start is skipped, and an optional field
// outside every convention is dropped (telemetry.DecodeWarn; the record then
// holds the canonical encoding without it). A bad line — a bad required
// field — is skipped and reported, or with strict is an error naming the
// file and the line. A line longer than 1 MiB ends the reading either way.
func readRecords(name string, r io.Reader, strict bool) ([]alerts.Record, *InputReport, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var recs []alerts.Record
	rep := &InputReport{Name: name, DroppedBy: map[string]int{}}
	var ws []telemetry.FieldWarning
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			b = telemetry.TrimBOM(b)
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		p, warns, err := telemetry.DecodeWarn(b, ws[:0])
		ws = warns
		if err != nil {
			if strict {
				return nil, nil, fmt.Errorf("%w: %s:%d: %v", ErrInput, name, line, err)
			}
			rep.Bad++
			if len(rep.BadLines) < maxReportedLines {
				rep.BadLines = append(rep.BadLines, fmt.Sprintf("%s:%d: %v", name, line, err))
			}
			continue
		}
		v := append([]byte(nil), b...)
		if len(warns) > 0 {
			v = p.AppendJSON(nil) // what ingest would have produced
			for _, w := range warns {
				rep.Dropped++
				rep.DroppedBy[w.Field]++
				if len(rep.DropLines) < maxReportedLines {
					rep.DropLines = append(rep.DropLines, fmt.Sprintf("%s:%d: %s", name, line, w))
				}
			}
		}
		recs = append(recs, alerts.Record{Offset: int64(line - 1), Value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: %s:%d: %v", ErrInput, name, line+1, err)
	}
	return recs, rep, nil
}

// Log writes the dropped fields, each listed one at Warn.
func (rep *InputReport) Log(log *slog.Logger) {
	for _, l := range rep.DropLines {
		log.Warn("optional field dropped, record kept", "at", l)
	}
	if rep.Dropped > len(rep.DropLines) {
		log.Warn("more optional fields dropped", "unlisted", rep.Dropped-len(rep.DropLines))
	}
}

// Err is the error of a run that completed over bad lines, or nil.
func (rep *InputReport) Err() error {
	if rep.Bad == 0 {
		return nil
	}
	more := ""
	if rep.Bad > len(rep.BadLines) {
		more = fmt.Sprintf("\n... and %d more", rep.Bad-len(rep.BadLines))
	}
	return fmt.Errorf("%w: %s: completed with %d bad line(s) skipped, their positions not replayed (--strict stops at the first):\n%s%s",
		ErrInput, rep.Name, rep.Bad, strings.Join(rep.BadLines, "\n"), more)
}

// replayRecords is Replay over records already read.
func replayRecords(ctx context.Context, zones alerts.Zones, recs []alerts.Record, batch int, w io.Writer) (alerts.Stats, error) {
	var total alerts.Stats
	store := dedup.NewMemory(0)
	eng, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		return total, err
	}
	for i := 0; i < len(recs); i += batch {
		out := eng.Apply(zones, recs[i:min(i+batch, len(recs))])
		if out == nil {
			continue
		}
		if _, err := store.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
			return total, err
		}
		s := out.Stats
		total.Records += s.Records
		total.Applied += s.Applied
		total.Duplicates += s.Duplicates
		total.Invalid += s.Invalid
		total.Skipped += s.Skipped
		total.Raised += s.Raised
		total.Cleared += s.Cleared
	}
	entries, err := store.Outbox(ctx, 0)
	if err != nil {
		return total, err
	}
	bw := bufio.NewWriter(w)
	for _, e := range entries {
		bw.Write(e.Event)
		bw.WriteByte('\n')
	}
	return total, bw.Flush()
}
