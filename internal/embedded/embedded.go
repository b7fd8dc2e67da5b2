// Package embedded runs nofly's two backends inside the calling process, on
// loopback ports, for trying nofly out with nothing but Go: a one-broker
// Kafka-protocol cluster (franz-go's kfake) and a Redis server (miniredis).
// The pipeline talks to them over TCP with the very clients it uses against
// the real services, so nothing in ingest or the alerter knows the
// difference. What they do not honour, and how nofly works around it, is in
// docs/demo.md ("The embedded default"). Nothing is kept across a restart.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures the embedded stack; the zero value is usable.
type Options struct {
	// Topics are created at start with Partitions partitions each. kfake
	// answers a fetch of a missing topic by waiting, so seeding them saves a
	// reader's first wait; the services also create theirs with
	// CreateTopics, which kfake honours.
	Topics     []string
	Partitions int // 12 when 0
	// ClockTick is how often miniredis's TTLs are counted down (it expires
	// keys only when told time has passed); 1 s when 0.
	ClockTick time.Duration
	Logger    *slog.Logger
}

// Stack is a running embedded Kafka and Redis.
type Stack struct {
	Kafka *Kafka
	Redis *Redis
}

// Start starts the broker and the Redis server on free loopback ports.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k, err := StartKafka(o)
	if err != nil {
		return nil, err
	}
	r, err := StartRedis(o.ClockTick)
	if err != nil {
		k.Close()
		return nil, err
	}
	if o.Logger != nil {
		o.Logger.Info("embedded stack", "kafka", k.Brokers(), "redis", r.Addr())
	}
	return &Stack{Kafka: k, Redis: r}, nil
}

// Brokers are the embedded cluster's bootstrap addresses.
func (s *Stack) Brokers() []string { return s.Kafka.Brokers() }

// RedisAddr is the embedded Redis server's address.
func (s *Stack) RedisAddr() string { return s.Redis.Addr() }

// Close stops both servers; everything they held is gone.
func (s *Stack) Close() {
	s.Redis.Close()
	s.Kafka.Close()
}

// Kafka is a one-broker kfake cluster.
type Kafka struct{ c *kfake.Cluster }

// StartKafka starts a one-broker cluster on a free loopback port (kfake
// listens on 127.0.0.1:0 when given no port).
func StartKafka(o Options) (*Kafka, error) {
	if o.Partitions <= 0 {
		o.Partitions = 12
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1), // on a free port of 127.0.0.1
		kfake.DefaultNumPartitions(o.Partitions),
		// Tests run groups with sessions down to a few seconds.
		kfake.GroupMinSessionTimeout(time.Second),
	}
	if len(o.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.Partitions), o.Topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	return &Kafka{c: c}, nil
}

// Brokers are the cluster's bootstrap addresses.
func (k *Kafka) Brokers() []string { return k.c.ListenAddrs() }

// Close stops the broker; its topics are gone.
func (k *Kafka) Close() { k.c.Close() }

// Redis is a miniredis server whose clock follows the wall clock.
type Redis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// StartRedis starts miniredis on a free loopback port and counts its TTLs
// down every tick (1 s when 0), so that keys expire as on a real server.
// Its clock is left on the wall clock (no SetTime): TIME and stream ids
// then move every millisecond, as the live event stream's merge expects.
func StartRedis(tick time.Duration) (*Redis, error) {
	if tick <= 0 {
		tick = time.Second
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	// What miniredis lacks and the pipeline uses (xinfo.go).
	m.Server().SetPreHook(newShim(m).hook)
	r := &Redis{m: m, stop: make(chan struct{})}
	r.done.Add(1)
	go r.tick(tick)
	return r, nil
}

func (r *Redis) tick(every time.Duration) {
	defer r.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Addr is the server's address.
func (r *Redis) Addr() string { return r.m.Addr() }

// Close stops the server; its keys are gone.
func (r *Redis) Close() {
	r.once.Do(func() {
		close(r.stop)
		r.done.Wait()
		r.m.Close()
	})
}
