package geofence

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/paulmach/orb"
)

// Ref is the vertical reference of a height or of a zone limit.
type Ref uint8

const (
	// AMSL is height above mean sea level, the default reference.
	AMSL Ref = iota
	// AGL is height above ground level.
	AGL
	// WGS84 is height above the WGS84 ellipsoid.
	WGS84
	// RefUnknown marks a limit whose file gave no reference, loaded with
	// the conservative reading (Loader.Conservative): the limit counts as
	// met when it is met in any reference the position has a height in, or
	// the position lacks a height in some reference (the one meant might
	// be that one). Parsers never produce it otherwise.
	RefUnknown
)

// String returns the reference's name as written in zone files.
func (r Ref) String() string {
	switch r {
	case AMSL:
		return "AMSL"
	case AGL:
		return "AGL"
	case WGS84:
		return "WGS84"
	case RefUnknown:
		return "UNKNOWN"
	}
	return "Ref(" + strconv.Itoa(int(r)) + ")"
}

// ParseRef parses "AMSL", "AGL" or "WGS84" (case-insensitive; "MSL" and
// "ALT" are read as AMSL, "SFC" as AGL, "ELLIPSOID", "HAE" and "W84" (ASTM
// F3548's and InterUSS's name) as WGS84).
func ParseRef(s string) (Ref, bool) {
	switch upperASCII(s) {
	case "AMSL", "MSL", "ALT":
		return AMSL, true
	case "AGL", "SFC":
		return AGL, true
	case "WGS84", "W84", "ELLIPSOID", "HAE":
		return WGS84, true
	}
	return 0, false
}

// MarshalText writes the reference's name.
func (r Ref) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Heights are the heights of a position in each reference it is known in.
// A height whose Has flag is false is unknown.
type Heights struct {
	AMSL, WGS84, AGL          float64
	HasAMSL, HasWGS84, HasAGL bool
}

// Get returns the height in reference r and whether it is known.
func (h Heights) Get(r Ref) (float64, bool) {
	switch r {
	case AMSL:
		return h.AMSL, h.HasAMSL
	case AGL:
		return h.AGL, h.HasAGL
	case WGS84:
		return h.WGS84, h.HasWGS84
	}
	return 0, false
}

// Set returns h with the height in reference r set to v.
func (h Heights) Set(r Ref, v float64) Heights {
	switch r {
	case AMSL:
		h.AMSL, h.HasAMSL = v, true
	case AGL:
		h.AGL, h.HasAGL = v, true
	case WGS84:
		h.WGS84, h.HasWGS84 = v, true
	}
	return h
}

// limitMet reports whether heights h are at or above a floor (isFloor) or
// at or below a ceiling of m metres in reference ref, widened by buf, and
// whether that had to be assumed because a height was unknown (the
// vertical test of the package doc).
func limitMet(ref Ref, m float64, h *Heights, isFloor bool, buf float64) (ok, assumed bool) {
	in := func(v float64) bool {
		if isFloor {
			return v >= m-buf
		}
		return v <= m+buf
	}
	if ref != RefUnknown {
		v, known := h.Get(ref)
		if !known {
			return true, true
		}
		return in(v), false
	}
	// No reference given: met if it is met in any reference it might be in.
	for _, r := range [...]Ref{AMSL, WGS84, AGL} {
		if v, known := h.Get(r); !known || in(v) {
			return true, true
		}
	}
	return false, false
}

// Point is one position of a drone: WGS84 degrees, the time of the fix and
// its heights.
type Point struct {
	Lat, Lon float64
	Time     time.Time
	Heights  Heights
}

// Category tells how serious entering a zone is.
type Category string

const (
	// Restricted: flying here is prohibited (ED-269/ED-318 PROHIBITED).
	Restricted Category = "restricted"
	// Warning: flying here needs an authorisation or is subject to
	// conditions (ED-269 REQ_AUTHORISATION and CONDITIONAL, ED-318
	// REQ_AUTHORIZATION and CONDITIONAL); the original value is kept in
	// Zone.Restriction.
	Warning Category = "warning"
)

// Limit is a vertical limit of a zone: a height in metres in a reference.
// Limits are inclusive.
type Limit struct {
	M   float64 `json:"m"`
	Ref Ref     `json:"ref"`
}

