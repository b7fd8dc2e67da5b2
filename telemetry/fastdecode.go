package telemetry

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The hand-written decoder. Every record the alerter, ingest and replay read
// passes through it, so it reads the record object's fields straight from
// the bytes: no reflection, no intermediate values, and one allocation a
// record (the drone id, sharing it with the kept optional numbers).
//
// Its contract is encoding/json's reading of wire followed by the same
// validation (decodeJSON, the reference): the same records accepted, with
// the same values and warnings, and the same *FieldError for every refused
// one. That includes what encoding/json does without saying so: keys
// matched without regard to case (Unicode simple folding, so "ſeq" is seq),
// the last of duplicate keys winning, null as absence, the first type error
// in document order reported (after the whole input's syntax is checked),
// escapes and invalid UTF-8 in strings read as it reads them, nesting
// limited to 10000, whitespace and trailing data. For input that is not
// JSON at all the scanner only says so (errSyntax); DecodeWarn then asks
// encoding/json for its message, so even that text is the same. That path
// is cold: a feed sends malformed JSON by mistake, not at rate.
// FuzzDecodeMatchesJSON checks all of this against decodeJSON.

// errSyntax is decodeFast's verdict that data is not JSON.
var errSyntax = &FieldError{Err: "malformed JSON"}

// maxDepth is encoding/json's nesting limit (its scanner's maxNestingDepth).
const maxDepth = 10000

// decodeFast is DecodeWarn without encoding/json, except that for input
// that is not JSON it returns errSyntax.
func decodeFast(data []byte, warns []FieldWarning) (Position, []FieldWarning, error) {
	var r record
	s := scanner{data: data}
	te, ok := s.record(&r)
	if !ok {
		return Position{}, warns, errSyntax
	}
	if te != nil {
		return Position{}, warns, te
	}
	var p Position
	warns, err := r.position(&p, warns)
	return p, warns, err
}

// Fields of the record object, in fieldNames' order.
const (
	fUnknown = iota
	fDroneID
	fSeq
	fTS
	fLat
	fLon
	fAltM
	fAltRef
	fAGLM
	fSpeed
	fHeading
	fHAcc
	fVAcc
	fDropped
	fOperator
)

var fieldNames = [...]string{"", "drone_id", "seq", "ts", "lat", "lon", "alt_m", "alt_ref", "agl_m",
	"speed_mps", "heading_deg", "h_accuracy_m", "v_accuracy_m", "dropped", "operator"}

// Members of the operator object, in opNames' order.
const (
	oUnknown = iota
	oLat
	oLon
	oAltM
	oType
)

var opNames = [...]string{"", "lat", "lon", "alt_m", "type"}

type scanner struct {
	data []byte
	i    int
}

// record reads one JSON value into r. ok is false when data is not JSON;
// otherwise te is the first type error, as encoding/json reports it.
func (s *scanner) record(r *record) (te *FieldError, ok bool) {
	s.space()
	if s.i >= len(s.data) {
		return nil, false
	}
	switch s.data[s.i] {
	case '{':
		ok = s.object(r, &te)
	case 'n': // null into a struct: no error, nothing set
		ok = s.literal("null")
	default:
		var kind string
		kind, ok = s.skip(0)
		te = typeError("", "a JSON object", kind)
	}
	if !ok {
		return nil, false
	}
	s.space()
	return te, s.i == len(s.data)
}

