package dronestore

import (
	"context"
	"time"
)

// Active returns every drone whose last position's ts is at or after
// since, and every drone with an active alarm however long ago it was
// heard (the map keeps drawing it where it was last seen), in no order,
// with Stale filled but without their alarms' raise times (Since is nil):
// one pass over every partition's drone hash, where List, which pages,
// reads every hash again for each page. A Scanner does the same and does
// not decode again a state unchanged since its last pass.
func (s *Store) Active(ctx context.Context, since time.Time) ([]Drone, error) {
	return s.Scanner().Active(ctx, since)
}

// Scanner is Active with a memory of the states it decoded: the dashboard's
// positions producer (api/positions_hub.go) reads every drone state once a
// second, and most states — every drone not flying — have not changed
// since the second before. It holds one decoded state per drone known; it
// is not safe for concurrent use.
type Scanner struct {
	s     *Store
	pass  uint64
	known []map[string]*decoded // by partition, then drone id
}

// decoded is a state as read (raw) and decoded, and the pass it was last
// seen in.
type decoded struct {
	raw  string
	d    Drone
	pass uint64
}

// Scanner returns a Scanner of the store's drones.
func (s *Store) Scanner() *Scanner {
	sc := &Scanner{s: s, known: make([]map[string]*decoded, len(s.keys))}
	for p := range sc.known {
		sc.known[p] = map[string]*decoded{}
	}
	return sc
}

// Active is Store.Active.
func (sc *Scanner) Active(ctx context.Context, since time.Time) ([]Drone, error) {
	sc.pass++
	f := Filter{ActiveSince: since}
	// A drone on two partitions (moved by a repartition) is the one List
	// would answer: the better state, then the filter.
	best := map[string]*Drone{}
	err := sc.s.scan(ctx, func(p int, id, raw string) error {
		k := sc.known[p][id]
		if k == nil || k.raw != raw {
			d, err := droneOf(id, p, []byte(raw))
			if err != nil {
				return err
			}
			k = &decoded{raw: raw, d: d}
			sc.known[p][id] = k
		}
		k.pass = sc.pass
		if prev, ok := best[id]; !ok || better(&k.d, prev) {
			best[id] = &k.d
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// States gone from Redis are forgotten.
	for _, m := range sc.known {
		for id, k := range m {
			if k.pass != sc.pass {
				delete(m, id)
			}
		}
	}
	var out []Drone
	for _, d := range best {
		if f.match(d) || len(d.ActiveAlarms) > 0 && !d.pos.IsZero() {
			out = append(out, *d)
		}
	}
	if err := sc.s.staleness(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}
