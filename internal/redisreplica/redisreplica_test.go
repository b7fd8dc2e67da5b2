package redisreplica_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/testenv"
)

var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// TestWait: with the replica attached a waited write returns once the
// replica has it; detached, the same write succeeds on the primary but is
// reported not replicated; a reader's Confirm covers another client's
// writes, and only when the replica has them.
func TestWait(t *testing.T) {
	ctx := context.Background()
	p := testenv.StartRedisPair(t)
	primary := redis.NewClient(&redis.Options{Addr: p.Primary.Addr(), MaxRetries: -1})
	replica := redis.NewClient(&redis.Options{Addr: p.Replica.Addr()})
	t.Cleanup(func() { _ = primary.Close(); _ = replica.Close() })
	w := redisreplica.Wait{Replicas: 1, Timeout: 200 * time.Millisecond}

	cmd, err := w.Run(ctx, primary, incr, []string{"{t}:n"})
	if err != nil {
		t.Fatalf("attached: %v", err)
	}
	if n, _ := cmd.Int64(); n != 1 {
		t.Fatalf("script reply %d, want 1", n)
	}
	if v, err := replica.Get(ctx, "{t}:n").Result(); err != nil || v != "1" {
		t.Fatalf("the replica has %q (%v) right after a confirmed write, want 1", v, err)
	}

	// A second client writes without waiting; a reader that confirms after
	// reading it covers that write too.
	other := redis.NewClient(&redis.Options{Addr: p.Primary.Addr()})
	defer other.Close()
	if err := other.Set(ctx, "{t}:x", "from another client", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := w.Confirm(ctx, primary, "{t}:check", "read"); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if v, _ := replica.Get(ctx, "{t}:x").Result(); v != "from another client" {
		t.Fatalf("after Confirm the replica has %q", v)
	}

	p.Detach(t)
	began := time.Now()
	cmd, err = w.Run(ctx, primary, incr, []string{"{t}:n"})
	if !errors.Is(err, redisreplica.ErrNotReplicated) {
		t.Fatalf("detached: err = %v, want ErrNotReplicated", err)
	}
	if took := time.Since(began); took < w.Timeout {
		t.Errorf("not replicated reported after %v, before the %v timeout", took, w.Timeout)
	}
	if n, _ := cmd.Int64(); n != 2 {
		t.Fatalf("detached: the script still ran on the primary, reply %d, want 2", n)
	}
	if err := w.Confirm(ctx, primary, "{t}:check", "read"); !errors.Is(err, redisreplica.ErrNotReplicated) {
		t.Fatalf("detached confirm: err = %v, want ErrNotReplicated", err)
	}
	t.Logf("detached: %v", err)

	// Off: a plain write.
	if _, err := (redisreplica.Wait{}).Run(ctx, primary, incr, []string{"{t}:n"}); err != nil {
		t.Fatalf("off: %v", err)
	}
}

// TestWaitSettings: the wait's bounds are checked before anything is sent.
func TestWaitSettings(t *testing.T) {
	tests := []struct {
		name string
		w    redisreplica.Wait
		ok   bool
	}{
		{"off", redisreplica.Wait{}, true},
		{"one", redisreplica.Wait{Replicas: 1}, true},
		{"negative replicas", redisreplica.Wait{Replicas: -1}, false},
		{"negative timeout", redisreplica.Wait{Replicas: 1, Timeout: -time.Second}, false},
	}
	for _, tt := range tests {
		if err := tt.w.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	// A WAIT longer than the client's read timeout would read as a dead
	// connection: refused up front.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	defer c.Close()
	_, err := redisreplica.Wait{Replicas: 1, Timeout: time.Second}.Run(context.Background(), c, incr, []string{"k"})
	if err == nil || !strings.Contains(err.Error(), "read timeout") {
		t.Fatalf("err = %v, want the read timeout named", err)
	}
}
