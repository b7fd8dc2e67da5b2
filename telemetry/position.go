// Package telemetry defines the position record that drone feeds send and
// that travels through Kafka as the value of "telemetry.positions" (key =
// drone_id): its schema, validation and encoding. DESIGN.md ("Contracts") is
// the authority; this package is its executable form.
package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Height references for alt_m (and for zone limits).
const (
	RefAMSL  = "AMSL"  // above mean sea level: the default
	RefWGS84 = "WGS84" // above the WGS84 ellipsoid (what GNSS reports)
	RefAGL   = "AGL"   // above ground level
)

// MaxDroneIDLen is the longest drone_id accepted.
const MaxDroneIDLen = 64

// Position is one fix of one drone. (DroneID, Seq) is its unique key: for one
// drone a record whose Seq is not above the highest applied one is a
// duplicate or stale and never causes a transition.
type Position struct {
	DroneID    string    `json:"drone_id"`
	Seq        int64     `json:"seq"`
	TS         time.Time `json:"ts"`
	Lat        float64   `json:"lat"`
	Lon        float64   `json:"lon"`
	AltM       *float64  `json:"alt_m,omitempty"`
	AltRef     string    `json:"alt_ref,omitempty"`
	AGLM       *float64  `json:"agl_m,omitempty"`
	SpeedMPS   *float64  `json:"speed_mps,omitempty"`
	HeadingDeg *float64  `json:"heading_deg,omitempty"`
}

// FieldError says which field of a record is wrong and why. Field is the
// JSON name ("" when the record is not a JSON object at all).
type FieldError struct {
	Field string
	Err   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err
	}
	return e.Field + ": " + e.Err
}

// ErrInvalid is matched by errors.Is for every validation failure.
var ErrInvalid = errors.New("invalid position record")

// Is lets errors.Is(err, ErrInvalid) hold for a *FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// wire mirrors Position with pointers so a missing field is told apart from a
// zero one. Unknown fields are ignored, as the contract asks.
type wire struct {
	DroneID    *string  `json:"drone_id"`
	Seq        *int64   `json:"seq"`
	TS         *string  `json:"ts"`
	Lat        *float64 `json:"lat"`
	Lon        *float64 `json:"lon"`
	AltM       *float64 `json:"alt_m"`
	AltRef     *string  `json:"alt_ref"`
	AGLM       *float64 `json:"agl_m"`
	SpeedMPS   *float64 `json:"speed_mps"`
	HeadingDeg *float64 `json:"heading_deg"`
}

// Decode parses and validates one JSON record. The error is a *FieldError.
func Decode(data []byte) (Position, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return Position{}, jsonError(err)
	}
	return w.position()
}

// DecodeAll parses a JSON object or an array of objects (application/json
// bodies). Errors carry the zero-based index of the bad element.
func DecodeAll(data []byte) ([]Position, []IndexedError) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, []IndexedError{{Index: 0, Err: jsonError(err)}}
		}
		out := make([]Position, 0, len(raws))
		var errs []IndexedError
		for i, r := range raws {
			p, err := Decode(r)
			if err != nil {
				errs = append(errs, IndexedError{Index: i, Err: err.(*FieldError)})
				continue
			}
			out = append(out, p)
		}
		return out, errs
	}
	p, err := Decode(data)
	if err != nil {
		return nil, []IndexedError{{Index: 0, Err: err.(*FieldError)}}
	}
	return []Position{p}, nil
}

// IndexedError is a FieldError of the Index-th record of a request.
type IndexedError struct {
	Index int
	Err   *FieldError
}

func jsonError(err error) *FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &FieldError{Field: te.Field, Err: fmt.Sprintf("must be %s, got JSON %s", kindName(te.Type.Kind().String()), te.Value)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &FieldError{Err: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)}
	}
	return &FieldError{Err: "malformed JSON: " + err.Error()}
}

func kindName(k string) string {
	switch k {
	case "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "ptr", "struct":
		return "a JSON object"
	}
	return k
}

