package authstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// newStore is a store under a prefix of its own on the shared Redis
// (127.0.0.1:6379 unless NOFLY_REDIS_ADDR): the test fails, never skips,
// without it.
func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	o.Prefix = testenv.RedisPrefix(t, "authstore")
	return New(testenv.RedisClient(t), o)
}

var t0 = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)

func auth(id, drone string, from, until time.Time) authorization.Authorization {
	return authorization.Authorization{ID: id, Drone: drone, Zones: authorization.Zones{IDs: []string{"LHR-1"}},
		From: from, Until: until, Reason: "inspection", Reference: "P-" + id, By: "ops"}
}

// TestCreateRevoke: creates and a revocation are versions 1, 2, 3 with the
// whole set in each; the entry reads back as written; a revocation ends
// the authorisation at the store's now and keeps it; a second revocation
// and an unknown id are refused without a version.
func TestCreateRevoke(t *testing.T) {
	now := t0.Add(time.Hour)
	s := newStore(t, Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	cur, err := s.Set(ctx)
	if err != nil || cur.Version != 0 || len(cur.All()) != 0 {
		t.Fatalf("empty store: %+v, %v", cur, err)
	}
	if e, err := s.Current(ctx); err != nil || e.Version != 0 || e.Authorizations == nil {
		t.Fatalf("empty store: current %+v, %v", e, err)
	}
	e1, err := s.Create(ctx, cur, auth("a", "POLICE-*", t0, t0.Add(4*time.Hour)))
	if err != nil || e1.Version != 1 || e1.Action != ActionCreate || e1.AuthorizationID != "a" || e1.By != "ops" {
		t.Fatalf("create a: %+v, %v", e1, err)
	}
	cur, _ = s.Set(ctx)
	e2, err := s.Create(ctx, cur, auth("b", "FILM-1", t0.Add(2*time.Hour), t0.Add(3*time.Hour)))
	if err != nil || e2.Version != 2 || len(e2.Authorizations) != 2 {
		t.Fatalf("create b: %+v, %v", e2, err)
	}
	got, err := s.Current(ctx)
	if err != nil || got.Version != 2 || !got.At.Equal(now) || fmt.Sprint(ids(got.Set())) != "[a b]" {
		t.Fatalf("current %+v, %v", got, err)
	}
	cur, _ = s.Set(ctx)
	e3, revoked, err := s.Revoke(ctx, cur, "a", "admin")
	if err != nil || e3.Version != 3 || e3.Action != ActionRevoke || e3.AuthorizationID != "a" || e3.By != "admin" {
		t.Fatalf("revoke a: %+v, %v", e3, err)
	}
	if revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(now) || revoked.RevokedBy != "admin" || revoked.State(now) != "ended" {
		t.Errorf("revoked: %+v", revoked)
	}
	cur, _ = s.Set(ctx)
	if a, ok := cur.Get("a"); !ok || !a.End().Equal(now) {
		t.Errorf("the revoked authorisation is kept, ending now: %+v %v", a, ok)
	}
	if _, ok := cur.Covering("POLICE-1", "LHR-1", "restricted", now); ok {
		t.Error("a revoked authorisation still covers")
	}
	if _, _, err := s.Revoke(ctx, cur, "a", "admin"); !errors.Is(err, ErrEnded) {
		t.Errorf("revoke again: %v, want ErrEnded", err)
	}
	if _, _, err := s.Revoke(ctx, cur, "zz", "admin"); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke unknown: %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, cur, auth("b", "X", t0, t0.Add(time.Hour))); !errors.Is(err, ErrDuplicate) {
		t.Errorf("create with a taken id: %v, want ErrDuplicate", err)
	}
	if v, _ := s.Version(ctx); v != 3 {
		t.Errorf("refused changes made a version: %d", v)
	}
}

func ids(s *authorization.Set) []string {
	var out []string
	for _, a := range s.All() {
		out = append(out, a.ID)
	}
	return out
}

