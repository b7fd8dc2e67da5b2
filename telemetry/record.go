package telemetry

import (
	"math"
	"strings"
	"time"
	"unsafe"
)

// record is one record as read, before validation: what both decoders
// (encoding/json's, kept as the reference, and the hand-written one) fill,
// so that validation, conventions and warnings are one piece of code.
type record struct {
	set   uint8 // has* bits: which required fields were present (not null)
	owned bool  // droneID is a string of its own, not a view of the input
	// reference: read by encoding/json (decodeJSON), validated exactly as
	// before the hand-written decoder, ts by time.Parse alone.
	reference bool
	droneID   string
	seq       int64
	ts        string // may be a view of the input: only parsed, never kept
	lat       float64
	lon       float64

	altM, aglM, speed, heading, hAcc, vAcc optNum
	altRef                                 optRef

	// dropped is the record's "dropped" when it was a JSON string (may be
	// a view of the input: only parsed, never kept).
	dropped    string
	hasDropped bool

	op opRecord
}

// opRecord is the record's "operator" as read: kind is 0 when absent or
// null, kindObject for an object (its members in the rest), else the kind of
// the JSON value given instead.
type opRecord struct {
	kind          byte
	lat, lon, alt optNum
	typ           opType
}

// opType is the operator's "type": v the Operator type it names, or raw the
// JSON value when it names none (nil when absent or null).
type opType struct {
	v   string
	raw []byte
}

// Required fields present in a record.
const (
	hasDroneID = 1 << iota
	hasSeq
	hasTS
	hasLat
	hasLon
)

