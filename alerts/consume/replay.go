package consume

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

// ErrInput is wrapped by errors about the replayed file's content.
var ErrInput = errors.New("bad input")

// maxReportedLines caps the bad lines and the dropped fields a report
// lists; the counts cover all of them.
const maxReportedLines = 20

// maxLine is the longest line Replay reads; a longer one ends the replay.
const maxLine = 1 << 20

// spoolMemory is how many bytes of events a strict replay holds in memory
// before it moves them to a temporary file.
var spoolMemory = 8 << 20 // a variable for the tests

// outBuffer is the size of the output's buffer: events reach the output
// when it fills, and at the end.
var outBuffer = 256 << 10 // a variable for the tests

// ReplayOptions configure Replay.
type ReplayOptions struct {
	Name   string // the input's name in errors ("file:line: ...")
	Batch  int    // records per engine batch, at least 1
	Strict bool   // the first bad line is an error and no event is written

	// Partition is the partition the replay runs as (its events carry it),
	// FirstOffset the offset of the input's first line: line n is offset
	// FirstOffset+n-1, as in a partition dumped from FirstOffset on, so that
	// Switches, taken from the live partition, apply at the same records.
	Partition   int
	FirstOffset int64
	// Switches change the zone set during the replay, oldest first: the
	// records at offsets above a switch's After are evaluated with its Zones
	// (until the next switch), as the live partition recorded them; the
	// records at or below the first are evaluated with Replay's zones.
	Switches []ZoneSwitch
	// AuthSwitches change the authorisation set the same way (before the
	// first, none: version 0), as the live partition recorded them
	// (<tag>:authswitch).
	AuthSwitches []AuthSwitch

	// Timing is the live alerter's clock settings (--signal-lost-after,
	// --drone-ttl, --event-ttl): the clock's decisions replay equal to
	// live only with the same. Records carry the log's clock in a
	// "received" field or a "<unix ms>\t" prefix (a topic dump by kcat
	// -f '%T\t%s\n'), and ticks are lines of their own; without them the
	// clock stands still and decides nothing.
	Timing alerts.Timing
	// Approach is the live alerter's approaching warnings
	// (--approach-before, --approach-buffer): replay equals live only with
	// the same.
	Approach alerts.ApproachSettings

	// Progress, when set, is called about every ProgressEvery (5 s when
	// zero) while the replay runs, between two batches: a replay shorter
	// than that never calls it.
	Progress      func(ReplayProgress)
	ProgressEvery time.Duration
}

// ZoneSwitch is a switch of the zone set at an offset of the partition.
type ZoneSwitch struct {
	After int64
	Zones alerts.Zones
}

// AuthSwitch is a switch of the authorisation set at an offset of the
// partition.
type AuthSwitch struct {
	After int64
	Set   *authorization.Set
}