// Circle is a horizontal area bounded by a great circle distance from a
// centre.
type Circle struct {
	Center  orb.Point `json:"center"` // lon, lat
	RadiusM float64   `json:"radius_m"`
}

// Volume is one airspace volume of a zone: a horizontal area (Area, or
// Circle when Area is empty) between an optional floor and ceiling.
// GeoJSON zones have one volume; ED-269 and ED-318 zones have one per
// geometry element or layer.
type Volume struct {
	Area    orb.MultiPolygon `json:"area,omitempty"`
	Circle  *Circle          `json:"circle,omitempty"`
	Floor   *Limit           `json:"floor,omitempty"`
	Ceiling *Limit           `json:"ceiling,omitempty"`
}

// WeeklyInterval is a half-open interval [Start, End) of seconds since
// Monday 00:00 UTC, 0 <= Start < End <= 604800.
type WeeklyInterval struct {
	Start, End int32
}

// Window is one applicability period of a zone: the zone is active from
// From (inclusive, zero = unbounded) until Until (exclusive, zero =
// unbounded) and, when Weekly is not empty, only during one of the weekly
// intervals.
type Window struct {
	From   time.Time        `json:"from,omitzero"`
	Until  time.Time        `json:"until,omitzero"`
	Weekly []WeeklyInterval `json:"weekly,omitempty"`
}

const week = 7 * 24 * 3600

// weekSecond returns the second of the week (Monday 00:00 UTC = 0) of t.
func weekSecond(t time.Time) int32 {
	// 1970-01-01 was a Thursday: shift so that Monday is 0.
	s := (t.Unix() + 3*86400) % week
	if s < 0 {
		s += week
	}
	return int32(s)
}

// Active reports whether t is within the window.
func (w *Window) Active(t time.Time) bool {
	if !w.From.IsZero() && t.Before(w.From) {
		return false
	}
	if !w.Until.IsZero() && !t.Before(w.Until) {
		return false
	}
	if len(w.Weekly) == 0 {
		return true
	}
	s := weekSecond(t)
	for _, iv := range w.Weekly {
		if s >= iv.Start && s < iv.End {
			return true
		}
	}
	return false
}

// Zone is a no-fly zone.
type Zone struct {
	ID       string
	Name     string
	Category Category
	// Restriction is the ED-269/ED-318 restriction the category came from
	// (PROHIBITED, REQ_AUTHORISATION, ...); empty for GeoJSON zones.
	Restriction string
	// Authority names the zone authority (ED-269/ED-318), if any.
	Authority string
	Volumes   []Volume
	// ActiveFrom and ActiveUntil bound the zone's activity: active iff
	// ActiveFrom <= t < ActiveUntil; a zero value is unbounded.
	ActiveFrom, ActiveUntil time.Time
	// Windows are the ED-269/ED-318 applicability periods: when not empty,
	// the zone is active only within one of them (and within
	// ActiveFrom/ActiveUntil).
	Windows []Window
	// ClearBufferM is the hysteresis distance in metres (see package doc).
	ClearBufferM float64
	// ApproachBefore is how long before a predicted entry (Index.Approaches)
	// the alerter warns of this zone, at most an hour; 0 is unset: the
	// alerter's default for the zone's category applies. GeoJSON's
	// approach_before_s; ED-269 and ED-318 have no such field.
	//
	// It is left out of the fingerprint on purpose: it says when to warn,
	// not where the zone is, so changing it must not clear and re-raise the
	// zone's alarms as a changed zone does.
	ApproachBefore time.Duration
	// Fingerprint is a stable hash of the zone's canonical definition
	// (every field above but ApproachBefore): equal fingerprints mean equal
	// zones. It is set by the parsers and by NewIndex.
	Fingerprint string
}

// MaxApproachBefore bounds Zone.ApproachBefore: a warning more than an
// hour ahead predicts nothing, a straight path being assumed.
const MaxApproachBefore = time.Hour

// Active reports whether the zone is active at t.
func (z *Zone) Active(t time.Time) bool {
	if !z.ActiveFrom.IsZero() && t.Before(z.ActiveFrom) {
		return false
	}
	if !z.ActiveUntil.IsZero() && !t.Before(z.ActiveUntil) {
		return false
	}
	if len(z.Windows) == 0 {
		return true
	}
	for i := range z.Windows {
		if z.Windows[i].Active(t) {
			return true
		}
	}
	return false
}

