package telemetry

import (
	"bytes"
	"encoding/json"
	"time"
)

// A tick is a record of the telemetry topic that carries no position, only
// time: ingest writes one to every partition at least once a second
// (internal/ingestd's ticker), so that a partition with no traffic still
// has a clock. The alerter's clock for time-driven decisions (signal lost,
// zone windows, drones forgotten) is the log's: each record's Kafka
// timestamp, which ingest sets to its receive time — for a tick, the time
// it wrote it. Its value:
//
//	{"tick":"2026-12-06T01:30:00.123Z","from":"ingest-7f3a"}
//
// "tick" is the writer's clock (the same as the record's timestamp; replay
// reads it where no timestamp travels with the line), "from" names the
// writer. A tick has no drone_id, so nothing that reads positions can take
// it for one: ParseTick tells them apart, and Decode refuses a tick.

// Tick is one clock tick of the telemetry topic.
type Tick struct {
	At   time.Time `json:"tick"`
	From string    `json:"from,omitempty"`
}

// AppendJSON appends the tick's canonical value to dst.
func (t *Tick) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"tick":"`...)
	dst = t.At.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if t.From != "" {
		dst = append(dst, `,"from":`...)
		dst = appendString(dst, t.From)
	}
	return append(dst, '}')
}

var tickPrefix = []byte(`{"tick":`)

// ParseTick reports whether b is a tick and its time: a JSON object with a
// "tick" that is an RFC 3339 time and no "drone_id". Positions never start
// with "tick" (ingest writes drone_id first), so a position costs one
// prefix comparison; an object that names a tick but is not one (no
// valid time, or a drone_id too) is no tick, and then decoding it as a
// position says what is wrong.
func ParseTick(b []byte) (time.Time, bool) {
	b = bytes.TrimSpace(b)
	if !bytes.HasPrefix(b, tickPrefix) {
		if len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(`"tick"`)) {
			return time.Time{}, false
		}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return time.Time{}, false
	}
	raw, ok := m["tick"]
	if _, pos := m["drone_id"]; !ok || pos {
		return time.Time{}, false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return at.UTC(), true
}

// appendString appends s as a JSON string (encoding/json's escaping of
// the few characters a writer name may hold).
func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// HasTickPrefix reports whether b starts as a canonical tick does: the
// cheap test before ParseTick on a hot path.
func HasTickPrefix(b []byte) bool { return bytes.HasPrefix(b, tickPrefix) }
