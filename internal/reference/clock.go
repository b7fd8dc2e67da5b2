package reference

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// Rec is one record of the telemetry topic as the reference reads it: a
// position, or a tick (Tick set), received at At — its Kafka timestamp, the
// log's clock (zero: not known; the clock then does not move).
type Rec struct {
	Pos  telemetry.Position
	At   time.Time
	Tick bool
	// Partition of a tick: ingest writes one to each partition, so a tick
	// here names the partition it is for (-1: every partition).
	Partition int
}

// Timing is the clock's rules (zero fields: 30 s, 24 h, 7 days).
type Timing struct {
	SignalLostAfter, DroneTTL, KeepAfterRaise time.Duration
}

// Input is a run of the reference over a topic.
type Input struct {
	// Sets are the zone sets: records at index >= SwitchAt[i] are judged
	// against Sets[i+1].
	Sets     [][]Zone
	SwitchAt []int
	// AuthSets are the authorisation sets, switched like Sets: records at
	// index >= AuthSwitchAt[i] are decided with AuthSets[i+1]. None: no
	// authorisation ever.
	AuthSets     [][]Auth
	AuthSwitchAt []int
	Recs         []Rec
	// Partitions is the topic's partition count: each partition has its
	// own clock, and a drone's records are in partition murmur2(id) mod n.
	Partitions int
	Timing     Timing
	// Approach are the approaching settings (zero: none, but for zones
	// with their own approach_before_s).
	Approach ApproachSettings
}

