// Package versionstore is a versioned JSON document in Redis, what the
// zone store (geofence/zonestore) and the authorisation store
// (authorization/authstore) both are: an integer version, the current
// version's entry, and the recent versions' entries, under one hash tag.
// A change is all or nothing: a Lua script (put.lua) writes version
// expected+1 only if expected is still current, and trims the history in
// the same step (docs/redis-layout.md, "Zone store"). One implementation,
// so the two stores cannot drift apart in what a version means.
//
// The entries are opaque here: each store encodes and decodes its own.
package versionstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// Keys names a store's keys under its hash tag, so the change script
// touches one Cluster slot.
type Keys struct{ tag string }

// KeysOf returns the keys under tag (with its braces, e.g. {nofly:zones}).
func KeysOf(tag string) Keys { return Keys{tag: tag} }

// Tag is the store's hash tag.
func (k Keys) Tag() string { return k.tag }

// Version is the string holding the current version (decimal; absent = 0,
// nothing stored).
func (k Keys) Version() string { return k.tag + ":version" }

// Current is the string holding the current version's entry JSON.
func (k Keys) Current() string { return k.tag + ":current" }

// History is the hash of version (decimal) → entry JSON of the versions
// kept.
func (k Keys) History() string { return k.tag + ":history" }

// Times is the sorted set of the versions kept, scored by the unix time in
// milliseconds they were made at: the history's trimming order.
func (k Keys) Times() string { return k.tag + ":times" }

// ConflictError is a change refused because the current version is not
// the one it was made against. Store names the store in the message.
type ConflictError struct {
	Store             string
	Expected, Current int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: version %d is current, not %d", e.Store, e.Current, e.Expected)
}

// Options configure a Store.
type Options struct {
	// Name prefixes the store's errors (zonestore, authstore).
	Name string
	// Retention: a version made longer ago than this is dropped from the
	// history unless it is among the last MinKeep (default 168h, the
	// alarm retention).
	Retention time.Duration
	// MinKeep versions are kept whatever their age (default 32), MaxKeep
	// at most whatever their age (default 1024).
	MinKeep, MaxKeep int
	// Replicas, when on, makes a Put succeed only once the primary has
	// that many replicas holding it (--redis-min-replicas): a change a
	// failover could take back is not reported as made.
	Replicas redisreplica.Wait
}

// Store is one versioned document. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	o    Options
}

// New returns the store under keys, o's zero values defaulted.
func New(rdb redis.UniversalClient, keys Keys, o Options) *Store {
	if o.Retention <= 0 {
		o.Retention = 168 * time.Hour
	}
	if o.MinKeep <= 0 {
		o.MinKeep = 32
	}
	if o.MaxKeep < o.MinKeep {
		o.MaxKeep = max(1024, o.MinKeep)
	}
	return &Store{rdb: rdb, keys: keys, o: o}
}

// Keys returns the store's keys.
func (s *Store) Keys() Keys { return s.keys }

// Retention returns the history's retention, defaulted.
func (s *Store) Retention() time.Duration { return s.o.Retention }

// Version returns the current version, 0 when nothing is stored.
func (s *Store) Version(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.Version()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: read version: %w", s.o.Name, err)
	}
	return v, nil
}

// Current returns the current version's entry JSON; ok is false when
// nothing is stored.
func (s *Store) Current(ctx context.Context) (entry []byte, ok bool, err error) {
	b, err := s.rdb.Get(ctx, s.keys.Current()).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: read current: %w", s.o.Name, err)
	}
	return b, true, nil
}

// Versioned is one kept version's entry JSON, as stored.
type Versioned struct {
	Version int64
	Entry   string
}

