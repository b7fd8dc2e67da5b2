// Package authstore is the versioned authorisation set every alerter
// instance shares, in Redis, stored as the zone set is
// (internal/versionstore): the current version's entry — the change that
// made it and the whole set after it — with an integer version, and the
// recent versions, under the hash tag {prefix:auths}. A change (a create,
// a revocation) is the next version, written by the compare-and-set script
// only if the version it was made against is still current
// (docs/redis-layout.md, "Authorisation store"). Every instance polls the
// version (internal/alerterd/authsync.go) and the batch commits record the
// version each record was decided with, so a replay with the history
// decides as live did.
package authstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/versionstore"
)

// Keys names the store's keys under a Redis prefix: internal/versionstore's
// under the tag {prefix:auths}. No partition's tag
// ({prefix:topic:partition}) can equal it: a partition tag ends in a
// decimal number.
type Keys = versionstore.Keys

// KeysOf returns the store's keys under prefix.
func KeysOf(prefix string) Keys { return versionstore.KeysOf("{" + prefix + ":auths}") }

// The actions of an Entry.
const (
	ActionCreate = "create"
	ActionRevoke = "revoke"
)

// MaxEntryBytes bounds a version's encoded entry (the whole set): every
// instance reads it whole, and the history keeps up to MaxKeep of them.
const MaxEntryBytes = 32 << 20

// Entry is one version of the authorisation set: the change that made it
// and the whole set after it.
type Entry struct {
	Version int64     `json:"version"`
	At      time.Time `json:"at"`
	// By is the caller's token name.
	By string `json:"by"`
	// Action is ActionCreate or ActionRevoke, of AuthorizationID.
	Action          string `json:"action"`
	AuthorizationID string `json:"authorization_id"`
	// Authorizations is the set after the change, in id order.
	Authorizations []authorization.Authorization `json:"authorizations"`
}

// Set returns the entry's authorisations as the set of its version.
func (e *Entry) Set() *authorization.Set { return authorization.NewSet(e.Version, e.Authorizations) }

// ConflictError is a change refused because the current version is not
// the one it was made against.
type ConflictError = versionstore.ConflictError

// Errors of a change.
var (
	// ErrNotFound: the set holds no authorisation of that id.
	ErrNotFound = errors.New("authstore: no such authorization")
	// ErrEnded: a revocation of an authorisation that has ended (revoked,
	// or past its until); it is left as it is.
	ErrEnded = errors.New("authstore: the authorization has already ended")
	// ErrFull: the set would hold more than authorization.MaxAuthorizations
	// or encode to more than MaxEntryBytes, after the ended ones older than
	// the retention are pruned.
	ErrFull = errors.New("authstore: the authorization set is full")
	// ErrDuplicate: the set already holds the id (make another: NewID).
	ErrDuplicate = errors.New("authstore: the authorization id is taken")
	// ErrDecode: a stored entry does not decode (reading it again will
	// not help).
	ErrDecode = errors.New("authstore: stored entry does not decode")
)

// Options configure a Store.
type Options struct {
	Prefix string
	// Retention: a version made longer ago than this is dropped from the
	// history unless it is among the last MinKeep, and an authorisation
	// that ended longer ago is pruned from the set at the next change
	// (default 168h, the alarm retention: as long as a replay needs it).
	Retention time.Duration
	// MinKeep versions are kept whatever their age (default 32), MaxKeep
	// at most whatever their age (default 1024).
	MinKeep, MaxKeep int
	// Now is the clock of a change's At and of a revocation (time.Now
	// when nil).
	Now func() time.Time
	// Replicas, when on, makes a change succeed only once the primary has
	// that many replicas holding it (--redis-min-replicas).
	Replicas redisreplica.Wait
}

// Store is the authorisation store. It is safe for concurrent use.
type Store struct {
	vs  *versionstore.Store
	now func() time.Time
	// set is the last set Set decoded: read again only when the version
	// moved, so a list or a lookup costs one GET of the version.
	set atomic.Pointer[authorization.Set]
}

