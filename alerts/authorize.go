package alerts

import (
	"slices"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/geofence"
)

// Authorised flights (docs/design.md, "Authorised flights"): an alarm of a
// drone an authorisation covers is raised as any alarm, carrying the
// authorisation, and pages nobody; when the authorisation ends while the
// drone is inside, the alarm emits one unauthorized event at the first
// second of log time after, and pages from then on; one that starts while
// the drone is inside emits one authorized.
//
// Every such decision is a function of the partition's records, the log's
// clock and the authorisation set version in force at each record — the
// version is recorded with each batch's commit (dedup.Batch.AuthVersion),
// as the zone set's is — so it is made once, live or in a replay.

// SetAuthorizations sets the authorisation set the next Apply or Decide
// decides with (nil: none, version 0). Its version is recorded with the
// batch; at the first record of a new version every active alarm is looked
// at again.
func (e *Engine) SetAuthorizations(s *authorization.Set) { e.auths = s }

// authVersion is the version of the set in use, 0 for none.
func (e *Engine) authVersion() int64 {
	if e.auths == nil {
		return 0
	}
	return e.auths.Version
}

// decisionTime is T, the time an authorisation is judged at: the log's
// clock, or, while the partition has none (a replay without receive
// times), the drone's last ts.
func (e *Engine) decisionTime(d *drone) time.Time {
	if e.clock > 0 {
		return time.UnixMilli(e.clock).UTC()
	}
	return d.Pos.TS
}

// covering is the authorisation covering d's alarm a at t, if any.
func (e *Engine) covering(d *drone, a *ActiveAlarm, t time.Time) (*authorization.Authorization, bool) {
	if e.auths == nil {
		return nil, false
	}
	return e.auths.Covering(d.id, a.Zone, geofence.Category(a.Category), t)
}

// coverRaises gives the raised events among evs (d's, just decided) the
// authorisation covering their alarm, and the alarms the memory of it.
func (e *Engine) coverRaises(d *drone, evs []Event) {
	if e.auths == nil {
		return
	}
	t := e.decisionTime(d)
	for j := range evs {
		ev := &evs[j]
		if ev.Type != Raised {
			continue
		}
		for i := range d.Alarms {
			a := &d.Alarms[i]
			if a.Alarm != ev.AlarmID {
				continue
			}
			if au, ok := e.covering(d, a, t); ok {
				a.remember(au)
				ev.Authorization = a.authRef()
			}
			break
		}
	}
}

// remember makes au the alarm's covering authorisation.
func (a *ActiveAlarm) remember(au *authorization.Authorization) {
	a.Auth, a.AuthRef, a.AuthUntil = au.ID, au.Reference, au.End().UnixMilli()
}

// authRef is the alarm's remembered authorisation as an event carries it.
func (a *ActiveAlarm) authRef() *AuthRef {
	return &AuthRef{ID: a.Auth, Reference: a.AuthRef, Until: time.UnixMilli(a.AuthUntil).UTC()}
}

// authorize looks at d's alarms again, in zone id order: one whose
// covering authorisation is not the one it remembers emits authorized (a
// new one covers it) or unauthorized (none does). It appends the events
// and returns them.
func (e *Engine) authorize(d *drone, events []Event) []Event {
	if len(d.Alarms) == 0 || (e.auths == nil && !d.anyAuthorized()) {
		return events
	}
	t := e.decisionTime(d)
	// In zone id order; the alarms are kept so (judge sorts them), and
	// sorting them here otherwise changes no decision.
	slices.SortFunc(d.Alarms, func(a, b ActiveAlarm) int { return strings.Compare(a.Zone, b.Zone) })
	for i := range d.Alarms {
		a := &d.Alarms[i]
		au, ok := e.covering(d, a, t)
		switch {
		case ok && au.ID == a.Auth, !ok && a.Auth == "":
			continue
		case ok:
			a.AuthN++
			a.remember(au)
			ev := e.clockEvent(d, Authorized, SignalEventID(a.Alarm, Authorized, a.AuthN), a.Alarm, a.Zone, a.Name, a.Category)
			ev.Authorization = a.authRef()
			events = append(events, ev)
		default:
			a.AuthN++
			ev := e.clockEvent(d, Unauthorized, SignalEventID(a.Alarm, Unauthorized, a.AuthN), a.Alarm, a.Zone, a.Name, a.Category)
			ev.Authorization = a.authRef()
			ev.Reason = ReasonExpired
			if held, found := e.auths.Get(a.Auth); !found || (held.RevokedAt != nil && !held.RevokedAt.After(t)) {
				ev.Reason = ReasonRevoked
			}
			events = append(events, ev)
			a.Auth, a.AuthRef, a.AuthUntil = "", "", 0
		}
	}
	return events
}

// anyAuthorized reports whether one of d's alarms remembers an
// authorisation.
func (d *drone) anyAuthorized() bool {
	for i := range d.Alarms {
		if d.Alarms[i].Auth != "" {
			return true
		}
	}
	return false
}

// authsChanged looks at every drone with alarms again, in drone id order,
// at the first record after the authorisation set's version changed.
func (e *Engine) authsChanged(zv, off int64, events []Event, st *Stats) []Event {
	due := e.due[:0]
	for _, d := range e.drones {
		if len(d.Alarms) > 0 {
			due = append(due, d)
		}
	}
	for _, d := range sortedDrones(due) {
		first := len(events)
		events = e.authorize(d, events)
		if len(events) > first {
			e.touch(d)
			e.stamp(events[first:], zv, off, st)
		}
		e.schedule(d) // the new set's starts and ends may come sooner
	}
	clear(due)
	e.due = due[:0]
	return events
}

// nextAuthChange is the log time (unix ms) of the set's next start or end
// after d's decision time, 0 when none: d's alarms are looked at then.
func (e *Engine) nextAuthChange(d *drone) int64 {
	if e.auths == nil || len(d.Alarms) == 0 {
		return 0
	}
	t := e.decisionTime(d)
	if e.clock == 0 {
		return 0 // no clock: nothing is decided by time
	}
	n, ok := e.auths.NextChange(t)
	if !ok {
		return 0
	}
	return (n.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}
