package telemetry

import (
	"strings"
)

// Physical ranges of the optional numbers. A value outside its range cannot
// be a measurement (a unit mix-up, an overflow, a hostile feed): it is
// dropped with a warning like any value outside every convention, so a
// height becomes unknown — and an unknown height is inside every vertical
// limit, the reading that alarms. Taking 1e300 m at face value would put a
// drone over a runway above every ceiling.
const (
	// MaxHeightM bounds alt_m (any reference) and agl_m from above: the
	// ceiling of any aircraft a drone feed reports, with room to spare.
	MaxHeightM = 30_000.0
	// minHeightM bounds alt_m AMSL and WGS84 from below (the Dead Sea
	// shore is at -430 m, the geoid's lowest undulation -106 m). -1000
	// itself is Remote ID's "unknown", absent without a warning.
	minHeightM = -1_000.0
	// minAGLM bounds heights above ground from below (agl_m, alt_m with
	// alt_ref AGL): a drone in a quarry or a shaft, not under the earth.
	minAGLM = -100.0
	// MaxSpeedMPS bounds speed_mps: above ASTM F3411's largest encodable
	// ground speed (254.25 m/s) and any small unmanned aircraft; a value
	// beyond is a unit error (km/h, cm/s).
	MaxSpeedMPS = 300.0
	// MaxAccuracyM bounds h_accuracy_m and v_accuracy_m: F3411's widest
	// class is 10 NM (18,520 m).
	MaxAccuracyM = 100_000.0
)

// MinHeightM and MinAGLM are the lower bounds of alt_m (AMSL, WGS84) and of
// heights above ground, for documentation and tests.
const (
	MinHeightM = minHeightM
	MinAGLM    = minAGLM
)

// outOfRange is the warning of a value v outside [lo, hi] (unit after the
// numbers); then is what dropping it means, if anything.
func outOfRange(v, lo, hi float64, unit, then string) string {
	w := formatFloat(v) + " is outside the physical range " + formatFloat(lo) + ".." + formatFloat(hi) + " " + unit + "; dropped"
	if then != "" {
		w += ": " + then
	}
	return w
}

// The optional fields a record may have had dropped, in the order of
// Position.Dropped. "operator" is the whole operator dropped (warnings
// "operator", "operator.lat", "operator.lon"): the pilot's position is
// unknown because the feed sent a bad one. A dropped operator alt_m or type
// leaves the position known and is not listed.
var droppable = [...]string{"alt_m", "alt_ref", "agl_m", "speed_mps", "heading_deg", "h_accuracy_m", "v_accuracy_m", "operator"}

// droppedNames[mask] is the canonical Dropped of the fields in mask (bit i:
// droppable[i]), built once so that decoding allocates nothing for it.
var droppedNames = func() (t [1 << len(droppable)]string) {
	for m := range t {
		var names []string
		for i, f := range droppable {
			if m&(1<<i) != 0 {
				names = append(names, f)
			}
		}
		t[m] = strings.Join(names, ",")
	}
	return t
}()

// parseDropped returns the canonical form of a "dropped" value, or "" when
// it is not a comma-separated list of distinct optional fields (it is set
// by ingest, never by a feed: a value that is not ingest's is ignored).
func parseDropped(s string) string {
	mask := 0
	for s != "" {
		name, rest, _ := strings.Cut(s, ",")
		bit := -1
		for i, f := range droppable {
			if name == f {
				bit = i
				break
			}
		}
		if bit < 0 || mask&(1<<bit) != 0 {
			return ""
		}
		mask |= 1 << bit
		if rest == "" && len(name) < len(s) {
			return "" // a trailing comma
		}
		s = rest
	}
	return droppedNames[mask]
}

// DroppedOf returns the Dropped of a record whose decoding gave warns: the
// optional fields among the warnings, in canonical order ("" for none).
func DroppedOf(warns []FieldWarning) string {
	mask := 0
	for _, w := range warns {
		field := w.Field
		if field == "operator.lat" || field == "operator.lon" {
			field = "operator"
		}
		for i, f := range droppable {
			if field == f {
				mask |= 1 << i
			}
		}
	}
	return droppedNames[mask]
}

// DroppedFields returns Dropped as a list (nil for none).
func (p *Position) DroppedFields() []string {
	if p.Dropped == "" {
		return nil
	}
	return strings.Split(p.Dropped, ",")
}
