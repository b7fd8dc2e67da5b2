// Package zonestore is the versioned zone set every alerter instance
// shares, in Redis: the current set (a zone document, normalized to a
// FeatureCollection) with an integer version, and the recent versions
// (each version's set, when and by whom it was made). A change is
// all-or-nothing: a Lua script compares the version the change was made
// against and writes the new one only if it is still current
// (docs/redis-layout.md, "Zone store"); internal/versionstore is that
// script and its reads, shared with the authorisation store.
package zonestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/versionstore"
)

// Keys names the zone store's keys under a Redis prefix
// (internal/versionstore's, under the tag {prefix:zones}), so the change
// script touches one Cluster slot; no partition's tag
// ({prefix:topic:partition}) can equal it: a topic name cannot hold ":"
// and "zones}" at once.
type Keys = versionstore.Keys

// KeysOf returns the zone store's keys under prefix.
func KeysOf(prefix string) Keys { return versionstore.KeysOf("{" + prefix + ":zones}") }

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
type ConflictError = versionstore.ConflictError

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
	// MaxBytes bounds the history's bytes (default
	// versionstore.DefaultMaxBytes, --zone-history-max-bytes): past it
	// the oldest versions go whatever their age and MinKeep, never the
	// current one.
	MaxBytes int64
	Now      func() time.Time
	// Replicas, when on, makes a Put succeed only once the primary has
	// that many replicas holding it (--redis-min-replicas): a zone change
	// a failover could take back is not reported as made.
	Replicas redisreplica.Wait
}

// stageAbove: a version larger than this is written in pieces and stored
// once, under its own key (versionstore's Options.StageAbove): a national
// set in one command held Redis for 0.8 s.
const stageAbove = 1 << 20

// Store is the zone store. It is safe for concurrent use.
type Store struct {
	vs  *versionstore.Store
	now func() time.Time
}

// New returns the store under o.Prefix.
func New(rdb redis.UniversalClient, o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{now: o.Now, vs: versionstore.New(rdb, KeysOf(o.Prefix), versionstore.Options{Name: "zonestore",
		Retention: o.Retention, MinKeep: o.MinKeep, MaxKeep: o.MaxKeep, MaxBytes: o.MaxBytes, StageAbove: stageAbove, Replicas: o.Replicas})}
}

// Keys returns the store's keys.
func (s *Store) Keys() Keys { return s.vs.Keys() }

// Version returns the current version, 0 when no set is stored.
func (s *Store) Version(ctx context.Context) (int64, error) { return s.vs.Version(ctx) }

// Current returns the current version's entry, ErrEmpty when none.
func (s *Store) Current(ctx context.Context) (Entry, error) {
	b, ok, err := s.vs.Current(ctx)
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		return Entry{}, ErrEmpty
	}
	return decodeEntry(b)
}

// History returns the versions kept, oldest first.
func (s *Store) History(ctx context.Context) ([]Entry, error) {
	vs, err := s.vs.History(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(vs))
	for _, v := range vs {
		e, err := decodeEntry([]byte(v.Entry))
		if err != nil {
			return nil, fmt.Errorf("zonestore: version %d: %w", v.Version, err)
		}
		out = append(out, e)
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

// Put makes zones (a normalized document, see Normalize) version
// expected+1, if expected is still the current version (0: no set stored
// yet); otherwise it returns a *ConflictError and changes nothing.
func (s *Store) Put(ctx context.Context, expected int64, format string, zones json.RawMessage, by string) (Entry, error) {
	now := s.now().UTC()
	e := Entry{Version: expected + 1, At: now, By: by, Format: format, Zones: zones}
	b, err := json.Marshal(e)
	if err != nil {
		return Entry{}, fmt.Errorf("zonestore: encode entry: %w", err)
	}
	if err := s.vs.Put(ctx, expected, b, now); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// Switch is a partition's switch to a zone set version: its records at
// offsets above AfterOffset were evaluated with Version, until the next
// switch.
type Switch = versionstore.Switch

// ReadSwitches reads every partition's zone switches (the batch script's
// <tag>:zoneswitch lists of "<version> <after_offset>", oldest first), by
// partition number in decimal, in one pipeline.
func ReadSwitches(ctx context.Context, rdb redis.UniversalClient, prefix, topic string, partitions int) (map[string][]Switch, error) {
	sw, err := versionstore.ReadSwitches(ctx, rdb, partitions,
		func(p int) string { return redislayout.Of(prefix, topic, p).ZoneSwitches() }, "zone switches")
	if err != nil {
		return nil, fmt.Errorf("zonestore: %w", err)
	}
	return sw, nil
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
