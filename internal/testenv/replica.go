package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisPair is a private primary and a private server that replicates it
// while attached: the smallest setup in which WAIT means something.
type RedisPair struct {
	Primary, Replica *RedisProc
	rc               *redis.Client
}

// StartRedisPair starts both servers (stopped when the test ends) and
// attaches the replica.
func StartRedisPair(t testing.TB) *RedisPair {
	t.Helper()
	p := &RedisPair{Primary: StartRedis(t), Replica: StartRedis(t)}
	p.rc = redis.NewClient(&redis.Options{Addr: p.Replica.Addr()})
	t.Cleanup(func() { _ = p.rc.Close() })
	p.Attach(t)
	return p
}

// Attach makes the replica follow the primary and waits until it is in sync.
func (p *RedisPair) Attach(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	host, port, _ := strings.Cut(p.Primary.Addr(), ":")
	if err := p.rc.Do(ctx, "replicaof", host, port).Err(); err != nil {
		t.Fatalf("replicaof: %v", err)
	}
	CheckFor(t, 20*time.Second, func() error {
		info, err := p.rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") || strings.Contains(info, "master_sync_in_progress:1") {
			return fmt.Errorf("replica of %s not in sync yet", p.Primary.Addr())
		}
		return nil
	})
}

// Detach makes the replica a primary of its own: it receives nothing more
// (as a replica cut off by a partition).
func (p *RedisPair) Detach(t testing.TB) {
	t.Helper()
	if err := p.rc.Do(context.Background(), "replicaof", "no", "one").Err(); err != nil {
		t.Fatalf("replicaof no one: %v", err)
	}
}
