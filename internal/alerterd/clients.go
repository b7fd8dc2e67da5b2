package alerterd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/redisconn"
)

// loadZones reads the zone file with the default options and builds its
// index (tests and benchmarks; serve and replay use Config.zoneSource).
func loadZones(path string) (*geofence.Index, error) {
	ix, _, err := zoneSource{path: path}.load()
	return ix, err
}

// storeTuning is the store's client: no automatic retries, because the
// outcome of a failed script is unknown and only a reload tells it.
func storeTuning(name string) redisconn.Tuning {
	return redisconn.Tuning{Name: name, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
}

// openRedis opens a client of c's Redis (one server or a cluster, with c's
// TLS and ACL settings) and checks that it answers, so a wrong password or
// address fails the command at start.
func (c Config) openRedis(ctx context.Context, t redisconn.Tuning) (redis.UniversalClient, error) {
	rc, err := redisconn.Open(c.RedisAddr, c.Access, t)
	if err != nil {
		return nil, err
	}
	if err := redisconn.Check(ctx, rc, c.Access); err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("redis %s: %w", c.RedisAddr, err)
	}
	return rc, nil
}

// openKafka loads c's Kafka TLS and SASL settings and checks that the
// brokers answer a metadata request with them, so a wrong password or an
// untrusted certificate fails the command at start.
func (c Config) openKafka(ctx context.Context, log *slog.Logger) (kafkaconn.Conn, error) {
	kc, err := c.Security.Load()
	if err != nil {
		return kafkaconn.Conn{}, err
	}
	if err := kc.Check(ctx, c.Brokers); err != nil {
		return kafkaconn.Conn{}, err
	}
	log.Info("connections", "kafka", c.Security.Describe(), "redis", c.Access.Describe(), "redis_min_replicas", c.RedisMinReplicas)
	if c.RedisMinReplicas == 0 {
		if a, err := redisconn.ParseAddr(c.RedisAddr); err == nil && a.Cluster {
			log.Warn("Redis Cluster without --redis-min-replicas: a failover can lose acknowledged batches (docs/exactly-once.md)")
		}
	}
	return kc, nil
}
