// Package telemetry defines the position record that drone feeds send and
// that travels through Kafka as the value of "telemetry.positions" (key =
// drone_id): its schema, validation and encoding. docs/design.md ("Contracts") is
// the authority; this package is its executable form.
package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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

// Position is one fix of one drone. (DroneID, TS, Seq) is its unique key and
// (TS, Seq) its place in the drone's order: for one drone a record not after
// the last applied one (alerts.DroneState.After) is a duplicate or stale and
// never causes a transition.
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
	// HAccuracyM / VAccuracyM bound the horizontal / vertical position
	// error in metres (95%), as Remote ID's accuracy classes state it.
	HAccuracyM *float64 `json:"h_accuracy_m,omitempty"`
	VAccuracyM *float64 `json:"v_accuracy_m,omitempty"`
	// Dropped names the optional fields ingest dropped from the record as
	// it arrived (outside every convention or physical range), comma
	// separated in a fixed order: "alt_m,agl_m". Set by ingest alone (a
	// feed's own "dropped" is replaced), so the alerter can show that a
	// drone's height is unknown because its feed sent nonsense.
	Dropped string `json:"dropped,omitempty"`
	// Operator is where the drone's pilot (remote pilot station) stood, as
	// the feed reported it with this position (nil: not reported). It
	// never decides an alarm: it is shown and reported.
	Operator *Operator `json:"operator,omitempty"`
}

// Operator location types, as Remote ID states them (ASTM F3411
// operator_location's altitude type, OpenDroneID System message's
// OperatorLocationType): where the take-off happened, the pilot's live
// GNSS position, or a fixed location given by the pilot.
const (
	OperatorTakeoff = "takeoff"
	OperatorLive    = "live"
	OperatorFixed   = "fixed"
)

// Operator is a pilot's position as a feed reported it.
type Operator struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
	// AltM is the pilot's geodetic (WGS84) altitude in metres, when known.
	AltM *float64 `json:"alt_m,omitempty"`
	// Type is OperatorTakeoff, OperatorLive or OperatorFixed ("" not known).
	Type string `json:"type,omitempty"`
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

// FieldWarning is an optional field that decoding dropped from a record: its
// value lies outside every convention the decoder knows, so the position is
// kept without it. Field is the JSON name.
type FieldWarning struct {
	Field   string
	Warning string
}

func (w FieldWarning) String() string { return w.Field + ": " + w.Warning }

// Published "unknown" values of optional fields, in this record's units. A
// field holding one is absent, without a warning: the feed said "unknown".
// Sources: ASTM F3411-22a Table 1 as InterUSS's uas_standards states it
// (astm/f3411/v22a/constants.py: SpecialTrackDirection, SpecialSpeed,
// SpecialHeight), OpenDroneID's opendroneid-core-c (opendroneid.h: INV_DIR,
// INV_SPEED_H, INV_ALT), MAVLink's common.xml (GLOBAL_POSITION_INT.hdg,
// GPS_RAW_INT.vel and .cog: "If unknown, set to: UINT16_MAX").
const (
	// ASTM F3411-22a Table 1 (Network and broadcast Remote ID; OpenDroneID's
	// INV_DIR): track direction 361 = "Invalid, No Value or Unknown".
	unknownTrackRID = 361
	// MAVLink GLOBAL_POSITION_INT.hdg and GPS_RAW_INT.cog are centidegrees
	// with UINT16_MAX for unknown: 655.35 once scaled to degrees.
	unknownHeadingMAVLink = 655.35
	// ASTM F3411-22a Table 1 (OpenDroneID's INV_SPEED_H): ground speed 255
	// m/s = unknown; the largest real value is 254.25.
	unknownSpeedRID = 255
	// MAVLink GPS_RAW_INT.vel is cm/s with UINT16_MAX for unknown: 655.35
	// m/s once scaled.
	unknownSpeedMAVLink = 655.35
	// ASTM F3411-22a Table 1 (OpenDroneID's INV_ALT): altitude and height
	// -1000 m = unknown.
	unknownHeightRID = -1000
)

