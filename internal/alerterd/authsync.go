package alerterd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/authorization/authstore"
)

// authPoll is how often an alerter reads the authorisation store's
// version: a create or a revocation made through any instance's API is in
// use on every instance within about this long (the contract says 5 s),
// one GET a second per instance. A poll, as for zones: a pub/sub message
// sent while an instance reconnects would be lost.
var authPoll = time.Second // a variable for the tests

// authStore is the alerter's authorisation store under its Redis prefix;
// versions are kept, and ended authorisations pruned, after the alarm
// retention, as zone versions are.
func (c Config) authStore(rc redis.UniversalClient) *authstore.Store {
	return authstore.New(rc, authstore.Options{Prefix: c.RedisPrefix, Retention: c.zoneRetention(), Replicas: c.replicas()})
}

// authSync keeps the authorisations in use on the store's current version.
type authSync struct {
	store *authstore.Store
	cur   *authorization.Current
	log   *slog.Logger

	pollMu  sync.Mutex // one poll at a time: a slow one never swaps in an older set
	mu      sync.Mutex // guards inUse and refused
	inUse   int64      // the version in use
	refused int64      // the last version that did not decode, not retried
}

// startAuthSync loads the store's current version into cur (version 0, the
// empty set, when nothing is stored), retrying with backoff while Redis is
// unreachable, and follows the store until ctx ends. The gauge
// nofly_alerter_authorization_version is the version in use.
func startAuthSync(ctx context.Context, cfg Config, rc redis.UniversalClient, cur *authorization.Current, m *metrics, log *slog.Logger) (*authSync, error) {
	as := &authSync{store: cfg.authStore(rc), cur: cur, log: log, refused: -1}
	wait := 100 * time.Millisecond
	for {
		err := as.poll(ctx, true)
		var final *authStoreError
		switch {
		case err == nil:
		case errors.As(err, &final):
			return nil, fmt.Errorf("authorization store: %w", err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("authorization store: %w (last error: %w)", ctx.Err(), err)
		}
		if err == nil {
			break
		}
		log.Warn("authorization store unreachable at start; trying again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("authorization store: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nofly", Subsystem: "alerter", Name: "authorization_version",
		Help: "The authorisation store's version of the authorisations in use."}, func() float64 { return float64(as.version()) }))
	go as.follow(ctx)
	return as, nil
}

// follow polls the store's version and loads a new one.
func (as *authSync) follow(ctx context.Context) {
	t := time.NewTicker(authPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := as.poll(ctx, false); err != nil && ctx.Err() == nil {
			as.log.Warn("authorization store poll failed; keeping the authorizations in use", "err", err, "authorization_version", as.version())
		}
	}
}

func (as *authSync) version() int64 {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.inUse
}

// poll loads the current version when it is not the one in use (first:
// whatever it is). A version that does not decode is logged once and the
// authorisations in use are kept; at start that is an error, final:
// deciding with none would page every authorised flight unannounced.
func (as *authSync) poll(ctx context.Context, first bool) error {
	as.pollMu.Lock()
	defer as.pollMu.Unlock()
	v, err := as.store.Version(ctx)
	if err != nil {
		return err
	}
	as.mu.Lock()
	same := v == as.inUse || v == as.refused
	as.mu.Unlock()
	if same && !first {
		return nil
	}
	e, err := as.store.Current(ctx)
	if errors.Is(err, authstore.ErrDecode) {
		if first {
			return &authStoreError{err}
		}
		as.mu.Lock()
		as.refused = v
		as.mu.Unlock()
		as.log.Error("authorization store version does not decode; keeping the authorizations in use", "err", err,
			"authorization_version", v, "in_use", as.version())
		return nil
	}
	if err != nil {
		return err
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if e.Version < as.inUse {
		// The store was emptied (a reset): its version is the truth again.
		as.log.Warn("the authorization store's version went back (store reset?); following it",
			"authorization_version", e.Version, "in_use", as.inUse)
	}
	set := e.Set()
	old := as.cur.Store(set)
	as.inUse = e.Version
	if first {
		as.log.Info("authorizations loaded", "authorization_version", e.Version, "authorizations", len(set.All()))
		return nil
	}
	as.log.Info("authorizations switched", "authorization_version", e.Version, "from_version", versionOf(old),
		"action", e.Action, "authorization_id", e.AuthorizationID, "by", e.By, "at", e.At, "authorizations", len(set.All()))
	return nil
}

// authStoreError is a stored version that does not decode: trying again
// would not help.
type authStoreError struct{ err error }

func (e *authStoreError) Error() string { return e.err.Error() }
func (e *authStoreError) Unwrap() error { return e.err }

func versionOf(s *authorization.Set) int64 {
	if s == nil {
		return 0
	}
	return s.Version
}