// New returns the store under o.Prefix.
func New(rdb redis.UniversalClient, o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{now: o.Now, vs: versionstore.New(rdb, KeysOf(o.Prefix), versionstore.Options{Name: "authstore",
		Retention: o.Retention, MinKeep: o.MinKeep, MaxKeep: o.MaxKeep, Replicas: o.Replicas})}
}

// Keys returns the store's keys.
func (s *Store) Keys() Keys { return s.vs.Keys() }

// Now is the store's clock: the time a revocation ends an authorisation
// at, and the time states are judged at.
func (s *Store) Now() time.Time { return s.now().UTC() }

// Version returns the current version, 0 when nothing is stored.
func (s *Store) Version(ctx context.Context) (int64, error) { return s.vs.Version(ctx) }

// Current returns the current version's entry; with nothing stored, version
// 0 with no authorisation.
func (s *Store) Current(ctx context.Context) (Entry, error) {
	b, ok, err := s.vs.Current(ctx)
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		return Entry{Authorizations: []authorization.Authorization{}}, nil
	}
	return DecodeEntry(b)
}

// Set returns the current set (version 0 and empty with nothing stored),
// decoded again only when the version moved since the last call.
func (s *Store) Set(ctx context.Context) (*authorization.Set, error) {
	v, err := s.vs.Version(ctx)
	if err != nil {
		return nil, err
	}
	if c := s.set.Load(); c != nil && c.Version == v {
		return c, nil
	}
	e, err := s.Current(ctx)
	if err != nil {
		return nil, err
	}
	set := e.Set()
	s.set.Store(set)
	return set, nil
}

