package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// Approaching warnings (docs/design.md, "Approaching warnings"): a drone
// predicted to enter a zone within the zone's horizon, or closing on it
// within the buffer, at two consecutive positions, opens one approach
// episode — one approaching event — that ends silently with the raise, or
// with one approach_ended when it turned away for 10 s of its own time,
// its signal was lost, or the zone was removed. Every decision is a
// function of the drone's records in order (its velocity and episodes are
// in its stored state), the zone and authorisation versions and the log's
// clock, so it is made once, live or in a replay.

// Event types of an approach.
const (
	Approaching   = "approaching"
	ApproachEnded = "approach_ended"
)

// Reasons of an approach_ended event.
const (
	ReasonTurnedAway = "turned_away"
	// ReasonSignalLost: the drone was not heard for the signal-lost time.
	ReasonSignalLost = "signal_lost"
	// ReasonZoneRemoved (also a clear's reason) ends an approach of a zone
	// no longer in the set.
)

// Approach rules' constants (the design's).
const (
	// approachMinSpeed is the speed below which a path is not predicted:
	// a hovering drone's velocity is GNSS noise.
	approachMinSpeed = 1.0
	// velocityTau is the velocity's smoothing time constant.
	velocityTau = 4 * time.Second
	// velocityGap forgets the velocity: positions farther apart than this
	// say nothing of the present motion.
	velocityGap = 10 * time.Second
	// approachAway is how long a drone is outside an episode's hold band
	// before the episode ends (turned away).
	approachAway = 10 * time.Second
	// approachHold widens the horizon and the buffer into the hold band.
	approachHold = 1.5
	// closingRate is the decrease of distance along the drone's velocity,
	// in metres per second, that counts as closing.
	closingRate = 0.5
	// metresPerDegree is the flat frame's scale (the contract's sphere,
	// 6378137 m).
	metresPerDegree = 6378137 * math.Pi / 180
)

// ApproachSettings configure approaching warnings. The zero value turns
// them off.
type ApproachSettings struct {
	// Before is the horizon by zone category, "*" for every category not
	// listed; a zone's own approach_before_s overrides it; 0 is off.
	Before map[string]time.Duration
	// BufferM warns a drone closing on a zone this close, whatever its
	// predicted time.
	BufferM float64
}

// On reports whether any warning can be given.
func (a ApproachSettings) On() bool {
	for _, d := range a.Before {
		if d > 0 {
			return true
		}
	}
	return false
}

// horizon is zone z's horizon (0: no warning).
func (a *ApproachSettings) horizon(z *geofence.Zone) time.Duration {
	if z.ApproachBefore > 0 {
		return z.ApproachBefore
	}
	if d, ok := a.Before[string(z.Category)]; ok {
		return d
	}
	return a.Before["*"]
}

// SetApproach sets the approaching warnings (off until called).
func (e *Engine) SetApproach(a ApproachSettings) {
	e.apSet = a
	e.apMax = 0
	for _, d := range a.Before {
		e.apMax = max(e.apMax, d)
	}
	e.apZones = nil
}

// ApproachState is a drone's approach state for one zone: an open
// episode, or a zone that qualified at its last position.
type ApproachState struct {
	Zone string `json:"zone"`
	// ID is the open episode's approach id ("" none open).
	ID string `json:"id,omitempty"`
	// N counts the consecutive positions the zone qualified at.
	N int64 `json:"n,omitempty"`
	// Away is the ts (unix ms) the drone left the open episode's hold
	// band, 0 while within it.
	Away int64 `json:"away,omitempty"`
	// The open episode's last prediction, for the API and the map: time
	// to entry (seconds; nil when only near) and the entry point.
	EtaS     *float64 `json:"eta,omitempty"`
	EntryLat float64  `json:"elat,omitempty"`
	EntryLon float64  `json:"elon,omitempty"`
}

// approaches is what an approach needs of the zone set; *geofence.Index
// has it.
type approaches interface {
	Approaches(p geofence.Point, vE, vN, horizonS, bufferM float64, dst []geofence.Approach) []geofence.Approach
}

