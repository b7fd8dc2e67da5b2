// Package dronestore is the read side of the drone states and short
// tracks that the batch script (dedup) writes per partition: list the
// drones with their last known position and active alarms, and get one
// with its track (docs/redis-layout.md, "Drone state"). It writes nothing:
// the states and tracks are kept by the one script per batch that already
// writes each seen drone's state, so the API costs the pipeline no Redis
// write. Any alerter instance may serve it: the state is in Redis.
package dronestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/telemetry"
)

// The limits of a list request.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// scanCount is the COUNT hint of each HSCAN: a hash is read in steps of
// about this many fields, so a large one never blocks Redis for long.
const scanCount = 1000

// ErrNotFound is returned for a drone no partition holds.
var ErrNotFound = errors.New("dronestore: no such drone")

// ErrBadCursor is returned for a cursor List did not hand out.
var ErrBadCursor = errors.New("dronestore: bad cursor")

// Options configure a Store. Redis, Topic and Partitions are required.
type Options struct {
	Redis      redis.UniversalClient
	Prefix     string // dedup.DefaultPrefix when empty
	Topic      string
	Partitions int
	// SignalLostAfter is the alerter's --signal-lost-after: a drone not
	// heard this long on its partition's log clock is stale
	// (alerts.DefaultSignalLostAfter when 0).
	SignalLostAfter time.Duration
}

// Store reads the drones of every partition of a topic.
type Store struct {
	o    Options
	keys []redislayout.Keys
}

// New returns a store on o.
func New(o Options) (*Store, error) {
	if o.Redis == nil || o.Topic == "" || o.Partitions <= 0 {
		return nil, errors.New("dronestore: Options need Redis, Topic and Partitions")
	}
	if o.Prefix == "" {
		o.Prefix = dedup.DefaultPrefix
	}
	if o.SignalLostAfter <= 0 {
		o.SignalLostAfter = alerts.DefaultSignalLostAfter
	}
	s := &Store{o: o, keys: make([]redislayout.Keys, o.Partitions)}
	for p := range s.keys {
		s.keys[p] = redislayout.Of(o.Prefix, o.Topic, p)
	}
	return s, nil
}

// Alarm is one of a drone's active alarms, as its state holds it.
type Alarm struct {
	AlarmID   string `json:"alarm_id"`
	ZoneID    string `json:"zone_id"`
	ZoneName  string `json:"zone_name"`
	Category  string `json:"category"`
	RaisedSeq int64  `json:"raised_seq"`
	// Since is the raising event's ts, from the alarm index; null when the
	// index does not hold the alarm (raised before the index existed).
	Since *time.Time `json:"since"`
	// SignalLostSince is, while the drone is not heard (a signal_lost and
	// no signal_regained since), when it was last heard on the log's
	// clock; null while it is heard.
	SignalLostSince *time.Time `json:"signal_lost_since"`
	// Authorization is the authorisation covering the alarm when last
	// looked at (null: none, it pages).
	Authorization *alerts.AuthRef `json:"authorization"`
}

// Approach is one of a drone's open approach episodes (docs/design.md,
// "Approaching warnings") as its state holds it after its last position.
type Approach struct {
	ApproachID string `json:"approach_id"`
	ZoneID     string `json:"zone_id"`
	// EtaS is the predicted seconds to entry from the drone's last
	// position (its ts), and Entry the predicted entry point; null when
	// the drone is only near and closing.
	EtaS  *float64       `json:"eta_s"`
	Entry *alerts.LatLon `json:"entry"`
}

// Point is a position: the last known one, or one of the track's.
type Point struct {
	TS     time.Time `json:"ts"`
	Lat    float64   `json:"lat"`
	Lon    float64   `json:"lon"`
	AltM   *float64  `json:"alt_m"`
	AltRef *string   `json:"alt_ref"`
}

// Drone is one drone as the API answers it. The position fields are null
// for a state written before states kept their position (only seq and
// alarms are known then).
type Drone struct {
	DroneID   string     `json:"drone_id"`
	Partition int        `json:"partition"`
	Seq       int64      `json:"seq"`
	TS        *time.Time `json:"ts"`
	Lat       *float64   `json:"lat"`
	Lon       *float64   `json:"lon"`
	AltM      *float64   `json:"alt_m"`
	AltRef    *string    `json:"alt_ref"`
	// Dropped is what ingest dropped from the last position (its
	// "dropped"): a feed sending values no aircraft can have.
	Dropped []string `json:"dropped"`
	// SeqResets is DroneState.Resets: how often the drone's seq went back.
	SeqResets int64 `json:"seq_resets"`
	// LastSeen is when its last position was received, on the log's clock
	// (null for a state written before the clock); Stale says it has not
	// been heard for --signal-lost-after of its partition's clock since.
	LastSeen     *time.Time `json:"last_seen"`
	Stale        bool       `json:"stale"`
	ActiveAlarms []Alarm    `json:"active_alarms"`
	// Approaching are its open approach episodes, by zone id.
	Approaching []Approach `json:"approaching"`
	// Operator is its pilot as last reported, with range and bearing from
	// the drone's last position (null: never reported).
	Operator *alerts.Pilot `json:"operator"`

	pos  alerts.Fix // the state's position (zero: unknown)
	seen int64      // LastSeen in unix ms (0: unknown)
}

