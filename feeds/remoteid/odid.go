package remoteid

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// ODIDHeightAboveGround is the height type "above ground"
// (ODID_HEIGHT_REF_OVER_GROUND); 0 is above takeoff.
const ODIDHeightAboveGround = 1

// MaxODIDAhead is how far ahead of its receive time a Location's time may
// resolve: a drone's clock a few seconds fast must not put a position of
// 11:59:58 an hour back, at 10:59:58.
const MaxODIDAhead = 10 * time.Second

// ResolveSecondsPastHour returns the time s seconds past an hour (a
// Location message's TimeStamp) that is the latest such time not after
// recv + ahead: the hour of recv, or the one before (a fix of 59:59.9 heard
// at 00:00.1), or the one after (a fix of 00:00.5 heard at 59:59.8 from a
// clock slightly fast).
func ResolveSecondsPastHour(s float64, recv time.Time, ahead time.Duration) time.Time {
	recv = recv.UTC()
	base := recv.Truncate(time.Hour).Add(time.Duration(math.Round(s*1e3)) * time.Millisecond)
	limit := recv.Add(ahead)
	for _, t := range []time.Time{base.Add(time.Hour), base, base.Add(-time.Hour)} {
		if !t.After(limit) {
			return t
		}
	}
	return base.Add(-2 * time.Hour) // unreachable for 0 <= s < 3600 and ahead >= 0
}

// locForm names a decoder's JSON fields of a Location message and the unit
// of its timestamp. Keys are matched exactly (encoding/json would match
// "timestamp" to "TimeStamp", and the two forms count it in different units).
type locForm struct {
	lat, lon, alt, height, heightType, dir, speed, hAcc, vAcc string
	ts                                                        string
	tsPerSecond                                               float64 // timestamp units per second
	tsUnit                                                    string
}

var (
	// opendroneid-core-c's decoded ODID_Location_data: degrees, metres,
	// m/s, TimeStamp in seconds past the hour, the published unknown values
	// (361, 255, -1000, 0xFFFF) in place.
	formCoreC = locForm{lat: "Latitude", lon: "Longitude", alt: "AltitudeGeo", height: "Height",
		heightType: "HeightType", dir: "Direction", speed: "SpeedHorizontal", hAcc: "HorizAccuracy", vAcc: "VertAccuracy",
		ts: "TimeStamp", tsPerSecond: 1, tsUnit: "seconds"}
	// librid's rid_location_to_json: the same units but the timestamp in
	// tenths of a second past the hour, and null for every unknown value.
	formLibrid = locForm{lat: "latitude", lon: "longitude", alt: "geodetic_altitude", height: "height",
		heightType: "height_type", dir: "track_direction", speed: "speed", hAcc: "horizontal_accuracy", vAcc: "vertical_accuracy",
		ts: "timestamp", tsPerSecond: 10, tsUnit: "tenths of a second"}
)

// fields is one JSON object, read key by key.
type fields struct {
	m    map[string]json.RawMessage
	path string
	res  *Result
	item int
	bad  bool
}

func objectAt(raw json.RawMessage, path string, res *Result, item int) (*fields, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		res.fail(item, path, "must be a JSON object")
		return nil, false
	}
	return &fields{m: m, path: path, res: res, item: item}, true
}

func (f *fields) has(k string) bool { _, ok := f.m[k]; return ok }

// num reads a required number (null or absent: nil, for the caller to
// refuse); another JSON value refuses the item.
func (f *fields) num(k string) *float64 {
	raw, ok := f.m[k]
	if !ok || isNull(raw) {
		return nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		f.res.fail(f.item, f.path+"."+k, "must be a number, got JSON "+shorten(raw))
		f.bad = true
		return nil
	}
	return &v
}

// opt reads an optional number: what is not one is dropped with a note.
func (f *fields) opt(k string) *float64 {
	raw, ok := f.m[k]
	if !ok || isNull(raw) {
		return nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		f.res.note(f.item, f.path+"."+k, dropped(raw, "a number"))
		return nil
	}
	return &v
}

// optInt reads an optional integer (an enumeration's number) as opt does.
func (f *fields) optInt(k string) *int {
	v := f.opt(k)
	if v == nil {
		return nil
	}
	if *v != math.Trunc(*v) || math.Abs(*v) > 1e9 {
		f.res.note(f.item, f.path+"."+k, dropped(f.m[k], "an integer"))
		return nil
	}
	n := int(*v)
	return &n
}

// int reads a required integer.
func (f *fields) int(k string) *int {
	v := f.num(k)
	if v == nil {
		return nil
	}
	if *v != math.Trunc(*v) || math.Abs(*v) > 1e9 {
		f.res.fail(f.item, f.path+"."+k, "must be an integer")
		f.bad = true
		return nil
	}
	n := int(*v)
	return &n
}