// ReplayProgress is where a running replay is.
type ReplayProgress struct {
	Records int64         // records read so far (bad lines included)
	Bytes   int64         // bytes of the input read so far
	Elapsed time.Duration // since Replay started
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
// as the live alerter — as one partition (o.Partition), in batches of o.Batch
// records — and writes the events to out as NDJSON. The events equal the
// live pipeline's for the same records in the same order in every field but
// partition and offset (and in those too when the input is one partition
// dumped from o.FirstOffset on, replayed as o.Partition).
//
// It streams: it reads a batch of lines, applies it and writes the batch's
// events before it reads the next, so its memory is the drones' states and
// one batch, whatever the input's length. The input is read as ingest reads
// a request (see readBatch). A run over bad lines completes, and Input.Err
// reports them. With o.Strict the first bad line is an error and nothing is
// written: the events are held (in memory up to spoolMemory bytes, then in
// a temporary file) until the whole input has been read. Without o.Strict,
// an error that ends the replay early (a line over 1 MiB, a read error, ctx
// done) leaves the events of the records before it written.
//
// Live, a batch is committed to a Store, whose unique keys suppress an
// event decided twice. Replay keeps the drones' states in the engine and
// commits nowhere, because in one engine that never loses its state no
// event id can repeat: a raised event's id is a hash of (drone, zone,
// raising seq, the drone's run of seqs), a drone's seqs strictly increase
// within a run (a seq not above the last starts the next run, and a record
// not after its drone's last by ts, then seq, is a duplicate and decides
// nothing), and one position raises a zone once; a cleared event's id is its alarm's id with
// ":cleared", and an alarm is cleared once, as it leaves the state then.
// The unique keys would suppress nothing, so keeping them would only cost
// memory in proportion to the events.
func Replay(ctx context.Context, zones alerts.Zones, in io.Reader, out io.Writer, o ReplayOptions) (ReplayResult, error) {
	if o.Batch < 1 {
		return ReplayResult{}, fmt.Errorf("consume: replay batch %d, must be at least 1", o.Batch)
	}
	for i := 1; i < len(o.Switches); i++ {
		if o.Switches[i].After < o.Switches[i-1].After {
			return ReplayResult{}, fmt.Errorf("consume: replay zone switches out of order (after %d, then %d)", o.Switches[i-1].After, o.Switches[i].After)
		}
	}
	for i := 1; i < len(o.AuthSwitches); i++ {
		if o.AuthSwitches[i].After < o.AuthSwitches[i-1].After {
			return ReplayResult{}, fmt.Errorf("consume: replay authorisation switches out of order (after %d, then %d)", o.AuthSwitches[i-1].After, o.AuthSwitches[i].After)
		}
	}
	eng, err := alerts.NewEngine(o.Partition, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		return ReplayResult{}, err
	}
	eng.SetTiming(o.Timing)
	eng.SetApproach(o.Approach)
	every := o.ProgressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	cr := &countingReader{r: in}
	rd := &lineReader{name: o.Name, strict: o.Strict, sc: bufio.NewScanner(cr), base: o.FirstOffset,
		rep: InputReport{Name: o.Name, DroppedBy: map[string]int{}}}
	rd.sc.Buffer(make([]byte, 256<<10), maxLine)

	var w eventWriter
	if o.Strict {
		sp := &spool{}
		defer sp.Close()
		w = sp
	} else {
		w = &directWriter{bw: bufio.NewWriterSize(out, outBuffer)}
	}

	var total alerts.Stats
	switches, authSwitches := o.Switches, o.AuthSwitches
	var events []alerts.Event // scratch: one run's events
	apply := func(zones alerts.Zones, recs []alerts.Positioned) error {
		var st alerts.Stats
		events, st = eng.Decide(zones, recs, events[:0])
		total.Add(st)
		for i := range events {
			if err := w.Write(&events[i]); err != nil {
				return fmt.Errorf("write events: %w", err)
			}
		}
		clear(events) // the scratch must not keep positions alive
		return nil
	}
	start := time.Now()
	next := start.Add(every)
	for {
		if err := ctx.Err(); err != nil {
			return ReplayResult{Stats: total, Input: rd.rep}, errors.Join(err, w.Flush())
		}
		recs, more, err := rd.readBatch(o.Batch)
		if err != nil {
			if !o.Strict {
				err = errors.Join(err, w.Flush())
			}
			return ReplayResult{Stats: total, Input: rd.rep}, err
		}
		// The batch is applied in runs of records of one zone set and one
		// authorisation set: a run ends where the live partition switched
		// either.
		for len(recs) > 0 {
			n := len(recs)
			for i := range recs {
				if (len(switches) > 0 && recs[i].Offset > switches[0].After) ||
					(len(authSwitches) > 0 && recs[i].Offset > authSwitches[0].After) {
					n = i
					break
				}
			}
			if n == 0 {
				if len(switches) > 0 && recs[0].Offset > switches[0].After {
					zones, switches = switches[0].Zones, switches[1:]
				}
				if len(authSwitches) > 0 && recs[0].Offset > authSwitches[0].After {
					eng.SetAuthorizations(authSwitches[0].Set)
					authSwitches = authSwitches[1:]
				}
				continue
			}
			if err := apply(zones, recs[:n]); err != nil {
				return ReplayResult{Stats: total, Input: rd.rep}, err
			}
			recs = recs[n:]
		}
		if !more {
			break
		}
		if o.Progress != nil {
			if now := time.Now(); !now.Before(next) {
				o.Progress(ReplayProgress{Records: rd.lines, Bytes: cr.n, Elapsed: now.Sub(start)})
				next = now.Add(every)
			}
		}
	}
	if o.Strict {
		if err := w.(*spool).CopyTo(out); err != nil {
			return ReplayResult{Stats: total, Input: rd.rep}, fmt.Errorf("write events: %w", err)
		}
		return ReplayResult{Stats: total, Input: rd.rep}, nil
	}
	if err := w.Flush(); err != nil {
		return ReplayResult{Stats: total, Input: rd.rep}, fmt.Errorf("write events: %w", err)
	}
	return ReplayResult{Stats: total, Input: rd.rep}, nil
}

// lineReader reads an NDJSON telemetry file, one record per line, into
// batches of records numbered by line (offset = FirstOffset + line number - 1; blank
// lines are skipped, so offsets need not be contiguous), as ingest reads a
// request: a UTF-8 byte order mark at the start is skipped, and an optional
// field outside every convention is dropped (telemetry.DecodeWarn; the
// record then holds the canonical encoding without it). A bad line — a bad
// required field — is skipped and reported, or with strict is an error
// naming the file and the line. A line longer than 1 MiB ends the reading
// either way.
type lineReader struct {
	name   string
	strict bool
	base   int64 // the offset of line 1
	sc     *bufio.Scanner
	rep    InputReport
	line   int   // lines read
	lines  int64 // non-blank lines read
	recs   []alerts.Positioned
	ws     []telemetry.FieldWarning
}

// readBatch returns the next batch of up to n records, decoded once here
// (the engine takes them as they are), valid until the next call, and
// whether the input may hold more.
func (r *lineReader) readBatch(n int) ([]alerts.Positioned, bool, error) {
	clear(r.recs) // the last batch's positions must not stay reachable
	recs := r.recs[:0]
	more := true
	for len(recs) < n {
		if !r.sc.Scan() {
			more = false
			break
		}
		r.line++
		b := r.sc.Bytes()
		if r.line == 1 {
			b = telemetry.TrimBOM(b)
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		r.lines++
		at, b := receivedPrefix(b)
		off := r.base + int64(r.line-1)
		if telemetry.HasTickPrefix(b) {
			if t, ok := telemetry.ParseTick(b); ok {
				if at.IsZero() {
					at = t
				}
				recs = append(recs, alerts.Positioned{Offset: off, Time: at, Tick: true})
				continue
			}
		}
		p, warns, err := telemetry.DecodeWarn(b, r.ws[:0])
		r.ws = warns
		if err != nil {
			if t, ok := telemetry.ParseTick(b); ok {
				if at.IsZero() {
					at = t
				}
				recs = append(recs, alerts.Positioned{Offset: off, Time: at, Tick: true})
				continue
			}
		}
		if err != nil {
			if r.strict {
				return nil, false, fmt.Errorf("%w: %s:%d: %v", ErrInput, r.name, r.line, err)
			}
			r.rep.Bad++
			if len(r.rep.BadLines) < maxReportedLines {
				r.rep.BadLines = append(r.rep.BadLines, fmt.Sprintf("%s:%d: %v", r.name, r.line, err))
			}
			// Live, a record that does not decode still moves the clock.
			if at.IsZero() {
				at = receivedField(b)
			}
			if !at.IsZero() {
				recs = append(recs, alerts.Positioned{Offset: off, Time: at, Bad: true})
			}
			continue
		}
		// With dropped fields, p is what the alerter decodes from the
		// canonical record ingest would have produced without them
		// (AppendJSON's numbers round-trip exactly).
		if len(warns) > 0 {
			for _, w := range warns {
				r.rep.Dropped++
				r.rep.DroppedBy[w.Field]++
				if len(r.rep.DropLines) < maxReportedLines {
					r.rep.DropLines = append(r.rep.DropLines, fmt.Sprintf("%s:%d: %s", r.name, r.line, w))
				}
			}
		}
		p.Dropped = telemetry.DroppedOf(warns) // what ingest would have said
		if at.IsZero() {
			at = receivedField(b)
		}
		recs = append(recs, alerts.Positioned{Offset: off, Time: at, Pos: p})
	}
	if err := r.sc.Err(); err != nil {
		return nil, false, fmt.Errorf("%w: %s:%d: %v", ErrInput, r.name, r.line+1, err)
	}
	r.recs = recs
	return recs, more, nil
}

// receivedPrefix splits a line of a topic dump that starts with its
// record's Kafka timestamp, "<unix ms>\t<value>" (kcat -f '%T\t%s\n'),
// into that time and the value; any other line is returned whole with no
// time.
func receivedPrefix(b []byte) (time.Time, []byte) {
	i := bytes.IndexByte(b, '\t')
	if i <= 0 || i > 19 {
		return time.Time{}, b
	}
	ms, err := strconv.ParseInt(string(b[:i]), 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, b
	}
	return time.UnixMilli(ms).UTC(), bytes.TrimSpace(b[i+1:])
}

// receivedField reads a record line's optional "received" (RFC 3339): the
// time ingest received the record, the log's clock, for a hand-written or
// converted replay input. Records are flat objects, and in JSON the bytes
// "received":" cannot occur inside a string value (its quotes would be
// escaped), so the first occurrence is the key.
func receivedField(b []byte) time.Time {
	const key = `"received":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return time.Time{}
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
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

// countingReader counts the bytes read through it, for the progress.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// eventWriter takes the replay's events, written as one JSON object a line.
type eventWriter interface {
	Write(e *alerts.Event) error
	Flush() error
}

// directWriter writes the events to the output as they are decided.
type directWriter struct{ bw *bufio.Writer }

func (d *directWriter) Write(e *alerts.Event) error {
	// Encoded straight into the writer's free space (a copy only when it
	// does not fit).
	_, err := d.bw.Write(append(e.AppendJSON(d.bw.AvailableBuffer()), '\n'))
	return err // bufio.Writer's errors are sticky
}

func (d *directWriter) Flush() error { return d.bw.Flush() }

// spool holds a strict replay's events until the input has been read
// without a bad line: in memory up to spoolMemory bytes, then in a
// temporary file, removed by Close.
type spool struct {
	mem  []byte
	file *os.File
	bw   *bufio.Writer
}

func (s *spool) Write(ev *alerts.Event) error {
	if s.file == nil {
		s.mem = append(ev.AppendJSON(s.mem), '\n')
		if len(s.mem) <= spoolMemory {
			return nil
		}
		f, err := os.CreateTemp("", "nofly-replay-*.ndjson")
		if err != nil {
			return fmt.Errorf("hold the events of a strict replay: %w", err)
		}
		s.file, s.bw = f, bufio.NewWriterSize(f, 256<<10)
		_, err = s.bw.Write(s.mem)
		s.mem = nil
		return err
	}
	_, err := s.bw.Write(append(ev.AppendJSON(s.bw.AvailableBuffer()), '\n'))
	return err
}

// Flush does nothing: a spool's events go out only through CopyTo.
func (s *spool) Flush() error { return nil }

// CopyTo writes the held events to w.
func (s *spool) CopyTo(w io.Writer) error {
	if s.file == nil {
		_, err := w.Write(s.mem)
		return err
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.file)
	return err
}

// Close removes the temporary file, if any.
func (s *spool) Close() error {
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	return errors.Join(err, os.Remove(s.file.Name()))
}
