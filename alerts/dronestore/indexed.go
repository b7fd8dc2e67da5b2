package dronestore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
)

// The drone indexes the batch script keeps beside the states
// (docs/redis-layout.md, "drones:ids", "drones:geo", "drones:changed"):
// List reads a page by id range or the drones within a box instead of
// every state, whatever the number of drones known.

const (
	// examineMax bounds the states one List request reads when its filter
	// is sparse: the page then holds fewer drones than asked, with a next
	// cursor to go on from (a request never reads the whole fleet).
	examineMax = 20000
	// geoCap is the most drones one partition's box search returns; a box
	// holding more (a country at national scale) is read by id range and
	// filtered, which is as cheap when most drones match.
	geoCap = 20000
	// geoMaxSpan is the widest box, in degrees of longitude, searched in
	// the geo set: beyond it the search's approximations of the box are
	// not worth it, and the id range does the work.
	geoMaxSpan = 90
)

// indexed reports whether every partition's drone indexes are built (one
// pipelined round trip); a partition written before them is listed by
// scanning its hash until an alerter loads it (dedup.Redis.IndexDrones).
func (s *Store) indexed(ctx context.Context) (bool, error) {
	ks := make([]string, len(s.keys))
	for p, k := range s.keys {
		ks[p] = k.DroneIndexed()
	}
	cmds := make([]*redis.IntCmd, len(ks))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range ks {
			cmds[p] = pl.Exists(ctx, k)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("dronestore: drone indexes' marks: %w", err)
	}
	for _, c := range cmds {
		if c.Val() != 1 {
			return false, nil
		}
	}
	return true, nil
}

// placed is a drone id found in the indexes, and its partition.
type placed struct {
	id string
	p  int
}

// states reads the states of ids (one pipelined HMGET per partition) and
// returns the best of each drone, by id.
func (s *Store) states(ctx context.Context, ids []placed) (map[string]*Drone, error) {
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
		return nil, fmt.Errorf("dronestore: read drone states: %w", err)
	}
	best := make(map[string]*Drone, len(ids))
	for p, c := range cmds {
		if c == nil {
			continue
		}
		for i, v := range c.Val() {
			raw, ok := v.(string)
			if !ok {
				continue // forgotten since the index was read
			}
			d, err := droneOf(byP[p][i], p, []byte(raw))
			if err != nil {
				return nil, err
			}
			if prev, ok := best[d.DroneID]; !ok || better(&d, prev) {
				best[d.DroneID] = &d
			}
		}
	}
	return best, nil
}

// listIndexed is List from the indexes. after is the cursor's id.
func (s *Store) listIndexed(ctx context.Context, f Filter, after string) ([]Drone, string, error) {
	if f.BBox != nil && geoSearchable(*f.BBox) {
		if out, next, ok, err := s.listInBox(ctx, f, after); err != nil || ok {
			return out, next, err
		}
	}
	return s.listByID(ctx, f, after)
}

// listByID pages the drones by id: each round reads the next ids of every
// partition's id set (ZRANGEBYLEX), their states, and keeps those the
// filter takes, until the page is full, the ids end, or examineMax states
// were read.
func (s *Store) listByID(ctx context.Context, f Filter, after string) ([]Drone, string, error) {
	chunk := int64(f.Limit + 1)
	if f.BBox != nil || !f.ActiveSince.IsZero() {
		chunk = max(chunk, 500)
	}
	var out []*Drone
	examined := 0
	for {
		cmds := make([]*redis.StringSliceCmd, len(s.keys))
		from := "-"
		if after != "" {
			from = "(" + after
		}
		_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for p, k := range s.keys {
				cmds[p] = pl.ZRangeByLex(ctx, k.DroneIDs(), &redis.ZRangeBy{Min: from, Max: "+", Count: chunk})
			}
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("dronestore: drone ids after %q: %w", after, err)
		}
		// The ids are in order up to the lowest last id of a partition
		// that returned a full chunk: beyond it, that partition may hold
		// ids not read yet.
		bound, more := "", false
		for _, c := range cmds {
			if ids := c.Val(); int64(len(ids)) == chunk {
				if last := ids[len(ids)-1]; !more || last < bound {
					bound = last
				}
				more = true
			}
		}
		var round []placed
		for p, c := range cmds {
			for _, id := range c.Val() {
				if !more || id <= bound {
					round = append(round, placed{id, p})
				}
			}
		}
		if len(round) == 0 {
			return flatten(out), "", nil
		}
		// Without a filter every drone read is listed: read the states of
		// the page's ids only (the lowest ones, every partition's state of
		// each), not the next chunk of every partition — with 256
		// partitions that would be 25,856 states for a page of 100.
		if f.BBox == nil && f.ActiveSince.IsZero() {
			slices.SortFunc(round, func(a, b placed) int { return strings.Compare(a.id, b.id) })
			need, n := f.Limit+1-len(out), 0
			for i := range round {
				if i == 0 || round[i].id != round[i-1].id {
					if n == need {
						round = round[:i]
						break
					}
					n++
				}
			}
			if n == need {
				more = true
				bound = round[len(round)-1].id
			}
		}
		best, err := s.states(ctx, round)
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, 0, len(best))
		for id := range best {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if d := best[id]; f.match(d) {
				out = append(out, d)
				if len(out) > f.Limit {
					out = out[:f.Limit]
					return flatten(out), cursorOf(out[len(out)-1].DroneID), nil
				}
			}
		}
		examined += len(round)
		if !more {
			return flatten(out), "", nil
		}
		after = bound
		if examined >= examineMax {
			return flatten(out), cursorOf(after), nil
		}
	}
}

