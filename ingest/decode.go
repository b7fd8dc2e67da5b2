package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// maxListedErrors caps the errors listed in one 400 answer, and the warnings
// of one 202; the message (warnings_total) says how many there were in all.
const maxListedErrors = 100

// LineError is one entry of a 400 answer: the record at Line (NDJSON: the
// line number from 1, blank lines counted; JSON: the array element index + 1,
// 1 for a single object) is wrong in Field ("" when the record is not a JSON
// object at all, or too long) because of Error.
type LineError struct {
	Line  int    `json:"line"`
	Field string `json:"field"`
	Error string `json:"error"`
}

// LineWarning is one entry of a 202 answer's warnings: an optional Field of
// the record at Line (numbered as LineError's) was dropped because of
// Warning, and the record was accepted without it.
type LineWarning struct {
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Warning string `json:"warning"`
}

// acceptedBody is the 202 answer. Warnings and WarningsTotal appear only
// when a field was dropped.
type acceptedBody struct {
	Accepted      int           `json:"accepted"`
	Warnings      []LineWarning `json:"warnings,omitempty"`
	WarningsTotal int           `json:"warnings_total,omitempty"`
}

// rejection is why a request is answered without producing anything.
type rejection struct {
	status  int
	reason  string // records_rejected_total label
	message string
	errs    []LineError
	records int   // records the request held as far as it was read
	cause   error // logged, not sent
}

// Reasons, the label values of nofly_ingest_records_rejected_total and of
// the requests that had no records to count.
const (
	reasonInvalid     = "invalid"
	reasonClock       = "ts_out_of_range"
	reasonLineTooLong = "line_too_long"
	reasonTooMany     = "too_many_records"
	reasonBodyTooBig  = "body_too_large"
	reasonMediaType   = "unsupported_media_type"
	reasonEmpty       = "empty"
	reasonUnavailable = "kafka_unavailable"
	reasonProduce     = "produce_failed"
	reasonClientGone  = "client_closed"
)

// batch is a decoded request: the records and, for each, its line; the
// optional fields dropped (listed up to maxListedErrors, counted by field).
type batch struct {
	positions []telemetry.Position
	lines     []int
	warnings  []LineWarning
	nWarnings int
	dropped   map[string]int
}

// decodeOpts is what a request is decoded against: the limits, the receive
// time and the bounds on ts around it (0: no bound).
type decodeOpts struct {
	lim      Limits
	now      time.Time
	maxAhead time.Duration
	maxAge   time.Duration
}

// decoder accumulates the errors of one request.
type decoder struct {
	decodeOpts
	b        batch
	ws       []telemetry.FieldWarning // scratch, reused per record
	errs     []LineError
	nErrs    int
	nClock   int // errors of ts against the receive time
	tooLong  bool
	nRecords int
}

func (d *decoder) fail(line int, field, msg string) {
	d.nErrs++
	if len(d.errs) < maxListedErrors {
		d.errs = append(d.errs, LineError{Line: line, Field: field, Error: msg})
	}
}

func (d *decoder) record(line int, raw []byte) *rejection {
	d.nRecords++
	if d.nRecords > d.lim.MaxRecords {
		return &rejection{status: http.StatusRequestEntityTooLarge, reason: reasonTooMany, records: d.nRecords,
			message: fmt.Sprintf("more than %d records in one request; split it", d.lim.MaxRecords)}
	}
	if len(raw) > d.lim.MaxLineBytes {
		d.tooLong = true
		d.fail(line, "", fmt.Sprintf("record is %d bytes, longer than the limit of %d", len(raw), d.lim.MaxLineBytes))
		return nil
	}
	p, ws, err := telemetry.DecodeWarn(raw, d.ws[:0])
	d.ws = ws
	if err != nil {
		var fe *telemetry.FieldError
		if errors.As(err, &fe) {
			d.fail(line, fe.Field, fe.Err)
		} else {
			d.fail(line, "", err.Error())
		}
		return nil
	}
	if msg := d.checkClock(p.TS); msg != "" {
		d.nClock++
		d.fail(line, "ts", msg)
		return nil
	}
	for _, w := range ws {
		d.b.nWarnings++
		if len(d.b.warnings) < maxListedErrors {
			d.b.warnings = append(d.b.warnings, LineWarning{Line: line, Field: w.Field, Warning: w.Warning})
		}
		if d.b.dropped == nil {
			d.b.dropped = make(map[string]int)
		}
		d.b.dropped[w.Field]++
	}
	// What ingest dropped travels with the record, so the alerter can show
	// why a drone's height is unknown; a feed's own "dropped" is replaced.
	p.Dropped = telemetry.DroppedOf(ws)
	d.b.positions = append(d.b.positions, p)
	d.b.lines = append(d.b.lines, line)
	return nil
}

// checkClock says what is wrong with ts against the receive time, or "".
// A bound is "more than": a ts exactly maxAhead ahead is accepted.
func (d *decoder) checkClock(ts time.Time) string {
	// The bounds compare times, not ts.Sub(now): a Duration saturates at
	// ±292 years, so year 1 would otherwise pass any age bound.
	switch skew := ts.Sub(d.now); {
	case d.maxAhead > 0 && ts.After(d.now.Add(d.maxAhead)):
		return fmt.Sprintf("%s is %v ahead of the receive time %s, more than the allowed clock skew of %v; is the sender's clock fast?",
			ts.Format(time.RFC3339Nano), skew, d.now.Format(time.RFC3339Nano), d.maxAhead)
	case d.maxAge > 0 && ts.Before(d.now.Add(-d.maxAge)):
		return fmt.Sprintf("%s is %v before the receive time %s, older than the allowed record age of %v",
			ts.Format(time.RFC3339Nano), -skew, d.now.Format(time.RFC3339Nano), d.maxAge)
	}
	return ""
}

