package alerts

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// AppendJSON appends the event's JSON to dst: byte for byte what
// encoding/json.Marshal gives (a test and a fuzz target hold it to that),
// without reflection, since the engine encodes every event on the hot path.
func (e *Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event_id":`...)
	dst = appendString(dst, e.EventID)
	dst = append(dst, `,"alarm_id":`...)
	dst = appendString(dst, e.AlarmID)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, e.Type)
	dst = append(dst, `,"drone_id":`...)
	dst = appendString(dst, e.DroneID)
	dst = append(dst, `,"zone_id":`...)
	dst = appendString(dst, e.ZoneID)
	dst = append(dst, `,"zone_name":`...)
	dst = appendString(dst, e.ZoneName)
	dst = append(dst, `,"category":`...)
	dst = appendString(dst, e.Category)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, e.Seq, 10)
	dst = append(dst, `,"ts":`...)
	dst = appendTime(dst, e.TS)
	dst = append(dst, `,"lat":`...)
	dst = appendFloat(dst, e.Lat)
	dst = append(dst, `,"lon":`...)
	dst = appendFloat(dst, e.Lon)
	if e.AltM != nil {
		dst = append(dst, `,"alt_m":`...)
		dst = appendFloat(dst, *e.AltM)
	}
	if e.AltRef != "" {
		dst = append(dst, `,"alt_ref":`...)
		dst = appendString(dst, e.AltRef)
	}
	dst = append(dst, `,"height_assumed":`...)
	dst = strconv.AppendBool(dst, e.HeightAssumed)
	if e.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendString(dst, e.Reason)
	}
	if a := e.Authorization; a != nil {
		dst = append(dst, `,"authorization":{"id":`...)
		dst = appendString(dst, a.ID)
		dst = append(dst, `,"reference":`...)
		dst = appendString(dst, a.Reference)
		dst = append(dst, `,"until":`...)
		dst = appendTime(dst, a.Until)
		dst = append(dst, '}')
	}
	if e.EtaS != nil {
		dst = append(dst, `,"eta_s":`...)
		dst = appendFloat(dst, *e.EtaS)
	}
	if e.DistanceM != nil {
		dst = append(dst, `,"distance_m":`...)
		dst = appendFloat(dst, *e.DistanceM)
	}
	if e.Entry != nil {
		dst = append(dst, `,"entry":{"lat":`...)
		dst = appendFloat(dst, e.Entry.Lat)
		dst = append(dst, `,"lon":`...)
		dst = appendFloat(dst, e.Entry.Lon)
		dst = append(dst, '}')
	}
	if e.LastSeen != nil {
		dst = append(dst, `,"last_seen":`...)
		dst = appendTime(dst, *e.LastSeen)
	}
	if e.AgeS != nil {
		dst = append(dst, `,"age_s":`...)
		dst = appendFloat(dst, *e.AgeS)
	}
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(e.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, e.Offset, 10)
	dst = append(dst, `,"zone_version":`...)
	dst = strconv.AppendInt(dst, e.ZoneVersion, 10)
	if e.By != "" {
		dst = append(dst, `,"by":`...)
		dst = appendString(dst, e.By)
	}
	if e.Note != "" {
		dst = append(dst, `,"note":`...)
		dst = appendString(dst, e.Note)
	}
	if e.Operator != nil {
		dst = append(dst, `,"operator":`...)
		dst = e.Operator.AppendJSON(dst)
	}
	return append(dst, '}')
}

// appendString appends s as encoding/json would: plain printable ASCII
// without " \ < > & directly, anything else through json.Marshal.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func appendTime(dst []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		b, err := json.Marshal(t)
		if err != nil {
			return append(dst, "null"...)
		}
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendFloat is encoding/json's float64 encoding.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...) // never produced: telemetry rejects them
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
