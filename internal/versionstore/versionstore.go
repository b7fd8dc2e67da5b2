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
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/audit"
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

// Entry is the string holding version v's entry when it was staged (an
// entry over Options.StageAbove): current and the history then hold "@"
// and this key's name instead of the entry.
func (k Keys) Entry(v int64) string { return k.tag + ":entry:" + strconv.FormatInt(v, 10) }

// Staging is where a large entry is written in pieces before the change
// script renames it to its Entry key; it expires after StagingTTL if the
// change never runs.
func (k Keys) Staging(id string) string { return k.tag + ":staging:" + id }

// StagingTTL is how long a staged entry the change script never took is
// kept (a writer that died halfway).
const StagingTTL = time.Hour

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
	// MaxBytes bounds the kept entries' bytes (default DefaultMaxBytes):
	// past it the oldest versions go, whatever their age and MinKeep, but
	// never the one just made. One version of a national zone set is tens
	// of MB, so a count alone does not bound Redis's memory.
	MaxBytes int64
	// StageAbove, when above 0, writes an entry larger than it in pieces
	// of StagePiece bytes, one command each, before the change script
	// runs, which only renames it: no single command writes the whole
	// entry. With appendfsync always a command writing 166 MB (an 83 MB
	// zone set in current and the history) held Redis, and every
	// partition's commits, for 0.8 s; a 1 MiB piece holds it for ~20 ms.
	StageAbove int64
	// Replicas, when on, makes a Put succeed only once the primary has
	// that many replicas holding it (--redis-min-replicas): a change a
	// failover could take back is not reported as made.
	Replicas redisreplica.Wait
}

// DefaultMaxBytes is Options.MaxBytes's default: 512 MiB of kept entries,
// about 6 versions of a 100,000-zone ED-269 set, hundreds of a city's.
const DefaultMaxBytes = 512 << 20

// StagePiece is the size of one piece of a staged entry.
const StagePiece = 1 << 20

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
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return &Store{rdb: rdb, keys: keys, o: o}
}

// Keys returns the store's keys.
func (s *Store) Keys() Keys { return s.keys }

// Retention returns the history's retention, defaulted.
func (s *Store) Retention() time.Duration { return s.o.Retention }

// MaxBytes returns the history's byte bound, defaulted.
func (s *Store) MaxBytes() int64 { return s.o.MaxBytes }

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
	// A staged current is a reference: read its key. A change that
	// trims it between the two reads (a version made and the byte bound
	// reached meanwhile) is read again.
	for try := 0; ; try++ {
		b, err := s.rdb.Get(ctx, s.keys.Current()).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: read current: %w", s.o.Name, err)
		}
		key, ok := refKey(b)
		if !ok {
			return b, true, nil
		}
		b, err = s.readStaged(ctx, key)
		if errors.Is(err, redis.Nil) && try < 3 {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: read current (%s): %w", s.o.Name, key, err)
		}
		return b, true, nil
	}
}

// readStaged reads a staged entry's key in pieces of StagePiece bytes
// (GETRANGE): Redis copies a reply into its buffers on its one thread, so
// one GET of an 83 MB entry held it ~0.15 s. redis.Nil when the key is gone
// (trimmed), before or during the read.
func (s *Store) readStaged(ctx context.Context, key string) ([]byte, error) {
	n, err := s.rdb.StrLen(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, redis.Nil
	}
	out := make([]byte, 0, n)
	for off := int64(0); off < n; off += StagePiece {
		piece, err := s.rdb.GetRange(ctx, key, off, min(off+StagePiece, n)-1).Bytes()
		if err != nil {
			return nil, err
		}
		if len(piece) == 0 {
			return nil, redis.Nil // trimmed meanwhile: the entry is immutable until then
		}
		out = append(out, piece...)
	}
	if int64(len(out)) != n {
		return nil, redis.Nil
	}
	return out, nil
}

// refKey is the key a stored "@<key>" refers to; ok is false for an entry
// (JSON).
func refKey(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '@' || len(b) > 512 {
		return "", false
	}
	return string(b[1:]), true
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
		str, ok := b.(string)
		if !ok {
			continue // trimmed between the two reads
		}
		if key, isRef := refKey([]byte(str)); isRef {
			e, err := s.readStaged(ctx, key)
			if errors.Is(err, redis.Nil) {
				continue // trimmed since
			}
			if err != nil {
				return nil, fmt.Errorf("%s: read history version %d: %w", s.o.Name, vs[i], err)
			}
			str = string(e)
		}
		out = append(out, Versioned{Version: vs[i], Entry: str})
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
	if key, isRef := refKey([]byte(b)); err == nil && isRef {
		var e []byte
		e, err = s.readStaged(ctx, key)
		b = string(e)
	}
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
// and trims the history (by age past MinKeep, by count past MaxKeep, by
// bytes past MaxBytes); otherwise it returns a *ConflictError and
// changes nothing. With Replicas on, a version the replicas did not
// confirm is an error wrapping redisreplica.ErrNotReplicated.
func (s *Store) Put(ctx context.Context, expected int64, entry []byte, at time.Time) error {
	k := s.keys
	staged, inline, flag := k.Staging("none"), entry, "0"
	if s.o.StageAbove > 0 && int64(len(entry)) > s.o.StageAbove {
		var err error
		if staged, err = s.stage(ctx, entry); err != nil {
			return err
		}
		inline, flag = []byte{}, "1"
	}
	aw, _ := audit.Change(ctx, expected, expected+1)
	cmd, werr := s.o.Replicas.Run(ctx, s.rdb, putScript, []string{k.Version(), k.Current(), k.History(), k.Times(), staged, k.Entry(expected + 1), audit.Stream(k.tag)},
		expected, inline, at.UnixMilli(), at.Add(-s.o.Retention).UnixMilli(), s.o.MinKeep, s.o.MaxKeep, s.o.MaxBytes, flag, aw.Entry, aw.MinID)
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

// stage writes entry to a new staging key in pieces of StagePiece bytes,
// one command each, and returns the key; it expires after StagingTTL
// unless the change script takes it.
func (s *Store) stage(ctx context.Context, entry []byte) (string, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("%s: staging id: %w", s.o.Name, err)
	}
	key := s.keys.Staging(hex.EncodeToString(id[:]))
	for off := 0; off < len(entry); off += StagePiece {
		piece := entry[off:min(off+StagePiece, len(entry))]
		var err error
		if off == 0 {
			err = s.rdb.Set(ctx, key, piece, StagingTTL).Err()
		} else {
			err = s.rdb.Append(ctx, key, string(piece)).Err()
		}
		if err != nil {
			s.rdb.Unlink(context.WithoutCancel(ctx), key)
			return "", fmt.Errorf("%s: stage an entry of %d bytes: %w", s.o.Name, len(entry), err)
		}
	}
	return key, nil
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
