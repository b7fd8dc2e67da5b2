package authorization

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nofly-dev/nofly/geofence"
)

// MaxAuthorizations bounds a set, revoked and ended ones included until
// they are pruned from it (they stay in the history).
const MaxAuthorizations = 10_000

// Set is one version of the authorisations, as the alerter decides with
// it. It is immutable once made: a change (a new authorisation, a
// revocation) is a new Set with a higher Version.
type Set struct {
	Version int64
	// all, in id order: lookups and answers do not depend on the order
	// the authorisations were made in.
	all []Authorization
	// The engine asks Covering at every raise and near every zone a drone
	// approaches, and NextChange at every position of a drone with an
	// alarm: indexes, not scans of up to MaxAuthorizations. byDrone holds
	// the authorisations of one exact drone id, prefixed those of a
	// prefix (indexes into all, ascending); changes every start and end,
	// sorted.
	byDrone  map[string][]int
	prefixed []int
	changes  []time.Time
}

// NewSet makes a version of the given authorisations (copied, sorted by
// id).
func NewSet(version int64, auths []Authorization) *Set {
	s := &Set{Version: version, all: slices.Clone(auths), byDrone: map[string][]int{}}
	slices.SortFunc(s.all, func(a, b Authorization) int { return strings.Compare(a.ID, b.ID) })
	for i := range s.all {
		a := &s.all[i]
		if strings.HasSuffix(a.Drone, "*") {
			s.prefixed = append(s.prefixed, i)
		} else {
			s.byDrone[a.Drone] = append(s.byDrone[a.Drone], i)
		}
		s.changes = append(s.changes, a.From, a.End())
	}
	slices.SortFunc(s.changes, func(a, b time.Time) int { return a.Compare(b) })
	return s
}

// All returns the authorisations in id order; the slice must not be
// changed.
func (s *Set) All() []Authorization {
	if s == nil {
		return nil
	}
	return s.all
}

// Get returns the authorisation of that id.
func (s *Set) Get(id string) (Authorization, bool) {
	if s == nil {
		return Authorization{}, false
	}
	i, ok := slices.BinarySearchFunc(s.all, id, func(a Authorization, id string) int { return strings.Compare(a.ID, id) })
	if !ok {
		return Authorization{}, false
	}
	return s.all[i], true
}

// Covering returns the authorisation that covers the drone in the zone at
// t, if one does. When several do, the one that lasts longest (the latest
// End), then the smallest id: the choice depends only on the set and t,
// so live and replay name the same one.
func (s *Set) Covering(drone, zoneID string, cat geofence.Category, t time.Time) (*Authorization, bool) {
	if s == nil {
		return nil, false
	}
	var best *Authorization
	for _, l := range [2][]int{s.byDrone[drone], s.prefixed} {
		for _, i := range l {
			a := &s.all[i]
			if !a.Covers(drone, zoneID, cat, t) {
				continue
			}
			if best == nil || a.End().After(best.End()) || (a.End().Equal(best.End()) && a.ID < best.ID) {
				best = a
			}
		}
	}
	return best, best != nil
}

// NextChange returns the first time after t at which what the set covers
// may change (an authorisation starts or ends), and false when none will:
// the alerter's clock looks again at a drone inside a zone then.
func (s *Set) NextChange(t time.Time) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
	}
	i, _ := slices.BinarySearchFunc(s.changes, t, func(c, t time.Time) int {
		if c.After(t) {
			return 1
		}
		return -1 // at or before t: not next
	})
	if i == len(s.changes) {
		return time.Time{}, false
	}
	return s.changes[i], true
}

// Revoke returns the next version with the authorisation of that id ended
// at t by who, and whether it existed and had not ended by then. An
// authorisation already revoked or ended is left as it is.
func (s *Set) Revoke(id string, t time.Time, by string) (*Set, bool) {
	a, ok := s.Get(id)
	if !ok || !t.Before(a.End()) {
		return s, false
	}
	at := t.UTC()
	a.RevokedAt, a.RevokedBy = &at, by
	all := slices.Clone(s.all)
	i, _ := slices.BinarySearchFunc(all, id, func(a Authorization, id string) int { return strings.Compare(a.ID, id) })
	all[i] = a
	return NewSet(s.Version+1, all), true
}

// Add returns the next version with a added, and false when the set is
// full or already holds that id.
func (s *Set) Add(a Authorization) (*Set, bool) {
	if _, dup := s.Get(a.ID); dup || len(s.All()) >= MaxAuthorizations {
		return s, false
	}
	var v int64
	if s != nil {
		v = s.Version
	}
	return NewSet(v+1, append(slices.Clone(s.All()), a)), true
}

// Current holds the set in use, swapped whole when a new version is
// loaded; a nil *Current or an empty one holds no authorisation (version
// 0). Safe for concurrent use.
type Current struct {
	p atomic.Pointer[Set]
}

// Load returns the set in use (nil: none).
func (c *Current) Load() *Set {
	if c == nil {
		return nil
	}
	return c.p.Load()
}

// Store swaps s in and returns the set it replaces.
func (c *Current) Store(s *Set) (old *Set) { return c.p.Swap(s) }