// fpBuf is the canonical binary form of a zone that the fingerprint
// hashes: fields in a fixed order, strings and lists length-prefixed,
// floats as IEEE-754 bits (with -0 as 0), times as UTC Unix nanoseconds.
type fpBuf []byte

func (b *fpBuf) u64(v uint64) { *b = binary.LittleEndian.AppendUint64(*b, v) }
func (b *fpBuf) f(v float64) {
	if v == 0 {
		v = 0 // -0 and 0 are the same value
	}
	b.u64(math.Float64bits(v))
}
func (b *fpBuf) s(v string) { b.u64(uint64(len(v))); *b = append(*b, v...) }
func (b *fpBuf) t(v time.Time) {
	if v.IsZero() {
		*b = append(*b, 0)
		return
	}
	*b = append(*b, 1)
	b.u64(uint64(v.Unix()))
	b.u64(uint64(v.Nanosecond()))
}
func (b *fpBuf) limit(l *Limit) {
	if l == nil {
		*b = append(*b, 0)
		return
	}
	*b = append(*b, 1, byte(l.Ref))
	b.f(l.M)
}

// ComputeFingerprint returns the hash of the zone's canonical definition:
// every exported field but Fingerprint and ApproachBefore, so two zones
// have the same fingerprint iff they have the same definition.
// ApproachBefore is a warning horizon, not a definition: hashing it would
// make Diff report the zone changed, which clears and re-raises its alarms.
func (z *Zone) ComputeFingerprint() string {
	n := 256
	for _, v := range z.Volumes {
		for _, p := range v.Area {
			for _, r := range p {
				n += 16*len(r) + 8
			}
		}
	}
	b := make(fpBuf, 0, n)
	b.s("nofly-zone-v1")
	b.s(z.ID)
	b.s(z.Name)
	b.s(string(z.Category))
	b.s(z.Restriction)
	b.s(z.Authority)
	b.u64(uint64(len(z.Volumes)))
	for _, v := range z.Volumes {
		if c := v.Circle; c != nil {
			b = append(b, 1)
			b.f(c.Center[0])
			b.f(c.Center[1])
			b.f(c.RadiusM)
		} else {
			b = append(b, 0)
		}
		b.u64(uint64(len(v.Area)))
		for _, p := range v.Area {
			b.u64(uint64(len(p)))
			for _, r := range p {
				b.u64(uint64(len(r)))
				for _, pt := range r {
					b.f(pt[0])
					b.f(pt[1])
				}
			}
		}
		b.limit(v.Floor)
		b.limit(v.Ceiling)
	}
	b.t(z.ActiveFrom)
	b.t(z.ActiveUntil)
	b.u64(uint64(len(z.Windows)))
	for _, w := range z.Windows {
		b.t(w.From)
		b.t(w.Until)
		b.u64(uint64(len(w.Weekly)))
		for _, iv := range w.Weekly {
			b.u64(uint64(iv.Start))
			b.u64(uint64(iv.End))
		}
	}
	b.f(z.ClearBufferM)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ZoneSet is a loaded set of zones with a version.
type ZoneSet struct {
	// Version identifies the set: the file's "version" member when it has
	// one, else a hash of the zones' fingerprints.
	Version string
	Zones   []*Zone
	// Report says what the parser loaded, dropped and warned of (empty for
	// a set built in code).
	Report LoadReport
	// ZoneVersion is the set's integer version in the zone store
	// (geofence/zonestore); 0 for a set loaded from a file without it.
	ZoneVersion int64
}

// contentVersion derives a version from the zones' fingerprints and
// warning horizons: a set whose only change is an approach_before_s is
// another set (the fingerprints leave it out, see Zone.ApproachBefore), and
// a set without horizons keeps the version it had before they existed.
func contentVersion(zones []*Zone) string {
	fps := make([]string, len(zones))
	for i, z := range zones {
		fps[i] = z.Fingerprint
		if z.ApproachBefore != 0 {
			fps[i] += "/approach_before=" + strconv.FormatInt(int64(z.ApproachBefore), 10)
		}
	}
	sort.Strings(fps)
	h := sha256.New()
	for _, f := range fps {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:12])
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