func (w *wire) position() (Position, error) {
	var p Position
	switch {
	case w.DroneID == nil:
		return p, &FieldError{"drone_id", "required"}
	case !validDroneID(*w.DroneID):
		return p, &FieldError{"drone_id", "must be 1-64 characters of [A-Za-z0-9._:-]"}
	case w.Seq == nil:
		return p, &FieldError{"seq", "required"}
	case *w.Seq < 0:
		return p, &FieldError{"seq", "must not be negative"}
	case w.TS == nil:
		return p, &FieldError{"ts", "required"}
	case w.Lat == nil:
		return p, &FieldError{"lat", "required"}
	case !finite(*w.Lat) || *w.Lat < -90 || *w.Lat > 90:
		return p, &FieldError{"lat", "must be between -90 and 90"}
	case w.Lon == nil:
		return p, &FieldError{"lon", "required"}
	case !finite(*w.Lon) || *w.Lon < -180 || *w.Lon > 180:
		return p, &FieldError{"lon", "must be between -180 and 180"}
	}
	ts, err := time.Parse(time.RFC3339Nano, *w.TS)
	if err != nil {
		return p, &FieldError{"ts", "must be an RFC 3339 timestamp with a time zone, e.g. 2026-12-02T10:15:03.250Z"}
	}
	p = Position{DroneID: *w.DroneID, Seq: *w.Seq, TS: ts.UTC(), Lat: *w.Lat, Lon: *w.Lon,
		AltM: w.AltM, AGLM: w.AGLM, SpeedMPS: w.SpeedMPS, HeadingDeg: w.HeadingDeg}
	if w.AltRef != nil {
		switch *w.AltRef {
		case RefAMSL, RefWGS84, RefAGL:
			p.AltRef = *w.AltRef
		default:
			return p, &FieldError{"alt_ref", "must be AMSL, WGS84 or AGL"}
		}
	}
	if p.AltM != nil && !finite(*p.AltM) {
		return p, &FieldError{"alt_m", "must be a finite number"}
	}
	if p.AGLM != nil && !finite(*p.AGLM) {
		return p, &FieldError{"agl_m", "must be a finite number"}
	}
	if p.AltRef == RefAGL && p.AltM != nil && p.AGLM != nil && *p.AltM != *p.AGLM {
		return p, &FieldError{"agl_m", "differs from alt_m, which alt_ref AGL says is height above ground"}
	}
	if p.SpeedMPS != nil && (!finite(*p.SpeedMPS) || *p.SpeedMPS < 0) {
		return p, &FieldError{"speed_mps", "must be a number >= 0"}
	}
	if p.HeadingDeg != nil && (!finite(*p.HeadingDeg) || *p.HeadingDeg < 0 || *p.HeadingDeg >= 360) {
		return p, &FieldError{"heading_deg", "must be in [0, 360)"}
	}
	return p, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func validDroneID(s string) bool {
	if len(s) == 0 || len(s) > MaxDroneIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Ref returns the reference of AltM, AMSL when unset.
func (p *Position) Ref() string {
	if p.AltRef == "" {
		return RefAMSL
	}
	return p.AltRef
}

// Height returns the record's height in reference ref and whether it has one:
// alt_m when alt_ref matches, agl_m for AGL.
func (p *Position) Height(ref string) (float64, bool) {
	if p.AltM != nil && p.Ref() == ref {
		return *p.AltM, true
	}
	if ref == RefAGL && p.AGLM != nil {
		return *p.AGLM, true
	}
	return 0, false
}

// Key is the Kafka key of the record: the drone id, so one drone's records
// stay in one partition, in order.
func (p *Position) Key() []byte { return []byte(p.DroneID) }

// AppendJSON appends the canonical JSON encoding (the Kafka value) to dst.
// Hand-written: ingest encodes every record and the alerter decodes it, so
// this avoids reflection on the hot path; Decode reads it back exactly.
func (p *Position) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"drone_id":`...)
	dst = strconv.AppendQuote(dst, p.DroneID) // ids are [A-Za-z0-9._:-]: no escapes
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, p.Seq, 10)
	dst = append(dst, `,"ts":"`...)
	dst = p.TS.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","lat":`...)
	dst = appendFloat(dst, p.Lat)
	dst = append(dst, `,"lon":`...)
	dst = appendFloat(dst, p.Lon)
	if p.AltM != nil {
		dst = append(dst, `,"alt_m":`...)
		dst = appendFloat(dst, *p.AltM)
	}
	if p.AltRef != "" {
		dst = append(dst, `,"alt_ref":"`...)
		dst = append(dst, p.AltRef...)
		dst = append(dst, '"')
	}
	if p.AGLM != nil {
		dst = append(dst, `,"agl_m":`...)
		dst = appendFloat(dst, *p.AGLM)
	}
	if p.SpeedMPS != nil {
		dst = append(dst, `,"speed_mps":`...)
		dst = appendFloat(dst, *p.SpeedMPS)
	}
	if p.HeadingDeg != nil {
		dst = append(dst, `,"heading_deg":`...)
		dst = appendFloat(dst, *p.HeadingDeg)
	}
	return append(dst, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (p Position) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

func appendFloat(dst []byte, f float64) []byte { return strconv.AppendFloat(dst, f, 'f', -1, 64) }

// Float returns a pointer to f, for building records in code.
func Float(f float64) *float64 { return &f }