func (s *scanner) space() {
	if s.i < len(s.data) && s.data[s.i] > ' ' {
		return // the usual case: records are written without spaces
	}
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object reads the record object, s.i on its '{'.
func (s *scanner) object(r *record, te **FieldError) bool {
	d := s.data
	s.i++
	s.space()
	if s.i < len(d) && d[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(d) || d[s.i] != '"' {
			return false
		}
		key, plain, ok := s.str()
		if !ok {
			return false
		}
		f := fieldOf(key, plain)
		s.space()
		if s.i >= len(d) || d[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !s.field(r, f, te) {
			return false
		}
		s.space()
		if s.i >= len(d) {
			return false
		}
		switch d[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// field reads the value of field f into r, as encoding/json reads it into
// wire: required fields through pointers (null clears, a wrong type is a
// type error), optional ones through optNum and optRef.
func (s *scanner) field(r *record, f int, te **FieldError) bool {
	d := s.data
	if s.i >= len(d) {
		return false
	}
	c := d[s.i]
	switch f {
	case fUnknown:
		_, ok := s.skip(1)
		return ok
	case fDroneID, fTS:
		bit := uint8(hasDroneID)
		if f == fTS {
			bit = hasTS
		}
		switch c {
		case '"':
			raw, plain, ok := s.str()
			if !ok {
				return false
			}
			v, owned := view(raw), false
			if !plain {
				v, owned = string(unquote(raw)), true
			}
			if f == fDroneID {
				r.droneID, r.owned = v, owned
			} else {
				r.ts = v
			}
			r.set |= bit
			return true
		case 'n':
			r.set &^= bit
			return s.literal("null")
		}
		return s.wrongType(f, "a string", te)
	case fSeq:
		switch {
		case c == 'n':
			r.set &^= hasSeq
			return s.literal("null")
		case c == '-' || c >= '0' && c <= '9':
			lit, ok := s.number()
			if !ok {
				return false
			}
			n, ok := parseInt(lit)
			if !ok {
				setTypeError(te, "seq", "an integer", "number "+string(lit))
				return true
			}
			r.seq = n
			r.set |= hasSeq
			return true
		}
		return s.wrongType(f, "an integer", te)
	case fLat, fLon:
		bit, dst := uint8(hasLat), &r.lat
		if f == fLon {
			bit, dst = hasLon, &r.lon
		}
		switch {
		case c == 'n':
			r.set &^= bit
			return s.literal("null")
		case c == '-' || c >= '0' && c <= '9':
			lit, v, inRange, ok := s.float()
			if !ok {
				return false
			}
			if !inRange {
				setTypeError(te, fieldNames[f], "a number", "number "+string(lit))
				return true
			}
			*dst = v
			r.set |= bit
			return true
		}
		return s.wrongType(f, "a number", te)
	case fAltRef:
		return s.ref(&r.altRef)
	case fOperator:
		return s.operator(&r.op)
	case fDropped:
		// A string is kept for validation; anything else is no list
		// (encoding/json's optDropped reads it so too).
		r.dropped, r.hasDropped = "", false
		switch c {
		case '"':
			raw, plain, ok := s.str()
			if !ok {
				return false
			}
			if plain {
				r.dropped = view(raw)
			} else {
				r.dropped = string(unquote(raw))
			}
			r.hasDropped = true
			return true
		}
		_, ok := s.skip(1)
		return ok
	}
	var o *optNum
	switch f {
	case fAltM:
		o = &r.altM
	case fAGLM:
		o = &r.aglM
	case fSpeed:
		o = &r.speed
	case fHeading:
		o = &r.heading
	case fHAcc:
		o = &r.hAcc
	default:
		o = &r.vAcc
	}
	return s.num(o)
}

// wrongType skips a value of the wrong JSON type for field f, noting the
// type error if it is the first.
func (s *scanner) wrongType(f int, want string, te **FieldError) bool {
	kind, ok := s.skip(1)
	if ok {
		setTypeError(te, fieldNames[f], want, kind)
	}
	return ok
}

func setTypeError(te **FieldError, field, want, got string) {
	if *te == nil {
		*te = typeError(field, want, got)
	}
}

// typeError is jsonError's text for a *json.UnmarshalTypeError.
func typeError(field, want, got string) *FieldError {
	return &FieldError{Field: field, Err: fmt.Sprintf("must be %s, got JSON %s", want, got)}
}

// operator reads the operator as optOperator.UnmarshalJSON does, s.i on
// its value. Its object is at depth 2 (inside the record's).
func (s *scanner) operator(o *opRecord) bool {
	*o = opRecord{}
	d := s.data
	switch c := d[s.i]; c {
	case 'n':
		return s.literal("null")
	case '{':
	default:
		o.kind = jsonKind(c)
		_, ok := s.skip(1)
		return ok
	}
	o.kind = kindObject
	s.i++
	s.space()
	if s.i < len(d) && d[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(d) || d[s.i] != '"' {
			return false
		}
		key, plain, ok := s.str()
		if !ok {
			return false
		}
		m := opMemberOf(key, plain)
		s.space()
		if s.i >= len(d) || d[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if s.i >= len(d) {
			return false
		}
		switch m {
		case oLat:
			ok = s.numAt(&o.lat, 2)
		case oLon:
			ok = s.numAt(&o.lon, 2)
		case oAltM:
			ok = s.numAt(&o.alt, 2)
		case oType:
			ok = s.opType(&o.typ)
		default:
			_, ok = s.skip(2)
		}
		if !ok {
			return false
		}
		s.space()
		if s.i >= len(d) {
			return false
		}
		switch d[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// opType reads the operator's type as optOpType.UnmarshalJSON does.
func (s *scanner) opType(o *opType) bool {
	*o = opType{}
	start := s.i
	switch s.data[s.i] {
	case 'n':
		return s.literal("null")
	case '"':
		raw, plain, ok := s.str()
		if !ok {
			return false
		}
		if plain {
			o.v = operatorType(view(raw))
		} else {
			o.v = operatorType(string(unquote(raw)))
		}
	default:
		if _, ok := s.skip(2); !ok {
			return false
		}
	}
	if o.v == "" {
		o.raw = s.data[start:s.i]
	}
	return true
}

// num reads an optional number as optNum.UnmarshalJSON does.
func (s *scanner) num(o *optNum) bool { return s.numAt(o, 1) }

// numAt is num for a value inside depth levels of nesting.
func (s *scanner) numAt(o *optNum, depth int) bool {
	*o = optNum{}
	switch c := s.data[s.i]; {
	case c == '-' || c >= '0' && c <= '9':
		_, f, inRange, ok := s.float()
		if !ok {
			return false
		}
		if !inRange || !finite(f) {
			o.kind = kindOverflow
		} else {
			o.v, o.kind = f, kindNumber
		}
		return true
	case c == 'n':
		return s.literal("null")
	case c == '"':
		o.kind = kindString
	case c == 't' || c == 'f':
		o.kind = kindBool
	default:
		o.kind = c // '{' or '[' when it is a value at all
	}
	_, ok := s.skip(depth)
	return ok
}

// ref reads alt_ref as optRef.UnmarshalJSON does, raw pointing into the
// input as it does there.
func (s *scanner) ref(o *optRef) bool {
	*o = optRef{}
	start := s.i
	switch s.data[s.i] {
	case 'n':
		return s.literal("null")
	case '"':
		raw, _, ok := s.str()
		if !ok {
			return false
		}
		v := view(raw)
		if bytes.IndexByte(raw, '\\') >= 0 {
			v = string(unquote(raw))
		}
		switch {
		case strings.EqualFold(v, RefAMSL), strings.EqualFold(v, "MSL"):
			o.ref = RefAMSL
		case strings.EqualFold(v, RefWGS84):
			o.ref = RefWGS84
		case strings.EqualFold(v, RefAGL):
			o.ref = RefAGL
		}
	default:
		if _, ok := s.skip(1); !ok {
			return false
		}
	}
	if o.ref == "" {
		o.raw = s.data[start:s.i]
	}
	return true
}

// skip checks and passes over one value inside depth levels of nesting,
// returning its JSON type as encoding/json names it in a type error.
func (s *scanner) skip(depth int) (string, bool) {
	d := s.data
	if s.i >= len(d) {
		return "", false
	}
	switch c := d[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return "string", ok
	case c == '{':
		return "object", s.skipObject(depth + 1)
	case c == '[':
		return "array", s.skipArray(depth + 1)
	case c == 't':
		return "bool", s.literal("true")
	case c == 'f':
		return "bool", s.literal("false")
	case c == 'n':
		return "null", s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, ok := s.number()
		return "number", ok
	}
	return "", false
}

func (s *scanner) skipObject(depth int) bool {
	if depth > maxDepth {
		return false
	}
	d := s.data
	s.i++
	s.space()
	if s.i < len(d) && d[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(d) || d[s.i] != '"' {
			return false
		}
		if _, _, ok := s.str(); !ok {
			return false
		}
		s.space()
		if s.i >= len(d) || d[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if _, ok := s.skip(depth); !ok {
			return false
		}
		s.space()
		if s.i >= len(d) {
			return false
		}
		switch d[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) skipArray(depth int) bool {
	if depth > maxDepth {
		return false
	}
	d := s.data
	s.i++
	s.space()
	if s.i < len(d) && d[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if _, ok := s.skip(depth); !ok {
			return false
		}
		s.space()
		if s.i >= len(d) {
			return false
		}
		switch d[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// literal passes over true, false or null.
func (s *scanner) literal(word string) bool {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// number passes over a JSON number and returns its text.
func (s *scanner) number() ([]byte, bool) {
	lit, _, _, _, ok := s.scanNumber()
	return lit, ok
}

// scanNumber passes over a JSON number. When its value is m×10^exp with m
// below 2^52 and -22 <= exp <= 0 (a decimal without an exponent part and
// at most 19 digits), simple says so and m, exp hold it.
func (s *scanner) scanNumber() (lit []byte, m uint64, exp int, simple bool, ok bool) {
	d, i := s.data, s.i
	if d[i] == '-' {
		i++
	}
	nd := 0 // digits in m
	simple = true
	digit := func(c byte) {
		if nd < 19 {
			m = m*10 + uint64(c-'0')
			nd++
		} else {
			simple = false
		}
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			digit(d[i])
			i++
		}
	default:
		return nil, 0, 0, false, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		start := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			digit(d[i])
			exp--
			i++
		}
		if i == start {
			return nil, 0, 0, false, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		simple = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		start := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == start {
			return nil, 0, 0, false, false
		}
	}
	lit = d[s.i:i]
	s.i = i
	return lit, m, exp, simple && m < 1<<52 && exp >= -22, true
}

// exactPow10 are the powers of ten a float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// float passes over a number and returns its value as
// strconv.ParseFloat(lit, 64) does; inRange is false where ParseFloat fails
// (beyond float64). A simple decimal is m / 10^k with both exact, one
// correctly rounded division: what ParseFloat's own exact path computes.
func (s *scanner) float() (lit []byte, f float64, inRange, ok bool) {
	lit, m, exp, simple, ok := s.scanNumber()
	if !ok {
		return nil, 0, false, false
	}
	if simple {
		f = float64(m)
		if lit[0] == '-' {
			f = -f
		}
		return lit, f / exactPow10[-exp], true, true
	}
	f, err := strconv.ParseFloat(view(lit), 64)
	return lit, f, err == nil, true
}

// parseInt is strconv.ParseInt(lit, 10, 64) of a JSON number.
func parseInt(lit []byte) (int64, bool) {
	digits := lit
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 18 {
		n, err := strconv.ParseInt(view(lit), 10, 64)
		return n, err == nil
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false // a fraction or an exponent
		}
		n = n*10 + int64(c-'0')
	}
	if lit[0] == '-' {
		n = -n
	}
	return n, true
}

// str passes over a string, s.i on its opening quote, and returns what lies
// between the quotes. plain means no escape and no byte outside ASCII: the
// bytes are the value.
func (s *scanner) str() (raw []byte, plain, ok bool) {
	d := s.data
	start := s.i + 1
	plain = true
	for i := start; i < len(d); {
		for i < len(d) && plainByte[d[i]] {
			i++
		}
		if i == len(d) {
			break
		}
		switch c := d[i]; {
		case c == '"':
			s.i = i + 1
			return d[start:i], plain, true
		case c == '\\':
			plain = false
			if i+1 >= len(d) {
				return nil, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(d)-i < 6 || hex4(d[i+2:i+6]) < 0 {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < ' ':
			return nil, false, false
		case c >= utf8.RuneSelf:
			plain = false
			i++
		default:
			i++
		}
	}
	return nil, false, false
}

// plainByte is true for the bytes that stand for themselves in a string.
var plainByte = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// hex4 is the value of four hex digits, or -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquote decodes the contents of a string that str passed, as
// encoding/json's unquoteBytes does: invalid UTF-8 and lone surrogates
// become U+FFFD.
func unquote(raw []byte) []byte {
	b := make([]byte, 0, len(raw)+utf8.UTFMax)
	for r := 0; r < len(raw); {
		switch c := raw[r]; {
		case c == '\\':
			switch e := raw[r+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(raw[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if len(raw)-r >= 6 && raw[r] == '\\' && raw[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(raw[r+2:])); dec != unicode.ReplacementChar {
							b = utf8.AppendRune(b, dec)
							r += 6
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(raw[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return b
}

// fieldOf is the field a key names. encoding/json matches keys exactly, then
// without regard to case; no two of the record's names fold alike, so one
// folded comparison is the same.
func fieldOf(key []byte, plain bool) int {
	if !plain {
		return fieldOfFolded(unquote(key), fieldNames[:])
	}
	switch view(key) {
	case "drone_id":
		return fDroneID
	case "seq":
		return fSeq
	case "ts":
		return fTS
	case "lat":
		return fLat
	case "lon":
		return fLon
	case "alt_m":
		return fAltM
	case "alt_ref":
		return fAltRef
	case "agl_m":
		return fAGLM
	case "speed_mps":
		return fSpeed
	case "heading_deg":
		return fHeading
	case "h_accuracy_m":
		return fHAcc
	case "v_accuracy_m":
		return fVAcc
	case "dropped":
		return fDropped
	case "operator":
		return fOperator
	}
	return foldedASCII(key, fieldNames[:])
}

// opMemberOf is the operator member a key names, as fieldOf.
func opMemberOf(key []byte, plain bool) int {
	if !plain {
		return fieldOfFolded(unquote(key), opNames[:])
	}
	switch view(key) {
	case "lat":
		return oLat
	case "lon":
		return oLon
	case "alt_m":
		return oAltM
	case "type":
		return oType
	}
	return foldedASCII(key, opNames[:])
}

// foldedASCII is the index in names (0 for none) of an ASCII key matched
// without regard to case.
func foldedASCII(key []byte, names []string) int {
	for f := 1; f < len(names); f++ {
		name := names[f]
		if len(key) != len(name) {
			continue
		}
		i := 0
		for ; i < len(key); i++ {
			c := key[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != name[i] {
				break
			}
		}
		if i == len(key) {
			return f
		}
	}
	return 0
}

// fieldOfFolded matches a key with escapes or non-ASCII bytes, folded as
// encoding/json folds it (its appendFoldedName): each rune to the smallest
// of its simple-fold orbit, so U+017F (ſ) is S and U+212A (Kelvin) is K.
func fieldOfFolded(key []byte, names []string) int {
	var arr [32]byte
	folded := arr[:0]
	for i := 0; i < len(key); {
		if c := key[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			folded = append(folded, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(key[i:])
		folded = utf8.AppendRune(folded, foldRune(r))
		i += n
	}
	for f := 1; f < len(names); f++ {
		if strings.EqualFold(string(folded), names[f]) && isASCII(folded) {
			return f
		}
	}
	return 0
}

// foldRune is encoding/json's: the smallest rune of r's fold orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// view is b as a string without a copy. Only for values that do not
// outlive the call: strconv, time.Parse and strings.EqualFold copy what
// they keep (their errors clone the input), and record.position copies the
// drone id.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