func (f *fields) str(k string) *string {
	raw, ok := f.m[k]
	if !ok || isNull(raw) {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		f.res.fail(f.item, f.path+"."+k, "must be a string, got JSON "+shorten(raw))
		f.bad = true
		return nil
	}
	return &s
}

// ODID converts decoded Broadcast Remote ID Location messages, a JSON
// object or an array of objects, each in one of two forms:
//
//   - opendroneid-core-c's decoded structs, with the Basic ID heard with
//     the Location (a Location message carries no id):
//
//     {"basic_id": {"UASID": "1596F3..."}, "received_at": "2026-12-03T08:00:01.2Z",
//     "location": {"Latitude": 51.47, "Longitude": -0.46, "AltitudeGeo": 130,
//     "HeightType": 1, "Height": 60, "Direction": 361, "SpeedHorizontal": 255,
//     "HorizAccuracy": 10, "VertAccuracy": 4, "TimeStamp": 1.5}}
//
//     ("uas_id": "..." may stand for basic_id);
//
//   - librid's message pack JSON (rid_message_pack_to_json), its Basic ID
//     (message_type 0, "uas_id") naming the drone of its Location messages
//     (message_type 1, "latitude", "geodetic_altitude", "height_type",
//     "track_direction", "speed", "timestamp" in tenths of a second, null
//     for unknown), with "received_at" added beside "messages" by the
//     receiver when it knows it.
//
// The timestamp, past the hour, is placed in an hour by
// ResolveSecondsPastHour against received_at (when the receiver heard it),
// or recv when the receiver did not say. An unknown timestamp (core-c's
// 0xFFFF, librid's null) takes the receive time itself, with a note: a
// position heard live is not thrown away for its clock. A timestamp beyond
// the hour is refused.
func ODID(body []byte, recv time.Time) Result {
	var res Result
	raws, err := items(body)
	if err != nil {
		p, msg := jsonErr("", err)
		res.fail(0, strings.TrimPrefix(p, "."), msg)
		return res
	}
	res.Items = len(raws)
	for i, raw := range raws {
		res.odidItem(i, fmt.Sprintf("[%d]", i), raw, recv)
	}
	if len(res.Errors) == 0 {
		res.order()
	}
	return res
}

func (r *Result) odidItem(i int, prefix string, raw json.RawMessage, recv time.Time) {
	f, ok := objectAt(raw, prefix, r, i)
	if !ok {
		return
	}
	if at := f.str("received_at"); at != nil {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			r.fail(i, prefix+".received_at", "must be an RFC 3339 timestamp with a time zone")
			return
		}
		if t.Before(epoch) {
			r.fail(i, prefix+".received_at", "must not be before 1970, where seq (milliseconds since then) would be negative")
			return
		}
		recv = t
	}
	if f.has("messages") {
		r.libridPack(i, prefix, f, recv)
		return
	}
	raw0, idPath := "", prefix+".basic_id.UASID"
	if f.has("basic_id") {
		if b, ok := objectAt(f.m["basic_id"], prefix+".basic_id", r, i); ok {
			if s := b.str("UASID"); s != nil {
				raw0 = strings.TrimSpace(*s)
			}
		} else {
			return
		}
	}
	if raw0 == "" {
		if s := f.str("uas_id"); s != nil {
			raw0, idPath = strings.TrimSpace(*s), prefix+".uas_id"
		}
	}
	if f.bad {
		return
	}
	drone, ok := DroneID(raw0)
	if !ok {
		r.fail(i, prefix+".basic_id.UASID", "required: a Location message carries no id; send the Basic ID heard with it")
		return
	}
	if !f.has("location") {
		r.fail(i, prefix+".location", "required")
		return
	}
	l, ok := objectAt(f.m["location"], prefix+".location", r, i)
	if !ok {
		return
	}
	if raw, ok := f.m["system"]; ok && !isNull(raw) {
		path := prefix + ".system"
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			r.note(i, path, dropped(raw, "a System message object")+": the pilot's position is unknown")
		} else {
			r.heard(drone, r.odidSystem(i, &fields{m: m, path: path, res: r, item: i}, systemCoreC), path)
		}
	}
	form := formCoreC
	if !l.has(formCoreC.ts) && l.has(formLibrid.ts) {
		form = formLibrid
	}
	r.odidLocation(i, l, form, drone, idPath, recv)
}