// Detail is one drone with its short track.
type Detail struct {
	Drone
	// Track is the drone's sampled positions, oldest first, at most the
	// track length (50) of them.
	Track []Point `json:"track"`
}

// pointOf is the answered form of a kept position.
func pointOf(f alerts.Fix) Point {
	p := Point{TS: f.TS, Lat: f.Lat, Lon: f.Lon, AltM: f.AltM}
	if f.AltRef != "" {
		ref := f.AltRef
		p.AltRef = &ref
	}
	return p
}

// droneOf builds the drone id's answer from its stored state on partition p.
func droneOf(id string, p int, raw []byte) (Drone, error) {
	st, err := alerts.DecodeDroneState(raw)
	if err != nil {
		return Drone{}, fmt.Errorf("dronestore: partition %d drone %q: %w", p, id, err)
	}
	d := Drone{DroneID: id, Partition: p, Seq: st.Seq, SeqResets: st.Resets, Dropped: []string{},
		ActiveAlarms: make([]Alarm, 0, len(st.Alarms)), Approaching: []Approach{}, pos: st.Pos, seen: st.Seen}
	for _, ap := range st.Approaches {
		if ap.ID == "" {
			continue // qualified once, not yet an episode
		}
		a := Approach{ApproachID: ap.ID, ZoneID: ap.Zone, EtaS: ap.EtaS}
		if ap.EtaS != nil {
			a.Entry = &alerts.LatLon{Lat: ap.EntryLat, Lon: ap.EntryLon}
		}
		d.Approaching = append(d.Approaching, a)
	}
	if st.Seen > 0 {
		t := time.UnixMilli(st.Seen).UTC()
		d.LastSeen = &t
	}
	if st.Pos.Drop != "" {
		d.Dropped = strings.Split(st.Pos.Drop, ",")
	}
	if !st.Pos.IsZero() {
		pt := pointOf(st.Pos)
		d.TS, d.Lat, d.Lon, d.AltM, d.AltRef = &pt.TS, &pt.Lat, &pt.Lon, pt.AltM, pt.AltRef
	}
	d.Operator = alerts.PilotOf(&st.Op, st.Pos.Lat, st.Pos.Lon, !st.Pos.IsZero())
	for _, a := range st.Alarms {
		al := Alarm{AlarmID: a.Alarm, ZoneID: a.Zone, ZoneName: a.Name, Category: a.Category, RaisedSeq: a.RaisedSeq}
		if a.Lost != 0 {
			t := time.UnixMilli(a.Lost).UTC()
			al.SignalLostSince = &t
		}
		if a.Auth != "" {
			al.Authorization = &alerts.AuthRef{ID: a.Auth, Reference: a.AuthRef, Until: time.UnixMilli(a.AuthUntil).UTC()}
		}
		if al.AlarmID == "" {
			al.AlarmID = alerts.AlarmID(id, a.Zone, a.RaisedSeq)
		}
		d.ActiveAlarms = append(d.ActiveAlarms, al)
	}
	return d, nil
}

// BBox is a longitude/latitude box, edges included (GeoJSON order:
// MinLon, MinLat, MaxLon, MaxLat). It does not cross the antimeridian.
type BBox struct {
	MinLon, MinLat, MaxLon, MaxLat float64
}

// Check says what is wrong with the box, or nil.
func (b BBox) Check() error {
	switch {
	case b.MinLon < -180 || b.MaxLon > 180:
		return errors.New("longitudes must be within [-180, 180]")
	case b.MinLat < -90 || b.MaxLat > 90:
		return errors.New("latitudes must be within [-90, 90]")
	case b.MinLon > b.MaxLon:
		return errors.New("minLon is above maxLon (a box across the antimeridian is two requests)")
	case b.MinLat > b.MaxLat:
		return errors.New("minLat is above maxLat")
	}
	return nil
}

// Contains reports whether the box holds the position.
func (b BBox) Contains(lat, lon float64) bool {
	return lon >= b.MinLon && lon <= b.MaxLon && lat >= b.MinLat && lat <= b.MaxLat
}

// Filter selects drones for List. The zero value lists every drone,
// DefaultLimit of them. A drone whose state holds no position (written
// before states kept one) is listed unless BBox or ActiveSince is set: its
// position and its last ts are unknown.
type Filter struct {
	BBox *BBox // nil: anywhere
	// ActiveSince keeps drones whose last position's ts is at or after it
	// (zero: any).
	ActiveSince time.Time
	Limit       int    // DefaultLimit when 0; at most MaxLimit
	Cursor      string // from a previous page's next cursor
}