// TestConflict: ten writers race on one version: exactly one wins, the
// others get a ConflictError naming the version that won; each retries
// from the set it reads until it lands, and no change is lost.
func TestConflict(t *testing.T) {
	s := newStore(t, Options{Now: func() time.Time { return t0 }})
	ctx := context.Background()
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Create(ctx, nil, auth(fmt.Sprint("w", i), "D1", t0, t0.Add(time.Hour)))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var ce *ConflictError
		switch {
		case err == nil:
			won++
		case errors.As(err, &ce):
			if ce.Current != 1 || ce.Expected != 0 || !strings.HasPrefix(ce.Error(), "authstore: ") {
				t.Errorf("conflict %+v (%v), want current 1 expected 0", ce, ce)
			}
		default:
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won version 1, want 1", won)
	}
	for i := range n {
		wg.Go(func() {
			for {
				cur, err := s.Set(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				_, err = s.Create(ctx, cur, auth(fmt.Sprint("r", i), "D1", t0, t0.Add(time.Hour)))
				if ce := (*ConflictError)(nil); errors.As(err, &ce) {
					continue
				}
				errs[i] = err
				return
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cur, err := s.Set(ctx)
	if err != nil || cur.Version != 1+n || len(cur.All()) != 1+n {
		t.Fatalf("version %d with %d authorisations (%v), want %d and %d", cur.Version, len(cur.All()), err, 1+n, 1+n)
	}
}

// TestHistory: the versions are kept oldest first, each with its action
// and whole set; versions older than the retention go but the last MinKeep
// stay, MaxKeep caps the count; the one-at-a-time reader agrees.
func TestHistory(t *testing.T) {
	now := t0
	s := newStore(t, Options{Retention: time.Hour, MinKeep: 3, MaxKeep: 5, Now: func() time.Time { return now }})
	ctx := context.Background()
	versions := func() string {
		h, err := s.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var v []string
		for i, e := range h {
			if i > 0 && e.Version <= h[i-1].Version {
				t.Errorf("history out of order: %d after %d", e.Version, h[i-1].Version)
			}
			v = append(v, fmt.Sprintf("%d:%s:%s:%d", e.Version, e.Action, e.AuthorizationID, len(e.Authorizations)))
		}
		return strings.Join(v, " ")
	}
	for i := range 6 {
		cur, _ := s.Set(ctx)
		if _, err := s.Create(ctx, cur, auth(fmt.Sprint("a", i), "D1", t0, t0.Add(10*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := s.Set(ctx)
	if _, _, err := s.Revoke(ctx, cur, "a2", "admin"); err != nil {
		t.Fatal(err)
	}
	if got, want := versions(), "3:create:a2:3 4:create:a3:4 5:create:a4:5 6:create:a5:6 7:revoke:a2:6"; got != want {
		t.Errorf("after 7 recent versions: %s, want the last 5 (MaxKeep): %s", got, want)
	}
	now = now.Add(2 * time.Hour)
	cur, _ = s.Set(ctx)
	if _, err := s.Create(ctx, cur, auth("b", "D2", now, now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if got, want := versions(), "6:create:a5:6 7:revoke:a2:6 8:create:b:6"; got != want {
		// 8 holds a0-a5 less a2, revoked more than the retention ago, and b.
		t.Errorf("after the retention: %s, want the last 3 (MinKeep): %s", got, want)
	}
	vs, err := s.HistoryVersions(ctx)
	if err != nil || fmt.Sprint(vs) != "[6 7 8]" {
		t.Errorf("HistoryVersions: %v %v, want [6 7 8]", vs, err)
	}
	if _, ok, err := s.HistoryEntry(ctx, 5); ok || err != nil {
		t.Errorf("HistoryEntry(5), trimmed: found %v, %v", ok, err)
	}
	raw, ok, err := s.HistoryEntry(ctx, 7)
	e, derr := DecodeEntry([]byte(raw))
	if !ok || err != nil || derr != nil || e.Version != 7 || e.Action != ActionRevoke {
		t.Errorf("HistoryEntry(7): %q found %v, %v %v", raw, ok, err, derr)
	}
	if a, _ := e.Set().Get("a2"); a.RevokedAt == nil {
		t.Errorf("version 7 does not hold a2 revoked: %+v", a)
	}
}

// TestMaxAuthorizations: a set of MaxAuthorizations takes no more
// (ErrFull, no version made) until one has ended longer than the
// retention ago; the next change prunes that one, and the rest stay.
func TestMaxAuthorizations(t *testing.T) {
	now := t0
	s := newStore(t, Options{Retention: time.Hour, Now: func() time.Time { return now }})
	ctx := context.Background()
	all := make([]authorization.Authorization, authorization.MaxAuthorizations)
	for i := range all {
		all[i] = auth(fmt.Sprintf("%06d", i), "D1", t0, t0.Add(24*time.Hour))
	}
	all[0].Until = t0.Add(30 * time.Minute) // ends first
	full := authorization.NewSet(0, all)
	if _, err := s.put(ctx, 0, Entry{Version: 1, At: now, By: "seed", Action: ActionCreate, AuthorizationID: all[len(all)-1].ID,
		Authorizations: full.All()}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Set(ctx)
	if err != nil || len(cur.All()) != authorization.MaxAuthorizations {
		t.Fatalf("seeded %d, %v", len(cur.All()), err)
	}
	if _, err := s.Create(ctx, cur, auth("x1", "D2", t0, t0.Add(time.Hour))); !errors.Is(err, ErrFull) {
		t.Fatalf("create in a full set: %v, want ErrFull", err)
	}
	// Ended, but within the retention: still kept, still full.
	now = t0.Add(time.Hour)
	if _, err := s.Create(ctx, cur, auth("x1", "D2", t0, t0.Add(time.Hour))); !errors.Is(err, ErrFull) {
		t.Fatalf("create with one ended within the retention: %v, want ErrFull", err)
	}
	if v, _ := s.Version(ctx); v != 1 {
		t.Fatalf("a refused create made version %d", v)
	}
	now = t0.Add(2 * time.Hour)
	e, err := s.Create(ctx, cur, auth("x1", "D2", now, now.Add(time.Hour)))
	if err != nil {
		t.Fatalf("create after the retention: %v", err)
	}
	set := e.Set()
	if _, ok := set.Get(all[0].ID); ok || len(set.All()) != authorization.MaxAuthorizations || set.Version != 2 {
		t.Errorf("version %d holds %d, the long-ended one kept %v", set.Version, len(set.All()), ok)
	}
}

// TestNewID: ids are 16 lowercase hex digits and sort by creation, even
// when the clock stands still or steps back.
func TestNewID(t *testing.T) {
	a := NewID(t0, nil)
	set := authorization.NewSet(1, []authorization.Authorization{auth(a, "D", t0, t0.Add(time.Hour)), auth("zz-not-hex", "D", t0, t0.Add(time.Hour))})
	b := NewID(t0, set)
	c := NewID(t0.Add(-time.Hour), set)
	d := NewID(t0.Add(time.Millisecond), set)
	hex := regexp.MustCompile(`^[0-9a-f]{16}$`)
	if !hex.MatchString(a) || !hex.MatchString(b) || !(a < b) || b != c || !(b < d) {
		t.Errorf("ids %q, %q, %q, %q", a, b, c, d)
	}
}

// TestReadSwitches: each partition's <tag>:authswitch list, oldest first.
func TestReadSwitches(t *testing.T) {
	rc := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "authswitch")
	ctx := context.Background()
	rc.RPush(ctx, redislayout.Of(prefix, "t", 1).AuthSwitches(), "1 -1", "3 41")
	sw, err := ReadSwitches(ctx, rc, prefix, "t", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sw); got != "map[0:[] 1:[{1 -1} {3 41}]]" {
		t.Errorf("switches %s", got)
	}
	rc.RPush(ctx, redislayout.Of(prefix, "t", 0).AuthSwitches(), "x")
	if _, err := ReadSwitches(ctx, rc, prefix, "t", 2); err == nil || !strings.Contains(err.Error(), "partition 0") {
		t.Errorf("a bad switch: %v", err)
	}
}

// TestKeysDocumented: the key strings are pinned (stored sets must stay
// readable) and docs/redis-layout.md's "Authorisation store" table lists
// exactly them.
func TestKeysDocumented(t *testing.T) {
	k := KeysOf("nofly")
	keys := []string{k.Version(), k.Current(), k.History(), k.Times()}
	want := []string{"{nofly:auths}:version", "{nofly:auths}:current", "{nofly:auths}:history", "{nofly:auths}:times"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "redis-layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(<atag>:[^`]*)` \\|").FindAllStringSubmatch(string(doc), -1) {
		rows = append(rows, m[1])
	}
	var generic []string
	for _, key := range keys {
		generic = append(generic, strings.Replace(key, k.Tag(), "<atag>", 1))
	}
	slices.Sort(rows)
	slices.Sort(generic)
	if !slices.Equal(rows, generic) {
		t.Errorf("docs/redis-layout.md's authorisation store rows %v, the package's keys %v", rows, generic)
	}
	if !strings.Contains(string(doc), "atag = {<prefix>:auths}") {
		t.Error("docs/redis-layout.md does not give the authorisation store's tag")
	}
}