// libridPack reads a librid message pack: the drone from its Basic ID
// message, a position from each Location message.
func (r *Result) libridPack(i int, prefix string, f *fields, recv time.Time) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(f.m["messages"], &msgs); err != nil {
		r.fail(i, prefix+".messages", "must be an array of messages")
		return
	}
	raw, idPath := "", ""
	var locs, systems []*fields
	for j, m := range msgs {
		path := fmt.Sprintf("%s.messages[%d]", prefix, j)
		mf, ok := objectAt(m, path, r, i)
		if !ok {
			return
		}
		switch t := mf.int("message_type"); {
		case mf.bad:
			return
		case t == nil:
			r.fail(i, path+".message_type", "required")
			return
		case *t == 0: // Basic ID
			if s := mf.str("uas_id"); s != nil && raw == "" {
				raw, idPath = strings.TrimSpace(*s), path+".uas_id"
			}
		case *t == 1: // Location
			locs = append(locs, mf)
		case *t == 4: // System: the pilot's position
			systems = append(systems, mf)
		}
		if mf.bad {
			return
		}
	}
	if len(locs) == 0 {
		r.fail(i, prefix+".messages", "no Location message (message_type 1)")
		return
	}
	drone, ok := DroneID(raw)
	if !ok {
		r.fail(i, prefix+".messages", "no Basic ID message (message_type 0) with a uas_id: a Location message carries no id")
		return
	}
	// A pack is one broadcast: its System message (the last, if several)
	// goes with every Location in it, wherever it stands in the pack.
	for _, s := range systems {
		r.heard(drone, r.odidSystem(i, s, systemLibrid), s.path)
	}
	for _, l := range locs {
		r.odidLocation(i, l, formLibrid, drone, idPath, recv)
	}
}

func (r *Result) odidLocation(i int, l *fields, form locForm, drone, idPath string, recv time.Time) {
	path := l.path
	lat, lon, ts := l.num(form.lat), l.num(form.lon), l.num(form.ts)
	if l.bad {
		return
	}
	alt, height, dir, spd := l.opt(form.alt), l.opt(form.height), l.opt(form.dir), l.opt(form.speed)
	heightType, hAcc, vAcc := l.optInt(form.heightType), l.optInt(form.hAcc), l.optInt(form.vAcc)
	if lat == nil && lon == nil && form == formLibrid {
		r.Skipped = append(r.Skipped, Note{Item: i, Path: path, Why: "latitude and longitude null (unknown): left out"})
		return
	}
	switch {
	case lat == nil:
		r.fail(i, path+"."+form.lat, "required")
		return
	case lon == nil:
		r.fail(i, path+"."+form.lon, "required")
		return
	}
	if f, msg, none := checkLatLon(*lat, *lon); f != "" {
		name := map[string]string{"lat": form.lat, "lng": form.lon}[f]
		r.fail(i, path+"."+name, msg)
		return
	} else if none {
		r.Skipped = append(r.Skipped, Note{Item: i, Path: path, Why: noPosition})
		return
	}
	var at time.Time
	switch unknown := 0xFFFF / form.tsPerSecond; {
	case ts == nil && form == formCoreC:
		r.fail(i, path+"."+form.ts, "required (0xFFFF for unknown)")
		return
	case ts == nil, *ts == 0xFFFF, form == formCoreC && *ts == unknown:
		at = recv.UTC()
		r.Notes = append(r.Notes, Note{Item: i, Path: path + "." + form.ts, Why: "unknown: the receive time is the position's time"})
	case !finite(*ts) || *ts < 0 || *ts >= 3600*form.tsPerSecond:
		r.fail(i, path+"."+form.ts, fmt.Sprintf("must be %s past the hour, in [0, %g)", form.tsUnit, 3600*form.tsPerSecond))
		return
	default:
		at = ResolveSecondsPastHour(*ts/form.tsPerSecond, recv, MaxODIDAhead)
	}
	if at.Before(epoch) {
		r.fail(i, path+"."+form.ts, "resolves to a time before 1970, where seq (milliseconds since then) would be negative")
		return
	}
	fix := Fix{Item: i, Path: path,
		Pos: telemetry.Position{DroneID: drone, Seq: unixMS(at), TS: at, Lat: *lat, Lon: *lon},
		Src: map[string]string{"drone_id": idPath, "seq": path + "." + form.ts, "ts": path + "." + form.ts,
			"lat": path + "." + form.lat, "lon": path + "." + form.lon, "alt_m": path + "." + form.alt, "alt_ref": path + "." + form.alt,
			"agl_m": path + "." + form.height, "heading_deg": path + "." + form.dir, "speed_mps": path + "." + form.speed,
			"h_accuracy_m": path + "." + form.hAcc, "v_accuracy_m": path + "." + form.vAcc},
	}
	fix.Pos.HAccuracyM, fix.Pos.VAccuracyM = classODID(horizontalODID, hAcc), classODID(verticalODID, vAcc)
	if a := altitude(alt); a != nil {
		fix.Pos.AltM, fix.Pos.AltRef = a, telemetry.RefWGS84
	}
	if heightType != nil && *heightType == ODIDHeightAboveGround {
		fix.Pos.AGLM = altitude(height)
	}
	fix.Pos.HeadingDeg = heading(dir)
	fix.Pos.SpeedMPS = speed(spd)
	if h, ok := r.operators[drone]; ok {
		fix.withOperator(h.op, h.path)
	}
	r.Fixes = append(r.Fixes, fix)
}