func (f *Filter) match(d *Drone) bool {
	if f.BBox == nil && f.ActiveSince.IsZero() {
		return true
	}
	if d.pos.IsZero() {
		return false
	}
	return (f.BBox == nil || f.BBox.Contains(d.pos.Lat, d.pos.Lon)) &&
		(f.ActiveSince.IsZero() || !d.pos.TS.Before(f.ActiveSince))
}

// cursorVersion starts every cursor, so the form can change.
const cursorVersion = 'd'

// The cursor is the last listed drone id: base64url of 'd' and the id.
func cursorOf(id string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{cursorVersion}, id...))
}

func parseCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != cursorVersion || len(b)-1 > telemetry.MaxDroneIDLen {
		return "", ErrBadCursor
	}
	return string(b[1:]), nil
}

// better reports whether a drone's state on one partition wins over its
// state on another: the higher seq (a drone moved by a repartition keeps
// going on its new partition), then, for equal seqs, the lower partition,
// so every instance picks the same.
func better(a, b *Drone) bool {
	if !a.pos.TS.Equal(b.pos.TS) {
		return a.pos.TS.After(b.pos.TS) // a drone's order is by ts, then seq
	}
	return a.Seq > b.Seq || (a.Seq == b.Seq && a.Partition < b.Partition)
}

// staleness fills Stale from each drone's partition's log clock (one
// pipelined GET of the partitions' clocks): a drone not heard for
// SignalLostAfter of it is stale.
func (s *Store) staleness(ctx context.Context, ds []Drone) error {
	if len(ds) == 0 {
		return nil
	}
	cmds := make([]*redis.StringCmd, len(s.keys))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range s.keys {
			cmds[p] = pl.Get(ctx, k.Clock())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("dronestore: partition clocks: %w", err)
	}
	for i := range ds {
		d := &ds[i]
		clock, err := cmds[d.Partition].Int64()
		if err != nil || d.seen == 0 {
			continue // no clock yet, or a state from before it: not known to be stale
		}
		d.Stale = time.Duration(clock-d.seen)*time.Millisecond >= s.o.SignalLostAfter
	}
	return nil
}

