package remoteid

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/nofly-dev/nofly/telemetry"
)

// The pilot's position (the remote pilot station). Network Remote ID gives
// it in a flight's details (RIDFlightDetails.operator_location), Broadcast
// Remote ID in the System message (message type 4), which travels apart
// from the Location messages. Either way it is attached to the drone's
// positions as telemetry.Operator; it decides no alarm, so whatever is
// wrong with it is dropped with a note and the positions are kept.

// Operator location types as F3411-22a's OperatorLocation.altitude_type
// names them, and as OpenDroneID's OperatorLocationType numbers them
// (ODID_OPERATOR_LOCATION_TYPE_TAKEOFF, _LIVE_GNSS, _FIXED).
var (
	ridOperatorTypes  = map[string]string{"Takeoff": telemetry.OperatorTakeoff, "Dynamic": telemetry.OperatorLive, "Fixed": telemetry.OperatorFixed}
	odidOperatorTypes = [...]string{telemetry.OperatorTakeoff, telemetry.OperatorLive, telemetry.OperatorFixed}
)

// ridOperator reads a flight's details.operator_location, in either form:
// F3411-19's LatLngPoint {"lat", "lng"}, or F3411-22a's OperatorLocation
// {"position": {"lat", "lng"}, "altitude": {"value", "reference": "W84",
// "units": "M"}, "altitude_type": "Takeoff" | "Dynamic" | "Fixed"}. nil when
// absent, unknown (lat = lng = 0) or unreadable (with a note at path).
func (r *Result) ridOperator(i int, path string, raw json.RawMessage) *telemetry.Operator {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var o struct {
		Lat      optNum `json:"lat"`
		Lng      optNum `json:"lng"`
		Position *struct {
			Lat optNum `json:"lat"`
			Lng optNum `json:"lng"`
		} `json:"position"`
		Altitude *struct {
			Value     optNum `json:"value"`
			Reference optStr `json:"reference"`
			Units     optStr `json:"units"`
		} `json:"altitude"`
		AltitudeType optStr `json:"altitude_type"`
	}
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &o) != nil {
		r.note(i, path, dropped(raw, "an OperatorLocation object")+": the pilot's position is unknown")
		return nil
	}
	lat, lng, at := o.Lat, o.Lng, path
	if o.Position != nil {
		lat, lng, at = o.Position.Lat, o.Position.Lng, path+".position"
	}
	op, ok := r.operatorAt(i, at, "lat", "lng", lat, lng)
	if !ok {
		return nil
	}
	if a := o.Altitude; a != nil {
		switch {
		case a.Value.raw != nil:
			r.note(i, path+".altitude.value", dropped(a.Value.raw, "a number"))
		case a.Reference.v != nil && *a.Reference.v != "W84":
			r.note(i, path+".altitude.reference", fmt.Sprintf("%q is not W84, the only reference F3411 gives the pilot's altitude; dropped", *a.Reference.v))
		case a.Units.v != nil && *a.Units.v != "M":
			r.note(i, path+".altitude.units", fmt.Sprintf("%q is not M; dropped", *a.Units.v))
		default:
			op.AltM = altitude(a.Value.v)
		}
	}
	if t := o.AltitudeType.v; t != nil {
		if op.Type = ridOperatorTypes[*t]; op.Type == "" {
			r.note(i, path+".altitude_type", fmt.Sprintf("%q is not Takeoff, Dynamic or Fixed; dropped", *t))
		}
	} else if o.AltitudeType.raw != nil {
		r.note(i, path+".altitude_type", dropped(o.AltitudeType.raw, "a string"))
	}
	return op
}

// operatorAt makes an Operator of a lat/lng pair read at path: ok false
// (with a note when they were not numbers, or only one was given) when
// there is none. lat = lng = 0 is Remote ID's "unknown". A value out of
// range is left for telemetry's validation, which drops the operator and
// names the field (Fix.Src).
func (r *Result) operatorAt(i int, path, latName, lngName string, lat, lng optNum) (*telemetry.Operator, bool) {
	switch {
	case lat.raw != nil:
		r.note(i, path+"."+latName, dropped(lat.raw, "a number")+": the pilot's position is unknown")
		return nil, false
	case lng.raw != nil:
		r.note(i, path+"."+lngName, dropped(lng.raw, "a number")+": the pilot's position is unknown")
		return nil, false
	case lat.v == nil && lng.v == nil:
		return nil, false
	case lat.v == nil:
		r.note(i, path+"."+latName, "missing beside "+lngName+": the pilot's position is unknown")
		return nil, false
	case lng.v == nil:
		r.note(i, path+"."+lngName, "missing beside "+latName+": the pilot's position is unknown")
		return nil, false
	case *lat.v == 0 && *lng.v == 0:
		return nil, false
	}
	return &telemetry.Operator{Lat: *lat.v, Lon: *lng.v}, true
}

// odidSystemForm names a decoder's JSON fields of a System message.
type odidSystemForm struct{ typ, lat, lon, alt string }

var (
	// opendroneid-core-c's decoded ODID_System_data: degrees, AltitudeGeo
	// in metres WGS84, -1000 for unknown, 0 for an unknown position.
	systemCoreC = odidSystemForm{typ: "OperatorLocationType", lat: "OperatorLatitude", lon: "OperatorLongitude", alt: "OperatorAltitudeGeo"}
	// librid's rid_system_to_json: the same, null for every unknown value.
	systemLibrid = odidSystemForm{typ: "operator_location_type", lat: "operator_latitude", lon: "operator_longitude", alt: "operator_altitude"}
)

// odidSystem reads a System message: the pilot's position it gives, or nil
// when it gives none (unknown, or unreadable: with a note).
func (r *Result) odidSystem(i int, s *fields, form odidSystemForm) *telemetry.Operator {
	num := func(k string) optNum {
		raw, ok := s.m[k]
		if !ok {
			return optNum{}
		}
		var o optNum
		_ = o.UnmarshalJSON(raw)
		return o
	}
	op, ok := r.operatorAt(i, s.path, form.lat, form.lon, num(form.lat), num(form.lon))
	if !ok {
		return nil
	}
	op.AltM = altitude(s.opt(form.alt))
	if t := s.optInt(form.typ); t != nil {
		if *t >= 0 && *t < len(odidOperatorTypes) {
			op.Type = odidOperatorTypes[*t]
		} else {
			r.note(i, s.path+"."+form.typ, fmt.Sprintf("%d is not 0 (take-off), 1 (live GNSS) or 2 (fixed); the type is unknown", *t))
		}
	}
	return op
}

// withOperator attaches op (a copy) to a fix, its fields' source being the
// object at path.
func (x *Fix) withOperator(op *telemetry.Operator, path string) {
	if op == nil {
		return
	}
	x.Pos.Operator = copyOperator(op)
	for _, f := range [...]string{"operator", "operator.lat", "operator.lon", "operator.alt_m", "operator.type"} {
		x.Src[f] = path
	}
}

// copyOperator gives each position its own Operator.
func copyOperator(o *telemetry.Operator) *telemetry.Operator {
	if o == nil {
		return nil
	}
	c := *o
	if o.AltM != nil {
		c.AltM = telemetry.Float(*o.AltM)
	}
	return &c
}
