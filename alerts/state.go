package alerts

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// Zones is what the state machine asks of the zone set; *geofence.Index
// implements it.
type Zones interface {
	// Query appends to dst[:0] the zones containing p (horizontally,
	// vertically, active at p.Time).
	Query(p geofence.Point, dst []geofence.Hit) []geofence.Hit
	// StillInside is the hysteresis test for an active alarm.
	StillInside(zoneID string, p geofence.Point) bool
	// Zone returns the zone with the given id.
	Zone(id string) (*geofence.Zone, bool)
}

// NoSeq is the highest seq of a drone never seen.
const NoSeq int64 = -1

// DroneState is what the alerter remembers of one drone: the seq of its
// last applied record, its active alarms, its last applied position (whose
// ts, with Seq, is where the drone's order stands) and when its track was
// last sampled. Stored as JSON in Redis (docs/redis-layout.md); states
// written before Pos, TrackMS and Resets existed decode with them zero.
type DroneState struct {
	Seq    int64         `json:"seq"`
	Alarms []ActiveAlarm `json:"in,omitempty"` // sorted by Zone; "in" is the stored name
	// Pos is the position of the last applied record (zero: none yet).
	Pos Fix `json:"pos,omitzero"`
	// TrackMS is the ts, in Unix milliseconds, of the drone's last track
	// sample (0: none): kept with the state, so that sampling goes on at
	// the same pace across restarts and partition moves.
	TrackMS int64 `json:"tk,omitempty"`
	// Resets counts the applied records whose seq was not above the one
	// before (a feed that restarted its counter, or the drone's records
	// after a wild seq): each starts a new run of seqs, and the alarm ids
	// raised in run r > 0 name r, so a seq used again never reuses an id
	// (AlarmIDAt).
	Resets int64 `json:"rs,omitempty"`
	// Seen is when the drone's last applied record was received, on the
	// log's clock (its Kafka timestamp), in unix milliseconds (0: not
	// known, a state written before the clock). Silence is measured from
	// it: signal lost, the drone forgotten.
	Seen int64 `json:"ls,omitempty"`
	// LastRaise is the log time of the drone's last raise, in unix
	// milliseconds (0: none known): a drone is forgotten only when it is
	// older than the unique keys' life, so a returning drone cannot raise
	// under an id whose key still holds.
	LastRaise int64 `json:"lr,omitempty"`
	// VE and VN are the drone's velocity east and north in m/s, when VK
	// (approach.go): smoothed over its positions, so kept with the state.
	VE float64 `json:"ve,omitempty"`
	VN float64 `json:"vn,omitempty"`
	VK bool    `json:"vk,omitempty"`
	// Approaches are its approach episodes and the zones it nears, by
	// zone id (approach.go).
	Approaches []ApproachState `json:"ap,omitempty"`
	// Op is the drone's pilot as last reported (zero: never): kept from
	// the last position that carried one, so a position without it keeps
	// the last known. Shown and reported, never deciding an alarm.
	Op OperatorFix `json:"op,omitzero"`
}

// OperatorFix is where a drone's pilot stood as a position reported it:
// the state's last known and a raised event's "operator". TS is the ts of
// the position that carried it (its age is measured from it).
type OperatorFix struct {
	Lat  float64   `json:"lat"`
	Lon  float64   `json:"lon"`
	AltM *float64  `json:"alt_m,omitempty"` // geodetic (WGS84), when reported
	Type string    `json:"type,omitempty"`  // takeoff, live, fixed ("" not known)
	TS   time.Time `json:"ts"`
}

// IsZero reports whether o is no pilot position (encoding/json's omitzero
// asks it, and so does AppendEncode).
func (o OperatorFix) IsZero() bool {
	return o.TS.IsZero() && o.Lat == 0 && o.Lon == 0 && o.AltM == nil && o.Type == ""
}

