package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestRedrive: events a webhook refused are dead-lettered by the
// dispatcher; a redrive to the mended endpoint posts each once more, in
// order, stops at the first failure leaving it and the rest, and a second
// redrive finishes the job.
func TestRedrive(t *testing.T) {
	rdb := testenv.RedisClient(t)
	refuse, refuseSrv := newHookServer(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
	reg := prometheus.NewRegistry()
	cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", Block: 20 * time.Millisecond,
		Registerer: reg, Logger: testLogger()}
	hook := Webhook{Name: "ops", URL: refuseSrv.URL}
	dcfg := cfg
	dcfg.Webhooks = []Webhook{hook}
	k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
	ctx := context.Background()
	t.Cleanup(func() {
		rdb.Del(ctx, k.Outbox(), k.Cursor(redislayout.WebhookOutput("ops")), k.Dead(redislayout.WebhookOutput("ops")))
	})
	const n = 10
	if _, err := appendEvents(ctx, rdb, k, 0, n); err != nil {
		t.Fatal(err)
	}
	stop := runDispatcher(t, dcfg, rdb, 0)
	testenv.CheckFor(t, 10*time.Second, func() error {
		if got := metricValue(t, reg, "nofly_outbox_dead_letters_total", "0", "webhook:ops"); got < n {
			return fmt.Errorf("%v of %d dead-lettered", got, n)
		}
		return nil
	})
	stop()
	if keys, _, _ := refuse.counts(); keys != n {
		t.Fatalf("refusing endpoint saw %d events, want %d", keys, n)
	}

	// The mended endpoint fails once, on the fourth event.
	var posts atomic.Int64
	mended, mendedSrv := newHookServer(t, func(_ int, w http.ResponseWriter) {
		if posts.Add(1) == 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	hook.URL = mendedSrv.URL

	res, err := Redrive(ctx, rdb, cfg, hook, 0, true)
	if err != nil || res.DeadLetters != n || res.Redelivered != 0 || posts.Load() != 0 {
		t.Fatalf("dry run: %+v, %v, %d posts; want %d dead letters and nothing posted", res, err, posts.Load(), n)
	}
	res, err = Redrive(ctx, rdb, cfg, hook, 0, false)
	if !errors.Is(err, ErrRedriveStopped) || res.Redelivered != 3 {
		t.Fatalf("first redrive: %+v, %v; want 3 redelivered and ErrRedriveStopped", res, err)
	}
	if left, _ := rdb.XLen(ctx, k.Dead(redislayout.WebhookOutput("ops"))).Result(); left != n-3 {
		t.Fatalf("%d dead letters left, want %d", left, n-3)
	}
	res, err = Redrive(ctx, rdb, cfg, hook, 0, false)
	if err != nil || res.DeadLetters != n-3 || res.Redelivered != n-3 {
		t.Fatalf("second redrive: %+v, %v; want all %d redelivered", res, err, n-3)
	}
	if left, _ := rdb.XLen(ctx, k.Dead(redislayout.WebhookOutput("ops"))).Result(); left != 0 {
		t.Fatalf("%d dead letters left, want 0", left)
	}
	keys, total, bad := mended.counts()
	if keys != n || total != n+1 || len(bad) > 0 {
		t.Fatalf("mended endpoint: %d events, %d posts, bad %v; want %d events, %d posts (one retried)", keys, total, bad, n, n+1)
	}
	for i := range n {
		evID, _ := testEvent(i)
		want := 1
		if i == 3 {
			want = 2
		}
		if got := len(mended.times(evID)); got != want {
			t.Fatalf("event %s posted %d times, want %d", evID, got, want)
		}
	}
}
