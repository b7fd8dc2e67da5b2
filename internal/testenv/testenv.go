// Package testenv gives integration tests the real services that
// scripts/services.sh starts: a Kafka broker and a Redis server on loopback.
//
// A test that needs a service it cannot reach fails (never skips) with a
// message naming the script that starts it: a green run must mean the
// guarantees were checked against the real thing.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/embedded"
	"github.com/nofly-dev/nofly/internal/kafkatopic"
)

const startHint = "start the services with `bash scripts/services.sh start` (or run the README's test command, which does)"

// KafkaBrokers returns the brokers named by NOFLY_KAFKA_BROKERS (comma
// separated), or the default single node of scripts/kafka.sh.
func KafkaBrokers() []string {
	if v := os.Getenv("NOFLY_KAFKA_BROKERS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"127.0.0.1:9092"}
}

// RedisAddr returns NOFLY_REDIS_ADDR or the default of scripts/redis.sh.
func RedisAddr() string {
	if v := os.Getenv("NOFLY_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

// Kafka returns the shared broker's addresses after checking that it answers a
// metadata request; the test fails otherwise.
func Kafka(t testing.TB) []string {
	t.Helper()
	brokers := KafkaBrokers()
	if err := PingKafka(context.Background(), brokers); err != nil {
		t.Fatalf("kafka at %v is not reachable: %v; %s", brokers, err, startHint)
	}
	return brokers
}

// PingKafka asks the brokers for metadata.
func PingKafka(ctx context.Context, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
	_, err := c.Metadata(ctx, &kafka.MetadataRequest{})
	return err
}

// Redis returns the shared Redis server's address after a PING; the test
// fails otherwise.
func Redis(t testing.TB) string {
	t.Helper()
	addr := RedisAddr()
	if err := PingRedis(context.Background(), addr); err != nil {
		t.Fatalf("redis at %s is not reachable: %v; %s", addr, err, startHint)
	}
	return addr
}

// RedisClient returns a client of the shared server, closed with the test.
// Tests share the server: keep keys under a prefix from UniqueName.
//
// Its commands wait up to TestRedisTimeout for an answer, not go-redis's
// 3 s: tests check what the stores do, not how fast, and the embedded
// step's miniredis (one process serving five packages' tests under CI's
// load) once took longer than 3 s to scan, then saw the retry of a commit
// that had gone through as fenced.
func RedisClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Redis(t), ReadTimeout: TestRedisTimeout, WriteTimeout: TestRedisTimeout})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRedisTimeout is how long a test's Redis client waits for an answer.
const TestRedisTimeout = 20 * time.Second

// PingRedis sends PING.
func PingRedis(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// UniqueName returns prefix plus a random suffix: topics, groups and Redis
// key prefixes of concurrent tests never collide.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// CreateTopic creates a uniquely named topic with the given partition count
// (auto-creation is off on our broker) and waits until every partition has a
// leader. The topic is deleted when the test ends.
func CreateTopic(t testing.TB, brokers []string, partitions int) string {
	t.Helper()
	topic := UniqueName(topicSafe(t.Name()))
	if len(topic) > 200 {
		topic = UniqueName("t")
	}
	if err := EnsureTopic(context.Background(), brokers, topic, partitions); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
	return topic
}

// topicSafe maps a test name onto Kafka's topic alphabet [a-zA-Z0-9._-]
// (sub-test and sub-benchmark names carry '/', '=', spaces).
func topicSafe(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r == '/':
			return '.'
		}
		return '_'
	}, name)
}

// EnsureTopic creates topic with partitions partitions unless it exists, and
// waits up to 60 s for every partition to have a leader: kafkatopic.Ensure
// with replication 1 (our brokers are single nodes) and the exact count, so
// an existing topic with another count fails (kafkatopic.ErrPartitionCount).
// The topic keeps its records whatever their timestamps (TopicConfigs).
func EnsureTopic(ctx context.Context, brokers []string, topic string, partitions int) error {
	_, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: topic, Partitions: partitions, Replication: 1, Configs: TopicConfigs})
	return err
}

// TopicConfigs are the configs of the topics tests create: no retention by
// time. The scenarios' records carry their receive times as Kafka
// timestamps (internal/scenario, Received: days in the past), and the
// broker's retention by time (scripts/kafka.sh: 24 h) would delete a test
// topic's segments under a running test at its next retention check. The
// tests delete their topics when they end.
var TopicConfigs = map[string]string{"retention.ms": "-1"}

// WaitFor polls cond until it returns nil or the timeout passes, and returns
// the last error then. Tests wait for conditions, not for time.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 10 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var perm permanent
		if errors.As(err, &perm) {
			return perm.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", timeout, err)
		case <-time.After(delay):
		}
		if delay < 500*time.Millisecond {
			delay *= 2
		}
	}
}

// permanent wraps an error that WaitFor must not retry.
type permanent struct{ error }

// CheckFor is WaitFor that fails the test.
func CheckFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := WaitFor(context.Background(), timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// RepoRoot is the repository's top directory, found from this file's path.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// KillRedisClients closes (CLIENT KILL ID) every connection whose client
// name is name and returns how many it closed. Only those: the server is
// shared with other tests, so a fault test names its clients and kills just
// them.
func KillRedisClients(ctx context.Context, c *redis.Client, name string) int {
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		var id string
		named := false
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			}
			if f == "name="+name {
				named = true
			}
		}
		if named && id != "" && c.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
			n++
		}
	}
	return n
}

// RedisPrefix returns a unique key prefix for a test's keys on the shared
// Redis server (nofly keys are "{prefix:topic:partition}:…") and deletes
// every key under it when the test ends, so repeated runs do not grow the
// server's data set (and its AOF) without bound.
func RedisPrefix(t testing.TB, name string) string {
	t.Helper()
	prefix := UniqueName(name)
	t.Cleanup(func() { DeleteRedisKeys(context.Background(), RedisAddr(), "{"+prefix+":*") })
	return prefix
}

// DeleteRedisKeys deletes the keys matching pattern, best effort.
func DeleteRedisKeys(ctx context.Context, addr, pattern string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	batch := make([]string, 0, 500)
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}

// Embedded starts the embedded default's in-process Kafka and Redis
// (internal/embedded, what `make demo` runs on) for one test and stops them
// when it ends: contract tests run on it beside the real services to prove
// the demo's backends keep the same promises.
func Embedded(t testing.TB) *embedded.Stack {
	t.Helper()
	s, err := embedded.Start(context.Background(), embedded.Options{})
	if err != nil {
		t.Fatalf("embedded stack: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}
