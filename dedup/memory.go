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
		mp = &memPart{applied: NoVersion, drones: map[string][]byte{}, keys: map[string]time.Time{}}
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
	s := Snapshot{Applied: mp.applied, Drones: make(map[string][]byte, len(mp.drones))}
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

// ForgetDrones drops every drone state of the partition, keeping the
// version, unique keys and outbox: a test of the second line of defence
// (state lost, log replayed).
func (m *Memory) ForgetDrones(partition int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.part(partition).drones = map[string][]byte{}
}