// wire mirrors Position so a missing field is told apart from a zero one.
// Unknown fields are ignored, as the contract asks. Required fields are
// pointers (a wrong JSON type is an error naming them); optional ones read
// any JSON value without failing, so a bad one can be dropped alone.
type wire struct {
	DroneID    *string     `json:"drone_id"`
	Seq        *int64      `json:"seq"`
	TS         *string     `json:"ts"`
	Lat        *float64    `json:"lat"`
	Lon        *float64    `json:"lon"`
	AltM       optNum      `json:"alt_m"`
	AltRef     optRef      `json:"alt_ref"`
	AGLM       optNum      `json:"agl_m"`
	SpeedMPS   optNum      `json:"speed_mps"`
	HeadingDeg optNum      `json:"heading_deg"`
	HAccuracyM optNum      `json:"h_accuracy_m"`
	VAccuracyM optNum      `json:"v_accuracy_m"`
	Dropped    optDropped  `json:"dropped"`
	Operator   optOperator `json:"operator"`
}

// optDropped is the optional "dropped": a JSON string is kept for
// validation, anything else (null included) is no list.
type optDropped struct {
	v  string
	ok bool
}

// UnmarshalJSON never fails.
func (o *optDropped) UnmarshalJSON(b []byte) error {
	*o = optDropped{}
	if b[0] == '"' {
		_ = json.Unmarshal(b, &o.v)
		o.ok = true
	}
	return nil
}

// optOperator is the optional "operator" as encoding/json reads it: an
// object's members into opWire, anything else noted by its JSON type.
type optOperator struct{ opRecord }

// opWire is the operator object's members. Unknown keys are ignored, as in
// the record.
type opWire struct {
	Lat  optNum    `json:"lat"`
	Lon  optNum    `json:"lon"`
	AltM optNum    `json:"alt_m"`
	Type optOpType `json:"type"`
}

// UnmarshalJSON never fails: its members never fail either, and the record's
// own scan has checked the syntax.
func (o *optOperator) UnmarshalJSON(b []byte) error {
	o.opRecord = opRecord{}
	switch b[0] {
	case 'n': // null: absent
	case '{':
		var w opWire
		_ = json.Unmarshal(b, &w)
		o.opRecord = opRecord{kind: kindObject, lat: w.Lat, lon: w.Lon, alt: w.AltM, typ: w.Type.t}
	default:
		o.kind = jsonKind(b[0])
	}
	return nil
}

// optOpType is the operator's optional "type".
type optOpType struct{ t opType }

// UnmarshalJSON never fails. The types are matched without regard to case.
func (o *optOpType) UnmarshalJSON(b []byte) error {
	o.t = opType{}
	if b[0] == 'n' {
		return nil
	}
	if b[0] == '"' {
		var s string
		_ = json.Unmarshal(b, &s)
		o.t.v = operatorType(s)
	}
	if o.t.v == "" {
		o.t.raw = b
	}
	return nil
}

// operatorType is the Operator.Type s names, "" for none.
func operatorType(s string) string {
	for _, t := range [...]string{OperatorTakeoff, OperatorLive, OperatorFixed} {
		if strings.EqualFold(s, t) {
			return t
		}
	}
	return ""
}

// jsonKind is the kind byte of a JSON value that starts with c.
func jsonKind(c byte) byte {
	switch {
	case c == '"':
		return kindString
	case c == 't' || c == 'f':
		return kindBool
	case c == '-' || c >= '0' && c <= '9':
		return kindNumber
	}
	return c // '{' or '['
}

// optNum is an optional JSON number. null, like absence, leaves it unset.
// Small (16 bytes) on purpose: wire is allocated for every record.
type optNum struct {
	v    float64
	kind byte // 0 absent or null, 'n' a finite number, else what was given instead
}

// What an optNum may hold instead of a number.
const (
	kindNumber   = 'n'
	kindOverflow = 'o' // a number beyond float64
	kindString   = 's'
	kindBool     = 'b'
	kindObject   = '{'
	kindArray    = '['
)

