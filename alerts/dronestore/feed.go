package dronestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Feed is Scanner reading only what changed: the dashboard's positions
// producer (api/positions_hub.go) asks for the active drones once a
// second, and a Feed reads, per partition, the drones whose state a batch
// wrote since its last call (the drone changes set, by applied offset:
// ZRANGEBYSCORE) and their states, not every state. At 50,000 drones known
// and a quiet sky a tick costs a few round trips and no state; at 50,000
// drones flying it reads each state once. It keeps the decoded states of
// the drones Active answered (those within the window, or with an alarm);
// until every partition is indexed it is a Scanner. Not safe for
// concurrent use.
type Feed struct {
	s     *Store
	sc    *Scanner
	after []int64               // by partition: the highest change read; unread when started is false
	known []map[string]*decoded // by partition, then drone id
	begun bool                  // the indexes were read at least once since a scan
	reads int64                 // states read by the last call (for tests and metrics)
}

// Feed returns a Feed of the store's drones.
func (s *Store) Feed() *Feed {
	fd := &Feed{s: s, after: make([]int64, len(s.keys)), known: make([]map[string]*decoded, len(s.keys))}
	for p := range fd.known {
		fd.known[p] = map[string]*decoded{}
	}
	return fd
}

// Reads is how many states the last Active read from Redis.
func (fd *Feed) Reads() int64 { return fd.reads }

// Active is Store.Active: every drone whose last position's ts is at or
// after since, and every drone with an active alarm, with Stale filled.
func (fd *Feed) Active(ctx context.Context, since time.Time) ([]Drone, error) {
	ok, err := fd.s.indexed(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		if fd.sc == nil {
			fd.sc = fd.s.Scanner()
		}
		fd.begun = false
		ds, err := fd.sc.Active(ctx, since)
		fd.reads = int64(len(ds))
		return ds, err
	}
	fd.sc = nil
	if !fd.begun {
		for p := range fd.known {
			fd.after[p] = -1 << 62
			clear(fd.known[p])
		}
		fd.begun = true
	}
	if err := fd.read(ctx); err != nil {
		return nil, err
	}
	f := Filter{ActiveSince: since}
	best := map[string]*Drone{}
	for _, m := range fd.known {
		for id, k := range m {
			if prev, ok := best[id]; !ok || better(&k.d, prev) {
				best[id] = &k.d
			}
		}
	}
	var out []Drone
	for _, d := range best {
		if f.match(d) || len(d.ActiveAlarms) > 0 && !d.pos.IsZero() {
			out = append(out, *d)
		}
	}
	// What Active would not answer is not kept: it is read again when a
	// batch writes it.
	for _, m := range fd.known {
		for id, k := range m {
			if len(k.d.ActiveAlarms) == 0 && (k.d.pos.IsZero() || k.d.pos.TS.Before(since)) {
				delete(m, id)
			}
		}
	}
	if err := fd.s.staleness(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// read brings the known states up to date: one pipelined round trip for
// every partition's changes (and applied offset), one for their states.
func (fd *Feed) read(ctx context.Context) error {
	s := fd.s
	applied := make([]*redis.StringCmd, len(s.keys))
	changes := make([]*redis.ZSliceCmd, len(s.keys))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range s.keys {
			applied[p] = pl.Get(ctx, k.Applied())
			changes[p] = pl.ZRangeByScoreWithScores(ctx, k.DroneChanges(), &redis.ZRangeBy{
				Min: "(" + strconv.FormatInt(fd.after[p], 10), Max: "+inf"})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("dronestore: drone changes: %w", err)
	}
	var ids []placed
	for p := range s.keys {
		// A partition whose offsets went back (its topic made anew) is
		// read from the start.
		if a, err := applied[p].Int64(); err == nil && a < fd.after[p] {
			fd.after[p] = -1 << 62
			clear(fd.known[p])
			return fd.read(ctx)
		}
		for _, z := range changes[p].Val() {
			ids = append(ids, placed{z.Member.(string), p})
			fd.after[p] = max(fd.after[p], int64(z.Score))
		}
	}
	fd.reads = int64(len(ids))
	for a := 0; a < len(ids); a += 5000 {
		if err := fd.states(ctx, ids[a:min(len(ids), a+5000)]); err != nil {
			return err
		}
	}
	return nil
}

// states reads and decodes the states of ids into known.
func (fd *Feed) states(ctx context.Context, ids []placed) error {
	s := fd.s
	byP := make([][]string, len(s.keys))
	for _, c := range ids {
		byP[c.p] = append(byP[c.p], c.id)
	}
	cmds := make([]*redis.SliceCmd, len(s.keys))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, ids := range byP {
			if len(ids) > 0 {
				cmds[p] = pl.HMGet(ctx, s.keys[p].Drones(), ids...)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dronestore: read changed drone states: %w", err)
	}
	for p, c := range cmds {
		if c == nil {
			continue
		}
		for i, v := range c.Val() {
			id := byP[p][i]
			raw, ok := v.(string)
			if !ok {
				delete(fd.known[p], id) // forgotten
				continue
			}
			if k := fd.known[p][id]; k != nil && k.raw == raw {
				continue
			}
			d, err := droneOf(id, p, []byte(raw))
			if err != nil {
				return err
			}
			fd.known[p][id] = &decoded{raw: raw, d: d}
		}
	}
	return nil
}
