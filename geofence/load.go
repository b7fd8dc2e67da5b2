package geofence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Format is a zone file format.
type Format string

const (
	FormatGeoJSON Format = "geojson" // docs/design.md's GeoJSON FeatureCollection
	FormatED269   Format = "ed269"   // EUROCAE ED-269 JSON, any layout
	FormatED318   Format = "ed318"   // EUROCAE ED-318 GeoJSON
)

// Loader reads zone files. Its zero value is the safe default: unknown
// GeoJSON properties are warnings, and a limit whose vertical reference or
// unit, or a time whose UTC offset, is missing is refused.
type Loader struct {
	// Strict makes unknown GeoJSON properties errors (an API that takes
	// zones sets it; files default to warnings).
	Strict bool
	// Conservative loads a limit whose vertical reference or unit is
	// missing, and a time without a UTC offset, with the reading that
	// alarms more (see the package doc's table), each with a warning,
	// instead of refusing the file.
	Conservative bool
	// Now is the time the "every window has passed" warning is judged at;
	// zero means time.Now().
	Now time.Time
}

func (l Loader) now() time.Time {
	if l.Now.IsZero() {
		return time.Now()
	}
	return l.Now
}

// Detect tells the format of a zone file from its content:
//   - a JSON array, or an object with UASZoneList, uas_zones (or another
//     ED-269 wrapper), or whose features are not GeoJSON Features: ED-269;
//   - a FeatureCollection with ED-318 markers (metadata, properties.
//     identifier, geometry layer or extent): ED-318;
//   - any other FeatureCollection: GeoJSON.
func Detect(b []byte) (Format, error) {
	var root any
	if err := json.Unmarshal(skipBOM(b), &root); err != nil {
		return "", fileProblem("", jsonMsg(err))
	}
	return detectTree(root)
}

// skipBOM drops a UTF-8 byte order mark, which some editors write and
// encoding/json does not accept.
func skipBOM(b []byte) []byte { return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) }

func detectTree(root any) (Format, error) {
	if _, ok := root.([]any); ok {
		return FormatED269, nil
	}
	o, ok := asObj(root)
	if !ok {
		return "", fileProblem("", "a zone file is a JSON object or array")
	}
	for _, k := range []string{"UASZoneList", "uas_zones", "UASZones"} {
		if _, ok := o.get(k); ok {
			return FormatED269, nil
		}
	}
	fv, _ := o.get("features")
	features, _ := fv.([]any)
	t, _ := o.get("type")
	if t != "FeatureCollection" {
		if _, ok := o.get("identifier"); ok || features != nil {
			return FormatED269, nil
		}
		return "", fileProblem("type", "not a FeatureCollection, nor an ED-269 zone list")
	}
	if _, ok := o.get("metadata"); ok {
		return FormatED318, nil
	}
	for _, f := range features {
		fo, ok := asObj(f)
		if !ok {
			continue
		}
		if _, ok := fo.get("properties"); !ok {
			if _, ok := fo.get("identifier"); ok {
				return FormatED269, nil
			}
			continue
		}
		pv, _ := fo.get("properties")
		p, _ := asObj(pv)
		if _, ok := p.get("identifier"); ok {
			return FormatED318, nil
		}
		gv, _ := fo.get("geometry")
		if g, ok := asObj(gv); ok {
			if _, ok := g.get("layer"); ok {
				return FormatED318, nil
			}
			if _, ok := g.get("extent"); ok {
				return FormatED318, nil
			}
		}
		return FormatGeoJSON, nil
	}
	return FormatGeoJSON, nil
}

// Parse reads a zone file in any supported format, detected from its
// content, with the default Loader.
func Parse(r io.Reader) (*ZoneSet, Format, error) { return Loader{}.Parse(r) }

// Parse reads a zone file in any supported format, detected from its
// content. The set's Report lists what was loaded, dropped and warned of.
func (l Loader) Parse(r io.Reader) (*ZoneSet, Format, error) {
	b, root, err := decodeTree(r)
	if err != nil {
		return nil, "", err
	}
	f, err := detectTree(root)
	if err != nil {
		return nil, "", err
	}
	var set *ZoneSet
	ps := &problems{opt: l}
	switch f {
	case FormatGeoJSON:
		set, err = parseGeoJSON(b, ps)
	case FormatED269:
		set, err = parseED269Tree(root, ps)
	case FormatED318:
		set, err = parseED318Tree(root, ps)
	}
	if set != nil {
		set.Report.Format = f
	}
	return set, f, err
}

// LoadFile reads a zone file in any supported format with the default
// Loader.
func LoadFile(path string) (*ZoneSet, error) { return Loader{}.LoadFile(path) }

