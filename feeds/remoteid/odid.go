package remoteid

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// odidLocation is a decoded Location message with opendroneid-core-c's
// ODID_Location_data field names and units (degrees, metres, m/s, the
// accuracy enums' numbers, TimeStamp in seconds past the hour).
type odidLocation struct {
	Status          *int     `json:"Status"`
	Direction       *float64 `json:"Direction"`
	SpeedHorizontal *float64 `json:"SpeedHorizontal"`
	SpeedVertical   *float64 `json:"SpeedVertical"`
	Latitude        *float64 `json:"Latitude"`
	Longitude       *float64 `json:"Longitude"`
	AltitudeBaro    *float64 `json:"AltitudeBaro"`
	AltitudeGeo     *float64 `json:"AltitudeGeo"`
	HeightType      *int     `json:"HeightType"`
	Height          *float64 `json:"Height"`
	HorizAccuracy   *int     `json:"HorizAccuracy"`
	VertAccuracy    *int     `json:"VertAccuracy"`
	TimeStamp       *float64 `json:"TimeStamp"`
}

type odidMessage struct {
	// The Basic ID message heard with the location (a Location message
	// carries no id): UASID as ODID_BasicID_data names it. uas_id is
	// accepted instead.
	BasicID *struct {
		UASID *string `json:"UASID"`
	} `json:"basic_id"`
	UASID      *string       `json:"uas_id"`
	ReceivedAt *string       `json:"received_at"`
	Location   *odidLocation `json:"location"`
}

// ODIDHeightAboveGround is ODID_HEIGHT_REF_OVER_GROUND; 0 is over takeoff.
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

// ODID converts decoded Broadcast Remote ID Location messages: a JSON
// object or an array of objects
//
//	{"basic_id": {"UASID": "1596F3..."}, "received_at": "2026-12-03T08:00:01.2Z",
//	 "location": {"Latitude": 51.47, "Longitude": -0.46, "AltitudeGeo": 130,
//	              "HeightType": 1, "Height": 60, "Direction": 361,
//	              "SpeedHorizontal": 255, "HorizAccuracy": 10, "VertAccuracy": 4,
//	              "TimeStamp": 1.5, ...}}
//
// location holds opendroneid-core-c's ODID_Location_data fields, decoded
// (its odid_decode output, written as JSON). TimeStamp, tenths of seconds
// past the hour, is placed in an hour by ResolveSecondsPastHour against
// received_at (when the receiver heard it), or recv when the receiver did
// not say; 0xFFFF (unknown) and anything outside [0, 3600) is refused, as
// the position then has no time.
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
		prefix := fmt.Sprintf("[%d]", i)
		var m odidMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			p, msg := jsonErr(prefix, err)
			res.fail(i, p, msg)
			continue
		}
		res.odid(i, prefix, &m, recv)
	}
	if len(res.Errors) == 0 {
		res.order()
	}
	return res
}

func (r *Result) odid(i int, prefix string, m *odidMessage, recv time.Time) {
	raw, idPath := "", prefix+".basic_id.UASID"
	if m.BasicID != nil && m.BasicID.UASID != nil {
		raw = strings.TrimSpace(*m.BasicID.UASID)
	}
	if raw == "" && m.UASID != nil {
		raw, idPath = strings.TrimSpace(*m.UASID), prefix+".uas_id"
	}
	drone, ok := DroneID(raw)
	if !ok {
		r.fail(i, prefix+".basic_id.UASID", "required: a Location message carries no id; send the Basic ID heard with it")
		return
	}
	if m.ReceivedAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *m.ReceivedAt)
		if err != nil {
			r.fail(i, prefix+".received_at", "must be an RFC 3339 timestamp with a time zone")
			return
		}
		recv = t
	}
	l := m.Location
	path := prefix + ".location"
	switch {
	case l == nil:
		r.fail(i, path, "required")
		return
	case l.TimeStamp == nil:
		r.fail(i, path+".TimeStamp", "required")
		return
	case !finite(*l.TimeStamp) || *l.TimeStamp < 0 || *l.TimeStamp >= 3600:
		r.fail(i, path+".TimeStamp", "must be seconds past the hour in [0, 3600); 0xFFFF is 'unknown' and leaves the position without a time")
		return
	case l.Latitude == nil:
		r.fail(i, path+".Latitude", "required")
		return
	case l.Longitude == nil:
		r.fail(i, path+".Longitude", "required")
		return
	}
	if f, msg, none := checkLatLon(*l.Latitude, *l.Longitude); f != "" {
		name := map[string]string{"lat": "Latitude", "lng": "Longitude"}[f]
		r.fail(i, path+"."+name, msg)
		return
	} else if none {
		r.Skipped = append(r.Skipped, Skip{Item: i, Path: path, Why: noPosition})
		return
	}
	ts := ResolveSecondsPastHour(*l.TimeStamp, recv, MaxODIDAhead)
	fix := Fix{Item: i, Path: path,
		Pos: telemetry.Position{DroneID: drone, Seq: unixMS(ts), TS: ts, Lat: *l.Latitude, Lon: *l.Longitude},
		Src: map[string]string{"drone_id": idPath, "seq": path + ".TimeStamp", "ts": path + ".TimeStamp",
			"lat": path + ".Latitude", "lon": path + ".Longitude", "alt_m": path + ".AltitudeGeo", "alt_ref": path + ".AltitudeGeo",
			"agl_m": path + ".Height", "heading_deg": path + ".Direction", "speed_mps": path + ".SpeedHorizontal",
			"h_accuracy_m": path + ".HorizAccuracy", "v_accuracy_m": path + ".VertAccuracy"},
	}
	fix.Pos.HAccuracyM, fix.Pos.VAccuracyM = classODID(horizontalODID, l.HorizAccuracy), classODID(verticalODID, l.VertAccuracy)
	if a := altitude(l.AltitudeGeo); a != nil {
		fix.Pos.AltM, fix.Pos.AltRef = a, telemetry.RefWGS84
	}
	if l.HeightType != nil && *l.HeightType == ODIDHeightAboveGround {
		fix.Pos.AGLM = altitude(l.Height)
	}
	fix.Pos.HeadingDeg = heading(l.Direction)
	fix.Pos.SpeedMPS = speed(l.SpeedHorizontal)
	r.Fixes = append(r.Fixes, fix)
}
