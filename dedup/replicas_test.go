package dedup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestRedisCommitWaitsForReplicas: with Replicas on, a commit succeeds
// only once the replica has the batch; with the replica cut off the batch
// runs on the primary but the commit says it may be lost, and Load refuses
// to hand out that state until the replica has it again (the next commit,
// sent to a promoted replica without it, would otherwise be fenced).
func TestRedisCommitWaitsForReplicas(t *testing.T) {
	ctx := context.Background()
	p := testenv.StartRedisPair(t)
	pc := redis.NewClient(&redis.Options{Addr: p.Primary.Addr(), MaxRetries: -1})
	rc := redis.NewClient(&redis.Options{Addr: p.Replica.Addr()})
	t.Cleanup(func() { _ = pc.Close(); _ = rc.Close() })
	opts := dedup.RedisOptions{Topic: "telemetry.positions", EventTTL: time.Hour,
		Replicas: redisreplica.Wait{Replicas: 1, Timeout: 200 * time.Millisecond}}
	s, err := dedup.NewRedis(pc, opts)
	if err != nil {
		t.Fatal(err)
	}
	onReplica, err := dedup.NewRedis(rc, dedup.RedisOptions{Topic: opts.Topic, EventTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(applied int64, id string) dedup.Batch {
		return dedup.Batch{Applied: applied, Drones: map[string][]byte{"d1": []byte(`{"seq":` + id + `}`)}, Events: []dedup.Event{ev("e" + id)}}
	}

	if _, err := s.Commit(ctx, 0, dedup.NoVersion, batch(10, "1")); err != nil {
		t.Fatalf("attached commit: %v", err)
	}
	if snap, err := onReplica.Load(ctx, 0); err != nil || snap.Applied != 10 {
		t.Fatalf("replica right after a confirmed commit: applied %d (%v), want 10", snap.Applied, err)
	}
	if snap, err := s.Load(ctx, 0); err != nil || snap.Applied != 10 || string(snap.Drones["d1"]) != `{"seq":1}` {
		t.Fatalf("confirmed load: %+v, %v", snap, err)
	}

	p.Detach(t)
	_, err = s.Commit(ctx, 0, 10, batch(20, "2"))
	if !errors.Is(err, redisreplica.ErrNotReplicated) {
		t.Fatalf("detached commit: err = %v, want ErrNotReplicated", err)
	}
	t.Logf("detached commit: %v", err)
	plain, err := dedup.NewRedis(pc, dedup.RedisOptions{Topic: opts.Topic, EventTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := plain.Load(ctx, 0); err != nil || snap.Applied != 20 {
		t.Fatalf("the primary has applied %d (%v), want 20: the batch ran there", snap.Applied, err)
	}
	if snap, err := onReplica.Load(ctx, 0); err != nil || snap.Applied != 10 {
		t.Fatalf("the cut-off replica has applied %d (%v), want 10", snap.Applied, err)
	}
	if _, err := s.Load(ctx, 0); !errors.Is(err, redisreplica.ErrNotReplicated) {
		t.Fatalf("load of an unconfirmed state: err = %v, want ErrNotReplicated", err)
	}

	p.Attach(t)
	snap, err := s.Load(ctx, 0)
	if err != nil || snap.Applied != 20 {
		t.Fatalf("load after the replica is back: applied %d (%v), want 20", snap.Applied, err)
	}
	if _, err := s.Commit(ctx, 0, 20, batch(30, "3")); err != nil {
		t.Fatalf("commit after the replica is back: %v", err)
	}
	if out, err := onReplica.Outbox(ctx, 0); err != nil || len(out) != 3 {
		t.Fatalf("replica outbox: %d entries (%v), want 3", len(out), err)
	}
	// Fenced stays fenced, whatever the replicas say.
	if _, err := s.Commit(ctx, 0, 20, batch(40, "4")); !errors.Is(err, dedup.ErrFenced) {
		t.Fatalf("stale commit: err = %v, want ErrFenced", err)
	}
}
