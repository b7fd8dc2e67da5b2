// Package zonestore is the versioned zone set every alerter instance
// shares, in Redis: the current set (a zone document, normalized to a
// FeatureCollection) with an integer version, and the recent versions
// (each version's set, when and by whom it was made). A change is
// all-or-nothing: a Lua script compares the version the change was made
// against and writes the new one only if it is still current
// (docs/redis-layout.md, "Zone store").
package zonestore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// Keys names the zone store's keys under a Redis prefix. They share the
// hash tag {prefix:zones}, so the change script touches one Cluster slot,
// and no partition's tag ({prefix:topic:partition}) can equal it: a topic
// name cannot hold ":" and "zones}" at once.
type Keys struct{ tag string }

// KeysOf returns the zone store's keys under prefix.
func KeysOf(prefix string) Keys { return Keys{tag: "{" + prefix + ":zones}"} }

// Tag is the store's hash tag, {prefix:zones}.
func (k Keys) Tag() string { return k.tag }

// Version is the string holding the current version (decimal; absent = 0,
// no zone set stored).
func (k Keys) Version() string { return k.tag + ":version" }

// Current is the string holding the current version's Entry JSON.
func (k Keys) Current() string { return k.tag + ":current" }

// History is the hash of version (decimal) → Entry JSON of the versions
// kept.
func (k Keys) History() string { return k.tag + ":history" }

// Times is the sorted set of the versions kept, scored by the unix time in
// milliseconds they were made at: the history's trimming order.
func (k Keys) Times() string { return k.tag + ":times" }

// Entry is one version of the zone set.
type Entry struct {
	Version int64     `json:"version"`
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	// Format is the format the set was given in (geojson, ed269, ed318);
	// Zones holds it normalized to a FeatureCollection (see Normalize).
	Format string          `json:"format"`
	Zones  json.RawMessage `json:"zones"`
}

// ErrEmpty: the store holds no zone set yet.
var ErrEmpty = errors.New("zonestore: no zone set stored")

// ConflictError is a change refused because the current version is not
// the one it was made against.
type ConflictError struct{ Expected, Current int64 }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("zonestore: version %d is current, not %d", e.Current, e.Expected)
}

// Options configure a Store.
type Options struct {
	Prefix string
	// Retention: a version made longer ago than this is dropped from the
	// history unless it is among the last MinKeep (default 168h, the
	// alarm retention).
	Retention time.Duration
	// MinKeep versions are kept whatever their age (default 32), MaxKeep
	// at most whatever their age (default 1024).
	MinKeep, MaxKeep int
	Now              func() time.Time
	// Replicas, when on, makes a Put succeed only once the primary has
	// that many replicas holding it (--redis-min-replicas): a zone change
	// a failover could take back is not reported as made.
	Replicas redisreplica.Wait
}

// Store is the zone store. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	o    Options
}

// New returns the store under o.Prefix.
func New(rdb redis.UniversalClient, o Options) *Store {
	if o.Retention <= 0 {
		o.Retention = 168 * time.Hour
	}
	if o.MinKeep <= 0 {
		o.MinKeep = 32
	}
	if o.MaxKeep < o.MinKeep {
		o.MaxKeep = max(1024, o.MinKeep)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{rdb: rdb, keys: KeysOf(o.Prefix), o: o}
}

// Keys returns the store's keys.
func (s *Store) Keys() Keys { return s.keys }

// Version returns the current version, 0 when no set is stored.
func (s *Store) Version(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.Version()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("zonestore: read version: %w", err)
	}
	return v, nil
}

// Current returns the current version's entry, ErrEmpty when none.
func (s *Store) Current(ctx context.Context) (Entry, error) {
	b, err := s.rdb.Get(ctx, s.keys.Current()).Bytes()
	if errors.Is(err, redis.Nil) {
		return Entry{}, ErrEmpty
	}
	if err != nil {
		return Entry{}, fmt.Errorf("zonestore: read current: %w", err)
	}
	return decodeEntry(b)
}

