package remoteid

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// ridTime is F3411-22a's Time ({"value": RFC 3339, "format": "RFC3339"});
// a plain RFC 3339 string (F3411-19, and InterUSS's injection API) is read
// too.
type ridTime struct {
	t   time.Time
	bad string // why it could not be read
}

func (r *ridTime) UnmarshalJSON(b []byte) error {
	*r = ridTime{}
	var s string
	switch {
	case len(b) > 0 && b[0] == '"':
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	case len(b) > 0 && b[0] == '{':
		var o struct {
			Value  *string `json:"value"`
			Format *string `json:"format"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		if o.Format != nil && *o.Format != "RFC3339" {
			r.bad = fmt.Sprintf("format %q is not RFC3339, the only one F3411 defines", *o.Format)
			return nil
		}
		if o.Value == nil {
			r.bad = "value: required"
			return nil
		}
		s = *o.Value
	default:
		r.bad = "must be a Time object {\"value\": RFC 3339, \"format\": \"RFC3339\"} or an RFC 3339 string"
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		r.bad = fmt.Sprintf("%q is not an RFC 3339 time", s)
		return nil
	}
	if t.Before(epoch) {
		r.bad = fmt.Sprintf("%q is before 1970, where seq (milliseconds since then) would be negative", s)
		return nil
	}
	r.t = t.UTC()
	return nil
}

// ridHeight is RIDHeight; a height that is not an object is kept in raw
// and dropped with a note.
type ridHeight struct {
	Distance  optNum `json:"distance"`
	Reference optStr `json:"reference"`
	raw       []byte
}

func (h *ridHeight) UnmarshalJSON(b []byte) error {
	type plain ridHeight
	var p plain
	if len(bytes.TrimSpace(b)) == 0 || bytes.TrimSpace(b)[0] != '{' || json.Unmarshal(b, &p) != nil {
		*h = ridHeight{raw: append([]byte(nil), b...)}
		return nil
	}
	*h = ridHeight(p)
	return nil
}

// ridPosition is RIDAircraftPosition: lat and lng required, the rest
// optional (a bad value of one is dropped alone).
type ridPosition struct {
	Lat       *float64   `json:"lat"`
	Lng       *float64   `json:"lng"`
	Alt       optNum     `json:"alt"`
	AccuracyH optStr     `json:"accuracy_h"`
	AccuracyV optStr     `json:"accuracy_v"`
	Height    *ridHeight `json:"height"` // F3411-22a: the height is part of the position
}

type ridState struct {
	Timestamp *ridTime     `json:"timestamp"`
	Position  *ridPosition `json:"position"`
	Track     optNum       `json:"track"`
	Speed     optNum       `json:"speed"`
	Height    *ridHeight   `json:"height"` // F3411-19 keeps it on the state
}

type ridRecent struct {
	Time     *ridTime     `json:"time"`
	Position *ridPosition `json:"position"`
}

// uasID is F3411-22a's UASID. A plain string is read as a serial number.
type uasID struct {
	SerialNumber      string `json:"serial_number"`
	RegistrationID    string `json:"registration_id"`
	UTMID             string `json:"utm_id"`
	SpecificSessionID string `json:"specific_session_id"`
}

func (u *uasID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*u = uasID{}
		return json.Unmarshal(b, &u.SerialNumber)
	}
	type plain uasID
	return json.Unmarshal(b, (*plain)(u))
}

// first returns the identifier the drone_id is made from and its field.
func (u *uasID) first() (string, string) {
	for _, c := range []struct{ v, f string }{
		{u.SerialNumber, "serial_number"}, {u.RegistrationID, "registration_id"},
		{u.UTMID, "utm_id"}, {u.SpecificSessionID, "specific_session_id"},
	} {
		if strings.TrimSpace(c.v) != "" {
			return strings.TrimSpace(c.v), c.f
		}
	}
	return "", ""
}

type ridFlight struct {
	ID      *string `json:"id"`
	UASID   *uasID  `json:"uas_id"`
	Details *struct {
		UASID *uasID `json:"uas_id"`
		// OperatorLocation is read apart (ridOperator): a bad one drops
		// the pilot's position, not the flight.
		OperatorLocation json.RawMessage `json:"operator_location"`
	} `json:"details"`
	CurrentState    *ridState   `json:"current_state"`
	RecentPositions []ridRecent `json:"recent_positions"`
}

// Flights converts a Network Remote ID flights answer: a JSON object with
// "flights", a list of RIDFlight (F3411-22a GetFlightsResponse; the
// F3411-19 form, with plain RFC 3339 times and the height on the state, is
// read too). Each flight gives its current_state and each of its
// recent_positions.
//
// drone_id is made (DroneID) from the aircraft's UAS id where the flight
// carries one — uas_id, or details.uas_id (RIDFlightDetails), as a
// serial_number, registration_id, utm_id or specific_session_id, the first
// given — and otherwise from the flight's id. The UAS id names the aircraft
// across flights; a USS's flight id changes with every flight.
func Flights(body []byte) Result {
	var res Result
	var top struct {
		Flights *[]json.RawMessage `json:"flights"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(body), &top); err != nil {
		p, msg := jsonErr("", err)
		if p == "" {
			p = "flights"
		}
		res.Errors = append(res.Errors, &Error{Item: 0, Path: strings.TrimPrefix(p, "."), Err: msg})
		return res
	}
	if top.Flights == nil {
		res.Errors = append(res.Errors, &Error{Path: "flights", Err: "required: the body is a USS's flights answer, {\"flights\": [RIDFlight, ...]}"})
		return res
	}
	res.Items = len(*top.Flights)
	for i, raw := range *top.Flights {
		prefix := fmt.Sprintf("flights[%d]", i)
		var f ridFlight
		if err := json.Unmarshal(raw, &f); err != nil {
			p, msg := jsonErr(prefix, err)
			res.Errors = append(res.Errors, &Error{Item: i, Path: p, Err: msg})
			continue
		}
		res.flight(i, prefix, &f)
	}
	if len(res.Errors) == 0 {
		res.order()
	}
	return res
}

func (r *Result) fail(i int, path, msg string) {
	r.Errors = append(r.Errors, &Error{Item: i, Path: path, Err: msg})
}

func (r *Result) flight(i int, prefix string, f *ridFlight) {
	raw, idField := "", ""
	for _, u := range []*uasID{f.UASID, detailsID(f)} {
		if u != nil {
			if v, fld := u.first(); v != "" {
				raw, idField = v, fld
				if u == f.UASID {
					idField = "uas_id." + fld
				} else {
					idField = "details.uas_id." + fld
				}
				break
			}
		}
	}
	if raw == "" && f.ID != nil {
		raw, idField = strings.TrimSpace(*f.ID), "id"
	}
	drone, ok := DroneID(raw)
	if !ok {
		r.fail(i, prefix+".id", "required: a flight needs an id (or a uas_id) to name the drone")
		return
	}
	if f.CurrentState == nil && len(f.RecentPositions) == 0 {
		// Valid F3411 (a flight known by its operating_area only), and the
		// other flights of the answer are still good: left out, said so.
		r.Skipped = append(r.Skipped, Note{Item: i, Path: prefix,
			Why: "neither current_state nor recent_positions: the flight gives no position; left out"})
		return
	}
	var op *telemetry.Operator
	opPath := prefix + ".details.operator_location"
	if f.Details != nil {
		op = r.ridOperator(i, opPath, f.Details.OperatorLocation)
	}
	if s := f.CurrentState; s != nil {
		path := prefix + ".current_state"
		h := s.Height
		if s.Position != nil && s.Position.Height != nil {
			h = s.Position.Height
		}
		hPath := "height"
		if h != s.Height {
			hPath = "position.height"
		}
		r.position(i, path, drone, idField, s.Timestamp, "timestamp", s.Position, h, hPath, &s.Track, &s.Speed, op, opPath)
	}
	for j := range f.RecentPositions {
		rp := &f.RecentPositions[j]
		var h *ridHeight
		if rp.Position != nil {
			h = rp.Position.Height
		}
		r.position(i, fmt.Sprintf("%s.recent_positions[%d]", prefix, j), drone, idField, rp.Time, "time", rp.Position, h, "position.height", &optNum{}, &optNum{}, op, opPath)
	}
}

// flightPath is "flights[i]" of a position's path.
func flightPath(path string) string {
	if i := strings.IndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return path
}

func detailsID(f *ridFlight) *uasID {
	if f.Details == nil {
		return nil
	}
	return f.Details.UASID
}

func (r *Result) position(i int, path, drone, idField string, t *ridTime, tField string, p *ridPosition, h *ridHeight, hField string, track, spd *optNum, op *telemetry.Operator, opPath string) {
	switch {
	case t == nil:
		r.fail(i, path+"."+tField, "required")
		return
	case t.bad != "":
		r.fail(i, path+"."+tField, t.bad)
		return
	case p == nil:
		r.fail(i, path+".position", "required")
		return
	case p.Lat == nil:
		r.fail(i, path+".position.lat", "required")
		return
	case p.Lng == nil:
		r.fail(i, path+".position.lng", "required")
		return
	}
	if f, msg, none := checkLatLon(*p.Lat, *p.Lng); f != "" {
		r.fail(i, path+".position."+f, msg)
		return
	} else if none {
		r.Skipped = append(r.Skipped, Note{Item: i, Path: path, Why: noPosition})
		return
	}
	fix := Fix{Item: i, Path: path,
		Pos: telemetry.Position{DroneID: drone, Seq: unixMS(t.t), TS: t.t, Lat: *p.Lat, Lon: *p.Lng},
		Src: map[string]string{"drone_id": flightPath(path) + "." + idField, "seq": path + "." + tField, "ts": path + "." + tField,
			"lat": path + ".position.lat", "lon": path + ".position.lng", "alt_m": path + ".position.alt", "alt_ref": path + ".position.alt",
			"agl_m": path + "." + hField + ".distance", "heading_deg": path + ".track", "speed_mps": path + ".speed",
			"h_accuracy_m": path + ".position.accuracy_h", "v_accuracy_m": path + ".position.accuracy_v"},
	}
	num := func(o *optNum, field string) *float64 {
		if o.raw != nil {
			r.note(i, path+"."+field, dropped(o.raw, "a number"))
		}
		return o.v
	}
	class := func(m map[string]float64, o *optStr, field string) *float64 {
		if o.raw != nil {
			r.note(i, path+".position."+field, dropped(o.raw, "a string"))
		}
		v := classRID(m, o.v)
		if v == nil && o.v != nil && *o.v != "HAUnknown" && *o.v != "VAUnknown" && *o.v != "HA10NMPlus" && *o.v != "VA150mPlus" {
			r.note(i, path+".position."+field, fmt.Sprintf("%q is not an F3411 accuracy class; dropped", *o.v))
		}
		return v
	}
	fix.Pos.HAccuracyM = class(horizontalRID, &p.AccuracyH, "accuracy_h")
	fix.Pos.VAccuracyM = class(verticalRID, &p.AccuracyV, "accuracy_v")
	if a := altitude(num(&p.Alt, "position.alt")); a != nil {
		fix.Pos.AltM, fix.Pos.AltRef = a, telemetry.RefWGS84
	}
	if h != nil {
		fix.Pos.AGLM = r.groundHeight(i, path+"."+hField, h)
	}
	fix.Pos.HeadingDeg = heading(num(track, "track"))
	fix.Pos.SpeedMPS = speed(num(spd, "speed"))
	fix.withOperator(op, opPath)
	r.Fixes = append(r.Fixes, fix)
}

// groundHeight is the height above ground a RIDHeight gives: its distance
// when the reference is GroundLevel, else none (TakeoffLocation is not the
// ground under the drone; an unknown reference could be anything).
func (r *Result) groundHeight(i int, path string, h *ridHeight) *float64 {
	switch {
	case h.raw != nil:
		r.note(i, path, dropped(h.raw, "a RIDHeight object"))
		return nil
	case h.Reference.raw != nil:
		r.note(i, path+".reference", dropped(h.Reference.raw, "a string")+"; the height counts as unknown")
		return nil
	case h.Distance.raw != nil:
		r.note(i, path+".distance", dropped(h.Distance.raw, "a number"))
		return nil
	case h.Reference.v == nil || *h.Reference.v == "TakeoffLocation":
		return nil
	case *h.Reference.v != "GroundLevel":
		r.note(i, path+".reference", fmt.Sprintf("%q is neither GroundLevel nor TakeoffLocation; the height counts as unknown", *h.Reference.v))
		return nil
	}
	return altitude(h.Distance.v)
}