// position validates r into *p, which is zero and stays so when r is
// refused. The required fields are checked in a fixed order and the first
// bad one is reported; then the optional ones follow the conventions
// DecodeWarn lists.
func (r *record) position(p *Position, warns []FieldWarning) ([]FieldWarning, error) {
	switch {
	case r.set&hasDroneID == 0:
		return warns, &FieldError{"drone_id", "required"}
	case !validDroneID(r.droneID):
		return warns, &FieldError{"drone_id", "must be 1-64 characters of [A-Za-z0-9._:-]"}
	case r.set&hasSeq == 0:
		return warns, &FieldError{"seq", "required"}
	case r.seq < 0:
		return warns, &FieldError{"seq", "must not be negative"}
	case r.set&hasTS == 0:
		return warns, &FieldError{"ts", "required"}
	case r.set&hasLat == 0:
		return warns, &FieldError{"lat", "required"}
	case !finite(r.lat) || r.lat < -90 || r.lat > 90:
		return warns, &FieldError{"lat", "must be between -90 and 90"}
	case r.set&hasLon == 0:
		return warns, &FieldError{"lon", "required"}
	case !finite(r.lon) || r.lon < -180 || r.lon > 180:
		return warns, &FieldError{"lon", "must be between -180 and 180"}
	}
	var ts time.Time
	ok := false
	if !r.reference {
		ts, ok = parseUTC(r.ts)
	}
	if !ok {
		t, err := time.Parse(time.RFC3339Nano, r.ts)
		if err != nil {
			return warns, &FieldError{"ts", "must be an RFC 3339 timestamp with a time zone, e.g. 2026-12-02T10:15:03.250Z"}
		}
		ts = t.UTC()
	}
	p.Seq, p.TS, p.Lat, p.Lon, p.AltRef = r.seq, ts, r.lat, r.lon, r.altRef.ref
	if r.hasDropped {
		p.Dropped = parseDropped(r.dropped)
	}

	alt, altOK, warns := number(&r.altM, "alt_m", warns)
	if altOK && alt == unknownHeightRID {
		altOK = false
	}
	if r.altRef.raw != nil {
		warns = append(warns, FieldWarning{"alt_ref", quote(r.altRef.raw) + " is not AMSL, WGS84 or AGL; dropped"})
		if altOK {
			// Without alt_ref, alt_m would be read as AMSL: the permissive
			// reading when it was meant as AGL. Unknown height alarms.
			warns = append(warns, FieldWarning{"alt_m", "dropped with alt_ref, which is unknown: the height counts as unknown"})
			altOK = false
		}
	}
	if altOK {
		lo, ref := minHeightM, p.Ref()
		if ref == RefAGL {
			lo = minAGLM
		}
		if alt < lo || alt > MaxHeightM {
			warns = append(warns, FieldWarning{"alt_m", outOfRange(alt, lo, MaxHeightM, "m "+ref, "the height counts as unknown")})
			altOK = false
		}
	}
	agl, aglOK, warns := number(&r.aglM, "agl_m", warns)
	if aglOK && agl == unknownHeightRID {
		aglOK = false
	}
	if aglOK && (agl < minAGLM || agl > MaxHeightM) {
		warns = append(warns, FieldWarning{"agl_m", outOfRange(agl, minAGLM, MaxHeightM, "m", "the height counts as unknown")})
		aglOK = false
	}
	if p.AltRef == RefAGL && altOK && aglOK && alt != agl {
		warns = append(warns,
			FieldWarning{"alt_m", "dropped: alt_ref AGL makes it the height above ground, and agl_m differs; which is right is unknown"},
			FieldWarning{"agl_m", "dropped: it differs from alt_m, which alt_ref AGL makes the height above ground; which is right is unknown"})
		altOK, aglOK = false, false
	}
	speed, speedOK, warns := number(&r.speed, "speed_mps", warns)
	switch {
	case !speedOK:
	case speed == unknownSpeedRID || speed == unknownSpeedMAVLink:
		speedOK = false
	case speed < 0:
		warns = append(warns, FieldWarning{"speed_mps", formatFloat(speed) + " is negative; dropped"})
		speedOK = false
	case speed > MaxSpeedMPS:
		warns = append(warns, FieldWarning{"speed_mps", outOfRange(speed, 0, MaxSpeedMPS, "m/s", "")})
		speedOK = false
	case speed == 0:
		speed = 0 // not -0
	}
	head, headOK, warns := number(&r.heading, "heading_deg", warns)
	switch {
	case !headOK:
	case head == unknownTrackRID || head == unknownHeadingMAVLink:
		headOK = false
	case head < -360 || head > 360:
		warns = append(warns, FieldWarning{"heading_deg", formatFloat(head) + " is outside [-360, 360] (361: unknown); dropped"})
		headOK = false
	default:
		if head < 0 {
			// Rounded to 1e-9°: -359.99 + 360 is 0.00999999999999 in float64.
			head = math.Round((head+360)*1e9) / 1e9
		}
		if head >= 360 {
			head -= 360
		}
		if head == 0 {
			head = 0 // not -0
		}
	}

	hAcc, hAccOK, warns := accuracy(&r.hAcc, "h_accuracy_m", warns)
	vAcc, vAccOK, warns := accuracy(&r.vAcc, "v_accuracy_m", warns)
	p.Operator, warns = r.op.operator(warns)

	// One allocation holds every kept number and, when r.droneID is a view
	// of the input, the drone id's bytes too: Position's optional fields are
	// pointers, and this keeps a record to one allocation.
	if altOK || aglOK || speedOK || headOK || hAccOK || vAccOK {
		var v *[6]float64
		if r.owned {
			v = new([6]float64)
			p.DroneID = r.droneID
		} else {
			// float64 words, not bytes, so the numbers are aligned; the id
			// follows them. Neither holds a pointer: the GC does not scan it.
			words := make([]float64, 6+(len(r.droneID)+7)/8)
			id := unsafe.Slice((*byte)(unsafe.Pointer(&words[6])), len(r.droneID))
			copy(id, r.droneID)
			p.DroneID = unsafe.String(&id[0], len(id))
			v = (*[6]float64)(words)
		}
		if altOK {
			v[0], p.AltM = alt, &v[0]
		}
		if aglOK {
			v[1], p.AGLM = agl, &v[1]
		}
		if speedOK {
			v[2], p.SpeedMPS = speed, &v[2]
		}
		if headOK {
			v[3], p.HeadingDeg = head, &v[3]
		}
		if hAccOK {
			v[4], p.HAccuracyM = hAcc, &v[4]
		}
		if vAccOK {
			v[5], p.VAccuracyM = vAcc, &v[5]
		}
	} else if r.owned {
		p.DroneID = r.droneID
	} else {
		p.DroneID = strings.Clone(r.droneID)
	}
	return warns, nil
}

