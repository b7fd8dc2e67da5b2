package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

// ErrInput is wrapped by errors about the replayed file's content.
var ErrInput = fmt.Errorf("bad input")

// readRecords reads an NDJSON telemetry file, one record per line, into
// records numbered by line (offset = line number - 1; blank lines are
// skipped, so offsets need not be contiguous). A bad line is an error naming
// the file and the line.
func readRecords(name string, r io.Reader) ([]alerts.Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var recs []alerts.Record
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if _, err := telemetry.Decode(b); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrInput, name, line, err)
		}
		recs = append(recs, alerts.Record{Offset: int64(line - 1), Value: append([]byte(nil), b...)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s:%d: %v", ErrInput, name, line+1, err)
	}
	return recs, nil
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
	recs, err := readRecords(name, in)
	if err != nil {
		return err
	}
	st, err := replay(ctx, ix, recs, c.Batch, stdout)
	if err != nil {
		return err
	}
	newLogger(stderr, c.LogLevel).Info("replayed", "records", st.Records, "applied", st.Applied,
		"duplicates", st.Duplicates, "raised", st.Raised, "cleared", st.Cleared)
	return nil
}