// murmur2 is Kafka's hash of a record key (the Java client's
// Utils.murmur2), written from its definition.
func murmur2(data []byte) int32 {
	const seed uint32 = 0x9747b28c
	const m uint32 = 0x5bd1e995
	const r = 24
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	rest := n % 4
	tail := data[n-rest:]
	switch rest {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// PartitionOf is the partition of a drone's records among n.
func PartitionOf(drone string, n int) int {
	return int(murmur2([]byte(drone))&0x7fffffff) % n
}

// refAlarm is an active alarm as the reference keeps it.
type refAlarm struct {
	id, def, zone string
	category      string
	lostAt        time.Time // when last heard, while lost
	lost          bool
	losses        int
	// The authorisation remembered as covering it ("" none) and the count
	// of its changes (authorized / unauthorized events).
	auth, aref string
	aend       time.Time
	na         int
}

// cover remembers c (nil: none) as the authorisation covering the alarm.
func (a *refAlarm) cover(c *Auth) {
	a.auth, a.aref, a.aend = "", "", time.Time{}
	if c != nil {
		a.auth, a.aref, a.aend = c.ID, c.Reference, c.End()
	}
}

// refDrone is what the reference remembers of a drone.
type refDrone struct {
	last      last
	pos       telemetry.Position // the last applied position
	seen      time.Time          // when it was received (the log's clock)
	lastRaise time.Time
	alarms    map[string]*refAlarm // by zone id
	// Approaching: the velocity (m/s east, north; nil: none), the open
	// episodes and the zones that qualified at the last position, by zone.
	v        *[2]float64
	episodes map[string]*episode
	pending  map[string]bool
	// op is the pilot as the drone's positions last reported it ("" never),
	// in Event.Op's form: the raises carry it.
	op string
}

// partitionRun is one partition's clock and drones.
type partitionRun struct {
	clock  time.Time
	drones map[string]*refDrone
	set    int // the zone set its last record was judged with (-1 none)
	aset   int // the authorisation set likewise
	// approachS are the approaching settings.
	approachS ApproachSettings
}

// Run runs docs/design.md's rules — a drone's order, raise and clear, and
// the log's clock: signal lost and regained, zone windows and zone set
// changes judged at the first record after, drones forgotten — the
// authorisation rules ("Authorised flights") and the approaching rules
// ("Approaching warnings") over the records, each partition on its own
// clock, and returns the events.
func Run(in Input) []Event {
	t := in.Timing
	if t.SignalLostAfter == 0 {
		t.SignalLostAfter = 30 * time.Second
	}
	if t.DroneTTL == 0 {
		t.DroneTTL = 24 * time.Hour
	}
	if t.KeepAfterRaise == 0 {
		t.KeepAfterRaise = 7 * 24 * time.Hour
	}
	n := max(in.Partitions, 1)
	parts := make([]*partitionRun, n)
	for i := range parts {
		parts[i] = &partitionRun{drones: map[string]*refDrone{}, set: -1, aset: -1, approachS: in.Approach}
	}
	var out []Event
	set, aset := 0, 0
	for i := range in.Recs {
		for set < len(in.SwitchAt) && i >= in.SwitchAt[set] {
			set++
		}
		for aset < len(in.AuthSwitchAt) && i >= in.AuthSwitchAt[aset] {
			aset++
		}
		var auths []Auth
		if len(in.AuthSets) > 0 {
			auths = in.AuthSets[aset]
		}
		r := &in.Recs[i]
		var targets []int
		switch {
		case !r.Tick:
			targets = []int{PartitionOf(r.Pos.DroneID, n)}
		case r.Partition < 0:
			for p := range n {
				targets = append(targets, p)
			}
		default:
			targets = []int{r.Partition}
		}
		for _, p := range targets {
			out = parts[p].record(in.Sets[set], set, auths, aset, r, t, out)
		}
	}
	return out
}

// record applies one record to the partition: the clock first, then the
// zone set's change, the authorisation set's, the second's checks, and the
// position last.
func (pr *partitionRun) record(zones []Zone, set int, auths []Auth, aset int, r *Rec, t Timing, out []Event) []Event {
	prev := pr.clock
	if at := r.At.Truncate(time.Millisecond); at.After(pr.clock) { // the log's timestamps are milliseconds
		pr.clock = at
	}
	// T, the time authorisations are decided at: the log's clock, or
	// without one the position's ts (zero for a tick: nothing is decided).
	T := pr.clock
	if T.IsZero() {
		T = r.Pos.TS
	}
	self := ""
	if !r.Tick {
		self = r.Pos.DroneID
	}
	if set != pr.set {
		if pr.set >= 0 {
			for _, id := range pr.sortedIDs() {
				d := pr.drones[id]
				out = pr.judge(d, id, zones, auths, T, "zone_changed", out)
				if !d.seen.IsZero() && !pr.clock.IsZero() && pr.clock.Sub(d.seen) >= t.SignalLostAfter {
					out = pr.lose(d, id, out)
					out = pr.loseApproaches(d, id, out)
				}
			}
		}
		pr.set = set
	}
	if aset != pr.aset {
		if pr.aset >= 0 {
			for _, id := range pr.sortedIDs() {
				out = pr.look(pr.drones[id], id, auths, T, out)
			}
		}
		pr.aset = aset
	}
	if !prev.IsZero() && pr.clock.UnixMilli()/1000 > prev.UnixMilli()/1000 {
		for _, id := range pr.sortedIDs() {
			d := pr.drones[id]
			if d.seen.IsZero() {
				d.seen = pr.clock // heard before the clock was known: now, as far as it can tell
				out = pr.look(d, id, auths, T, out)
				continue
			}
			if id != self {
				out = pr.judge(d, id, zones, auths, T, "zone_activated", out)
			}
			out = pr.look(d, id, auths, T, out)
			silent := pr.clock.Sub(d.seen)
			if len(d.alarms) > 0 && silent >= t.SignalLostAfter {
				out = pr.lose(d, id, out)
			}
			// Approach episodes end by the same silence, alarms or not.
			if silent >= t.SignalLostAfter {
				out = pr.loseApproaches(d, id, out)
			}
			if len(d.alarms) == 0 && silent >= t.DroneTTL &&
				(d.lastRaise.IsZero() || pr.clock.Sub(d.lastRaise) >= t.KeepAfterRaise) {
				delete(pr.drones, id)
			}
		}
	}
	if r.Tick {
		return out
	}
	return pr.position(zones, auths, T, &r.Pos, out)
}

func (pr *partitionRun) sortedIDs() []string {
	ids := make([]string, 0, len(pr.drones))
	for id := range pr.drones {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// position is the rule of a position: its order, a regained signal, then
// raise and clear, then approaching.
func (pr *partitionRun) position(zones []Zone, auths []Auth, T time.Time, p *telemetry.Position, out []Event) []Event {
	d := pr.drones[p.DroneID]
	if d == nil {
		d = &refDrone{alarms: map[string]*refAlarm{}}
		pr.drones[p.DroneID] = d
		d.last = last{ts: p.TS, seq: p.Seq}
	} else {
		if !d.last.newer(p) {
			return out
		}
		if p.Seq <= d.last.seq {
			d.last.resets++
		}
		d.last.ts, d.last.seq = p.TS, p.Seq
	}
	for _, z := range sortedZones(d.alarms) {
		a := d.alarms[z]
		if a.lost {
			out = append(out, Event{AlarmID: a.id, Type: "signal_regained", DroneID: p.DroneID, ZoneID: z, Seq: p.Seq, N: a.losses})
			a.lost = false
		}
	}
	var prev *telemetry.Position
	if d.pos.DroneID != "" {
		prev = new(telemetry.Position)
		*prev = d.pos
	}
	d.pos = *p
	if p.Operator != nil {
		d.op = OpKey(p.Operator.Lat, p.Operator.Lon, p.Operator.AltM, p.Operator.Type, p.TS)
	}
	if !pr.clock.IsZero() {
		d.seen = pr.clock
	}
	// The zone set's change clears alarms of removed or changed zones.
	for _, z := range sortedZones(d.alarms) {
		if zoneByID(zones, z) == nil || zoneByID(zones, z).def != d.alarms[z].def {
			out = append(out, Event{AlarmID: d.alarms[z].id, Type: "cleared", DroneID: p.DroneID, ZoneID: z, Seq: p.Seq})
			delete(d.alarms, z)
		}
	}
	for zi := range zones {
		z := &zones[zi]
		if a, in := d.alarms[z.id]; in {
			if !z.contains(p, z.buffer) {
				out = append(out, Event{AlarmID: a.id, Type: "cleared", DroneID: p.DroneID, ZoneID: z.id, Seq: p.Seq})
				delete(d.alarms, z.id)
			}
		} else if z.contains(p, 0) {
			id := AlarmID(p.DroneID, z.id, p.Seq, d.last.resets)
			a := &refAlarm{id: id, def: z.def, zone: z.id, category: z.category}
			a.cover(Covering(auths, p.DroneID, z.id, z.category, T))
			out = append(out, Event{AlarmID: id, Type: "raised", DroneID: p.DroneID, ZoneID: z.id, Seq: p.Seq, Auth: a.auth, Op: d.op})
			d.alarms[z.id] = a
			d.raisedApproach(z.id)
			if !pr.clock.IsZero() {
				d.lastRaise = pr.clock
			}
		}
	}
	return pr.approach(d, zones, auths, T, p, prev, out)
}

// judge decides the drone's last position again at its own time now (its
// ts plus the log time since it was heard): alarms of removed, changed or
// inactive zones clear; zones that hold it without an alarm raise, under
// the id of the decision's time, covered by the authorisation covering it
// at T.
func (pr *partitionRun) judge(d *refDrone, id string, zones []Zone, auths []Auth, T time.Time, _ string, out []Event) []Event {
	now := d.pos.TS
	if !pr.clock.IsZero() && !d.seen.IsZero() {
		now = d.pos.TS.Add(pr.clock.Sub(d.seen))
	}
	at := d.pos
	at.TS = now
	for _, zid := range sortedZones(d.alarms) {
		a := d.alarms[zid]
		z := zoneByID(zones, zid)
		if z == nil || z.def != a.def || !z.activeAt(now) {
			out = append(out, Event{AlarmID: a.id, Type: "cleared", DroneID: id, ZoneID: zid, Seq: d.last.seq})
			delete(d.alarms, zid)
		}
	}
	if d.pos.DroneID == "" {
		return out
	}
	var raised []string
	for zi := range zones {
		z := &zones[zi]
		if _, in := d.alarms[z.id]; in || !z.contains(&at, 0) {
			continue
		}
		aid := tickAlarmID(id, z.id, pr.clock)
		a := &refAlarm{id: aid, def: z.def, zone: z.id, category: z.category}
		a.cover(Covering(auths, id, z.id, z.category, T))
		d.alarms[z.id] = a
		d.raisedApproach(z.id)
		raised = append(raised, z.id)
		d.lastRaise = pr.clock
	}
	sort.Strings(raised)
	for _, zid := range raised {
		a := d.alarms[zid]
		out = append(out, Event{AlarmID: a.id, Type: "raised", DroneID: id, ZoneID: zid, Seq: d.last.seq, Auth: a.auth, Op: d.op})
	}
	return out
}

// look checks each active alarm, in zone id order, against the
// authorisations at T: when the covering one's id differs from the one
// remembered, the alarm is authorized (by the new one) or unauthorized
// (the ended one: revoked when the set holds it revoked by T or no longer
// holds it, else expired). Neither clears or raises.
func (pr *partitionRun) look(d *refDrone, id string, auths []Auth, T time.Time, out []Event) []Event {
	if T.IsZero() {
		return out // a tick before the log has a clock: no time to decide at
	}
	for _, zid := range sortedZones(d.alarms) {
		a := d.alarms[zid]
		c := Covering(auths, id, zid, a.category, T)
		now := ""
		if c != nil {
			now = c.ID
		}
		if now == a.auth {
			continue
		}
		a.na++
		e := Event{AlarmID: a.id, DroneID: id, ZoneID: zid, Seq: d.last.seq, N: a.na}
		if c != nil {
			e.Type, e.Auth = "authorized", c.ID
		} else {
			e.Type, e.Auth, e.Reason = "unauthorized", a.auth, "expired"
			if h := authByID(auths, a.auth); h == nil || !h.RevokedAt.IsZero() && !h.RevokedAt.After(T) {
				e.Reason = "revoked"
			}
		}
		out = append(out, e)
		a.cover(c)
	}
	return out
}

// lose declares each of the drone's alarms still heard lost.
func (pr *partitionRun) lose(d *refDrone, id string, out []Event) []Event {
	for _, zid := range sortedZones(d.alarms) {
		a := d.alarms[zid]
		if a.lost {
			continue
		}
		a.lost = true
		a.losses++
		out = append(out, Event{AlarmID: a.id, Type: "signal_lost", DroneID: id, ZoneID: zid, Seq: d.last.seq, N: a.losses})
	}
	return out
}

func (z *Zone) activeAt(t time.Time) bool {
	return !(z.hasFrom && t.Before(z.from) || z.hasUntil && !t.Before(z.until))
}

func zoneByID(zones []Zone, id string) *Zone {
	for i := range zones {
		if zones[i].id == id {
			return &zones[i]
		}
	}
	return nil
}

func sortedZones(m map[string]*refAlarm) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// tickAlarmID is the contract's id of an alarm raised by the log's clock:
// the first 16 bytes of SHA-256(drone NUL zone NUL "@" clock-in-unix-ms).
func tickAlarmID(drone, zone string, clock time.Time) string {
	ms := int64(0)
	if !clock.IsZero() {
		ms = clock.UnixMilli()
	}
	return hashHex(drone + "\x00" + zone + "\x00@" + strconv.FormatInt(ms, 10))
}

// signalN reads the n of an event id alarm_id:type:n (signal_lost,
// signal_regained, authorized, unauthorized).
func signalN(eventID string) (int, bool) {
	i := strings.LastIndexByte(eventID, ':')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(eventID[i+1:])
	return n, err == nil && n > 0
}