// AppendJSON appends o's JSON to dst, byte for byte encoding/json's.
func (o *OperatorFix) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"lat":`...)
	dst = appendFloat(dst, o.Lat)
	dst = append(dst, `,"lon":`...)
	dst = appendFloat(dst, o.Lon)
	if o.AltM != nil {
		dst = append(dst, `,"alt_m":`...)
		dst = appendFloat(dst, *o.AltM)
	}
	if o.Type != "" {
		dst = append(dst, `,"type":`...)
		dst = appendString(dst, o.Type)
	}
	dst = append(dst, `,"ts":`...)
	dst = appendTime(dst, o.TS)
	return append(dst, '}')
}

// Fix is one position of a drone as the alerter keeps it: the last known
// position in its state and each point of its short track, in the same
// compact JSON.
type Fix struct {
	TS     time.Time `json:"ts"`
	Lat    float64   `json:"lat"`
	Lon    float64   `json:"lon"`
	AltM   *float64  `json:"alt,omitempty"` // alt_m of the record, when it had one
	AltRef string    `json:"ref,omitempty"` // its alt_ref (amsl when the record gave none)
	// AGL is the record's agl_m, when it had one: the log's clock judges
	// zones around the last known position, AGL limits included.
	AGL *float64 `json:"agl,omitempty"`
	// Drop is the record's dropped: the optional fields ingest dropped
	// from it as out of range or outside every convention.
	Drop string `json:"drop,omitempty"`
}

// IsZero reports whether f is no position at all (encoding/json's
// omitzero asks it, and so does AppendEncode: the two agree by
// construction).
func (f Fix) IsZero() bool { return f == Fix{} }

// FixOf returns the kept form of a telemetry position.
func FixOf(p *telemetry.Position) Fix {
	f := Fix{TS: p.TS.UTC(), Lat: p.Lat, Lon: p.Lon, Drop: p.Dropped, AGL: p.AGLM}
	if p.AltM != nil {
		f.AltM = p.AltM
		f.AltRef = p.Ref()
	}
	return f
}

// AppendJSON appends f's JSON to dst, byte for byte encoding/json's: the
// form of a track point (docs/redis-layout.md).
func (f *Fix) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"ts":`...)
	dst = appendTime(dst, f.TS)
	dst = append(dst, `,"lat":`...)
	dst = appendFloat(dst, f.Lat)
	dst = append(dst, `,"lon":`...)
	dst = appendFloat(dst, f.Lon)
	if f.AltM != nil {
		dst = append(dst, `,"alt":`...)
		dst = appendFloat(dst, *f.AltM)
	}
	if f.AltRef != "" {
		dst = append(dst, `,"ref":`...)
		dst = appendString(dst, f.AltRef)
	}
	if f.AGL != nil {
		dst = append(dst, `,"agl":`...)
		dst = appendFloat(dst, *f.AGL)
	}
	if f.Drop != "" {
		dst = append(dst, `,"drop":`...)
		dst = appendString(dst, f.Drop)
	}
	return append(dst, '}')
}

// DecodeFix parses a track point.
func DecodeFix(b []byte) (Fix, error) {
	var f Fix
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("alerts: bad track point %q: %w", b, err)
	}
	return f, nil
}

// DefaultTrackInterval is the engine's default spacing of track samples,
// in the positions' ts: at most one point per drone per interval.
const DefaultTrackInterval = 10 * time.Second

// SampleTrack reports whether the state's current position (the last
// Step) is due as a track point, every apart in ts from the last sample,
// and if so records it as the last sample. The first position is always
// due, and so is one whose ts went back before the last sample (a drone
// clock reset must not stop its track).
func (s *DroneState) SampleTrack(every time.Duration) bool {
	ts := s.Pos.TS.UnixMilli()
	if s.TrackMS != 0 && ts >= s.TrackMS && ts-s.TrackMS < every.Milliseconds() {
		return false
	}
	s.TrackMS = ts
	return true
}

// ActiveAlarm is one alarm a drone has raised and not yet cleared.
type ActiveAlarm struct {
	Zone      string `json:"zone"`
	Alarm     string `json:"alarm"`
	FP        string `json:"fp"`   // the zone's fingerprint when raised
	RaisedSeq int64  `json:"rseq"` // the seq that raised it
	Name      string `json:"name,omitempty"`
	Category  string `json:"cat,omitempty"`
	// Lost is, while the drone's signal is lost, the log time (unix ms)
	// it was last heard; 0 while it is heard. Losses counts the losses so
	// far: the n-th loss's events are alarm_id:signal_lost:n and
	// alarm_id:signal_regained:n.
	Lost   int64 `json:"lost,omitempty"`
	Losses int64 `json:"nl,omitempty"`
	// Auth is the authorisation covering the alarm when last looked at
	// ("" none), with its reference and end (unix ms) for the event that
	// says it ended; AuthN counts the alarm's authorized and unauthorized
	// events so far (their ids' n).
	Auth      string `json:"auth,omitempty"`
	AuthRef   string `json:"aref,omitempty"`
	AuthUntil int64  `json:"auntil,omitempty"`
	AuthN     int64  `json:"na,omitempty"`
}

// NewDroneState returns the state of a drone never seen.
func NewDroneState() DroneState { return DroneState{Seq: NoSeq} }

// DecodeDroneState parses a stored state.
func DecodeDroneState(b []byte) (DroneState, error) {
	var s DroneState
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("alerts: bad drone state %q: %w", b, err)
	}
	return s, nil
}

// Encode returns the stored form of the state.
func (s *DroneState) Encode() []byte { return s.AppendEncode(nil) }

