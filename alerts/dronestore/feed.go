package dronestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Feed is Scanner reading only what changed: the dashboard's positions
// producer (api/positions_hub.go) asks for the active drones once a
// second, and a Feed reads, per partition, the drone ids the batches wrote
// since its last call (the drone changes stream: one entry per batch) and
// their states, not every state. At 50,000 drones known and a quiet sky a
// tick costs a few round trips and no state; at 50,000 drones flying it
// reads each state once. Each entry names the version before it: a gap in
// that chain (entries trimmed after ChangesKeep, or batches of an alerter
// that writes none) makes the Feed read the partition's every state again,
// as a Scanner does. It keeps the decoded states of the drones Active
// answered (those within the window, or with an alarm). Not safe for
// concurrent use.
type Feed struct {
	s     *Store
	parts []feedPart
	known []map[string]*decoded // by partition, then drone id
	reads int64                 // states read by the last call
}

// feedPart is where a Feed is in a partition's changes.
type feedPart struct {
	synced bool   // lastID and applied follow the partition's chain
	lastID string // the last entry read
	// applied is the partition's version the known states are at least
	// at: the last entry's a, or the version read before a full read.
	applied int64
}

// Feed returns a Feed of the store's drones.
func (s *Store) Feed() *Feed {
	fd := &Feed{s: s, parts: make([]feedPart, len(s.keys)), known: make([]map[string]*decoded, len(s.keys))}
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
	fd.reads = 0
	if err := fd.read(ctx); err != nil {
		return nil, err
	}
	f := Filter{ActiveSince: since}
	n := 0
	for _, m := range fd.known {
		n += len(m)
	}
	best := make(map[string]*Drone, n)
	for _, m := range fd.known {
		for id, k := range m {
			if prev, ok := best[id]; !ok || better(&k.d, prev) {
				best[id] = &k.d
			}
		}
	}
	out := make([]Drone, 0, len(best))
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

// changesPage is how many entries one XRANGE reads.
const changesPage = 1000

// read brings the known states up to date: one pipelined round trip for
// every partition's applied offset and new entries, one for the states
// they name; a partition out of its chain is read whole.
func (fd *Feed) read(ctx context.Context) error {
	s := fd.s
	applied := make([]*redis.StringCmd, len(s.keys))
	changes := make([]*redis.XMessageSliceCmd, len(s.keys))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range s.keys {
			applied[p] = pl.Get(ctx, k.Applied())
			if fd.parts[p].synced {
				changes[p] = pl.XRangeN(ctx, k.DroneChanges(), "("+fd.parts[p].lastID, "+", changesPage)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("dronestore: drone changes: %w", err)
	}
	var ids []placed
	for p := range s.keys {
		fp := &fd.parts[p]
		a, err := applied[p].Int64()
		if errors.Is(err, redis.Nil) {
			a, err = -1, nil
		}
		if err != nil {
			return fmt.Errorf("dronestore: partition %d applied offset: %w", p, err)
		}
		if fp.synced {
			xs := changes[p].Val()
			for _, x := range xs {
				prev, _ := x.Values["p"].(string)
				if prev != strconv.FormatInt(fp.applied, 10) {
					fp.synced = false // entries trimmed, or batches that wrote none
					break
				}
				fp.applied, _ = strconv.ParseInt(fmt.Sprint(x.Values["a"]), 10, 64)
				fp.lastID = x.ID
				if d, _ := x.Values["d"].(string); d != "" {
					for _, id := range strings.Split(d, "\n") {
						ids = append(ids, placed{id, p})
					}
				}
			}
			// More entries than a page, or batches after the last entry
			// that wrote none (an alerter from before the stream): read
			// it again next tick, or whole.
			if fp.synced && len(xs) < changesPage && a > fp.applied {
				fp.synced = false
			}
		}
		if !fp.synced {
			if err := fd.resync(ctx, p); err != nil {
				return err
			}
		}
	}
	fd.reads += int64(len(ids))
	for a := 0; a < len(ids); a += 5000 {
		if err := fd.states(ctx, ids[a:min(len(ids), a+5000)]); err != nil {
			return err
		}
	}
	return nil
}

// resync reads partition p's every state, after the last entry of its
// changes (read first: a batch written during the read is read again at
// the next tick).
func (fd *Feed) resync(ctx context.Context, p int) error {
	s, k := fd.s, fd.s.keys[p]
	var tail *redis.XMessageSliceCmd
	var applied *redis.StringCmd
	_, err := s.o.Redis.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		tail = pl.XRevRangeN(ctx, k.DroneChanges(), "+", "-", 1)
		applied = pl.Get(ctx, k.Applied())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("dronestore: partition %d drone changes: %w", p, err)
	}
	fp := &fd.parts[p]
	*fp = feedPart{synced: true, lastID: "0-0", applied: -1}
	if xs := tail.Val(); len(xs) > 0 {
		fp.lastID = xs[0].ID
		fp.applied, _ = strconv.ParseInt(fmt.Sprint(xs[0].Values["a"]), 10, 64)
	}
	if a, err := applied.Int64(); err == nil && a > fp.applied {
		// Batches without entries came last: the chain starts again at
		// the next entry whose p is this version.
		fp.applied = a
	}
	seen := map[string]bool{}
	var cursor uint64
	for {
		kv, next, err := s.o.Redis.HScan(ctx, k.Drones(), cursor, "", scanCount).Result()
		if err != nil {
			return fmt.Errorf("dronestore: scan partition %d drones: %w", p, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			id, raw := kv[i], kv[i+1]
			seen[id] = true
			fd.reads++
			if kn := fd.known[p][id]; kn != nil && kn.raw == raw {
				continue
			}
			d, err := droneOf(id, p, []byte(raw))
			if err != nil {
				return err
			}
			fd.known[p][id] = &decoded{raw: raw, d: d}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	for id := range fd.known[p] {
		if !seen[id] {
			delete(fd.known[p], id) // forgotten
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