// LoadFile reads a zone file in any supported format. Problems and the
// report name the file by its path as given.
func (l Loader) LoadFile(path string) (*ZoneSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	set, _, err := l.Parse(bytes.NewReader(b))
	if err != nil {
		if ve, ok := err.(*ValidationError); ok {
			ve.setFile(path)
			return nil, ve
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	set.Report.File = path
	nameFile(set.Report.Warnings, path)
	return set, nil
}

// feat reports problems of one feature (index i, counted from 0).
type feat struct {
	ps *problems
	i  int
	id string
}

func (f *feat) add(field, msg string)  { f.ps.add(f.i, f.id, field, msg) }
func (f *feat) warn(field, msg string) { f.ps.warn(f.i, f.id, field, msg) }
func (f *feat) conservative() bool     { return f.ps.opt.Conservative }

// numString reads a JSON number written as a string ("0", " 120.5 ").
func numString(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	if t == "" || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		return 0, false
	}
	var v float64
	if json.Unmarshal([]byte(t), &v) != nil {
		return 0, false
	}
	return v, true
}

// treeNum reads a number of a decoded JSON tree; a number written as a
// string is read with a warning. ok is false (and a problem added) for
// anything else.
func treeNum(v any, field string, f *feat) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case string:
		if n, ok := numString(v); ok {
			f.warn(field, fmt.Sprintf("a number written as a string (%q), read as %v", v, n))
			return n, true
		}
	}
	f.add(field, fmt.Sprintf("must be a number, not %s", jsonKind(v)))
	return 0, false
}

// Widest UTC offsets in use: a local time without an offset denotes an
// instant between local-14h (UTC+14) and local+12h (UTC-12).
const (
	maxEastOffset = 14 * time.Hour
	maxWestOffset = 12 * time.Hour
)

const noOffsetMsg = "has no UTC offset (Z or ±hh:mm), so it could mean any of 26 hours"

// dateTime reads an RFC 3339 date-time. One without a UTC offset is
// refused, or with Loader.Conservative read as the earliest instant it
// could mean when it starts a period (end false) and the latest when it
// ends one, with a warning.
func dateTime(s string, end bool, field string, f *feat) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	local, err := time.Parse("2006-01-02T15:04:05.999999999", s)
	if err != nil {
		local, err = time.Parse("2006-01-02T15:04", s)
	}
	if err != nil {
		f.add(field, fmt.Sprintf("must be an RFC 3339 date-time, not %q", s))
		return time.Time{}, false
	}
	if !f.conservative() {
		f.add(field, fmt.Sprintf("%q %s; add the offset, or load conservatively to widen the period to every instant it could mean", s, noOffsetMsg))
		return time.Time{}, false
	}
	t := local.Add(-maxEastOffset)
	if end {
		t = local.Add(maxWestOffset)
	}
	f.warn(field, fmt.Sprintf("%q %s; read conservatively as %s", s, noOffsetMsg, t.Format(time.RFC3339)))
	return t, true
}

// unit scales, metres per unit.
var unitScales = map[string]float64{"M": 1, "FT": 0.3048, "FL": 30.48} // FL: hundreds of feet

// limitKeys names a format's vertical fields.
type limitKeys struct {
	format, uom, lower, lowerRef, upper, upperRef string
	units                                         string // for messages: "M, FT or FL"
}