// History returns the versions kept, oldest first.
func (s *Store) History(ctx context.Context) ([]Entry, error) {
	vs, err := s.vs.History(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(vs))
	for _, v := range vs {
		e, err := DecodeEntry([]byte(v.Entry))
		if err != nil {
			return nil, fmt.Errorf("authstore: version %d: %w", v.Version, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// HistoryVersions returns the versions kept, lowest first (without their
// entries).
func (s *Store) HistoryVersions(ctx context.Context) ([]int64, error) {
	return s.vs.HistoryVersions(ctx)
}

// HistoryEntry returns version v's Entry JSON as stored; ok is false when
// the history no longer holds it (trimmed).
func (s *Store) HistoryEntry(ctx context.Context, v int64) (entry string, ok bool, err error) {
	return s.vs.HistoryEntry(ctx, v)
}

// DecodeEntry reads an Entry's JSON as the store writes it.
func DecodeEntry(b []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if e.Authorizations == nil {
		e.Authorizations = []authorization.Authorization{}
	}
	return e, nil
}

// NewID returns the id of an authorisation created now in the set cur: 16
// lowercase hex digits, the unix milliseconds of now shifted 16 bits
// left, or one above the set's highest id if that is not less. Ids then
// sort by creation, whatever the instances' clocks; two creates made
// against one version may get one id, and the compare-and-set lets one of
// them through.
func NewID(now time.Time, cur *authorization.Set) string {
	next := uint64(max(now.UnixMilli(), 0)&(1<<48-1)) << 16
	all := cur.All()
	for i := len(all) - 1; i >= 0; i-- {
		if n, err := strconv.ParseUint(all[i].ID, 16, 64); err == nil && len(all[i].ID) == 16 {
			next = max(next, n+1)
			break
		}
	}
	return fmt.Sprintf("%016x", next)
}

// Create stores a as the next version after cur (the set the change was
// made against: nil or version 0 when nothing is stored), if cur is still
// current; a *ConflictError otherwise. Authorisations that ended more
// than the retention ago are pruned from the set first (they stay in the
// history's older versions while those are kept).
func (s *Store) Create(ctx context.Context, cur *authorization.Set, a authorization.Authorization) (Entry, error) {
	now := s.Now()
	pruned := s.prune(cur, now)
	next, ok := pruned.Add(a)
	if !ok {
		if _, dup := pruned.Get(a.ID); dup {
			return Entry{}, ErrDuplicate
		}
		return Entry{}, fmt.Errorf("%w: it holds %d authorizations, the most it may, none of them ended more than %v ago",
			ErrFull, len(pruned.All()), s.vs.Retention())
	}
	return s.put(ctx, version(cur), Entry{Version: next.Version, At: now, By: a.By, Action: ActionCreate,
		AuthorizationID: a.ID, Authorizations: next.All()})
}

// Revoke ends the authorisation of that id now (the store's clock), by
// who, as the next version after cur, and returns the new entry and the
// authorisation as revoked. ErrNotFound when cur does not hold it,
// ErrEnded (with the authorisation as it is) when it has ended already, a
// *ConflictError when cur is no longer current.
func (s *Store) Revoke(ctx context.Context, cur *authorization.Set, id, by string) (Entry, authorization.Authorization, error) {
	a, ok := cur.Get(id)
	if !ok {
		return Entry{}, authorization.Authorization{}, ErrNotFound
	}
	now := s.Now()
	next, ok := s.prune(cur, now).Revoke(id, now, by)
	if !ok {
		return Entry{}, a, ErrEnded
	}
	e, err := s.put(ctx, version(cur), Entry{Version: next.Version, At: now, By: by, Action: ActionRevoke,
		AuthorizationID: id, Authorizations: next.All()})
	if err != nil {
		return Entry{}, authorization.Authorization{}, err
	}
	a, _ = next.Get(id)
	return e, a, nil
}

func version(s *authorization.Set) int64 {
	if s == nil {
		return 0
	}
	return s.Version
}

// prune returns cur (as the same version) without the authorisations that
// ended before now less the retention: no replay within the retention
// can need them, and the set's bound would otherwise be reached by
// history.
func (s *Store) prune(cur *authorization.Set, now time.Time) *authorization.Set {
	cutoff := now.Add(-s.vs.Retention())
	all := cur.All()
	kept := make([]authorization.Authorization, 0, len(all))
	for _, a := range all {
		if !a.End().Before(cutoff) {
			kept = append(kept, a)
		}
	}
	return authorization.NewSet(version(cur), kept)
}

// put stores e as version expected+1.
func (s *Store) put(ctx context.Context, expected int64, e Entry) (Entry, error) {
	if e.Authorizations == nil {
		e.Authorizations = []authorization.Authorization{}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return Entry{}, fmt.Errorf("authstore: encode entry: %w", err)
	}
	if len(b) > MaxEntryBytes {
		return Entry{}, fmt.Errorf("%w: the set would encode to %d bytes, more than %d", ErrFull, len(b), MaxEntryBytes)
	}
	if err := s.vs.Put(ctx, expected, b, e.At); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// Switch is a partition's switch to an authorisation set version: its
// records at offsets above AfterOffset were decided with Version, until
// the next switch.
type Switch = versionstore.Switch

// ReadSwitches reads every partition's authorisation switches (the batch
// script's <tag>:authswitch lists of "<version> <after_offset>", oldest
// first), by partition number in decimal, in one pipeline.
func ReadSwitches(ctx context.Context, rdb redis.UniversalClient, prefix, topic string, partitions int) (map[string][]Switch, error) {
	sw, err := versionstore.ReadSwitches(ctx, rdb, partitions,
		func(p int) string { return redislayout.Of(prefix, topic, p).AuthSwitches() }, "authorization switches")
	if err != nil {
		return nil, fmt.Errorf("authstore: %w", err)
	}
	return sw, nil
}

// History is GET /v1/authorizations/history and the file `alerter replay
// --authorization-history` reads: the versions kept and each partition's
// switches, so that a replay decides each record with the version live
// used.
type History struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	// Current is the current version (0: nothing stored).
	Current int64 `json:"current_version"`
	// Versions are the versions kept, oldest first.
	Versions []Entry `json:"versions"`
	// Switches are each partition's switches, oldest first, by partition
	// number (decimal).
	Switches map[string][]Switch `json:"switches"`
}