// geoSearchable reports whether a box is searched in the geo set: within
// its latitudes and not wider than geoMaxSpan.
func geoSearchable(b BBox) bool {
	return b.MinLat >= -dedup.GeoMaxLat && b.MaxLat <= dedup.GeoMaxLat && b.MaxLon-b.MinLon <= geoMaxSpan
}

// earthM is a generous length of one degree of latitude in metres (the
// box searched is a little larger than the one asked, and the states are
// filtered exactly).
const earthM = 111320 * 1.01

// listInBox lists the drones of f.BBox from the geo sets: one GEOSEARCH
// BYBOX per partition, covering the box, then the states of the ids after
// the cursor, in id order. ok is false when a partition holds more than
// geoCap drones in the box (the caller lists by id instead).
func (s *Store) listInBox(ctx context.Context, f Filter, after string) (out []Drone, next string, ok bool, err error) {
	b := *f.BBox
	cx, cy := (b.MinLon+b.MaxLon)/2, (b.MinLat+b.MaxLat)/2
	// Redis measures the box's width along the parallel of each point:
	// the widest the box is, at its latitude nearest the equator.
	near := 0.0
	if b.MinLat > 0 {
		near = b.MinLat
	} else if b.MaxLat < 0 {
		near = -b.MaxLat
	}
	// A drone is placed again only once it moved alerts.PlaceStepM: its
	// place may be that far from its state's position, on either side.
	const margin = 2*alerts.PlaceStepM + 100
	w := (b.MaxLon-b.MinLon)*earthM*math.Cos(near*math.Pi/180) + margin
	h := (b.MaxLat-b.MinLat)*earthM + margin
	cmds := make([]*redis.StringSliceCmd, len(s.keys))
	_, err = s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range s.keys {
			cmds[p] = pl.GeoSearch(ctx, k.DroneGeo(), &redis.GeoSearchQuery{Longitude: cx, Latitude: cy,
				BoxWidth: w, BoxHeight: h, BoxUnit: "m", Count: geoCap + 1})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", false, fmt.Errorf("dronestore: drones in %v: %w", b, err)
	}
	var found []placed
	for p, c := range cmds {
		ids := c.Val()
		if len(ids) > geoCap {
			return nil, "", false, nil
		}
		for _, id := range ids {
			if id > after {
				found = append(found, placed{id, p})
			}
		}
	}
	slices.SortFunc(found, func(a, b placed) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return a.p - b.p
	})
	// The states in id order, a page and one more at a time (a drone the
	// exact filter refuses is skipped), both partitions of a drone in the
	// same read.
	var page []*Drone
	for len(found) > 0 {
		n := min(len(found), f.Limit+1)
		for n < len(found) && found[n].id == found[n-1].id {
			n++
		}
		// Every partition's state of each: a drone moved by a repartition
		// may be placed in the box by its older state only.
		var read []placed
		for i, c := range found[:n] {
			if i == 0 || found[i-1].id != c.id {
				for p := range s.keys {
					read = append(read, placed{c.id, p})
				}
			}
		}
		best, err := s.states(ctx, read)
		if err != nil {
			return nil, "", false, err
		}
		for i, c := range found[:n] {
			if i > 0 && found[i-1].id == c.id {
				continue
			}
			if d := best[c.id]; d != nil && f.match(d) {
				page = append(page, d)
			}
		}
		found = found[n:]
		if len(page) > f.Limit {
			page = page[:f.Limit]
			return flatten(page), cursorOf(page[len(page)-1].DroneID), true, nil
		}
	}
	return flatten(page), "", true, nil
}

func flatten(ds []*Drone) []Drone {
	out := make([]Drone, len(ds))
	for i, d := range ds {
		out[i] = *d
	}
	return out
}