// readLimits reads a floor and ceiling with their unit and references
// (ED-269's geometry element, ED-318's layer); path prefixes the fields.
// Both formats make the unit and the references mandatory: a missing one
// is refused, or with Loader.Conservative read as alarming most (see the
// package doc).
func readLimits(g obj, k limitKeys, path string, f *feat) (floor, ceil *Limit) {
	num := func(key string) (float64, bool) {
		v, ok := g.get(key)
		if !ok {
			return 0, false // missing or null: no limit
		}
		n, ok := treeNum(v, path+key, f)
		return n, ok
	}
	lo, hasLo := num(k.lower)
	hi, hasHi := num(k.upper)
	hasLimit := hasLo || hasHi

	scaleLo, scaleHi, unitOK := 1.0, 1.0, true
	us, hasUnit := treeString(g, k.uom, path+k.uom, f)
	switch {
	case hasUnit:
		s, ok := unitScales[upperASCII(us)]
		if !ok {
			f.add(path+k.uom, fmt.Sprintf("must be %s, not %q", k.units, us))
			unitOK = false
		}
		scaleLo, scaleHi = s, s
	case !hasLimit:
		f.warn(path+k.uom, fmt.Sprintf("missing, though %s makes it mandatory (no limit depends on it here)", k.format))
	case f.conservative():
		// The reading that alarms most: the lowest floor and the highest
		// ceiling the number could mean in any unit.
		scaleLo, scaleHi = extremeScale(lo, false), extremeScale(hi, true)
		f.warn(path+k.uom, fmt.Sprintf("missing (%s makes it mandatory); read conservatively: the floor as low and the ceiling as high as any of %s makes them", k.format, k.units))
	default:
		f.add(path+k.uom, fmt.Sprintf("required: %s makes it mandatory, and a limit without its unit could be %s (load conservatively to read the lowest floor and highest ceiling it could mean)", k.format, k.units))
		unitOK = false
	}
	ref := func(key string, has bool, limitKey string) (Ref, bool) {
		rs, ok := treeString(g, key, path+key, f)
		switch {
		case ok:
			if upperASCII(rs) == "STD" {
				// Pressure altitude (flight levels): compared as AMSL,
				// which it equals in the standard atmosphere.
				return AMSL, true
			}
			r, good := ParseRef(rs)
			if !good {
				f.add(path+key, fmt.Sprintf("must be AGL, AMSL, WGS84 or STD, not %q", rs))
			}
			return r, good
		case !has:
			f.warn(path+key, fmt.Sprintf("missing, though %s makes it mandatory (no %s%s depends on it here)", k.format, path, limitKey))
			return AMSL, true
		case f.conservative():
			f.warn(path+key, fmt.Sprintf("missing (%s makes it mandatory); read conservatively: %s%s counts as met when it is met in any reference the position has a height in, or the position lacks one", k.format, path, limitKey))
			return RefUnknown, true
		}
		f.add(path+key, fmt.Sprintf("required with %s%s: %s makes it mandatory, and a limit without its reference cannot be placed (0–120 m AGL read as AMSL misses a drone over high ground); load conservatively to count it met in any reference", path, limitKey, k.format))
		return 0, false
	}
	rLo, okLo := ref(k.lowerRef, hasLo, k.lower)
	rHi, okHi := ref(k.upperRef, hasHi, k.upper)
	if hasLo && unitOK && okLo {
		floor = &Limit{M: lo * scaleLo, Ref: rLo}
	}
	if hasHi && unitOK && okHi {
		ceil = &Limit{M: hi * scaleHi, Ref: rHi}
	}
	return floor, ceil
}

// extremeScale is the unit that makes v lowest (a floor) or highest (a
// ceiling).
func extremeScale(v float64, highest bool) float64 {
	lo, hi := unitScales["FT"], unitScales["FL"]
	if v < 0 {
		lo, hi = hi, lo
	}
	if highest {
		return hi
	}
	return lo
}

// treeString reads a string member; missing, null and "" are absent, any
// other type is a problem.
func treeString(g obj, key, field string, f *feat) (string, bool) {
	v, ok := g.get(key)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		f.add(field, fmt.Sprintf("must be a string, not %s", jsonKind(v)))
		return "", false
	}
	if strings.TrimSpace(s) == "" {
		return "", false
	}
	return s, true
}

// checkPast warns of a zone whose activity lies wholly in the past. Such a
// zone is kept: a replay evaluates each record at its own time, so a zone
// dropped for being past would lose the alarms of past telemetry.
func checkPast(z *Zone, field string, f *feat) {
	now := f.ps.opt.now()
	var last time.Time
	switch {
	case !z.ActiveUntil.IsZero() && !now.Before(z.ActiveUntil):
		last = z.ActiveUntil
	case len(z.Windows) > 0:
		for _, w := range z.Windows {
			if w.Until.IsZero() || now.Before(w.Until) {
				return
			}
			if w.Until.After(last) {
				last = w.Until
			}
		}
	default:
		return
	}
	f.warn(field, fmt.Sprintf("every active window of the zone has passed (the last ended %s): it raises no alarm for live telemetry; kept for replays of past telemetry", last.UTC().Format(time.RFC3339)))
}

// finish sets fingerprints, the version and the report.
func finish(set *ZoneSet, version json.RawMessage, ps *problems) {
	for _, z := range set.Zones {
		z.Fingerprint = z.ComputeFingerprint()
	}
	var v any
	if len(version) > 0 && json.Unmarshal(version, &v) == nil {
		switch v := v.(type) {
		case string:
			set.Version = v
		case float64:
			set.Version = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	if set.Version == "" {
		set.Version = contentVersion(set.Zones)
	}
	if len(set.Zones) == 0 {
		msg := "no zone loaded: this set raises no alarm"
		if n := len(ps.dropped); n > 0 {
			msg += fmt.Sprintf(" (%d dropped as NO_RESTRICTION)", n)
		}
		ps.warn(-1, "", "", msg)
	}
	set.Report = LoadReport{Zones: len(set.Zones), Dropped: ps.dropped, Warnings: ps.warnings, Truncated: ps.truncated}
}