// distances measures how far a point is from a zone's area (the closing
// test).
type distances interface {
	DistanceM(zoneID string, p geofence.Point) (float64, bool)
}

// ApproachID is the id of the approach episode a drone's position with
// seq (in its run resets) opened for a zone: the first 16 bytes of
// SHA-256("approach" 0x00 drone 0x00 zone 0x00 seq [0x00 resets]), hex.
func ApproachID(drone, zone string, seq, resets int64) string {
	b := make([]byte, 0, 32+len(drone)+len(zone))
	b = append(b, "approach\x00"...)
	b = append(b, drone...)
	b = append(b, 0)
	b = append(b, zone...)
	b = append(b, 0)
	b = strconv.AppendInt(b, seq, 10)
	if resets != 0 {
		b = append(b, 0)
		b = strconv.AppendInt(b, resets, 10)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// updateVelocity sets d's velocity from p, the position just applied, and
// prev, the one before it (zero: none).
func updateVelocity(d *DroneState, prev *Fix, p *telemetry.Position) {
	if p.SpeedMPS != nil && p.HeadingDeg != nil {
		h := *p.HeadingDeg * math.Pi / 180
		d.VE, d.VN, d.VK = *p.SpeedMPS*math.Sin(h), *p.SpeedMPS*math.Cos(h), true
		return
	}
	dt := p.TS.Sub(prev.TS)
	if prev.IsZero() || dt <= 0 || dt > velocityGap {
		d.VE, d.VN, d.VK = 0, 0, false
		return
	}
	s := dt.Seconds()
	dLon := p.Lon - prev.Lon
	if dLon > 180 {
		dLon -= 360
	} else if dLon < -180 {
		dLon += 360
	}
	rawE := dLon * math.Cos(prev.Lat*math.Pi/180) * metresPerDegree / s
	rawN := (p.Lat - prev.Lat) * metresPerDegree / s
	if !d.VK {
		d.VE, d.VN, d.VK = rawE, rawN, true
		return
	}
	k := math.Min(1, s/velocityTau.Seconds())
	d.VE += k * (rawE - d.VE)
	d.VN += k * (rawN - d.VN)
}

// approach decides d's approaches at the position p just applied (after
// its raises and clears), prev the position before it, and appends the
// events.
func (e *Engine) approach(d *drone, prev *Fix, p *telemetry.Position, events []Event) []Event {
	updateVelocity(&d.DroneState, prev, p)
	ax, ok := e.zones.(approaches)
	horizon := e.maxHorizon()
	if !ok || horizon <= 0 {
		d.Approaches = nil
		return events
	}
	a := &e.apSet
	vE, vN := 0.0, 0.0
	if d.VK {
		vE, vN = d.VE, d.VN
	}
	speed := math.Hypot(vE, vN)
	pt := PointOf(p)
	e.aps = ax.Approaches(pt, vE, vN, approachHold*horizon.Seconds(), approachHold*a.BufferM, e.aps[:0])
	ts := p.TS.UnixMilli()
	first := len(events)
	old := d.Approaches
	if len(old) == 0 && len(e.aps) == 0 {
		return events // far from every zone: nothing to decide, nothing allocated
	}
	next := make([]ApproachState, 0, len(old)+len(e.aps))
	seen := e.apSeen[:0]
	for i := range e.aps {
		r := &e.aps[i]
		z := r.Zone
		h := a.horizon(z).Seconds()
		if h <= 0 || d.hasAlarm(z.ID) {
			continue
		}
		seen = append(seen, z.ID)
		// An authorised drone is not warned of: the zone does not qualify
		// (an episode already open runs its course).
		_, covered := e.auths.Covering(d.id, z.ID, z.Category, e.decisionTime(d))
		st := ApproachState{Zone: z.ID}
		if o := findApproach(old, z.ID); o != nil {
			st = *o
		}
		predicted := !covered && speed >= approachMinSpeed && r.EtaS >= 0 && r.EtaS <= h
		closing := !covered && speed >= approachMinSpeed && r.DistM <= a.BufferM && e.closing(z.ID, p, vE, vN, r.DistM)
		hold := (r.EtaS >= 0 && r.EtaS <= approachHold*h) || r.DistM <= approachHold*a.BufferM
		switch {
		case predicted || closing:
			st.N++
			st.Away = 0
			st.EtaS, st.EntryLat, st.EntryLon = nil, 0, 0
			if predicted {
				eta := r.EtaS
				st.EtaS, st.EntryLat, st.EntryLon = &eta, r.EntryLat, r.EntryLon
			}
			if st.ID == "" && st.N >= 2 {
				st.ID = ApproachID(d.id, z.ID, p.Seq, d.Resets)
				ev := newEvent(p, Approaching, st.ID+":"+Approaching, st.ID, z.ID, z.Name, string(z.Category))
				dist := r.DistM
				ev.DistanceM = &dist
				if predicted {
					eta := r.EtaS
					ev.EtaS, ev.Entry = &eta, &LatLon{Lat: r.EntryLat, Lon: r.EntryLon}
				}
				events = append(events, ev)
			}
		case st.ID != "":
			st.N = 0
			if hold {
				st.Away = 0
			} else if events = e.away(d, &st, p, ts, events); st.ID == "" {
				st = ApproachState{Zone: z.ID}
			}
		default:
			st.N = 0
		}
		if st.ID != "" || st.N > 0 {
			next = append(next, st)
		}
	}
	// Zones not listed now: outside every hold band (or no longer in the
	// set, raised, inactive, out of their vertical limits).
	for i := range old {
		st := old[i]
		if slices.Contains(seen, st.Zone) || st.ID == "" || d.hasAlarm(st.Zone) {
			continue
		}
		if _, ok := e.zones.Zone(st.Zone); !ok {
			events = append(events, e.ended(d, &st, p, ReasonZoneRemoved))
			continue
		}
		st.N = 0
		if events = e.away(d, &st, p, ts, events); st.ID != "" {
			next = append(next, st)
		}
	}
	e.apSeen = seen[:0]
	if len(next) > 1 {
		slices.SortFunc(next, func(a, b ApproachState) int { return strings.Compare(a.Zone, b.Zone) })
	}
	if len(next) == 0 {
		next = nil
	}
	d.Approaches = next
	if len(events)-first > 1 {
		slices.SortStableFunc(events[first:], func(a, b Event) int { return strings.Compare(a.ZoneID, b.ZoneID) })
	}
	return events
}

// away handles an open episode whose drone is outside its hold band at ts:
// it starts the 10 s, or ends the episode (turned away) when they have
// passed.
func (e *Engine) away(d *drone, st *ApproachState, p *telemetry.Position, ts int64, events []Event) []Event {
	switch {
	case st.Away == 0:
		st.Away = ts
	case time.Duration(ts-st.Away)*time.Millisecond >= approachAway:
		events = append(events, e.ended(d, st, p, ReasonTurnedAway))
		st.ID = ""
	}
	return events
}

// ended is the approach_ended event of st's episode at position p.
func (e *Engine) ended(d *drone, st *ApproachState, p *telemetry.Position, reason string) Event {
	name, cat := st.Zone, ""
	if z, ok := e.zones.Zone(st.Zone); ok {
		name, cat = z.Name, string(z.Category)
	}
	ev := newEvent(p, ApproachEnded, st.ID+":"+ApproachEnded, st.ID, st.Zone, name, cat)
	ev.Reason = reason
	return ev
}

// loseApproaches ends every open episode of d, silent for the signal-lost
// time (the clock's scan).
func (e *Engine) loseApproaches(d *drone, events []Event) []Event {
	for _, st := range d.Approaches {
		if st.ID == "" {
			continue // a zone that qualified once is forgotten with the silence too
		}
		name, cat := st.Zone, ""
		if z, ok := e.zones.Zone(st.Zone); ok {
			name, cat = z.Name, string(z.Category)
		}
		ev := e.clockEvent(d, ApproachEnded, st.ID+":"+ApproachEnded, st.ID, st.Zone, name, cat)
		ev.Reason = ReasonSignalLost
		events = append(events, ev)
	}
	d.Approaches = nil
	return events
}

// openApproach reports whether d has an open approach episode.
func (d *DroneState) openApproach() bool {
	for i := range d.Approaches {
		if d.Approaches[i].ID != "" {
			return true
		}
	}
	return false
}

func findApproach(l []ApproachState, zone string) *ApproachState {
	for i := range l {
		if l[i].Zone == zone {
			return &l[i]
		}
	}
	return nil
}

// closing reports whether the drone at p, moving at (vE, vN), is dist
// from the zone now and more than closingRate metres closer a second of
// travel on: its velocity, smoothed, closes on the zone (a raw distance
// difference would be GNSS noise).
func (e *Engine) closing(zone string, p *telemetry.Position, vE, vN, dist float64) bool {
	ds, ok := e.zones.(distances)
	if !ok {
		return false
	}
	lat := p.Lat + vN/metresPerDegree
	lon := p.Lon + vE/(metresPerDegree*math.Cos(p.Lat*math.Pi/180))
	next, ok := ds.DistanceM(zone, geofence.Point{Lat: lat, Lon: lon, Time: p.TS})
	return ok && next < dist-closingRate
}

// maxHorizon is the longest horizon of the settings and of the zone set's
// own approach_before_s, computed once per zone set.
func (e *Engine) maxHorizon() time.Duration {
	if e.apZones != e.zones || e.apZones == nil {
		e.apZones = e.zones
		e.apZoneMax = e.apMax
		if all, ok := e.zones.(interface{ Zones() []*geofence.Zone }); ok {
			for _, z := range all.Zones() {
				e.apZoneMax = max(e.apZoneMax, z.ApproachBefore)
			}
		}
	}
	return e.apZoneMax
}

// LatLon is a point an event names besides the drone's position: an
// approach's predicted entry.
type LatLon struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
}

// appendJSON appends the state as encoding/json would.
func (a *ApproachState) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"zone":`...)
	dst = appendString(dst, a.Zone)
	if a.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = appendString(dst, a.ID)
	}
	if a.N != 0 {
		dst = append(dst, `,"n":`...)
		dst = strconv.AppendInt(dst, a.N, 10)
	}
	if a.Away != 0 {
		dst = append(dst, `,"away":`...)
		dst = strconv.AppendInt(dst, a.Away, 10)
	}
	if a.EtaS != nil {
		dst = append(dst, `,"eta":`...)
		dst = appendFloat(dst, *a.EtaS)
	}
	if a.EntryLat != 0 {
		dst = append(dst, `,"elat":`...)
		dst = appendFloat(dst, a.EntryLat)
	}
	if a.EntryLon != 0 {
		dst = append(dst, `,"elon":`...)
		dst = appendFloat(dst, a.EntryLon)
	}
	return append(dst, '}')
}

// Defaults of the approaching warnings (--approach-before,
// --approach-buffer).
const (
	DefaultApproachBefore  = "*=30s"
	DefaultApproachBufferM = 50
)

// MaxApproachBefore bounds a horizon: a straight-line prediction over
// longer says little.
const MaxApproachBefore = time.Hour

// ParseApproachBefore reads "category=duration,...", "*" for every other
// category; "off" (or "") is none.
func ParseApproachBefore(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if t := strings.TrimSpace(s); t == "" || t == "off" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		cat, dur, ok := strings.Cut(strings.TrimSpace(item), "=")
		cat = strings.TrimSpace(cat)
		if !ok || cat == "" {
			return nil, fmt.Errorf("%q is not category=duration", item)
		}
		if _, dup := out[cat]; dup {
			return nil, fmt.Errorf("category %q twice", cat)
		}
		d, err := time.ParseDuration(strings.TrimSpace(dur))
		if err != nil || d < 0 || d > MaxApproachBefore {
			return nil, fmt.Errorf("%s: %q is not a duration from 0s to %s", cat, dur, MaxApproachBefore)
		}
		out[cat] = d
	}
	return out, nil
}
