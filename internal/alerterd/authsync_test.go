package alerterd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// authInstance is one alerter's share of the authorisations: its API and
// its sync, on its own Redis client.
type authInstance struct {
	srv  *httptest.Server
	cur  *authorization.Current
	m    *metrics
	sync *authSync
}

func startAuthInstance(t *testing.T, cfg Config, name string) *authInstance {
	t.Helper()
	rc := newRedisClient(cfg.RedisAddr, "authsync-"+name)
	t.Cleanup(func() { _ = rc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in := &authInstance{cur: &authorization.Current{}, m: newMetrics()}
	var err error
	if in.sync, err = startAuthSync(ctx, cfg, rc, in.cur, in.m, testLog(t).With("instance", name)); err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Options{Redis: rc, Prefix: cfg.RedisPrefix, Topic: cfg.Topic, Partitions: 2, AlarmRetention: cfg.AlarmRetention})
	if err != nil {
		t.Fatal(err)
	}
	in.srv = httptest.NewServer(s.Handler())
	t.Cleanup(in.srv.Close)
	return in
}

func (in *authInstance) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, in.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (in *authInstance) gauge(t *testing.T) float64 {
	t.Helper()
	mfs, err := in.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "nofly_alerter_authorization_version" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no nofly_alerter_authorization_version")
	return 0
}

// TestAuthChangeReachesEveryInstance: two alerters share one Redis. With
// nothing stored each uses version 0, the empty set. An authorisation
// created through the first one's API is in the second one's
// authorization.Current within 5 s, and a revocation made through the
// second one's API is in the first one's within 5 s: the drone it
// covered is covered no more from the revocation on. The version gauge
// follows.
func TestAuthChangeReachesEveryInstance(t *testing.T) {
	t.Parallel()
	cfg := Config{RedisAddr: testenv.Redis(t), RedisPrefix: testenv.RedisPrefix(t, "authsync"), Topic: "telemetry.positions", AlarmRetention: 168 * time.Hour}
	a, b := startAuthInstance(t, cfg, "a"), startAuthInstance(t, cfg, "b")
	for _, in := range []*authInstance{a, b} {
		if s := in.cur.Load(); s == nil || s.Version != 0 || len(s.All()) != 0 || in.gauge(t) != 0 {
			t.Fatalf("nothing stored: %+v, gauge %v", s, in.gauge(t))
		}
	}
	now := time.Now().UTC()
	body := fmt.Sprintf(`{"drone":"POLICE-1","zones":"all","from":%q,"until":%q,"reason":"patrol"}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	code, raw := a.do(t, "POST", "/v1/authorizations", body)
	if code != 201 {
		t.Fatalf("create through a: %d %s", code, raw)
	}
	created := time.Now()
	var au authorization.Authorization
	if err := json.Unmarshal([]byte(raw), &au); err != nil {
		t.Fatal(err)
	}
	covered := func(in *authInstance) (bool, int64) {
		s := in.cur.Load()
		_, ok := s.Covering("POLICE-1", "LHR-1", "restricted", time.Now())
		return ok, s.Version
	}
	err := testenv.WaitFor(context.Background(), 5*time.Second, func() error {
		for name, in := range map[string]*authInstance{"a": a, "b": b} {
			if ok, v := covered(in); !ok || v != 1 {
				return fmt.Errorf("instance %s: version %d, covered %v", name, v, ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the create is not in use everywhere 5 s after it was made: %v", err)
	}
	t.Logf("create in use on both instances %v after its answer", time.Since(created).Round(time.Millisecond))

	code, raw = b.do(t, "DELETE", "/v1/authorizations/"+au.ID, "")
	if code != 200 {
		t.Fatalf("revoke through b: %d %s", code, raw)
	}
	revoked := time.Now()
	err = testenv.WaitFor(context.Background(), 5*time.Second, func() error {
		if ok, v := covered(a); ok || v != 2 {
			return fmt.Errorf("instance a: version %d, covered %v", v, ok)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the revocation is not in use on the other instance 5 s after it was made: %v", err)
	}
	t.Logf("revocation in use on the other instance %v after its answer", time.Since(revoked).Round(time.Millisecond))
	got, ok := a.cur.Load().Get(au.ID)
	if !ok || got.RevokedAt == nil || got.RevokedBy != "anonymous" || got.State(time.Now()) != "ended" {
		t.Errorf("instance a holds %+v, %v: want it kept, revoked", got, ok)
	}
	if a.gauge(t) != 2 {
		t.Errorf("a's gauge %v, want 2", a.gauge(t))
	}
}

// TestAuthSyncKeepsWhatDecodes: a stored version that does not decode is
// refused at start (an error: no instance starts deciding with none), and
// later keeps the set in use; the next good version is taken.
func TestAuthSyncKeepsWhatDecodes(t *testing.T) {
	t.Parallel()
	cfg := Config{RedisAddr: testenv.Redis(t), RedisPrefix: testenv.RedisPrefix(t, "authsync-bad"), Topic: "t"}
	in := startAuthInstance(t, cfg, "a")
	code, _ := in.do(t, "POST", "/v1/authorizations",
		`{"drone":"D1","zones":"all","from":"2026-01-01T00:00:00Z","until":"2026-02-01T00:00:00Z","reason":"r"}`)
	if code != 201 {
		t.Fatalf("create: %d", code)
	}
	ctx := context.Background()
	if err := in.sync.poll(ctx, false); err != nil || in.cur.Load().Version != 1 {
		t.Fatalf("poll: %v, version %d", err, in.cur.Load().Version)
	}
	rc := testenv.RedisClient(t)
	k := in.sync.store.Keys()
	rc.Set(ctx, k.Current(), `{"version":2,"authorizations":[{"zones":"some"}]}`, 0)
	rc.Set(ctx, k.Version(), "2", 0)
	if err := in.sync.poll(ctx, false); err != nil || in.cur.Load().Version != 1 || in.sync.version() != 1 {
		t.Errorf("a version that does not decode: %v, in use %d", err, in.cur.Load().Version)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var final *authStoreError
	if _, err := startAuthSync(sctx, cfg, rc, &authorization.Current{}, newMetrics(), testLog(t)); !errors.As(err, &final) {
		t.Errorf("start on a version that does not decode: %v, want the final error", err)
	}
	rc.Set(ctx, k.Current(), `{"version":3,"authorizations":[]}`, 0)
	rc.Set(ctx, k.Version(), "3", 0)
	if err := in.sync.poll(ctx, false); err != nil || in.cur.Load().Version != 3 || len(in.cur.Load().All()) != 0 {
		t.Errorf("the next good version: %v, in use %d", err, in.cur.Load().Version)
	}
}

// TestAuthSyncWaitsForRedis: without Redis at start the sync tries again
// until its context ends, and says why it gave up.
func TestAuthSyncWaitsForRedis(t *testing.T) {
	t.Parallel()
	rc := newRedisClient("127.0.0.1:1", "authsync-none")
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := startAuthSync(ctx, Config{RedisPrefix: "none"}, rc, &authorization.Current{}, newMetrics(), testLog(t))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last error") {
		t.Errorf("start without Redis: %v", err)
	}
}