// History returns the versions kept, oldest first.
func (s *Store) History(ctx context.Context) ([]Entry, error) {
	vs, err := s.rdb.ZRange(ctx, s.keys.Times(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("zonestore: read history: %w", err)
	}
	if len(vs) == 0 {
		return nil, nil
	}
	bs, err := s.rdb.HMGet(ctx, s.keys.History(), vs...).Result()
	if err != nil {
		return nil, fmt.Errorf("zonestore: read history: %w", err)
	}
	out := make([]Entry, 0, len(bs))
	for i, b := range bs {
		str, ok := b.(string)
		if !ok {
			continue // trimmed between the two reads
		}
		e, err := decodeEntry([]byte(str))
		if err != nil {
			return nil, fmt.Errorf("zonestore: version %s: %w", vs[i], err)
		}
		out = append(out, e)
	}
	// The sorted set orders by time; versions order the same unless a
	// clock went back, and replay needs them by version.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Version < out[j-1].Version; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

func decodeEntry(b []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("zonestore: decode entry: %w", err)
	}
	return e, nil
}

//go:embed put.lua
var putSource string

var putScript = redis.NewScript(putSource)

// Put makes zones (a normalized document, see Normalize) version
// expected+1, if expected is still the current version (0: no set stored
// yet); otherwise it returns a *ConflictError and changes nothing.
func (s *Store) Put(ctx context.Context, expected int64, format string, zones json.RawMessage, by string) (Entry, error) {
	now := s.o.Now().UTC()
	e := Entry{Version: expected + 1, At: now, By: by, Format: format, Zones: zones}
	b, err := json.Marshal(e)
	if err != nil {
		return Entry{}, fmt.Errorf("zonestore: encode entry: %w", err)
	}
	k := s.keys
	cmd, werr := s.o.Replicas.Run(ctx, s.rdb, putScript, []string{k.Version(), k.Current(), k.History(), k.Times()},
		expected, b, now.UnixMilli(), now.Add(-s.o.Retention).UnixMilli(), s.o.MinKeep, s.o.MaxKeep)
	res, err := cmd.Int64Slice()
	if err != nil {
		return Entry{}, fmt.Errorf("zonestore: put version %d: %w", e.Version, err)
	}
	if res[0] == 0 {
		return Entry{}, &ConflictError{Expected: expected, Current: res[1]}
	}
	if werr != nil {
		return Entry{}, fmt.Errorf("zonestore: version %d is stored on the primary but may be lost in a failover: %w", e.Version, werr)
	}
	return e, nil
}

// Switch is a partition's switch to a zone set version: its records at
// offsets above AfterOffset were evaluated with Version, until the next
// switch.
type Switch struct {
	Version     int64 `json:"version"`
	AfterOffset int64 `json:"after_offset"`
}

// ReadSwitches reads every partition's zone switches (the batch script's
// <tag>:zoneswitch lists of "<version> <after_offset>", oldest first), by
// partition number in decimal, in one pipeline.
func ReadSwitches(ctx context.Context, rdb redis.UniversalClient, prefix, topic string, partitions int) (map[string][]Switch, error) {
	cmds := make([]*redis.StringSliceCmd, partitions)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.LRange(ctx, redislayout.Of(prefix, topic, i).ZoneSwitches(), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("zonestore: read zone switches: %w", err)
	}
	out := make(map[string][]Switch, partitions)
	for i, c := range cmds {
		l := make([]Switch, 0, len(c.Val()))
		for _, s := range c.Val() {
			var sw Switch
			if _, err := fmt.Sscanf(s, "%d %d", &sw.Version, &sw.AfterOffset); err != nil {
				return nil, fmt.Errorf("zonestore: partition %d: zone switch %q: %w", i, s, err)
			}
			l = append(l, sw)
		}
		out[strconv.Itoa(i)] = l
	}
	return out, nil
}

// History is GET /v1/zones/history and the file `alerter replay
// --zone-history` reads: the versions kept and each partition's switches,
// so that a replay evaluates each record with the version live used.
type History struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	// Current is the current version (0: no zone set stored).
	Current int64 `json:"current_version"`
	// Versions are the versions kept, oldest first.
	Versions []Entry `json:"versions"`
	// Switches are each partition's switches, oldest first, by partition
	// number (decimal).
	Switches map[string][]Switch `json:"switches"`
}
