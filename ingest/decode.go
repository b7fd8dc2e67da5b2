package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/nofly-dev/nofly/telemetry"
)

// maxListedErrors caps the errors listed in one 400 answer; the message says
// how many there were in all.
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
	reasonLineTooLong = "line_too_long"
	reasonTooMany     = "too_many_records"
	reasonBodyTooBig  = "body_too_large"
	reasonMediaType   = "unsupported_media_type"
	reasonEmpty       = "empty"
	reasonUnavailable = "kafka_unavailable"
	reasonProduce     = "produce_failed"
	reasonClientGone  = "client_closed"
)

// batch is a decoded request: the records and, for each, its line.
type batch struct {
	positions []telemetry.Position
	lines     []int
}

// decoder accumulates the errors of one request.
type decoder struct {
	lim      Limits
	b        batch
	errs     []LineError
	nErrs    int
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
	p, err := telemetry.Decode(raw)
	if err != nil {
		var fe *telemetry.FieldError
		if errors.As(err, &fe) {
			d.fail(line, fe.Field, fe.Err)
		} else {
			d.fail(line, "", err.Error())
		}
		return nil
	}
	d.b.positions = append(d.b.positions, p)
	d.b.lines = append(d.b.lines, line)
	return nil
}

func (d *decoder) result() (batch, *rejection) {
	if d.nErrs > 0 {
		reason := reasonInvalid
		if d.tooLong {
			reason = reasonLineTooLong
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
// skipped but counted, so line numbers match what an editor shows.
func decodeNDJSON(body []byte, lim Limits) (batch, *rejection) {
	d := decoder{lim: lim}
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
// element index + 1.
func decodeJSON(body []byte, lim Limits) (batch, *rejection) {
	d := decoder{lim: lim}
	trimmed := bytes.TrimSpace(body)
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
