package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

// ErrInput is wrapped by errors about the replayed file's content.
var ErrInput = fmt.Errorf("bad input")

// maxReportedLines caps the bad lines and the dropped fields replay lists;
// the counts cover all of them.
const maxReportedLines = 20

// inputReport is what readRecords found in the file beside the records: bad
// lines (skipped) and optional fields dropped (the record kept), as
// "file:line: field: why".
type inputReport struct {
	bad, dropped        int
	badLines, dropLines []string
	droppedBy           map[string]int // by field
}

// readRecords reads an NDJSON telemetry file, one record per line, into
// records numbered by line (offset = line number - 1; blank lines are
// skipped, so offsets need not be contiguous), as ingest reads a request: a
// UTF-8 byte order mark at the start is skipped, and an optional field
// outside every convention is dropped (telemetry.DecodeWarn; the record then
// holds the canonical encoding without it). A bad line — a bad required
// field — is skipped and reported, or with strict is an error naming the
// file and the line. A line longer than 1 MiB ends the reading either way.
func readRecords(name string, r io.Reader, strict bool) ([]alerts.Record, *inputReport, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var recs []alerts.Record
	rep := &inputReport{droppedBy: map[string]int{}}
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
			rep.bad++
			if len(rep.badLines) < maxReportedLines {
				rep.badLines = append(rep.badLines, fmt.Sprintf("%s:%d: %v", name, line, err))
			}
			continue
		}
		v := append([]byte(nil), b...)
		if len(warns) > 0 {
			v = p.AppendJSON(nil) // what ingest would have produced
			for _, w := range warns {
				rep.dropped++
				rep.droppedBy[w.Field]++
				if len(rep.dropLines) < maxReportedLines {
					rep.dropLines = append(rep.dropLines, fmt.Sprintf("%s:%d: %s", name, line, w))
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

// log writes the dropped fields, each listed one at Warn.
func (rep *inputReport) log(log *slog.Logger) {
	for _, l := range rep.dropLines {
		log.Warn("optional field dropped, record kept", "at", l)
	}
	if rep.dropped > len(rep.dropLines) {
		log.Warn("more optional fields dropped", "unlisted", rep.dropped-len(rep.dropLines))
	}
}

// err is the error of a run that completed over bad lines, or nil.
func (rep *inputReport) err(name string) error {
	if rep.bad == 0 {
		return nil
	}
	more := ""
	if rep.bad > len(rep.badLines) {
		more = fmt.Sprintf("\n... and %d more", rep.bad-len(rep.badLines))
	}
	return fmt.Errorf("%w: %s: completed with %d bad line(s) skipped, their positions not replayed (--strict stops at the first):\n%s%s",
		ErrInput, name, rep.bad, strings.Join(rep.badLines, "\n"), more)
}

// replay runs the records, in file order, through the same engine as the
// live alerter — as one partition (0), in batches of batch records, each
// committed to an in-memory dedup store — and writes the outbox's events to
// w as NDJSON. The events equal the live pipeline's for the same records in
// the same order in every field but partition and offset.
func replay(ctx context.Context, zones alerts.Zones, recs []alerts.Record, batch int, w io.Writer) (alerts.Stats, error) {
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

func replayCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := DefaultConfig()
	fs := newFlagSet("alerter replay")
	fs.SetOutput(stderr)
	fs.field(&c, "Zones", usages["Zones"])
	for _, f := range []string{"StrictZones", "ConservativeZones", "AllowEmptyZones"} {
		fs.field(&c, f, usages[f])
	}
	fs.field(&c, "Batch", usages["Batch"])
	fs.field(&c, "LogLevel", usages["LogLevel"])
	input := fs.String("input", "", "recorded telemetry, NDJSON one record per line (- for stdin)")
	strict := fs.Bool("strict", false, "stop at the first bad line, writing no event; without it bad lines are skipped, reported at the end, and the exit status is 1")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	switch {
	case c.Zones == "":
		return badField("Zones", "a zone file is required")
	case *input == "":
		return fmt.Errorf("%w: --input is required", ErrConfig)
	case c.Batch < 1:
		return badField("Batch", "must be at least 1")
	}
	ix, zrep, err := c.zoneSource().load()
	if err != nil {
		return err
	}
	// The zone summary on stderr: an audit over no zones, or over zones
	// dropped or warned of, must say so.
	logZoneReport(newLogger(stderr, c.LogLevel), "zones loaded", zrep, ix.Version())
	var in io.Reader = os.Stdin
	name := "stdin"
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, *input
	}
	recs, inRep, err := readRecords(name, in, *strict)
	if err != nil {
		return err
	}
	st, err := replay(ctx, ix, recs, c.Batch, stdout)
	if err != nil {
		return err
	}
	log := newLogger(stderr, c.LogLevel)
	inRep.log(log)
	log.Info("replayed", "records", st.Records, "applied", st.Applied,
		"duplicates", st.Duplicates, "raised", st.Raised, "cleared", st.Cleared,
		"bad_lines", inRep.bad, "fields_dropped", inRep.droppedBy)
	return inRep.err(name)
}
