package api

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
)

// TokenStore holds the token file's tokens in use and swaps them whole when
// the file is read again (alerter serve does on SIGHUP): a request is
// checked against the old set or the new one, never a mix. A file that
// does not parse changes nothing. A token removed, or given another role
// or hash, is refused from the next request on, and the event and
// positions streams it opened are ended at the swap (untilRevoked): a
// stream is authenticated once, at its start, so without that a revoked
// token's stream would run until its client left.
type TokenStore struct {
	mu  sync.Mutex // serialises Reload and Swap; readers never take it
	cur atomic.Pointer[tokenGen]
}

// tokenGen is one set of tokens in use; replaced is closed when a later
// set takes its place, which wakes the streams to check their token.
type tokenGen struct {
	ts       *Tokens
	replaced chan struct{}
}

// NewTokenStore starts with ts (not nil: a token file always holds a
// token, so a store never turns authentication off).
func NewTokenStore(ts *Tokens) *TokenStore {
	st := &TokenStore{}
	st.cur.Store(&tokenGen{ts: ts, replaced: make(chan struct{})})
	return st
}

// Tokens is the set in use.
func (st *TokenStore) Tokens() *Tokens { return st.cur.Load().ts }

// Lookup is the set in use's Lookup.
func (st *TokenStore) Lookup(token string) *Token { return st.cur.Load().ts.Lookup(token) }

// TokenChanges are the names a reload added, removed, or kept with another
// role or hash (a rotated token), each sorted. They are names only: never
// a token or a hash, so they may be logged and audited.
type TokenChanges struct {
	Added, Removed, Changed []string
}

// None reports whether nothing changed.
func (c TokenChanges) None() bool {
	return len(c.Added)+len(c.Removed)+len(c.Changed) == 0
}

// DiffTokens compares two token sets by name.
func DiffTokens(old, new *Tokens) TokenChanges {
	var c TokenChanges
	was := map[string]Token{}
	for _, t := range old.Tokens {
		was[t.Name] = t
	}
	for _, t := range new.Tokens {
		o, ok := was[t.Name]
		switch {
		case !ok:
			c.Added = append(c.Added, t.Name)
		case o != t:
			c.Changed = append(c.Changed, t.Name)
		}
		delete(was, t.Name)
	}
	for n := range was {
		c.Removed = append(c.Removed, n)
	}
	slices.Sort(c.Added)
	slices.Sort(c.Removed)
	slices.Sort(c.Changed)
	return c
}

// Reload reads the file the set in use came from and swaps it in. An
// error (ErrTokenFile names the file and line, never a token or hash)
// leaves the set in use as it was.
func (st *TokenStore) Reload() (*Tokens, TokenChanges, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	g := st.cur.Load()
	ts, err := LoadTokens(g.ts.Path)
	if err != nil {
		return g.ts, TokenChanges{}, err
	}
	return ts, st.swapLocked(g, ts), nil
}

// Swap puts ts in use (not nil) and returns what changed.
func (st *TokenStore) Swap(ts *Tokens) TokenChanges {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.swapLocked(st.cur.Load(), ts)
}

func (st *TokenStore) swapLocked(g *tokenGen, ts *Tokens) TokenChanges {
	st.cur.Store(&tokenGen{ts: ts, replaced: make(chan struct{})})
	close(g.replaced)
	return DiffTokens(g.ts, ts)
}

// holds reports whether the set has t as it is: same name, role and hash.
func (g *tokenGen) holds(t Token) bool {
	for _, u := range g.ts.Tokens {
		if u == t {
			return true
		}
	}
	return false
}

// tokenKey is the context key of the token a request authenticated with
// (a Token, not set without a token file).
type tokenKey struct{}

// withToken notes on ctx the token the request authenticated with.
func withToken(ctx context.Context, t *Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, *t)
}

// untilRevoked returns r with a context that also ends when the token r
// authenticated with leaves the store (removed, or its role or hash
// changed), and the function that lets go of the watch. A request without
// such a token (no token file) is returned as it is.
func (s *Server) untilRevoked(r *http.Request) (*http.Request, func()) {
	t, ok := r.Context().Value(tokenKey{}).(Token)
	if !ok || s.o.TokenStore == nil {
		return r, func() {}
	}
	ctx, cancel := context.WithCancel(r.Context())
	go s.o.TokenStore.watch(ctx, t, cancel)
	return r.WithContext(ctx), cancel
}

// watch calls revoke once t is no longer in the set in use, or returns when
// ctx ends. It wakes only at a swap, so a stream costs nothing between
// reloads. A swap between the request's authentication and this first
// look is caught by the first check.
func (st *TokenStore) watch(ctx context.Context, t Token, revoke func()) {
	g := st.cur.Load()
	for {
		if !g.holds(t) {
			revoke()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-g.replaced:
			g = st.cur.Load()
		}
	}
}
