// Package alerts decides when alarms are raised and cleared: the event
// model, the per-drone state machine (pure, no I/O) and the per-partition
// Engine that applies a batch of telemetry records and hands back what
// dedup.Store must make stick in one versioned commit.
//
// Alarm semantics (docs/design.md): for each (drone, zone), a raise at the first
// applied position inside the zone (horizontally, within its vertical
// limits, zone active at the position's ts) and a clear at the first later
// applied position outside it (beyond clear_buffer_m: geofence's
// Index.StillInside). A record whose seq is not above the drone's highest
// applied seq changes nothing.
//
// Zone-set reloads: an active alarm whose zone was removed, or whose zone's
// fingerprint changed, is cleared with reason zone_removed / zone_changed
// when the drone's next position is applied (not at reload time): every
// event is then caused by one Kafka record, carries that record's seq, ts
// and offset, and a replay of the log with the same zone sets gives the same
// events. A changed zone that still contains the position raises a new
// alarm (a new alarm_id: the raising seq differs) right after the clear.
package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Event types.
const (
	Raised  = "raised"
	Cleared = "cleared"
	Acked   = "acked" // an operator acknowledged the alarm (the HTTP API's ack)
	// SignalLost: nothing was received from the drone of an active alarm
	// for the signal-lost time of the log's clock. The alarm stays active.
	SignalLost = "signal_lost"
	// SignalRegained: the first position from a drone whose alarm had
	// lost its signal; the position is then decided as usual.
	SignalRegained = "signal_regained"
	// Authorized: an active alarm became covered by an authorisation (one
	// started, or one was made, while the drone was inside). It stops
	// paging; nothing is cleared.
	Authorized = "authorized"
	// Unauthorized: the authorisation covering an active alarm ended
	// (expired or revoked) while the drone was inside, and none other
	// covers it: from now on it pages like any alarm.
	Unauthorized = "unauthorized"
)

// Reasons of an unauthorized event.
const (
	ReasonRevoked = "revoked" // the authorisation was revoked (DELETE)
	ReasonExpired = "expired" // its until passed
)

// AuthRef is the authorisation an event carries (raised, authorized: the
// one covering the alarm; unauthorized: the one that ended).
type AuthRef struct {
	ID        string    `json:"id"`
	Reference string    `json:"reference"`
	Until     time.Time `json:"until"`
}

// Reasons of a raised event decided by the log's clock rather than by a
// position (absent on a position's raise).
const (
	// ReasonZoneActivated: the zone's active window opened while the
	// drone's last known position was inside it.
	ReasonZoneActivated = "zone_activated"
	// ReasonZoneChanged (also a clear's reason): the zone set changed — a
	// zone added or changed — and the drone's last known position is inside.
)

// Reasons of a cleared event.
const (
	ReasonExited       = "exited"        // farther than clear_buffer_m outside, or outside its vertical limits
	ReasonZoneRemoved  = "zone_removed"  // a reload removed the zone
	ReasonZoneChanged  = "zone_changed"  // a reload changed the zone's definition (fingerprint)
	ReasonZoneInactive = "zone_inactive" // the zone is not active at the position's ts
)

// Event is one alarm event: the JSON written to the outbox and sent
// downstream. docs/redis-layout.md lists the fields.
type Event struct {
	EventID       string    `json:"event_id"`
	AlarmID       string    `json:"alarm_id"`
	Type          string    `json:"type"`
	DroneID       string    `json:"drone_id"`
	ZoneID        string    `json:"zone_id"`
	ZoneName      string    `json:"zone_name"`
	Category      string    `json:"category"`
	Seq           int64     `json:"seq"`
	TS            time.Time `json:"ts"`
	Lat           float64   `json:"lat"`
	Lon           float64   `json:"lon"`
	AltM          *float64  `json:"alt_m,omitempty"`
	AltRef        string    `json:"alt_ref,omitempty"`
	HeightAssumed bool      `json:"height_assumed"`
	Reason        string    `json:"reason,omitempty"`
	// Authorization is the authorisation covering a raised alarm, or the
	// one an authorized / unauthorized event is about (docs/design.md,
	// "Authorised flights"); nil when none.
	Authorization *AuthRef `json:"authorization,omitempty"`
	// EtaS, DistanceM and Entry are an approaching event's: the predicted
	// seconds to entry and entry point (absent when the drone is only
	// near and closing), and the distance to the zone's area.
	EtaS      *float64 `json:"eta_s,omitempty"`
	DistanceM *float64 `json:"distance_m,omitempty"`
	Entry     *LatLon  `json:"entry,omitempty"`
	// LastSeen and AgeS are a time-driven event's (signal_lost,
	// signal_regained, a raise or clear at a tick): when the drone was last
	// heard, on the log's clock, and how long before the decision that
	// was, in seconds (for signal_regained: how long it was silent).
	LastSeen  *time.Time `json:"last_seen,omitempty"`
	AgeS      *float64   `json:"age_s,omitempty"`
	Partition int        `json:"partition"`
	Offset    int64      `json:"offset"`
	// ZoneVersion is the version of the zone set the event was decided
	// with (0 when the zone set is not versioned).
	ZoneVersion int64 `json:"zone_version"`
	// By and Note are an acked event's: the name of the API token that
	// acknowledged the alarm and its note.
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
	// Operator is a raised event's pilot position as known at the raise:
	// the last one the drone's positions reported, up to and including the
	// raising one (nil: none reported). It never decides the alarm.
	Operator *OperatorFix `json:"operator,omitempty"`
}