// AppendEncode appends the stored form of the state to dst: byte for byte
// what encoding/json.Marshal gives (a test and a fuzz target hold it to
// that), without reflection, since every batch encodes the state of every
// drone it saw.
func (s *DroneState) AppendEncode(dst []byte) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, s.Seq, 10)
	if len(s.Alarms) > 0 {
		dst = append(dst, `,"in":[`...)
		for i := range s.Alarms {
			a := &s.Alarms[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"zone":`...)
			dst = appendString(dst, a.Zone)
			dst = append(dst, `,"alarm":`...)
			dst = appendString(dst, a.Alarm)
			dst = append(dst, `,"fp":`...)
			dst = appendString(dst, a.FP)
			dst = append(dst, `,"rseq":`...)
			dst = strconv.AppendInt(dst, a.RaisedSeq, 10)
			if a.Name != "" {
				dst = append(dst, `,"name":`...)
				dst = appendString(dst, a.Name)
			}
			if a.Category != "" {
				dst = append(dst, `,"cat":`...)
				dst = appendString(dst, a.Category)
			}
			if a.Lost != 0 {
				dst = append(dst, `,"lost":`...)
				dst = strconv.AppendInt(dst, a.Lost, 10)
			}
			if a.Losses != 0 {
				dst = append(dst, `,"nl":`...)
				dst = strconv.AppendInt(dst, a.Losses, 10)
			}
			if a.Auth != "" {
				dst = append(dst, `,"auth":`...)
				dst = appendString(dst, a.Auth)
			}
			if a.AuthRef != "" {
				dst = append(dst, `,"aref":`...)
				dst = appendString(dst, a.AuthRef)
			}
			if a.AuthUntil != 0 {
				dst = append(dst, `,"auntil":`...)
				dst = strconv.AppendInt(dst, a.AuthUntil, 10)
			}
			if a.AuthN != 0 {
				dst = append(dst, `,"na":`...)
				dst = strconv.AppendInt(dst, a.AuthN, 10)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if !s.Pos.IsZero() {
		dst = append(dst, `,"pos":`...)
		dst = s.Pos.AppendJSON(dst)
	}
	if s.TrackMS != 0 {
		dst = append(dst, `,"tk":`...)
		dst = strconv.AppendInt(dst, s.TrackMS, 10)
	}
	if s.Resets != 0 {
		dst = append(dst, `,"rs":`...)
		dst = strconv.AppendInt(dst, s.Resets, 10)
	}
	if s.Seen != 0 {
		dst = append(dst, `,"ls":`...)
		dst = strconv.AppendInt(dst, s.Seen, 10)
	}
	if s.LastRaise != 0 {
		dst = append(dst, `,"lr":`...)
		dst = strconv.AppendInt(dst, s.LastRaise, 10)
	}
	if s.VE != 0 {
		dst = append(dst, `,"ve":`...)
		dst = appendFloat(dst, s.VE)
	}
	if s.VN != 0 {
		dst = append(dst, `,"vn":`...)
		dst = appendFloat(dst, s.VN)
	}
	if s.VK {
		dst = append(dst, `,"vk":true`...)
	}
	if len(s.Approaches) > 0 {
		dst = append(dst, `,"ap":[`...)
		for i := range s.Approaches {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.Approaches[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	if !s.Op.IsZero() {
		dst = append(dst, `,"op":`...)
		dst = s.Op.AppendJSON(dst)
	}
	return append(dst, '}')
}

// Point is the geofence's point of the kept position at time at: its
// heights are the record's (alt_m in its reference, agl_m), as PointOf
// gives them.
func (f *Fix) Point(at time.Time) geofence.Point {
	pt := geofence.Point{Lat: f.Lat, Lon: f.Lon, Time: at}
	if f.AltM != nil {
		if r, ok := geofence.ParseRef(f.AltRef); ok {
			pt.Heights = pt.Heights.Set(r, *f.AltM)
		}
	}
	if f.AGL != nil && (f.AltM == nil || f.AltRef != telemetry.RefAGL) {
		pt.Heights = pt.Heights.Set(geofence.AGL, *f.AGL)
	}
	return pt
}

// PointOf converts a telemetry position to the geofence's point, with its
// height in every reference the record gives one in.
func PointOf(p *telemetry.Position) geofence.Point {
	pt := geofence.Point{Lat: p.Lat, Lon: p.Lon, Time: p.TS}
	for _, r := range [...]geofence.Ref{geofence.AMSL, geofence.WGS84, geofence.AGL} {
		if h, ok := p.Height(r.String()); ok {
			pt.Heights = pt.Heights.Set(r, h)
		}
	}
	return pt
}

// After reports whether p comes after the drone's last applied record in
// the drone's own order: by ts, then by seq (docs/exactly-once.md, "A
// drone's order"). A record not after it — the same (ts, seq) again, or
// an earlier one — is a duplicate or stale. Ordering by ts first means no
// seq, however wild, holds a drone's later records back, and a feed whose
// counter restarted goes on being heard. A state written before states
// kept their position has only its seq to go by.
func (s *DroneState) After(p *telemetry.Position) bool {
	switch {
	case s.Seq == NoSeq:
		return true
	case s.Pos.IsZero():
		return p.Seq > s.Seq
	case !p.TS.Equal(s.Pos.TS):
		return p.TS.After(s.Pos.TS)
	}
	return p.Seq > s.Seq
}

// Step applies one position to a drone's state, the state machine of
// docs/design.md, and makes it the state's last position. It returns false
// (and changes nothing) when the position is a duplicate or stale: not
// After the state's last. Otherwise it appends the position's events to
// dst — clears first, then raises, each in zone id order — with Partition
// and Offset left zero, and returns the events and true. hits is scratch
// space for the zone query (may be nil).
func Step(s *DroneState, p *telemetry.Position, zs Zones, hits []geofence.Hit, dst []Event) ([]Event, []geofence.Hit, bool) {
	if !s.After(p) {
		return dst, hits, false
	}
	if s.Seq != NoSeq && p.Seq <= s.Seq {
		s.Resets++
	}
	s.Seq = p.Seq
	s.Pos = FixOf(p)
	if o := p.Operator; o != nil {
		s.Op = OperatorFix{Lat: o.Lat, Lon: o.Lon, AltM: o.AltM, Type: o.Type, TS: p.TS.UTC()}
	}
	pt := PointOf(p)
	hits = zs.Query(pt, hits)

	// Clears: every active alarm whose zone no longer holds the drone.
	kept := s.Alarms[:0]
	for _, a := range s.Alarms {
		reason := ""
		z, ok := zs.Zone(a.Zone)
		switch {
		case !ok:
			reason = ReasonZoneRemoved
		case z.Fingerprint != a.FP:
			reason = ReasonZoneChanged
		case !z.Active(p.TS):
			reason = ReasonZoneInactive
		case hitIndex(hits, a.Zone) >= 0 || zs.StillInside(a.Zone, pt):
			kept = append(kept, a)
			continue
		default:
			reason = ReasonExited
		}
		e := newEvent(p, Cleared, EventID(a.Alarm, Cleared), a.Alarm, a.Zone, a.Name, a.Category)
		e.Reason = reason
		dst = append(dst, e)
	}
	s.Alarms = kept

	// Raises: every zone that holds the drone and has no active alarm.
	first := len(dst)
	for _, h := range hits {
		if s.hasAlarm(h.Zone.ID) {
			continue
		}
		id, eventID := raisedIDs(p.DroneID, h.Zone.ID, p.Seq, s.Resets)
		e := newEvent(p, Raised, eventID, id, h.Zone.ID, h.Zone.Name, string(h.Zone.Category))
		e.HeightAssumed = h.HeightAssumed
		e.Operator = s.operator()
		dst = append(dst, e)
		s.Alarms = append(s.Alarms, ActiveAlarm{Zone: h.Zone.ID, Alarm: id, FP: h.Zone.Fingerprint, RaisedSeq: p.Seq,
			Name: h.Zone.Name, Category: string(h.Zone.Category)})
	}
	if len(dst)-first > 1 {
		slices.SortFunc(dst[first:], func(a, b Event) int { return strings.Compare(a.ZoneID, b.ZoneID) })
	}
	if len(s.Alarms) > 1 {
		slices.SortFunc(s.Alarms, func(a, b ActiveAlarm) int { return strings.Compare(a.Zone, b.Zone) })
	}
	return dst, hits, true
}

// operator is the pilot as known now, for a raised event (nil: never
// reported).
func (s *DroneState) operator() *OperatorFix {
	if s.Op.IsZero() {
		return nil
	}
	o := s.Op
	return &o
}

func (s *DroneState) hasAlarm(zone string) bool {
	for i := range s.Alarms {
		if s.Alarms[i].Zone == zone {
			return true
		}
	}
	return false
}

func hitIndex(hits []geofence.Hit, zone string) int {
	for i := range hits {
		if hits[i].Zone.ID == zone {
			return i
		}
	}
	return -1
}

func newEvent(p *telemetry.Position, typ, eventID, alarm, zone, name, category string) Event {
	e := Event{
		EventID: eventID, AlarmID: alarm, Type: typ,
		DroneID: p.DroneID, ZoneID: zone, ZoneName: name, Category: category,
		Seq: p.Seq, TS: p.TS.UTC(), Lat: p.Lat, Lon: p.Lon,
	}
	if p.AltM != nil {
		e.AltM = p.AltM
		e.AltRef = p.Ref()
	}
	return e
}