// operator validates the operator as DecodeWarn says: nil when absent or
// dropped. Its own allocation, made only for a record that carries one.
func (o *opRecord) operator(warns []FieldWarning) (*Operator, []FieldWarning) {
	switch o.kind {
	case 0:
		return nil, warns
	case kindObject:
	default:
		return nil, append(warns, FieldWarning{"operator", "must be a JSON object, got a JSON " + kindWord(o.kind) + "; dropped"})
	}
	lat, latOK, warns := number(&o.lat, "operator.lat", warns)
	if o.lat.kind != 0 && o.lat.kind != kindNumber {
		return nil, warns // number warned: the pilot's position is unknown
	}
	lon, lonOK, warns := number(&o.lon, "operator.lon", warns)
	if o.lon.kind != 0 && o.lon.kind != kindNumber {
		return nil, warns
	}
	switch {
	case !latOK:
		return nil, append(warns, FieldWarning{"operator.lat", "required in an operator; the operator was dropped"})
	case lat < -90 || lat > 90:
		return nil, append(warns, FieldWarning{"operator.lat", formatFloat(lat) + " is outside -90..90; the operator was dropped"})
	case !lonOK:
		return nil, append(warns, FieldWarning{"operator.lon", "required in an operator; the operator was dropped"})
	case lon < -180 || lon > 180:
		return nil, append(warns, FieldWarning{"operator.lon", formatFloat(lon) + " is outside -180..180; the operator was dropped"})
	case lat == 0 && lon == 0:
		return nil, warns // Remote ID's "unknown" (and no pilot stands there)
	}
	alt, altOK, warns := number(&o.alt, "operator.alt_m", warns)
	switch {
	case !altOK:
	case alt == unknownHeightRID:
		altOK = false
	case alt < minHeightM || alt > MaxHeightM:
		warns = append(warns, FieldWarning{"operator.alt_m", outOfRange(alt, minHeightM, MaxHeightM, "m WGS84", "")})
		altOK = false
	}
	if o.typ.raw != nil {
		warns = append(warns, FieldWarning{"operator.type", quote(o.typ.raw) + " is not takeoff, live or fixed; dropped"})
	}
	box := &struct {
		op  Operator
		alt float64
	}{op: Operator{Lat: lat + 0, Lon: lon + 0, Type: o.typ.v}} // + 0: not -0
	if altOK {
		box.alt, box.op.AltM = alt+0, &box.alt
	}
	return &box.op, warns
}

// kindWord names a kind byte as a warning does.
func kindWord(k byte) string {
	switch k {
	case kindString:
		return "string"
	case kindBool:
		return "boolean"
	case kindNumber, kindOverflow:
		return "number"
	}
	return "array"
}

// parseUTC is time.Parse(time.RFC3339Nano, s).UTC() for the form every
// encoder of this record writes, 2006-01-02T15:04:05[.fraction]Z, with
// fields in range. ok is false for anything else, which time.Parse then
// decides.
func parseUTC(s string) (t time.Time, ok bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return t, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				ok = false
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	ok = true
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	nsec := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return t, false
		}
		nsec = num(20, len(frac)-1)
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	if !ok || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return t, false
	}
	// time.Date(...).UTC() without its normalisation: the fields are in
	// range. Days from 1970-01-01 by the proleptic Gregorian calendar, years
	// starting in March so that the leap day is last.
	y := year
	if month <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	doy := (153*((month+9)%12)+2)/5 + day - 1
	days := era*146097 + yoe*365 + yoe/4 - yoe/100 + doy - 719468
	unix := int64(days)*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(unix, int64(nsec)).UTC(), true
}

func daysIn(month, year int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return [...]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1]
}