// List returns up to f.Limit drones matching f, by drone id, across every
// partition, and the cursor of the next page ("" when there is none).
//
// A page reads the drone indexes the batch script keeps (indexed.go): the
// next ids by range, or the drones within the box from the geo sets, then
// their states and one pipelined HMGET of the page's alarms' raise times,
// so its reads grow with the page, not with the drones known. A sparse
// filter reads at most examineMax states per page: the page may then hold
// fewer drones than asked and still have a next cursor. Until every
// partition is indexed (an alerter indexes one when it loads it), a page
// reads every partition's drone hash (HSCAN, pipelined across partitions).
func (s *Store) List(ctx context.Context, f Filter) ([]Drone, string, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	f.Limit = min(f.Limit, MaxLimit)
	after := ""
	if f.Cursor != "" {
		var err error
		if after, err = parseCursor(f.Cursor); err != nil {
			return nil, "", err
		}
	}
	if f.BBox != nil {
		if err := f.BBox.Check(); err != nil {
			return nil, "", fmt.Errorf("dronestore: bbox: %w", err)
		}
	}

	if ok, err := s.indexed(ctx); err != nil {
		return nil, "", err
	} else if ok {
		out, next, err := s.listIndexed(ctx, f, after)
		if err != nil {
			return nil, "", err
		}
		if err := s.raiseTimes(ctx, out); err != nil {
			return nil, "", err
		}
		if err := s.staleness(ctx, out); err != nil {
			return nil, "", err
		}
		return out, next, nil
	}

	// A partition written before the drone indexes: the best state of
	// each drone after the cursor; its filter is applied once every
	// partition was read, since a drone's state on another partition may
	// win.
	best := map[string]*Drone{}
	err := s.scan(ctx, func(p int, id, raw string) error {
		if id <= after {
			return nil
		}
		d, err := droneOf(id, p, []byte(raw))
		if err != nil {
			return err
		}
		if prev, ok := best[id]; !ok || better(&d, prev) {
			best[id] = &d
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}

	ids := make([]string, 0, len(best))
	for id, d := range best {
		if f.match(d) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > f.Limit {
		ids = ids[:f.Limit]
		next = cursorOf(ids[len(ids)-1])
	}
	out := make([]Drone, len(ids))
	for i, id := range ids {
		out[i] = *best[id]
	}
	if err := s.raiseTimes(ctx, out); err != nil {
		return nil, "", err
	}
	if err := s.staleness(ctx, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// scan calls visit with every field of every partition's drone hash: one
// HSCAN round per scanCount fields of the largest hash, pipelined across
// partitions.
func (s *Store) scan(ctx context.Context, visit func(p int, id, raw string) error) error {
	type scan struct {
		cursor uint64
		done   bool
	}
	scans := make([]scan, len(s.keys))
	cmds := make([]*redis.ScanCmd, len(s.keys))
	for {
		clear(cmds)
		_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for p, k := range s.keys {
				if !scans[p].done {
					cmds[p] = pl.HScan(ctx, k.Drones(), scans[p].cursor, "", scanCount)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("dronestore: scan drones: %w", err)
		}
		more := false
		for p, c := range cmds {
			if c == nil {
				continue
			}
			kv, next := c.Val()
			for i := 0; i+1 < len(kv); i += 2 {
				if err := visit(p, kv[i], kv[i+1]); err != nil {
					return err
				}
			}
			scans[p].cursor, scans[p].done = next, next == 0
			more = more || next != 0
		}
		if !more {
			return nil
		}
	}
}

// raiseTimes fills the Since of the drones' alarms from the alarm index:
// one pipelined HMGET per partition holding any of them.
func (s *Store) raiseTimes(ctx context.Context, ds []Drone) error {
	fields := make([][]string, len(s.keys))
	for _, d := range ds {
		for _, a := range d.ActiveAlarms {
			fields[d.Partition] = append(fields[d.Partition], a.AlarmID+dedup.SuffixRaised)
		}
	}
	cmds := make([]*redis.SliceCmd, len(s.keys))
	n := 0
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, fs := range fields {
			if len(fs) > 0 {
				cmds[p] = pl.HMGet(ctx, s.keys[p].Alarms(), fs...)
				n++
			}
		}
		return nil
	})
	if n == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dronestore: raise times: %w", err)
	}
	since := map[string]time.Time{}
	for p, c := range cmds {
		if c == nil {
			continue
		}
		for i, v := range c.Val() {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			var e struct {
				TS time.Time `json:"ts"`
			}
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				return fmt.Errorf("dronestore: partition %d: raised event %s: %w", p, fields[p][i], err)
			}
			since[strings.TrimSuffix(fields[p][i], dedup.SuffixRaised)] = e.TS.UTC()
		}
	}
	for i := range ds {
		for j := range ds[i].ActiveAlarms {
			a := &ds[i].ActiveAlarms[j]
			if ts, ok := since[a.AlarmID]; ok {
				a.Since = &ts
			}
		}
	}
	return nil
}

// Get returns drone id with its track: the state and track of every
// partition in one pipelined round trip (the state with the higher seq
// wins, with the track kept beside it), then its alarms' raise times.
// ErrNotFound when no partition holds a state of it.
func (s *Store) Get(ctx context.Context, id string) (Detail, error) {
	if id == "" || len(id) > telemetry.MaxDroneIDLen {
		return Detail{}, ErrNotFound
	}
	states := make([]*redis.StringCmd, len(s.keys))
	tracks := make([]*redis.StringSliceCmd, len(s.keys))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range s.keys {
			states[p] = pl.HGet(ctx, k.Drones(), id)
			// The last DefaultTrackLen points: a held track keeps more,
			// for the incident report, not for this answer.
			tracks[p] = pl.LRange(ctx, k.Track(id), -dedup.DefaultTrackLen, -1)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Detail{}, fmt.Errorf("dronestore: get drone %q: %w", id, err)
	}
	var best *Drone
	for p, c := range states {
		raw, err := c.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return Detail{}, fmt.Errorf("dronestore: get drone %q on partition %d: %w", id, p, err)
		}
		d, err := droneOf(id, p, raw)
		if err != nil {
			return Detail{}, err
		}
		if best == nil || better(&d, best) {
			best = &d
		}
	}
	if best == nil {
		return Detail{}, ErrNotFound
	}
	ds := []Drone{*best}
	if err := s.raiseTimes(ctx, ds); err != nil {
		return Detail{}, err
	}
	if err := s.staleness(ctx, ds); err != nil {
		return Detail{}, err
	}
	out := Detail{Drone: ds[0], Track: []Point{}}
	pts, err := tracks[best.Partition].Result()
	if err != nil {
		return Detail{}, fmt.Errorf("dronestore: track of %q on partition %d: %w", id, best.Partition, err)
	}
	for _, raw := range pts {
		f, err := alerts.DecodeFix([]byte(raw))
		if err != nil {
			return Detail{}, fmt.Errorf("dronestore: partition %d: %w", best.Partition, err)
		}
		out.Track = append(out.Track, pointOf(f))
	}
	if n := len(out.Track); n > dedup.DefaultTrackLen {
		out.Track = out.Track[n-dedup.DefaultTrackLen:]
	}
	return out, nil
}