// UnmarshalJSON never fails: what is not a finite number is noted in kind.
func (o *optNum) UnmarshalJSON(b []byte) error {
	*o = optNum{}
	switch c := b[0]; {
	case c == 'n': // null: absent
	case c == '-' || c >= '0' && c <= '9':
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || !finite(f) { // the scanner checked the syntax: only overflow is left
			o.kind = kindOverflow
			return nil
		}
		o.v, o.kind = f, kindNumber
	case c == '"':
		o.kind = kindString
	case c == 't' || c == 'f':
		o.kind = kindBool
	default:
		o.kind = c
	}
	return nil
}

// optRef is the optional alt_ref.
type optRef struct {
	ref string // RefAMSL, RefWGS84 or RefAGL once recognised
	raw []byte // the JSON value when it is not a known reference
}

// UnmarshalJSON never fails. The references are matched without regard to
// case, and MSL (MAVLink's name for it) is AMSL.
func (o *optRef) UnmarshalJSON(b []byte) error {
	*o = optRef{}
	if b[0] == 'n' {
		return nil
	}
	if b[0] == '"' {
		s := string(b[1 : len(b)-1])
		if strings.IndexByte(s, '\\') >= 0 {
			var u string // its own variable: s stays off the heap
			_ = json.Unmarshal(b, &u)
			s = u
		}
		switch {
		case strings.EqualFold(s, RefAMSL), strings.EqualFold(s, "MSL"):
			o.ref = RefAMSL
		case strings.EqualFold(s, RefWGS84):
			o.ref = RefWGS84
		case strings.EqualFold(s, RefAGL):
			o.ref = RefAGL
		}
	}
	if o.ref == "" {
		o.raw = b
	}
	return nil
}

// Decode parses and validates one JSON record. The error is a *FieldError.
// Optional fields are read as DecodeWarn reads them; its warnings are
// discarded.
func Decode(data []byte) (Position, error) {
	p, _, err := DecodeWarn(data, nil)
	return p, err
}

// DecodeWarn parses and validates one JSON record, appending to warns one
// FieldWarning for each optional field it dropped. The required fields
// (drone_id, seq, ts, lat, lon) are strict: the error, a *FieldError, names
// the first bad one, and warns comes back unchanged. Optional fields follow
// real feeds' conventions, then are dropped with a warning when they are
// outside all of them:
//
//   - null is absent, for every optional field.
//   - heading_deg: 360 is north (0); a negative track (ASTM F3411 tracks run
//     -359.99..359.99) is turned by +360; 361 (Remote ID's unknown) and
//     655.35 (MAVLink's UINT16_MAX centidegrees) are absent; the rest of
//     [-360, 360] is kept, anything else dropped.
//   - speed_mps: 255 (Remote ID) and 655.35 (MAVLink) are absent; a negative
//     speed is dropped.
//   - alt_m, agl_m: -1000 (Remote ID's unknown) is absent.
//   - alt_ref: AMSL, WGS84, AGL in any case, MSL for AMSL. An unknown alt_ref
//     drops alt_m with it: read without its reference alt_m would count as
//     AMSL, the permissive reading; without it the height is unknown, which
//     alarms.
//   - alt_ref AGL with an agl_m that differs from alt_m drops both heights:
//     which one is right is unknown.
//   - A JSON value of the wrong type, or a number beyond float64, is dropped.
//   - operator, the pilot's position, never decides an alarm, so nothing in
//     it refuses the record. null is absent, and so is lat = lon = 0 (Remote
//     ID's "unknown"). An operator that is not an object, or whose lat or lon
//     is missing, mistyped or out of range, is dropped whole (one warning:
//     "operator", "operator.lat" or "operator.lon"); a bad alt_m (-1000 is
//     unknown) or type (takeoff, live, fixed, in any case) is dropped alone.
//
// With no warning DecodeWarn allocates nothing for warns; pass a reused
// slice (warns[:0]) to keep it so when there are.
func DecodeWarn(data []byte, warns []FieldWarning) (Position, []FieldWarning, error) {
	p, warns, err := decodeFast(data, warns)
	if err == errSyntax {
		return decodeJSON(data, warns) // for encoding/json's own message
	}
	return p, warns, err
}

// decodeJSON is DecodeWarn through encoding/json: the reference that
// FuzzDecodeMatchesJSON holds the hand-written decoder to.
func decodeJSON(data []byte, warns []FieldWarning) (Position, []FieldWarning, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return Position{}, warns, jsonError(err)
	}
	return w.position(warns)
}

