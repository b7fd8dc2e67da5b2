package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func TestBackoff(t *testing.T) {
	const base, max = 100 * time.Millisecond, time.Second
	cases := []struct {
		attempt  int
		r        float64
		min, max time.Duration
	}{
		{attempt: 0, r: 0, min: 50 * time.Millisecond, max: 50 * time.Millisecond},
		{attempt: 1, r: 0, min: 50 * time.Millisecond, max: 50 * time.Millisecond},
		{attempt: 1, r: 0.999, min: 99 * time.Millisecond, max: 100 * time.Millisecond},
		{attempt: 2, r: 0.5, min: 150 * time.Millisecond, max: 150 * time.Millisecond},
		{attempt: 4, r: 0.999, min: 799 * time.Millisecond, max: 800 * time.Millisecond},
		{attempt: 5, r: 0.999, min: 999 * time.Millisecond, max: time.Second}, // capped
		{attempt: 5, r: 0, min: 500 * time.Millisecond, max: 500 * time.Millisecond},
		{attempt: 1000, r: 0.999, min: 999 * time.Millisecond, max: time.Second}, // no overflow
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("attempt %d r %.3f", tc.attempt, tc.r), func(t *testing.T) {
			if d := backoff(base, max, tc.attempt, tc.r); d < tc.min || d > tc.max {
				t.Fatalf("backoff = %v, want in [%v, %v]", d, tc.min, tc.max)
			}
		})
	}
	t.Run("jitter spreads", func(t *testing.T) {
		seen := make(map[time.Duration]bool)
		for range 50 {
			d := jittered(base, max, 3)
			if d < 200*time.Millisecond || d > 400*time.Millisecond {
				t.Fatalf("jittered = %v, want in [200ms, 400ms]", d)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("only %d distinct pauses in 50 draws", len(seen))
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"99999999999", 24 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.header, func(t *testing.T) {
			if got := retryAfter(tc.header, now); got != tc.want {
				t.Fatalf("retryAfter(%q) = %v, want %v", tc.header, got, tc.want)
			}
		})
	}
}

func TestClassifyAttempt(t *testing.T) {
	cases := []struct {
		r    attemptResult
		want verdict
	}{
		{attemptResult{status: 200}, delivered},
		{attemptResult{status: 204}, delivered},
		{attemptResult{err: errors.New("connection refused")}, retriable},
		{attemptResult{status: 500}, retriable},
		{attemptResult{status: 502}, retriable},
		{attemptResult{status: 503}, retriable},
		{attemptResult{status: 429}, retriable},
		{attemptResult{status: 408}, retriable},
		{attemptResult{status: 400}, permanent},
		{attemptResult{status: 401}, permanent},
		{attemptResult{status: 404}, permanent},
		{attemptResult{status: 409}, permanent},
		{attemptResult{status: 422}, permanent},
		{attemptResult{status: 304}, permanent},
	}
	for _, tc := range cases {
		t.Run(describe(tc.r), func(t *testing.T) {
			if got := classifyAttempt(tc.r); got != tc.want {
				t.Fatalf("classify(%s) = %d, want %d", describe(tc.r), got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Topic: "telemetry.positions", Webhooks: []Webhook{{Name: "ops", URL: "https://example.test/hook"}}}
	cases := []struct {
		name  string
		edit  func(c *Config)
		field string // "" = valid
	}{
		{"valid", func(c *Config) {}, ""},
		{"no topic", func(c *Config) { c.Topic = "" }, "Topic"},
		{"negative batch", func(c *Config) { c.BatchSize = -1 }, "BatchSize"},
		{"backoff max below backoff", func(c *Config) { c.Backoff, c.BackoffMax = time.Second, time.Millisecond }, "BackoffMax"},
		{"bad webhook name", func(c *Config) { c.Webhooks[0].Name = "a b" }, "Webhooks[0].Name"},
		{"duplicate webhook name", func(c *Config) { c.Webhooks = append(c.Webhooks, c.Webhooks[0]) }, "Webhooks[1].Name"},
		{"relative url", func(c *Config) { c.Webhooks[0].URL = "/hook" }, "Webhooks[0].URL"},
		{"ftp url", func(c *Config) { c.Webhooks[0].URL = "ftp://x/y" }, "Webhooks[0].URL"},
		{"negative attempts", func(c *Config) { c.Webhooks[0].MaxAttempts = -2 }, "Webhooks[0].MaxAttempts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			c.Webhooks = append([]Webhook(nil), ok.Webhooks...)
			tc.edit(&c)
			c.setDefaults()
			err := c.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field+":")):
				t.Fatalf("Validate = %v, want an ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
}

// hookServer answers each POST with what reply says for the attempt number
// of that Idempotency-Key, and records every attempt.
type hookServer struct {
	mu       sync.Mutex
	attempts map[string][]time.Time
	bad      []string // requests that broke the contract
	reply    func(attempt int, w http.ResponseWriter)
}

func newHookServer(t *testing.T, reply func(attempt int, w http.ResponseWriter)) (*hookServer, *httptest.Server) {
	h := &hookServer{attempts: make(map[string][]time.Time), reply: reply}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	h.mu.Lock()
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		key == "" || !strings.Contains(string(body), `"event_id":"`+key+`"`) {
		h.bad = append(h.bad, fmt.Sprintf("%s %q key %q body %s", r.Method, r.Header.Get("Content-Type"), key, body))
	}
	h.attempts[key] = append(h.attempts[key], time.Now())
	n := len(h.attempts[key])
	h.mu.Unlock()
	if h.reply == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.reply(n, w)
}

func (h *hookServer) counts() (keys, posts int, bad []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.attempts {
		posts += len(a)
	}
	return len(h.attempts), posts, append([]string(nil), h.bad...)
}

func (h *hookServer) times(key string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.attempts[key]...)
}

// TestWebhookOutput runs one webhook output against a scripted endpoint and
// the real Redis, and checks deliveries, retries, dead letters and cursor.
func TestWebhookOutput(t *testing.T) {
	const n = 8
	cases := []struct {
		name        string
		maxAttempts int
		reply       func(attempt int, w http.ResponseWriter)
		// expected per event: POSTs, and whether it ends as a dead letter
		posts      int
		dead       bool
		deadReason string
		// minGap is the least time between two attempts of one event.
		minGap time.Duration
	}{
		{name: "2xx at once", maxAttempts: 3, posts: 1},
		{name: "503 then 200", maxAttempts: 3, posts: 3, reply: func(a int, w http.ResponseWriter) {
			if a < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		}},
		{name: "permanent 400: dead letter at once", maxAttempts: 5, posts: 1, dead: true, deadReason: "permanent: HTTP 400",
			reply: func(a int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) }},
		{name: "redirect is not followed: dead letter at once", maxAttempts: 5, posts: 1, dead: true, deadReason: "permanent: HTTP 301",
			reply: func(a int, w http.ResponseWriter) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(http.StatusMovedPermanently)
			}},
		{name: "permanent 404: dead letter at once", maxAttempts: 5, posts: 1, dead: true, deadReason: "permanent: HTTP 404",
			reply: func(a int, w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) }},
		{name: "always 500: dead letter after max attempts", maxAttempts: 3, posts: 3, dead: true, deadReason: "attempts exhausted: HTTP 500",
			reply: func(a int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }},
		{name: "429 with Retry-After is honoured", maxAttempts: 3, posts: 2, minGap: time.Second,
			reply: func(a int, w http.ResponseWriter) {
				if a == 1 {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testenv.RedisClient(t)
			hs, srv := newHookServer(t, tc.reply)
			reg := prometheus.NewRegistry()
			cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", Block: 20 * time.Millisecond,
				Backoff: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, LagInterval: 20 * time.Millisecond,
				Webhooks:   []Webhook{{Name: "ops", URL: srv.URL, MaxAttempts: tc.maxAttempts, Timeout: 5 * time.Second}},
				Registerer: reg, Logger: testLogger()}
			k := redislayout.Of(cfg.Prefix, cfg.Topic, 2)
			const out = "webhook:ops"
			ctx := context.Background()
			t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(out), k.Dead(out)) })
			// A run with fewer events for the 429 case: each costs a second.
			count := n
			if tc.minGap > 0 {
				count = 2
			}
			ids, err := appendEvents(ctx, rdb, k, 0, count)
			if err != nil {
				t.Fatal(err)
			}
			stop := runDispatcher(t, cfg, rdb, 2)
			testenv.CheckFor(t, 20*time.Second, func() error {
				cur, _ := rdb.Get(ctx, k.Cursor(out)).Result()
				if cur != ids[len(ids)-1] {
					return fmt.Errorf("cursor %q, want %q", cur, ids[len(ids)-1])
				}
				if lag := metricValue(t, reg, "nofly_outbox_lag_entries", "2", out); lag != 0 {
					return fmt.Errorf("lag %v", lag)
				}
				return nil
			})
			stop()

			keys, posts, bad := hs.counts()
			if len(bad) > 0 {
				t.Fatalf("requests breaking the contract: %v", bad)
			}
			if keys != count || posts != count*tc.posts {
				t.Fatalf("%d keys, %d posts; want %d keys, %d posts", keys, posts, count, count*tc.posts)
			}
			dead, err := rdb.XRange(ctx, k.Dead(out), "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			wantDead := 0
			if tc.dead {
				wantDead = count
			}
			if len(dead) != wantDead {
				t.Fatalf("%d dead letters, want %d", len(dead), wantDead)
			}
			for i, m := range dead {
				evID, body := testEvent(i)
				if m.Values[redislayout.FieldOutboxID] != ids[i] || m.Values[redislayout.FieldEventID] != evID || m.Values[redislayout.FieldEvent] != string(body) ||
					m.Values[redislayout.FieldReason] != tc.deadReason || m.Values[redislayout.FieldAttempts] != fmt.Sprint(tc.posts) {
					t.Fatalf("dead letter %d: %v", i, m.Values)
				}
			}
			wantDelivered := float64(count - wantDead)
			for metric, want := range map[string]float64{
				"nofly_outbox_delivered_total":    wantDelivered,
				"nofly_outbox_dead_letters_total": float64(wantDead),
				"nofly_outbox_retries_total":      float64(count * (tc.posts - 1)),
			} {
				if got := metricValue(t, reg, metric, "2", out); got != want {
					t.Errorf("%s = %v, want %v", metric, got, want)
				}
			}
			if tc.minGap > 0 {
				for i := range count {
					evID, _ := testEvent(i)
					ts := hs.times(evID)
					if gap := ts[1].Sub(ts[0]); gap < tc.minGap {
						t.Fatalf("event %s retried after %v, Retry-After said %v", evID, gap, tc.minGap)
					}
				}
			}
		})
	}
}

