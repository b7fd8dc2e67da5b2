package remoteid

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// Fix is one position converted from a feed, with where it came from.
type Fix struct {
	Pos telemetry.Position
	// Item is the zero-based index of the flight (RID) or message (ODID)
	// in the request.
	Item int
	// Path is the JSON path of the source position, e.g.
	// "flights[0].recent_positions[2]".
	Path string
	// Src names, for each telemetry field, the JSON path of the source
	// field it came from, so an error found later names what the feed sent.
	Src map[string]string
}

// SourceField returns the JSON path of the feed's field that became the
// telemetry field f (the position's path when f is not one of them).
func (x *Fix) SourceField(f string) string {
	if s, ok := x.Src[f]; ok {
		return s
	}
	return x.Path
}

// Error is a required field that is missing or wrong: Item is the flight's
// or message's zero-based index, Path the field's JSON path in the body.
type Error struct {
	Item int
	Path string
	Err  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Err }

// Result is a converted request.
type Result struct {
	// Items is how many flights (RID) or messages (ODID) the body held.
	Items int
	Fixes []Fix
	// Errors lists the refused items (nothing of the request should be
	// produced when it is not empty).
	Errors []*Error
	// Skipped lists what carried no position and was left out: positions
	// at lat = lng = 0, flights with neither current_state nor
	// recent_positions (F3411 allows a flight known only by its
	// operating_area).
	Skipped []Note
	// Notes lists positions kept with a caveat (an ODID TimeStamp unknown:
	// the receive time used).
	Notes []Note

	// operators is the latest System message heard for each drone in this
	// request (ODID), its pilot's position going with that drone's later
	// Location messages. Bounded by the request's items.
	operators map[string]heardOperator
}

// heardOperator is a System message's pilot position (nil: unknown) and
// its path.
type heardOperator struct {
	op   *telemetry.Operator
	path string
}

// heard remembers the latest System message of a drone; one that says the
// position is unknown forgets the earlier one.
func (r *Result) heard(drone string, op *telemetry.Operator, path string) {
	if r.operators == nil {
		r.operators = map[string]heardOperator{}
	}
	r.operators[drone] = heardOperator{op, path}
}

// Note is a position (or a flight) left out, or kept with a caveat: Item
// as in Error, Path the position's or flight's, Why the reason.
type Note struct {
	Item int
	Path string
	Why  string
}

// noPosition is why a position at 0, 0 is left out.
const noPosition = "lat and lng are 0, Remote ID's \"no position\": left out"

// order sorts each drone's fixes by seq and drops a repeated (drone_id,
// seq), keeping the first listed; drones keep the order they first appear in.
func (r *Result) order() {
	first := map[string]int{}
	for i := range r.Fixes {
		if _, ok := first[r.Fixes[i].Pos.DroneID]; !ok {
			first[r.Fixes[i].Pos.DroneID] = i
		}
	}
	sort.SliceStable(r.Fixes, func(i, j int) bool {
		a, b := &r.Fixes[i].Pos, &r.Fixes[j].Pos
		if a.DroneID != b.DroneID {
			return first[a.DroneID] < first[b.DroneID]
		}
		return a.Seq < b.Seq
	})
	out := r.Fixes[:0]
	for i := range r.Fixes {
		if n := len(out); n > 0 && out[n-1].Pos.DroneID == r.Fixes[i].Pos.DroneID && out[n-1].Pos.Seq == r.Fixes[i].Pos.Seq {
			continue
		}
		out = append(out, r.Fixes[i])
	}
	r.Fixes = out
}

// heading normalises a track or direction into [0, 360); 361 (unknown)
// and anything outside (-360, 360] give nil.
func heading(v *float64) *float64 {
	if v == nil || !finite(*v) || *v <= -360 || *v > 360 {
		return nil
	}
	h := math.Mod(*v+360, 360)
	return &h
}

// speed drops F3411/ODID's 255 (unknown). Any other value goes on to
// telemetry's validator, which drops one outside its physical range with a
// warning the answer lists.
func speed(v *float64) *float64 {
	if v == nil || !finite(*v) || *v == 255 {
		return nil
	}
	s := *v
	return &s
}

// altitude drops -1000 (F3411/ODID's unknown). Any other value goes on to
// telemetry's validator, which drops one outside its physical range
// (-1,000..30,000 m; -100 above ground) with a warning: the height is then
// unknown, which alarms.
func altitude(v *float64) *float64 {
	if v == nil || !finite(*v) || *v == -1000 {
		return nil
	}
	a := *v
	return &a
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// checkLatLon returns the error of an out-of-range coordinate, and whether
// the pair is the "no position" 0, 0.
func checkLatLon(lat, lon float64) (field, msg string, none bool) {
	switch {
	case !finite(lat) || lat < -90 || lat > 90:
		return "lat", "must be between -90 and 90", false
	case !finite(lon) || lon < -180 || lon > 180:
		return "lng", "must be between -180 and 180", false
	case lat == 0 && lon == 0:
		return "", "", true
	}
	return "", "", false
}

// jsonErr turns a decoding error into a message, with the path of a wrongly
// typed field under prefix.
func jsonErr(prefix string, err error) (string, string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		p := prefix
		if te.Field != "" {
			p += "." + te.Field
		}
		return p, fmt.Sprintf("must not be JSON %s", te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return prefix, fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)
	}
	return prefix, "malformed JSON: " + err.Error()
}

// items splits a JSON body that is one object or an array of objects.
func items(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var raws []json.RawMessage
		err := json.Unmarshal(body, &raws)
		return raws, err
	}
	var raw json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	return []json.RawMessage{raw}, nil
}

// epoch is the earliest time a position may have: its seq is milliseconds
// since then, and telemetry refuses a negative seq.
var epoch = time.Unix(0, 0)

// unixMS is the seq of a position at ts.
func unixMS(ts time.Time) int64 { return ts.UnixMilli() }
