package geofence

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a zone document may
// have. The formats need about ten levels (an ED-318 MultiPolygon in a
// GeometryCollection in a feature of a collection is eight); 64 leaves room
// for extensions, and keeps out documents deep enough to break the JSON
// parsers of the clients that read the stored set back (most stop between
// 100 and 1000 levels).
const MaxDepth = 64

// MaxIDLen is the longest zone id, in characters.
const MaxIDLen = 256

// CheckText refuses a zone document that is not valid UTF-8 (encoding/json
// would read each bad byte as U+FFFD, but the document is stored and
// served as sent) or that nests arrays and objects deeper than MaxDepth.
// The *ValidationError names the field, as a JSON path, and the byte
// offset of the first such place. Every parser checks it first.
func CheckText(b []byte) error {
	bad := invalidUTF8At(b)
	deep := deeperAt(b, MaxDepth, bad)
	switch {
	case deep >= 0:
		return fileProblem(pathAt(b, deep), fmt.Sprintf("nested deeper than %d arrays and objects at byte %d", MaxDepth, deep))
	case bad >= 0:
		return fileProblem(pathAt(b, bad), fmt.Sprintf("invalid UTF-8 at byte %d (JSON text is UTF-8)", bad))
	}
	return nil
}

// invalidUTF8At is the offset of b's first byte that is not valid UTF-8,
// or -1.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// deeperAt is the offset of the first '[' or '{' (outside strings) that
// opens level max+1, before offset stop (-1: to the end), or -1.
func deeperAt(b []byte, max, stop int) int {
	if stop < 0 {
		stop = len(b)
	}
	depth, inStr, esc := 0, false, false
	for i := 0; i < stop; i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > max {
				return i
			}
		case '}', ']':
			depth--
		}
	}
	return -1
}

// pathAt is the JSON path (features[3].properties.name) of the value the
// byte at off belongs to, as far as the text before it is well formed; a
// key holding it is named with " (a key)".
func pathAt(b []byte, off int) string {
	type frame struct {
		arr     bool
		idx     int
		key     string
		wantKey bool
	}
	var st []frame
	render := func() string {
		var s strings.Builder
		for _, f := range st {
			switch {
			case f.arr:
				s.WriteString("[" + strconv.Itoa(f.idx) + "]")
			case f.key != "" && !f.wantKey:
				if s.Len() > 0 {
					s.WriteByte('.')
				}
				s.WriteString(keyPath(f.key))
			}
		}
		return s.String()
	}
	for i := 0; i < off && i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			isKey := len(st) > 0 && !st[len(st)-1].arr && st[len(st)-1].wantKey
			var s string
			if j >= len(b) || json.Unmarshal(b[i:j+1], &s) != nil {
				s = strings.ToValidUTF8(string(b[i+1:min(j, len(b))]), "\uFFFD")
			}
			if off <= j && isKey {
				f := &st[len(st)-1]
				f.key, f.wantKey = s, false
				return render() + " (a key)"
			}
			if isKey {
				st[len(st)-1].key = s
			}
			i = j
		case '{':
			st = append(st, frame{wantKey: true})
		case '[':
			st = append(st, frame{arr: true})
		case '}', ']':
			if len(st) > 0 {
				st = st[:len(st)-1]
			}
		case ',':
			if len(st) > 0 {
				if f := &st[len(st)-1]; f.arr {
					f.idx++
				} else {
					f.wantKey = true
				}
			}
		case ':':
			if len(st) > 0 {
				st[len(st)-1].wantKey = false
			}
		}
	}
	return render()
}

// keyPath writes a key as a path element: bare when it is a plain name,
// else quoted (and cut).
func keyPath(k string) string {
	plain := k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) < 0
	if plain && len(k) <= 64 {
		return k
	}
	if utf8.RuneCountInString(k) > 64 {
		k = string([]rune(k)[:64]) + "…"
	}
	return strconv.Quote(k)
}

// clipID is id as a problem names it: at most MaxIDLen characters (an id
// too long is itself a problem, and is not echoed whole).
func clipID(id string) string {
	if len(id) <= MaxIDLen {
		return id
	}
	if r := []rune(strings.ToValidUTF8(id, "\uFFFD")); len(r) > MaxIDLen {
		return string(r[:MaxIDLen]) + "…"
	}
	return id
}

// CheckID says why id cannot be a zone id, or "": 1 to MaxIDLen
// characters of UTF-8, none a control character (C0 or DEL).
func CheckID(id string) string {
	switch {
	case id == "":
		return "required"
	case !utf8.ValidString(id):
		return "not UTF-8"
	case utf8.RuneCountInString(id) > MaxIDLen:
		return fmt.Sprintf("longer than %d characters", MaxIDLen)
	case strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "holds a control character"
	}
	return ""
}