// TestWebhookResumesFromCursor stops a webhook output and starts it again:
// what it delivered before is not sent again, what came meanwhile is.
func TestWebhookResumesFromCursor(t *testing.T) {
	rdb := testenv.RedisClient(t)
	hs, srv := newHookServer(t, nil)
	cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", Block: 20 * time.Millisecond,
		Webhooks: []Webhook{{Name: "ops", URL: srv.URL}}, Logger: testLogger()}
	k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
	ctx := context.Background()
	t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(redislayout.WebhookOutput("ops"))) })
	d, err := NewDispatcher(cfg, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for round := range 3 {
		ids, err := appendEvents(ctx, rdb, k, total, 10)
		if err != nil {
			t.Fatal(err)
		}
		total += 10
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(runCtx, 0) }()
		// Stopped once the cursor is saved: the endpoint counting a POST
		// before its answer reaches the output is no reason to stop yet.
		testenv.CheckFor(t, 10*time.Second, func() error {
			if keys, _, _ := hs.counts(); keys < total {
				return fmt.Errorf("round %d: %d of %d delivered", round, keys, total)
			}
			if cur, _ := rdb.Get(ctx, k.Cursor(redislayout.WebhookOutput("ops"))).Result(); cur != ids[len(ids)-1] {
				return fmt.Errorf("round %d: cursor %q, want %q", round, cur, ids[len(ids)-1])
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if keys, posts, _ := hs.counts(); keys != total || posts != total {
		t.Fatalf("%d keys, %d posts, want %d each", keys, posts, total)
	}
}

// TestRunTwice: one partition runs once per Dispatcher.
func TestRunTwice(t *testing.T) {
	rdb := testenv.RedisClient(t)
	d, err := NewDispatcher(Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", Logger: testLogger()}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, 0) }()
	testenv.CheckFor(t, 5*time.Second, func() error {
		d.mu.Lock()
		started := d.running[0]
		d.mu.Unlock()
		if !started {
			return errors.New("first Run not started yet")
		}
		if err := d.Run(ctx, 0); !errors.Is(err, ErrRunning) {
			return fmt.Errorf("second Run = %v, want ErrRunning", err)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWebhookStopDuringPost: the output is stopped while a POST is in
// flight; the POST finishes, its 2xx is recorded, and the next Run does not
// send that event again.
func TestWebhookStopDuringPost(t *testing.T) {
	rdb := testenv.RedisClient(t)
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	hs, srv := newHookServer(t, func(attempt int, w http.ResponseWriter) {
		cancel() // the stop arrives while this POST waits for its answer
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	})
	cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", Block: 20 * time.Millisecond,
		Webhooks: []Webhook{{Name: "ops", URL: srv.URL}}, Logger: testLogger()}
	k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
	t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(redislayout.WebhookOutput("ops"))) })
	ids, err := appendEvents(ctx, rdb, k, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(cfg, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(runCtx, 0); err != nil {
		t.Fatal(err)
	}
	if cur, _ := rdb.Get(ctx, k.Cursor(redislayout.WebhookOutput("ops"))).Result(); cur != ids[0] {
		t.Fatalf("cursor %q after the stop, want %q (the answered POST recorded)", cur, ids[0])
	}
	hs.reply = nil
	stop := runDispatcher(t, cfg, rdb, 0)
	time.Sleep(200 * time.Millisecond)
	stop()
	if keys, posts, _ := hs.counts(); keys != 1 || posts != 1 {
		t.Fatalf("%d keys, %d posts; want the event posted once", keys, posts)
	}
}