// DecodeAll parses a JSON object or an array of objects (application/json
// bodies). Errors carry the zero-based index of the bad element.
func DecodeAll(data []byte) ([]Position, []IndexedError) {
	data = bytes.TrimSpace(TrimBOM(data))
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

// bom is the UTF-8 byte order mark, which some editors and Windows tools
// write at the start of a text file.
var bom = []byte{0xEF, 0xBB, 0xBF}

// TrimBOM returns b without a leading UTF-8 byte order mark. Call it on the
// start of a body or file, not on each record.
func TrimBOM(b []byte) []byte { return bytes.TrimPrefix(b, bom) }

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

// position validates what encoding/json read, as record.position does for
// both decoders.
func (w *wire) position(warns []FieldWarning) (Position, []FieldWarning, error) {
	r := record{owned: true, reference: true, altM: w.AltM, altRef: w.AltRef, aglM: w.AGLM, speed: w.SpeedMPS,
		heading: w.HeadingDeg, hAcc: w.HAccuracyM, vAcc: w.VAccuracyM, dropped: w.Dropped.v, hasDropped: w.Dropped.ok,
		op: w.Operator.opRecord}
	if w.DroneID != nil {
		r.set |= hasDroneID
		r.droneID = *w.DroneID
	}
	if w.Seq != nil {
		r.set |= hasSeq
		r.seq = *w.Seq
	}
	if w.TS != nil {
		r.set |= hasTS
		r.ts = *w.TS
	}
	if w.Lat != nil {
		r.set |= hasLat
		r.lat = *w.Lat
	}
	if w.Lon != nil {
		r.set |= hasLon
		r.lon = *w.Lon
	}
	var p Position
	warns, err := r.position(&p, warns)
	return p, warns, err
}

// number reads an optional number, warning when the field held something
// else.
func number(o *optNum, field string, warns []FieldWarning) (float64, bool, []FieldWarning) {
	var what string
	switch o.kind {
	case 0, kindNumber:
		return o.v, o.kind == kindNumber, warns
	case kindOverflow:
		what = "is a number beyond the range of a float64"
	case kindString:
		what = "must be a number, got a JSON string"
	case kindBool:
		what = "must be a number, got a JSON boolean"
	case kindObject:
		what = "must be a number, got a JSON object"
	default:
		what = "must be a number, got a JSON array"
	}
	return 0, false, append(warns, FieldWarning{field, what + "; dropped"})
}

// quote shortens a JSON value for a warning.
func quote(raw []byte) string {
	const max = 40
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// ValidDroneID reports whether s is a drone id: 1 to MaxDroneIDLen bytes of
// A-Z a-z 0-9 . _ : -.
func ValidDroneID(s string) bool { return validDroneID(s) }

func validDroneID(s string) bool {
	if len(s) == 0 || len(s) > MaxDroneIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !droneIDByte[s[i]] {
			return false
		}
	}
	return true
}

// droneIDByte is true for the bytes of a drone id: [A-Za-z0-9._:-].
var droneIDByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
	}
	return t
}()

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
	dst = appendAccuracy(dst, p)
	if p.Dropped != "" && parseDropped(p.Dropped) == p.Dropped { // only the canonical form: field names, no escapes
		dst = append(dst, `,"dropped":"`...)
		dst = append(dst, p.Dropped...)
		dst = append(dst, '"')
	}
	if o := p.Operator; o != nil {
		dst = append(dst, `,"operator":{"lat":`...)
		dst = appendFloat(dst, o.Lat)
		dst = append(dst, `,"lon":`...)
		dst = appendFloat(dst, o.Lon)
		if o.AltM != nil {
			dst = append(dst, `,"alt_m":`...)
			dst = appendFloat(dst, *o.AltM)
		}
		if t := operatorType(o.Type); t != "" && t == o.Type { // only the known types: no escapes
			dst = append(dst, `,"type":"`...)
			dst = append(dst, t...)
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (p Position) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

func appendFloat(dst []byte, f float64) []byte { return strconv.AppendFloat(dst, f, 'f', -1, 64) }

// Float returns a pointer to f, for building records in code.
func Float(f float64) *float64 { return &f }
