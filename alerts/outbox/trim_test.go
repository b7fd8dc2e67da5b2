package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestTrimOutbox: the outbox loses only entries older than the retention
// and passed by every output, against the real Redis.
func TestTrimOutbox(t *testing.T) {
	rdb := testenv.RedisClient(t)
	ctx := context.Background()
	cases := []struct {
		name      string
		cursors   map[string]int // output → index of the entry its cursor names; absent: no cursor
		outputs   []string
		retention time.Duration
		wantLeft  int // entries left of 10: those from the lowest cursor's on
	}{
		{"every output past entry 6", map[string]int{"kafka": 6, "webhook:a": 8}, []string{"kafka", "webhook:a"}, 0, 4},
		{"the slowest output decides", map[string]int{"kafka": 9, "webhook:a": 2}, []string{"kafka", "webhook:a"}, 0, 8},
		{"an output with no cursor holds everything", map[string]int{"kafka": 9}, []string{"kafka", "webhook:a"}, 0, 10},
		{"a removed output's cursor is ignored", map[string]int{"kafka": 7, "webhook:gone": 0}, []string{"kafka"}, 0, 3},
		{"all passed, but younger than the retention", map[string]int{"kafka": 9}, []string{"kafka"}, time.Hour, 10},
		{"all passed, entry 9 is the cursor's", map[string]int{"kafka": 9}, []string{"kafka"}, 0, 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := redislayout.Of(testenv.RedisPrefix(t, "trim"), "t", i)
			ids, err := appendEvents(ctx, rdb, k, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			dels := []string{k.Outbox()}
			for out, at := range tc.cursors {
				if err := rdb.Set(ctx, k.Cursor(out), ids[at], 0).Err(); err != nil {
					t.Fatal(err)
				}
				dels = append(dels, k.Cursor(out))
			}
			t.Cleanup(func() { rdb.Del(ctx, dels...) })
			trimmed, left, err := trimOutbox(ctx, rdb, k, tc.outputs, tc.retention, time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if left != int64(tc.wantLeft) || trimmed != int64(10-tc.wantLeft) {
				t.Fatalf("trimmed %d, left %d; want %d, %d", trimmed, left, 10-tc.wantLeft, tc.wantLeft)
			}
			msgs, err := rdb.XRange(ctx, k.Outbox(), "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, m.ID)
			}
			if want := ids[10-tc.wantLeft:]; !slices.Equal(got, want) {
				t.Fatalf("left %v, want %v", got, want)
			}
		})
	}
	t.Run("a cursor that is no stream id is an error", func(t *testing.T) {
		k := redislayout.Of(testenv.RedisPrefix(t, "trim"), "t", 99)
		if _, err := appendEvents(ctx, rdb, k, 0, 3); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(redislayout.KafkaOutput)) })
		rdb.Set(ctx, k.Cursor(redislayout.KafkaOutput), "garbage", 0)
		if _, _, err := trimOutbox(ctx, rdb, k, []string{"kafka"}, 0, time.Now()); err == nil {
			t.Fatal("no error for a bad cursor")
		}
		if n, _ := rdb.XLen(ctx, k.Outbox()).Result(); n != 3 {
			t.Fatalf("%d entries left, want all 3", n)
		}
	})
}

// TestTrimWaitsForAStuckWebhook: while one webhook is down, its entries stay
// in the outbox although the other output delivered them; once it is back,
// it gets every event and the outbox is trimmed.
func TestTrimWaitsForAStuckWebhook(t *testing.T) {
	rdb := testenv.RedisClient(t)
	var down atomic.Bool
	down.Store(true)
	up, upSrv := newHookServer(t, nil)
	stuck, stuckSrv := newHookServer(t, func(_ int, w http.ResponseWriter) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	reg := prometheus.NewRegistry()
	cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", Block: 20 * time.Millisecond,
		Backoff: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Retention: time.Millisecond, TrimInterval: 20 * time.Millisecond, Registerer: reg,
		Webhooks: []Webhook{{Name: "up", URL: upSrv.URL}, {Name: "stuck", URL: stuckSrv.URL, MaxAttempts: 1 << 20}},
		Logger:   testLogger()}
	k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
	ctx := context.Background()
	t.Cleanup(func() {
		rdb.Del(ctx, k.Outbox(), k.Cursor(redislayout.WebhookOutput("up")), k.Cursor(redislayout.WebhookOutput("stuck")))
	})
	const n = 50
	if _, err := appendEvents(ctx, rdb, k, 0, n); err != nil {
		t.Fatal(err)
	}
	runDispatcher(t, cfg, rdb, 0)
	testenv.CheckFor(t, 10*time.Second, func() error {
		if keys, _, _ := up.counts(); keys < n {
			return fmt.Errorf("healthy webhook: %d of %d", keys, n)
		}
		if _, posts, _ := stuck.counts(); posts < 5 {
			return fmt.Errorf("stuck webhook: %d attempts", posts)
		}
		return nil
	})
	time.Sleep(5 * cfg.TrimInterval) // trims would have run by now
	if left, _ := rdb.XLen(ctx, k.Outbox()).Result(); left != n {
		t.Fatalf("%d of %d entries left while a webhook has delivered none", left, n)
	}
	down.Store(false)
	testenv.CheckFor(t, 10*time.Second, func() error {
		if keys, _, _ := stuck.counts(); keys < n {
			return fmt.Errorf("recovered webhook: %d of %d", keys, n)
		}
		left, err := rdb.XLen(ctx, k.Outbox()).Result()
		if err != nil {
			return err
		}
		if left > 1 {
			return fmt.Errorf("%d entries left after both webhooks delivered all", left)
		}
		return nil
	})
	if got := metricValue(t, reg, "nofly_outbox_trimmed_total", "0", ""); got != n-1 {
		t.Fatalf("nofly_outbox_trimmed_total %v, want %d", got, n-1)
	}
	if bad := func() []string { _, _, b := up.counts(); _, _, b2 := stuck.counts(); return append(b, b2...) }(); len(bad) > 0 {
		t.Fatal(errors.New(bad[0]))
	}
}
