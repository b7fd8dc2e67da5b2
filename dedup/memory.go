package dedup

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Memory is an in-memory Store with the same semantics as Redis: for replay,
// demos and unit tests. The zero value is not usable; call NewMemory.
type Memory struct {
	mu    sync.Mutex
	parts map[int]*memPart
	ttl   time.Duration
	now   func() time.Time
}

type memPart struct {
	applied int64
	drones  map[string][]byte
	keys    map[string]time.Time // event id -> expiry
	outbox  []Entry
	seq     int64
	tracks  map[string]*memTrack
	zonever int64
	zsw     []ZoneSwitch
	clock   int64
	authver int64
	asw     []ZoneSwitch
}

type memTrack struct {
	points  [][]byte
	expires time.Time
}

// NewMemory returns an empty in-memory store whose unique keys live for ttl
// (DefaultEventTTL when ttl <= 0).
func NewMemory(ttl time.Duration) *Memory {
	if ttl <= 0 {
		ttl = DefaultEventTTL
	}
	return &Memory{parts: map[int]*memPart{}, ttl: ttl, now: time.Now}
}

func (m *Memory) part(p int) *memPart {
	mp := m.parts[p]
	if mp == nil {
		mp = &memPart{applied: NoVersion, drones: map[string][]byte{}, keys: map[string]time.Time{}, tracks: map[string]*memTrack{}, zonever: -1}
		m.parts[p] = mp
	}
	return mp
}

// Load implements Store.
func (m *Memory) Load(ctx context.Context, partition int) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.part(partition)
	s := Snapshot{Applied: mp.applied, Drones: make(map[string][]byte, len(mp.drones)), Clock: mp.clock, ZoneVersion: mp.zonever, AuthVersion: mp.authver}
	for k, v := range mp.drones {
		s.Drones[k] = append([]byte(nil), v...)
	}
	return s, nil
}

// Commit implements Store.
func (m *Memory) Commit(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
	if err := checkBatch(expected, b); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.part(partition)
	if mp.applied != expected {
		return Result{}, ErrFenced
	}
	for k, v := range b.Drones {
		mp.drones[k] = append([]byte(nil), v...)
	}
	now := m.now()
	for id, pt := range b.Tracks {
		tr := mp.tracks[id]
		if tr == nil || !now.Before(tr.expires) {
			tr = &memTrack{}
			mp.tracks[id] = tr
		}
		tr.points = append(tr.points, append([]byte(nil), pt...))
		keep := DefaultTrackLen
		if b.Held[id] {
			keep = DefaultHeldTrackLen
		}
		if n := len(tr.points); n > keep {
			tr.points = append([][]byte(nil), tr.points[n-keep:]...)
		}
		tr.expires = now.Add(DefaultTrackTTL)
	}
	for _, id := range b.Forgotten {
		delete(mp.drones, id)
		delete(mp.tracks, id)
	}
	if b.Clock != 0 {
		mp.clock = b.Clock
	}
	if b.ZoneVersion != 0 && b.ZoneVersion != mp.zonever {
		mp.zsw = append(mp.zsw, ZoneSwitch{Version: b.ZoneVersion, After: expected})
		mp.zonever = b.ZoneVersion
	}
	if b.AuthVersion != 0 && b.AuthVersion != mp.authver {
		mp.asw = append(mp.asw, ZoneSwitch{Version: b.AuthVersion, After: expected})
		mp.authver = b.AuthVersion
	}
	var r Result
	for _, e := range b.Events {
		if exp, ok := mp.keys[e.ID]; ok && now.Before(exp) {
			r.Suppressed++
			continue
		}
		mp.keys[e.ID] = now.Add(m.ttl)
		mp.seq++
		mp.outbox = append(mp.outbox, Entry{ID: strconv.FormatInt(mp.seq, 10) + "-0", EventID: e.ID, Event: append([]byte(nil), e.JSON...)})
		r.Appended++
	}
	mp.applied = b.Applied
	return r, nil
}

// Outbox implements OutboxReader.
func (m *Memory) Outbox(ctx context.Context, partition int) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.part(partition)
	return append([]Entry(nil), mp.outbox...), nil
}

// Track returns drone's track on partition, oldest point first (the last
// DefaultTrackLen points, DefaultHeldTrackLen for a held one, none once
// DefaultTrackTTL passed since the last).
func (m *Memory) Track(ctx context.Context, partition int, drone string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tr := m.part(partition).tracks[drone]
	if tr == nil || !m.now().Before(tr.expires) {
		return [][]byte{}, nil
	}
	out := make([][]byte, len(tr.points))
	for i, p := range tr.points {
		out[i] = append([]byte(nil), p...)
	}
	return out, nil
}

// ZoneSwitches returns the partition's zone switches, oldest first.
func (m *Memory) ZoneSwitches(ctx context.Context, partition int) ([]ZoneSwitch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ZoneSwitch{}, m.part(partition).zsw...), nil
}

// AuthSwitches returns the partition's authorisation set switches, oldest
// first.
func (m *Memory) AuthSwitches(ctx context.Context, partition int) ([]ZoneSwitch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ZoneSwitch{}, m.part(partition).asw...), nil
}

// ForgetDrones drops every drone state of the partition, keeping the
// version, unique keys and outbox: a test of the second line of defence
// (state lost, log replayed).
func (m *Memory) ForgetDrones(partition int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.part(partition).drones = map[string][]byte{}
}
