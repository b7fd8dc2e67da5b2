package alerts

import (
	"fmt"
	"math"
	"time"

	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// Record is one Kafka record of the telemetry topic: a position or a tick.
type Record struct {
	Offset int64
	// Time is the record's Kafka timestamp, the time ingest received it
	// (or wrote it, for a tick): the log's clock. Zero when not known (a
	// replay of records without it): the clock then stands still.
	Time  time.Time
	Value []byte
}

// BadRecord is a record that could not be decoded: it is skipped (its
// offset still counts as applied) and reported.
type BadRecord struct {
	Offset int64
	Err    error
}

// Stats count what a batch did.
type Stats struct {
	Records    int // records in the batch at offsets above the version
	Applied    int // positions that went through the state machine
	Duplicates int // positions not after the drone's last (by ts, then seq): duplicate or stale
	SeqResets  int // positions applied whose seq was not above the drone's last (DroneState.Resets)
	Dropped    int // positions applied that ingest had dropped an optional field from
	Invalid    int // records that did not decode
	Skipped    int // records at or below the version (already applied)
	Ticks      int // clock ticks (telemetry.Tick)
	Raised     int
	Cleared    int
	// The log clock's decisions: signal_lost and signal_regained events,
	// drones forgotten.
	SignalLost     int
	SignalRegained int
	Forgotten      int
	// Authorisations: authorized and unauthorized events.
	Authorized   int
	Unauthorized int
	// Approaches: approaching and approach_ended events.
	Approaching   int
	ApproachEnded int
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Records += o.Records
	s.Applied += o.Applied
	s.Duplicates += o.Duplicates
	s.SeqResets += o.SeqResets
	s.Dropped += o.Dropped
	s.Invalid += o.Invalid
	s.Skipped += o.Skipped
	s.Ticks += o.Ticks
	s.Raised += o.Raised
	s.Cleared += o.Cleared
	s.SignalLost += o.SignalLost
	s.SignalRegained += o.SignalRegained
	s.Forgotten += o.Forgotten
	s.Authorized += o.Authorized
	s.Unauthorized += o.Unauthorized
	s.Approaching += o.Approaching
	s.ApproachEnded += o.ApproachEnded
}

// Outcome is what one batch decided. Nothing of it is durable until
// Store.Commit(ctx, partition, Expected, Batch) succeeds.
type Outcome struct {
	Expected int64       // the version the batch started from
	Batch    dedup.Batch // drone states, events and the new version
	Events   []Event
	Bad      []BadRecord
	Stats    Stats
	Drones   int // the drones the engine holds after the batch
}

// Engine applies one partition's records in offset order. It is not safe
// for concurrent use. Apply changes the engine's state as if the batch were
// committed: when the commit fails for any reason (fenced, connection
// lost), discard the engine and build a new one from a fresh Store.Load.
type Engine struct {
	partition int
	applied   int64
	drones    map[string]*drone
	hits      []geofence.Hit
	batch     uint64        // Apply calls so far: marks the drones a batch changed
	changed   []*drone      // scratch: the drones the current batch changed
	scratch   []byte        // scratch: the batch's encoded states and events
	ends      []int         // scratch: where each of them ends in scratch
	trackGap  time.Duration // track sampling: a point per drone per this much ts (<= 0: no tracks)
	tracked   int           // drones of the current batch with a track point

	// The log's clock (clock.go): the partition's clock in unix
	// milliseconds (0: none yet), the zone version the drones were last
	// evaluated with, the decisions' settings, and scratch for a batch's
	// forgotten drones and a scan's due ones.
	clock  int64
	zv     int64
	timing Timing
	gone   []string
	due    []*drone
	sched  dueHeap // each drone's next look (clock.go)
	zones  Zones   // the zone set of the batch being applied

	// Authorised flights (authorize.go): the set in use and the version
	// the drones' alarms were last looked at with.
	auths *authorization.Set
	av    int64

	// Approaching warnings (approach.go): the settings, the longest
	// horizon (of the settings, and of the zone set apZones's own), and
	// scratch.
	apSet     ApproachSettings
	apMax     time.Duration
	apZones   Zones
	apZoneMax time.Duration
	aps       []geofence.Approach
	apSeen    []string
}

// drone is the engine's entry of one drone: its state and the last batch
// that changed it.
type drone struct {
	DroneState
	id    string
	mark  uint64
	track Fix    // the track point the batch sampled, when tmark is the batch
	tmark uint64 // the last batch that sampled a track point
	gone  bool   // forgotten (clock.go): its state is deleted, not written
	dueAt int64  // its next look on the log's clock (clock.go), 0: none
	// fresh: not in the partition's stored states until the batch commits
	// (the drone ids index gets it); placed, px, py: the position the
	// spatial index was last given in this engine's life (it is given a
	// new one only PlaceStepM away: dedup.Batch.Placed).
	fresh, placed bool
	px, py        float64
}

// PlaceStepM is how far a drone moves before its place in the spatial
// index of the drones API is written again. The index is searched with this
// margin and its answers filtered by the states' exact positions, so it
// costs no precision; at 1 Hz it spares Redis a GEOADD on most positions
// of a drone slower than 100 m/s.
const PlaceStepM = 100

// movedM is the distance between two positions, in metres, flat-earth:
// exact enough over a few hundred metres, and cheap on every position.
func movedM(lat1, lon1, lat2, lon2 float64) float64 {
	const m = 111195 // metres per degree of a great circle
	dy := (lat2 - lat1) * m
	dx := (lon2 - lon1) * m * math.Cos((lat1+lat2)/2*math.Pi/180)
	return math.Hypot(dx, dy)
}

// NewEngine returns the engine of a partition at the stored snapshot.
func NewEngine(partition int, snap dedup.Snapshot) (*Engine, error) {
	e := &Engine{partition: partition, applied: snap.Applied, drones: make(map[string]*drone, len(snap.Drones)),
		trackGap: DefaultTrackInterval, clock: snap.Clock, zv: snap.ZoneVersion, av: snap.AuthVersion, timing: Timing{}.withDefaults()}
	for id, b := range snap.Drones {
		s, err := DecodeDroneState(b)
		if err != nil {
			return nil, fmt.Errorf("partition %d drone %q: %w", partition, id, err)
		}
		d := &drone{DroneState: s, id: id, dueAt: 1}
		e.drones[id] = d
		// Every drone gets a look at the first scan, which schedules the
		// next with the zone set in hand.
		e.sched = append(e.sched, dueItem{at: 1, d: d})
	}
	return e, nil
}

// SetTrackInterval sets how far apart in ts a drone's track points are at
// least (DefaultTrackInterval unless set); d <= 0 samples no track points.
func (e *Engine) SetTrackInterval(d time.Duration) { e.trackGap = d }

// Partition returns the engine's partition.
func (e *Engine) Partition() int { return e.partition }

// Applied returns the offset of the last record applied (the version),
// dedup.NoVersion if none.
func (e *Engine) Applied() int64 { return e.applied }

// Drones returns how many drones the engine holds.
func (e *Engine) Drones() int { return len(e.drones) }

// Drone returns a copy of a drone's state and whether the engine knows it.
func (e *Engine) Drone(id string) (DroneState, bool) {
	s, ok := e.drones[id]
	if !ok {
		return DroneState{}, false
	}
	c := s.DroneState // Pos and TrackMS are values: copied
	c.Alarms = append([]ActiveAlarm(nil), s.Alarms...)
	return c, true
}

// Apply runs the records through the state machine, in the order given,
// against the zone set zs. Records at or below the version, or not above
// the previous record of the batch, are skipped: offsets need not be
// contiguous, and a record fetched twice is applied once. It returns nil
// when no record was above the version (nothing to commit).
func (e *Engine) Apply(zs Zones, recs []Record) *Outcome {
	zv := zoneVersion(zs)
	out := &Outcome{Expected: e.applied, Batch: dedup.Batch{Applied: e.applied, ZoneVersion: zv, AuthVersion: e.authVersion()}}
	e.batch++
	e.zones = zs
	e.changed = e.changed[:0]
	e.gone = e.gone[:0]
	for i := range recs {
		r := &recs[i]
		if r.Offset <= out.Batch.Applied {
			out.Stats.Skipped++
			continue
		}
		out.Batch.Applied = r.Offset
		out.Stats.Records++
		var p telemetry.Position
		at, tick := r.Time, false
		if telemetry.HasTickPrefix(r.Value) {
			var t time.Time
			if t, tick = telemetry.ParseTick(r.Value); tick && at.IsZero() {
				at = t
			}
		}
		var err error
		if !tick {
			if p, err = telemetry.Decode(r.Value); err != nil {
				if t, ok := telemetry.ParseTick(r.Value); ok {
					tick, err = true, nil
					if at.IsZero() {
						at = t
					}
				}
			}
		}
		// Every record moves the clock, a bad one too: it was received.
		out.Events = e.advance(zs, zv, r.Offset, at, p.DroneID, out.Events, &out.Stats)
		switch {
		case tick:
			out.Stats.Ticks++
			continue
		case err != nil:
			out.Stats.Invalid++
			out.Bad = append(out.Bad, BadRecord{Offset: r.Offset, Err: err})
			continue
		}
		var d *drone
		evs := len(out.Events)
		out.Events, d = e.step(zs, zv, r.Offset, &p, out.Events, &out.Stats)
		if d == nil {
			continue
		}
		if e.trackGap > 0 && d.SampleTrack(e.trackEvery(d, len(out.Events) > evs)) {
			// One point per drone per batch: the batch's latest sample.
			if d.tmark != e.batch {
				d.tmark = e.batch
				e.tracked++
			}
			d.track = d.Pos
		}
	}
	defer func() {
		clear(e.changed) // the scratch must not keep forgotten drones alive
		e.changed = e.changed[:0]
		e.tracked = 0
	}()
	if out.Stats.Records == 0 {
		return nil
	}
	e.applied = out.Batch.Applied
	out.Batch.Clock = e.clock
	out.Drones = len(e.drones)
	changed := e.changed[:0]
	for _, d := range e.changed {
		if !d.gone {
			changed = append(changed, d)
		} else if d.tmark == e.batch {
			e.tracked--
		}
	}
	for _, id := range e.gone {
		if _, back := e.drones[id]; !back { // one that came back in the batch is written anew
			out.Batch.Forgotten = append(out.Batch.Forgotten, id)
		}
	}

	// The states and the events' JSON are encoded into the engine's
	// scratch buffer, then copied into one allocation of the exact size
	// (sub-slices capped at their length): one allocation per batch, not
	// one per drone and per event.
	buf := e.scratch[:0]
	ends := e.ends[:0]
	for _, d := range changed {
		buf = d.AppendEncode(buf)
		ends = append(ends, len(buf))
	}
	for i := range out.Events {
		buf = out.Events[i].AppendJSON(buf)
		ends = append(ends, len(buf))
	}
	if e.tracked > 0 {
		for _, d := range changed {
			if d.tmark == e.batch {
				buf = d.track.AppendJSON(buf)
				ends = append(ends, len(buf))
			}
		}
	}
	slab := make([]byte, len(buf))
	copy(slab, buf)
	e.scratch, e.ends = buf[:0], ends[:0]
	start := 0
	next := func(k int) []byte {
		b := slab[start:ends[k]:ends[k]]
		start = ends[k]
		return b
	}
	out.Batch.Drones = make(map[string][]byte, len(changed))
	for k, d := range changed {
		out.Batch.Drones[d.id] = next(k)
		if d.fresh {
			d.fresh = false
			out.Batch.New = append(out.Batch.New, d.id)
		}
		if !d.Pos.IsZero() && (!d.placed || movedM(d.py, d.px, d.Pos.Lat, d.Pos.Lon) >= PlaceStepM) {
			d.placed, d.px, d.py = true, d.Pos.Lon, d.Pos.Lat
			out.Batch.Placed = append(out.Batch.Placed, dedup.Placed{ID: d.id, Lon: d.Pos.Lon, Lat: d.Pos.Lat})
		}
	}
	out.Batch.Events = make([]dedup.Event, len(out.Events))
	for i := range out.Events {
		out.Batch.Events[i] = dedup.Event{ID: out.Events[i].EventID, JSON: next(len(changed) + i)}
	}
	if e.tracked > 0 {
		out.Batch.Tracks = make(map[string][]byte, e.tracked)
		k := len(changed) + len(out.Events)
		for _, d := range changed {
			if d.tmark == e.batch {
				out.Batch.Tracks[d.id] = next(k)
				k++
				if e.heldTrack(d) {
					if out.Batch.Held == nil {
						out.Batch.Held = make(map[string]bool)
					}
					out.Batch.Held[d.id] = true
				}
			}
		}
	}
	return out
}

// step applies one decoded position at offset off: it appends the
// position's events, stamped with the partition, the offset and the zone
// version zv, and returns the drone it changed, or nil for a duplicate or
// stale position (counted in st). A position from a drone whose alarms had
// lost its signal first regains it (signal_regained), then is decided.
func (e *Engine) step(zs Zones, zv, off int64, p *telemetry.Position, events []Event, st *Stats) ([]Event, *drone) {
	d := e.drones[p.DroneID]
	isNew := d == nil
	if isNew {
		d = &drone{DroneState: NewDroneState(), id: p.DroneID, fresh: true}
	}
	if !d.After(p) {
		st.Duplicates++
		return events, nil
	}
	first := len(events)
	events = e.regain(d, p, events)
	resets := d.Resets
	raisedFrom := len(events)
	prev := d.Pos
	events, e.hits, _ = Step(&d.DroneState, p, zs, e.hits, events)
	e.coverRaises(d, events[raisedFrom:])
	events = e.approach(d, &prev, p, events)
	st.Applied++
	if d.Resets != resets {
		st.SeqResets++
	}
	if p.Dropped != "" {
		st.Dropped++
	}
	if e.clock > 0 {
		d.Seen = e.clock
	}
	if isNew {
		e.drones[d.id] = d
	}
	e.touch(d)
	e.stamp(events[first:], zv, off, st)
	for j := first; j < len(events); j++ {
		if events[j].Type == Raised {
			d.LastRaise = max(d.LastRaise, e.clock)
		}
	}
	e.schedule(d)
	return events, d
}

// stamp gives a record's events the partition, the record's offset and
// the zone version, and counts them.
func (e *Engine) stamp(evs []Event, zv, off int64, st *Stats) {
	for j := range evs {
		evs[j].Partition = e.partition
		evs[j].Offset = off
		evs[j].ZoneVersion = zv
		switch evs[j].Type {
		case Raised:
			st.Raised++
		case Cleared:
			st.Cleared++
		case SignalLost:
			st.SignalLost++
		case SignalRegained:
			st.SignalRegained++
		case Authorized:
			st.Authorized++
		case Unauthorized:
			st.Unauthorized++
		case Approaching:
			st.Approaching++
		case ApproachEnded:
			st.ApproachEnded++
		}
	}
}

// touch marks d as changed by the current batch: its state is written.
func (e *Engine) touch(d *drone) {
	if d.mark != e.batch {
		d.mark = e.batch
		e.changed = append(e.changed, d)
	}
}

// Positioned is a decoded record of the partition: a position, or a tick
// (Tick set, Pos empty), or a record that did not decode (Bad set: it only
// moves the clock, as it does live). Time is as Record's.
type Positioned struct {
	Offset int64
	Time   time.Time
	Tick   bool
	Bad    bool
	Pos    telemetry.Position
}

// Decide runs decoded positions through the state machine exactly as Apply
// runs records — same skips, same events in the same order — for a caller
// whose engine is the only copy of the states and that commits nowhere
// (replay): it encodes no drone state, event JSON or track point. It
// appends the events to dst and returns them with the counts.
func (e *Engine) Decide(zs Zones, recs []Positioned, dst []Event) ([]Event, Stats) {
	zv := zoneVersion(zs)
	var st Stats
	e.batch++
	e.zones = zs
	e.changed = e.changed[:0]
	e.gone = e.gone[:0]
	for i := range recs {
		r := &recs[i]
		if r.Offset <= e.applied {
			st.Skipped++
			continue
		}
		e.applied = r.Offset
		st.Records++
		dst = e.advance(zs, zv, r.Offset, r.Time, r.Pos.DroneID, dst, &st)
		switch {
		case r.Tick:
			st.Ticks++
			continue
		case r.Bad:
			st.Invalid++
			continue
		}
		dst, _ = e.step(zs, zv, r.Offset, &r.Pos, dst, &st)
	}
	clear(e.changed)
	e.changed = e.changed[:0]
	return dst, st
}

// Clock returns the partition's log clock (zero: none yet).
func (e *Engine) Clock() time.Time {
	if e.clock == 0 {
		return time.Time{}
	}
	return time.UnixMilli(e.clock).UTC()
}

// zoneVersion is the zone store's version of zs (geofence.Index's
// ZoneVersion), 0 for a zone set without one: the batch's events and its
// zone switch carry it.
func zoneVersion(zs Zones) int64 {
	if v, ok := zs.(interface{ ZoneVersion() int64 }); ok {
		return v.ZoneVersion()
	}
	return 0
}
