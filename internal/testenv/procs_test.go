package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestPrivateServersRestart checks what fault-injection tests rely on: a
// private broker and Redis server that come back on the same address with
// their data after a restart.
func TestPrivateServersRestart(t *testing.T) {
	ctx := context.Background()
	k := testenv.StartKafka(t)
	topic := "restart-check"
	if err := testenv.EnsureTopic(ctx, k.Brokers(), topic, 2); err != nil {
		t.Fatal(err)
	}
	r := testenv.StartRedis(t)
	if err := testenv.PingRedis(ctx, r.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The topic survived: EnsureTopic finds it (TopicAlreadyExists) and waits
	// for its leaders to come back.
	if err := testenv.EnsureTopic(ctx, k.Brokers(), topic, 2); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 10*time.Second, func() error { return testenv.PingRedis(ctx, r.Addr()) })
}