func (d *decoder) result() (batch, *rejection) {
	if d.nErrs > 0 {
		reason := reasonInvalid
		switch {
		case d.tooLong:
			reason = reasonLineTooLong
		case d.nClock == d.nErrs:
			reason = reasonClock
		}
		return batch{}, &rejection{status: http.StatusBadRequest, reason: reason, errs: d.errs, records: d.nRecords,
			message: fmt.Sprintf("%d of %d records invalid; nothing was accepted", d.nErrs, d.nRecords)}
	}
	if d.nRecords == 0 {
		return batch{}, &rejection{status: http.StatusBadRequest, reason: reasonEmpty, message: "no records in the body"}
	}
	return d.b, nil
}

// decodeNDJSON reads one record per line. Blank lines (whitespace only) are
// skipped but counted, so line numbers match what an editor shows; a UTF-8
// byte order mark before the first is skipped.
func decodeNDJSON(body []byte, o decodeOpts) (batch, *rejection) {
	lim := o.lim
	body = telemetry.TrimBOM(body)
	d := decoder{decodeOpts: o}
	d.b.positions = make([]telemetry.Position, 0, min(bytes.Count(body, []byte{'\n'})+1, lim.MaxRecords))
	d.b.lines = make([]int, 0, cap(d.b.positions))
	for line := 1; len(body) > 0; line++ {
		var ln []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			ln, body = body[:i], body[i+1:]
		} else {
			ln, body = body, nil
		}
		ln = bytes.TrimSpace(ln)
		if len(ln) == 0 {
			continue
		}
		if rej := d.record(line, ln); rej != nil {
			return batch{}, rej
		}
	}
	return d.result()
}

// decodeJSON reads one object, or an array of objects whose "line" is the
// element index + 1. A leading UTF-8 byte order mark is skipped.
//
// An array whose every element is accepted goes through a splitter of our
// own (arrayElements); anything else — a bad element, a bad separator,
// too many records — is read again from the start by encoding/json's
// Decoder (decodeJSONStd), whose answer, errors included, is the contract.
// FuzzDecodeJSONMatchesStd holds the two to the same results.
func decodeJSON(body []byte, o decodeOpts) (batch, *rejection) {
	trimmed := bytes.TrimSpace(telemetry.TrimBOM(body))
	if len(trimmed) > 0 && trimmed[0] == '[' {
		d := decoder{decodeOpts: o}
		var rej *rejection
		ok := arrayElements(trimmed, func(i int, raw []byte) bool {
			rej = d.record(i+1, raw)
			return rej == nil && d.nErrs == 0
		})
		if ok && d.nRecords > 0 {
			return d.result()
		}
	}
	return decodeJSONStd(body, o)
}

// arrayElements calls each with the elements of the JSON array b (which
// starts with '[' and has no surrounding space) in order, as encoding/json's
// Decoder would cut them, and reports whether b was a well-formed array
// all of whose elements each accepted. It checks the structure only: an
// element's own validity is each's to judge.
func arrayElements(b []byte, each func(i int, raw []byte) bool) bool {
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return skipSpace(b, i+1) == len(b)
	}
	for n := 0; ; n++ {
		start, depth := i, 0
	scan:
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				for i++; i < len(b) && b[i] != '"'; i++ {
					if b[i] == '\\' {
						i++
					}
				}
				if i >= len(b) {
					return false
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					break scan
				}
				depth--
			case ',':
				if depth == 0 {
					break scan
				}
			}
		}
		if i >= len(b) {
			return false
		}
		end := i
		for end > start && isSpace(b[end-1]) {
			end--
		}
		if end == start || !each(n, b[start:end]) {
			return false
		}
		if b[i] == ']' {
			return skipSpace(b, i+1) == len(b)
		}
		i = skipSpace(b, i+1) // past ','
	}
}

// isSpace is JSON's whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// decodeJSONStd is decodeJSON through encoding/json's Decoder alone.
func decodeJSONStd(body []byte, o decodeOpts) (batch, *rejection) {
	d := decoder{decodeOpts: o}
	trimmed := bytes.TrimSpace(telemetry.TrimBOM(body))
	if len(trimmed) == 0 || trimmed[0] != '[' {
		if len(trimmed) > 0 {
			if rej := d.record(1, trimmed); rej != nil {
				return batch{}, rej
			}
		}
		return d.result()
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil { // '['
		d.fail(1, "", "malformed JSON: "+err.Error())
		return d.result()
	}
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			d.nRecords++
			d.fail(i+1, "", "malformed JSON: "+err.Error())
			return d.result()
		}
		if rej := d.record(i+1, raw); rej != nil {
			return batch{}, rej
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		d.fail(d.nRecords+1, "", "malformed JSON: "+err.Error())
		return d.result()
	}
	if _, err := dec.Token(); err != io.EOF {
		d.fail(d.nRecords+1, "", "malformed JSON: data after the closing ]")
	}
	return d.result()
}

// accepted is the 202 answer for b.
func (b *batch) accepted() acceptedBody {
	return acceptedBody{Accepted: len(b.positions), Warnings: b.warnings, WarningsTotal: b.nWarnings}
}

// countDropped counts the fields dropped from an accepted batch.
func (s *Server) countDropped(b *batch) {
	for field, n := range b.dropped {
		s.m.fieldsDropped.WithLabelValues(field).Add(float64(n))
	}
}

// decodeOpts returns the options of a request received at now.
func (s *Server) decodeOpts(now time.Time) decodeOpts {
	return decodeOpts{lim: s.opt.Limits, now: now, maxAhead: max(s.opt.MaxClockSkewAhead, 0), maxAge: s.opt.MaxRecordAge}
}