// AlarmID is the deterministic id of the alarm that the position with seq
// raised for (drone, zone): the first 16 bytes of SHA-256 of
// "drone\x00zone\x00seq", in hex. It is AlarmIDAt(drone, zone, seq, 0):
// the id of every alarm of a drone whose seq never went back.
func AlarmID(drone, zone string, seq int64) string { return AlarmIDAt(drone, zone, seq, 0) }

// AlarmIDAt is the id of the alarm raised by the position with seq in the
// drone's run of seqs number resets (DroneState.Resets): AlarmID for run 0,
// and for run r > 0 the first 16 bytes of SHA-256 of
// "drone\x00zone\x00seq\x00r", so that a seq a restarted counter uses
// again names another alarm.
func AlarmIDAt(drone, zone string, seq, resets int64) string {
	var buf [32]byte
	return string(appendAlarmID(buf[:0], drone, zone, seq, resets))
}

// appendAlarmID appends AlarmIDAt(drone, zone, seq, resets) to dst (32
// bytes).
func appendAlarmID(dst []byte, drone, zone string, seq, resets int64) []byte {
	var in [160]byte
	b := append(in[:0], drone...)
	b = append(b, 0)
	b = append(b, zone...)
	b = append(b, 0)
	b = strconv.AppendInt(b, seq, 10)
	if resets != 0 {
		b = append(b, 0)
		b = strconv.AppendInt(b, resets, 10)
	}
	sum := sha256.Sum256(b)
	return hex.AppendEncode(dst, sum[:16])
}

// raisedIDs returns the alarm id and the raised event's id of the alarm
// (drone, zone, seq, resets) in one allocation: the alarm id is the event
// id's first 32 bytes.
func raisedIDs(drone, zone string, seq, resets int64) (alarm, event string) {
	var buf [32 + 1 + len(Raised)]byte
	b := appendAlarmID(buf[:0], drone, zone, seq, resets)
	b = append(b, ':')
	b = append(b, Raised...)
	event = string(b)
	return event[:32], event
}

// EventID is the id of an alarm's event of type typ: alarm_id:type.
func EventID(alarmID, typ string) string { return alarmID + ":" + typ }

// SignalEventID is the id of the n-th signal_lost or signal_regained event
// of an alarm (n from 1): alarm_id:type:n. An alarm may lose and regain its
// drone's signal many times; each time is its own event.
func SignalEventID(alarmID, typ string, n int64) string {
	return alarmID + ":" + typ + ":" + strconv.FormatInt(n, 10)
}

// AlarmIDTick is the id of an alarm raised by the log's clock rather than
// by a position (a zone's window opened, or the zone set changed, around
// the drone's last known position): the first 16 bytes of SHA-256 of
// "drone\x00zone\x00@clock", clock the log time of the decision in unix
// milliseconds. The raising position may have raised the zone before (a
// window that closed and opened again over a silent drone), so its seq
// cannot name the alarm; the decision's time can, as a drone raises a zone
// at most once at one instant.
func AlarmIDTick(drone, zone string, clockMS int64) string {
	var in [160]byte
	b := append(in[:0], drone...)
	b = append(b, 0)
	b = append(b, zone...)
	b = append(b, 0, '@')
	b = strconv.AppendInt(b, clockMS, 10)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