// History returns the versions kept, lowest first, with their entries.
func (s *Store) History(ctx context.Context) ([]Versioned, error) {
	vs, err := s.HistoryVersions(ctx)
	if err != nil || len(vs) == 0 {
		return nil, err
	}
	fields := make([]string, len(vs))
	for i, v := range vs {
		fields[i] = strconv.FormatInt(v, 10)
	}
	bs, err := s.rdb.HMGet(ctx, s.keys.History(), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: read history: %w", s.o.Name, err)
	}
	out := make([]Versioned, 0, len(bs))
	for i, b := range bs {
		if str, ok := b.(string); ok { // else trimmed between the two reads
			out = append(out, Versioned{Version: vs[i], Entry: str})
		}
	}
	return out, nil
}

// HistoryVersions returns the versions kept, lowest first (without their
// entries): with HistoryEntry, a reader holds one version at a time.
func (s *Store) HistoryVersions(ctx context.Context) ([]int64, error) {
	vs, err := s.rdb.ZRange(ctx, s.keys.Times(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: read history: %w", s.o.Name, err)
	}
	out := make([]int64, 0, len(vs))
	for _, v := range vs {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: history version %q: %w", s.o.Name, v, err)
		}
		out = append(out, n)
	}
	// The sorted set orders by time; a clock that went back would order
	// differently from the versions, which replay needs.
	slices.Sort(out)
	return out, nil
}

// HistoryEntry returns version v's entry JSON as stored; ok is false when
// the history no longer holds it (trimmed).
func (s *Store) HistoryEntry(ctx context.Context, v int64) (entry string, ok bool, err error) {
	b, err := s.rdb.HGet(ctx, s.keys.History(), strconv.FormatInt(v, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%s: read history version %d: %w", s.o.Name, v, err)
	}
	return b, true, nil
}

//go:embed put.lua
var putSource string

var putScript = redis.NewScript(putSource)

// Put stores entry (the JSON of version expected+1, made at) as the
// current version if expected is still current (0: nothing stored yet),
// and trims the history; otherwise it returns a *ConflictError and
// changes nothing. With Replicas on, a version the replicas did not
// confirm is an error wrapping redisreplica.ErrNotReplicated.
func (s *Store) Put(ctx context.Context, expected int64, entry []byte, at time.Time) error {
	k := s.keys
	cmd, werr := s.o.Replicas.Run(ctx, s.rdb, putScript, []string{k.Version(), k.Current(), k.History(), k.Times()},
		expected, entry, at.UnixMilli(), at.Add(-s.o.Retention).UnixMilli(), s.o.MinKeep, s.o.MaxKeep)
	res, err := cmd.Int64Slice()
	if err != nil {
		return fmt.Errorf("%s: put version %d: %w", s.o.Name, expected+1, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("%s: put version %d: the script answered %v", s.o.Name, expected+1, res)
	}
	if res[0] == 0 {
		return &ConflictError{Store: s.o.Name, Expected: expected, Current: res[1]}
	}
	if werr != nil {
		return fmt.Errorf("%s: version %d is stored on the primary but may be lost in a failover: %w", s.o.Name, expected+1, werr)
	}
	return nil
}

// Switch is a partition's switch to a version: its records at offsets
// above AfterOffset were decided with Version, until the next switch.
type Switch struct {
	Version     int64 `json:"version"`
	AfterOffset int64 `json:"after_offset"`
}

// ReadSwitches reads every partition's switches (the batch script's lists
// of "<version> <after_offset>", oldest first, at key(partition)), by
// partition number in decimal, in one pipeline. what names them in
// errors.
func ReadSwitches(ctx context.Context, rdb redis.UniversalClient, partitions int, key func(partition int) string, what string) (map[string][]Switch, error) {
	cmds := make([]*redis.StringSliceCmd, partitions)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.LRange(ctx, key(i), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	out := make(map[string][]Switch, partitions)
	for i, c := range cmds {
		l := make([]Switch, 0, len(c.Val()))
		for _, s := range c.Val() {
			var sw Switch
			if _, err := fmt.Sscanf(s, "%d %d", &sw.Version, &sw.AfterOffset); err != nil {
				return nil, fmt.Errorf("partition %d: %s %q: %w", i, what, s, err)
			}
			l = append(l, sw)
		}
		out[strconv.Itoa(i)] = l
	}
	return out, nil
}
