package alerts

import (
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// The log's clock, and what the alerter decides by it rather than by a
// position (docs/design.md, "Time in the log"; docs/exactly-once.md, "The
// log's clock").
//
// A partition's clock is the highest Kafka timestamp of its records seen so
// far — the time ingest received each, or wrote it for a tick — never the
// alerter's wall clock and never a drone's own ts. Ingest writes a tick to
// every partition at least once a second, so a partition without traffic
// still has a clock. The clock is stored with each batch's commit, so an
// engine rebuilt after a crash or a rebalance resumes it where the log had
// it, and a replay of the same records decides the same.
//
// Decisions are made as each record is applied, before a position is
// decided: when the record's time takes the clock into a new second, the
// engine looks at the drones whose next look has come (a schedule on the
// log's clock, below: the cost is the drones due, not the drones known)
// for
//
//   - signal lost: a drone with an active alarm not heard for
//     SignalLostAfter gets one signal_lost per alarm; the alarms stay
//     active (silence never clears one), and its next position emits
//     signal_regained, then is decided as usual;
//   - zone windows: when a zone's window opens or closes between the last
//     scan and this one — at the drone's own time, its last ts plus the log
//     time since (so a drone whose clock is off is judged at the time its
//     next position would be) — the drone's last known position is judged
//     again: raised (reason zone_activated) or cleared (zone_inactive);
//   - forgetting: a drone with no active alarm, silent for DroneTTL, whose
//     last raise is older than KeepAfterRaise, is removed from the engine
//     and from Redis by the batch's commit.
//
// And at the first record after the zone set changed (a new version), every
// drone's alarms of removed or changed zones are cleared (zone_removed,
// zone_changed) and its last known position raises the zones that now hold
// it (reason zone_changed), without waiting for its next position.
//
// Each such event names the record it was decided at (offset) and carries
// the drone's last known position, when it was last heard (last_seen) and
// how long before the decision (age_s).

// Defaults of Timing.
const (
	DefaultSignalLostAfter = 30 * time.Second
	DefaultDroneTTL        = 24 * time.Hour
	// DefaultKeepAfterRaise is the unique keys' default life (dedup's
	// DefaultEventTTL, 7 days).
	DefaultKeepAfterRaise = 7 * 24 * time.Hour
)

// NoZoneVersion is the engine's zone version before it has evaluated any
// (a partition never committed, or a snapshot without one): the first batch
// takes its zone set without re-judging the drones.
const NoZoneVersion int64 = -1

// Timing sets the clock's decisions. Zero fields take the defaults.
type Timing struct {
	// SignalLostAfter is the silence, on the log's clock, after which an
	// active alarm's drone is declared lost; negative: never.
	SignalLostAfter time.Duration
	// DroneTTL is the silence after which a drone without an active alarm
	// is forgotten; negative: never.
	DroneTTL time.Duration
	// KeepAfterRaise keeps a drone that raised an alarm at least this long
	// after the raise: set it to the unique keys' TTL (--event-ttl), so a
	// forgotten drone that comes back (its seq counter started again) never
	// raises under an id whose key is still held.
	KeepAfterRaise time.Duration
}

func (t Timing) withDefaults() Timing {
	if t.SignalLostAfter == 0 {
		t.SignalLostAfter = DefaultSignalLostAfter
	}
	if t.DroneTTL == 0 {
		t.DroneTTL = DefaultDroneTTL
	}
	if t.KeepAfterRaise == 0 {
		t.KeepAfterRaise = DefaultKeepAfterRaise
	}
	return t
}

// SetTiming sets the clock's decisions (the defaults until called).
func (e *Engine) SetTiming(t Timing) { e.timing = t.withDefaults() }

// advance moves the clock to at (never back) for the record at offset off,
// then makes the decisions due at the new time: the zone set's change if
// zv is new, and once per new second of log time a scan of the drones. self
// is the drone whose position the record is ("" for a tick): its own
// position decides it next, so the scan leaves its zones alone.
func (e *Engine) advance(zs Zones, zv, off int64, at time.Time, self string, events []Event, st *Stats) []Event {
	prev := e.clock
	if !at.IsZero() {
		if t := at.UnixMilli(); t > e.clock {
			e.clock = t
		}
	}
	if zv != e.zv {
		if e.zv != NoZoneVersion {
			events = e.zonesChanged(zs, zv, off, events, st)
		}
		e.zv = zv
	}
	if av := e.authVersion(); av != e.av {
		events = e.authsChanged(zv, off, events, st)
		e.av = av
	}
	if prev > 0 && e.clock/1000 > prev/1000 {
		events = e.scan(zs, zv, off, prev, self, events, st)
	}
	return events
}

// sortedDrones returns ds sorted by drone id: the order the clock's events
// of one record are emitted in, the same live and in a replay.
func sortedDrones(ds []*drone) []*drone {
	slices.SortFunc(ds, func(a, b *drone) int { return strings.Compare(a.id, b.id) })
	return ds
}

// scan makes the decisions due at the clock's new second: it pops the
// drones whose next look (the schedule, below) has come, and for each, in
// drone id order, judges its last known position at its own time now (not
// for self, whose own position decides it next), declares its heard
// alarms lost when it has been silent long enough, and forgets it when it
// has no alarm and has been silent for the TTL; then schedules its next
// look. A drone whose look came early (it was heard since) is only
// scheduled again. The cost is the drones due, not the drones known.
func (e *Engine) scan(zs Zones, zv, off, prev int64, self string, events []Event, st *Stats) []Event {
	t := e.timing
	due := e.due[:0]
	for len(e.sched) > 0 && e.sched[0].at <= e.clock {
		it := heap.Pop(&e.sched).(dueItem)
		if it.d.gone || it.d.dueAt != it.at {
			continue // a look scheduled again since, or a drone forgotten
		}
		it.d.dueAt = 0
		due = append(due, it.d)
	}
	for _, d := range sortedDrones(due) {
		if d.Seen == 0 {
			// A state from before the clock: heard now, as far as the
			// clock can tell.
			d.Seen = e.clock
			e.touch(d)
			e.schedule(d)
			continue
		}
		first := len(events)
		if d.id != self && !d.Pos.IsZero() {
			events = e.judge(d, zs, ReasonZoneActivated, events)
		}
		events = e.authorize(d, events)
		silent := time.Duration(e.clock-d.Seen) * time.Millisecond
		if t.SignalLostAfter > 0 && silent >= t.SignalLostAfter && d.openApproach() {
			events = e.loseApproaches(d, events)
		}
		if len(d.Alarms) > 0 && t.SignalLostAfter > 0 && silent >= t.SignalLostAfter {
			events = e.lose(d, events)
		}
		if len(events) > first {
			e.touch(d)
			e.stamp(events[first:], zv, off, st)
		}
		if len(d.Alarms) == 0 && e.forgettable(d, silent) {
			e.forget(d)
			st.Forgotten++
			continue
		}
		e.schedule(d)
	}
	clear(due)
	e.due = due[:0]
	return events
}

// The schedule: each drone's next look, on the log's clock — when it will
// have been silent for SignalLostAfter (an alarm still heard), or for the
// TTL (no alarm), or when its own time reaches the zone set's next window
// change. A min-heap of looks; a drone has at most one look that counts
// (dueAt), earlier ones scheduled later are left in the heap and skipped
// when they come. A look never comes later than due: it is scheduled again
// whenever it may have become earlier (a position, an alarm raised or
// regained, a zone set change), and one that comes early costs a judge
// that changes nothing.
type dueItem struct {
	at int64 // log clock, unix ms
	d  *drone
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = dueItem{}
	*h = old[:len(old)-1]
	return it
}

// nextChanges is what a zone set that can say when its activity next
// changes offers (*geofence.Index does); without it a drone with a position
// is looked at every second.
type nextChanges interface {
	NextActivityChange(t time.Time) (time.Time, bool)
}

// schedule sets d's next look to when its next decision may be due, if
// that is earlier than the look it has.
func (e *Engine) schedule(d *drone) {
	at := e.nextLook(d)
	if at == 0 || (d.dueAt != 0 && at >= d.dueAt) {
		return
	}
	d.dueAt = at
	heap.Push(&e.sched, dueItem{at: at, d: d})
}

// nextLook is the log time at which d's next decision by the clock may be
// due (0: never).
func (e *Engine) nextLook(d *drone) int64 {
	if d.Seen == 0 {
		return 1 // a state from before the clock: the next scan gives it one
	}
	t := e.timing
	best := int64(0)
	consider := func(at int64) {
		if at > 0 && (best == 0 || at < best) {
			best = at
		}
	}
	if len(d.Alarms) > 0 && t.SignalLostAfter > 0 && d.anyHeard() {
		consider(d.Seen + t.SignalLostAfter.Milliseconds())
	}
	if len(d.Alarms) == 0 && t.DroneTTL > 0 {
		at := d.Seen + t.DroneTTL.Milliseconds()
		if d.LastRaise != 0 {
			at = max(at, d.LastRaise+t.KeepAfterRaise.Milliseconds())
		}
		consider(at)
	}
	consider(e.nextAuthChange(d))
	if t.SignalLostAfter > 0 && d.openApproach() {
		consider(d.Seen + t.SignalLostAfter.Milliseconds())
	}
	if !d.Pos.IsZero() {
		if nc, ok := e.zones.(nextChanges); ok {
			if b, ok := nc.NextActivityChange(d.timeAt(max(e.clock, d.Seen))); ok {
				// The first clock at which the drone's own time is at b.
				consider(d.Seen + int64((b.Sub(d.Pos.TS)+time.Millisecond-1)/time.Millisecond))
			}
		} else {
			consider(max(e.clock, d.Seen) + 1)
		}
	}
	return best
}

// forgettable reports whether a drone without alarms, silent for silent,
// is due to be forgotten.
func (e *Engine) forgettable(d *drone, silent time.Duration) bool {
	t := e.timing
	return t.DroneTTL > 0 && silent >= t.DroneTTL &&
		(d.LastRaise == 0 || time.Duration(e.clock-d.LastRaise)*time.Millisecond >= t.KeepAfterRaise)
}

// forget removes d from the engine; the batch's commit deletes its state
// and its track.
func (e *Engine) forget(d *drone) {
	delete(e.drones, d.id)
	d.gone = true
	e.touch(d)
	e.gone = append(e.gone, d.id)
}

// timeAt is the drone's own time when the log's clock is at clock: its last
// ts plus the log time since it was heard.
func (d *drone) timeAt(clock int64) time.Time {
	return d.Pos.TS.Add(time.Duration(clock-d.Seen) * time.Millisecond)
}

// anyHeard reports whether one of d's alarms is not yet lost.
func (d *drone) anyHeard() bool {
	for i := range d.Alarms {
		if d.Alarms[i].Lost == 0 {
			return true
		}
	}
	return false
}

// zonesChanged judges every drone again at the first record after the zone
// set changed, in drone id order: alarms of removed or changed zones clear,
// zones that now hold a drone's last known position raise.
func (e *Engine) zonesChanged(zs Zones, zv, off int64, events []Event, st *Stats) []Event {
	due := e.due[:0]
	for _, d := range e.drones {
		if len(d.Alarms) > 0 || !d.Pos.IsZero() {
			due = append(due, d)
		}
	}
	for _, d := range sortedDrones(due) {
		first := len(events)
		events = e.judge(d, zs, ReasonZoneChanged, events)
		if e.timing.SignalLostAfter > 0 && e.clock > 0 && d.Seen > 0 &&
			time.Duration(e.clock-d.Seen)*time.Millisecond >= e.timing.SignalLostAfter {
			events = e.lose(d, events) // a raise over an old position is lost at once
		}
		if len(events) > first {
			e.touch(d)
			e.stamp(events[first:], zv, off, st)
		}
		e.schedule(d) // the new set's windows may change sooner
	}
	clear(due)
	e.due = due[:0]
	return events
}

// judge decides d's last known position again at the drone's time now (a
// position's decision without a new position): an alarm whose zone was
// removed or changed or is inactive now clears; a zone holding the
// position without an alarm raises, under an id of the decision's time
// (AlarmIDTick), with reason.
func (e *Engine) judge(d *drone, zs Zones, reason string, events []Event) []Event {
	now := d.Pos.TS
	if e.clock > 0 && d.Seen > 0 {
		now = d.timeAt(e.clock)
	}
	kept := d.Alarms[:0]
	for _, a := range d.Alarms {
		why := ""
		z, ok := zs.Zone(a.Zone)
		switch {
		case !ok:
			why = ReasonZoneRemoved
		case z.Fingerprint != a.FP:
			why = ReasonZoneChanged
		case !z.Active(now):
			why = ReasonZoneInactive
		}
		if why == "" {
			kept = append(kept, a)
			continue
		}
		ev := e.clockEvent(d, Cleared, EventID(a.Alarm, Cleared), a.Alarm, a.Zone, a.Name, a.Category)
		ev.Reason = why
		events = append(events, ev)
	}
	d.Alarms = kept
	if d.Pos.IsZero() {
		return events
	}
	e.hits = zs.Query(d.Pos.Point(now), e.hits)
	first := len(events)
	for _, h := range e.hits {
		if d.hasAlarm(h.Zone.ID) {
			continue
		}
		id := AlarmIDTick(d.id, h.Zone.ID, e.clock)
		ev := e.clockEvent(d, Raised, EventID(id, Raised), id, h.Zone.ID, h.Zone.Name, string(h.Zone.Category))
		ev.Reason = reason
		ev.HeightAssumed = h.HeightAssumed
		ev.Operator = d.operator()
		events = append(events, ev)
		d.Alarms = append(d.Alarms, ActiveAlarm{Zone: h.Zone.ID, Alarm: id, FP: h.Zone.Fingerprint, RaisedSeq: d.Seq,
			Name: h.Zone.Name, Category: string(h.Zone.Category)})
		d.LastRaise = max(d.LastRaise, e.clock)
	}
	if len(events)-first > 1 {
		slices.SortFunc(events[first:], func(a, b Event) int { return strings.Compare(a.ZoneID, b.ZoneID) })
	}
	e.coverRaises(d, events[first:])
	if len(d.Alarms) > 1 {
		slices.SortFunc(d.Alarms, func(a, b ActiveAlarm) int { return strings.Compare(a.Zone, b.Zone) })
	}
	return events
}

// lose emits one signal_lost for each of d's alarms not yet lost.
func (e *Engine) lose(d *drone, events []Event) []Event {
	for i := range d.Alarms {
		a := &d.Alarms[i]
		if a.Lost != 0 {
			continue
		}
		a.Losses++
		a.Lost = d.Seen
		events = append(events, e.clockEvent(d, SignalLost, SignalEventID(a.Alarm, SignalLost, a.Losses), a.Alarm, a.Zone, a.Name, a.Category))
	}
	return events
}

// regain emits one signal_regained for each of d's lost alarms, at the
// position p that was heard, before p is decided.
func (e *Engine) regain(d *drone, p *telemetry.Position, events []Event) []Event {
	for i := range d.Alarms {
		a := &d.Alarms[i]
		if a.Lost == 0 {
			continue
		}
		ev := newEvent(p, SignalRegained, SignalEventID(a.Alarm, SignalRegained, a.Losses), a.Alarm, a.Zone, a.Name, a.Category)
		seen := time.UnixMilli(a.Lost).UTC()
		ev.LastSeen = &seen
		if e.clock > 0 {
			age := float64(e.clock-a.Lost) / 1000
			ev.AgeS = &age
		}
		events = append(events, ev)
		a.Lost = 0
	}
	return events
}

// clockEvent is an event of d decided by the clock: about its last known
// position, with when it was last heard and how long before now.
func (e *Engine) clockEvent(d *drone, typ, eventID, alarm, zone, name, category string) Event {
	ev := Event{EventID: eventID, AlarmID: alarm, Type: typ, DroneID: d.id, ZoneID: zone, ZoneName: name, Category: category,
		Seq: d.Seq, TS: d.Pos.TS, Lat: d.Pos.Lat, Lon: d.Pos.Lon}
	if d.Pos.AltM != nil {
		ev.AltM = d.Pos.AltM
		ev.AltRef = d.Pos.AltRef
	}
	if d.Seen > 0 && e.clock > 0 {
		seen := time.UnixMilli(d.Seen).UTC()
		age := float64(e.clock-d.Seen) / 1000
		ev.LastSeen, ev.AgeS = &seen, &age
	}
	return ev
}
