package remoteid

import (
	"bytes"
	"encoding/json"
	"math"
)

// optNum is an optional number of a feed: null or absent leaves v nil;
// anything else that is not a number is kept in raw, so the field is
// dropped alone (with a note) and the position kept, as telemetry does
// with its own optional fields.
type optNum struct {
	v   *float64
	raw []byte
}

func (o *optNum) UnmarshalJSON(b []byte) error {
	*o = optNum{}
	if isNull(b) {
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		o.raw = append([]byte(nil), b...)
		return nil
	}
	o.v = &f
	return nil
}

// optStr is an optional string, read as optNum is.
type optStr struct {
	v   *string
	raw []byte
}

func (o *optStr) UnmarshalJSON(b []byte) error {
	*o = optStr{}
	if isNull(b) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		o.raw = append([]byte(nil), b...)
		return nil
	}
	o.v = &s
	return nil
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// dropped is the note of an optional field that held no usable value.
func dropped(raw []byte, what string) string {
	return "must be " + what + ", got JSON " + shorten(raw) + "; dropped"
}

func shorten(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// note records a kept position's caveat.
func (r *Result) note(i int, path, why string) {
	r.Notes = append(r.Notes, Note{Item: i, Path: path, Why: why})
}
