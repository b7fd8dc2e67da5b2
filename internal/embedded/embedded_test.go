package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/embedded"
)

// TestRedisBehavesLikeTheServer: what the pipeline needs of the embedded
// Redis beyond the store contract — a default go-redis client connects
// (CLIENT SETINFO answered), keys with a TTL expire on their own, and TIME
// and stream ids follow the wall clock.
func TestRedisBehavesLikeTheServer(t *testing.T) {
	r, err := embedded.StartRedis(100 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), ClientName: "embedded-test"})
	defer c.Close()
	if err := c.Set(ctx, "lease", "x", 300*time.Millisecond).Err(); err != nil {
		t.Fatalf("SET EX through a default client: %v", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := c.Get(ctx, "lease").Err()
		if errors.Is(err, redis.Nil) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a key with a 300 ms TTL still exists after 3 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t1, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t1); d < -time.Second || d > time.Second {
		t.Errorf("TIME is %v off the wall clock", d)
	}
	time.Sleep(5 * time.Millisecond)
	id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []string{"k", "v"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	t2, _ := c.Time(ctx).Result()
	if !t2.After(t1) {
		t.Errorf("TIME did not move: %v then %v", t1, t2)
	}
	// An id is "<ms>-<n>": its ms must lie between the two TIMEs.
	var ms int64
	if _, err := fmt.Sscanf(id, "%d-", &ms); err != nil || ms < t1.UnixMilli() || ms > t2.UnixMilli() {
		t.Errorf("stream id %s is not between TIME %d and %d ms", id, t1.UnixMilli(), t2.UnixMilli())
	}
}

// TestKafkaCreatesAndServesTopics: the embedded broker answers metadata,
// creates a topic with the count asked for and round-trips a record.
func TestKafkaCreatesAndServesTopics(t *testing.T) {
	k, err := embedded.StartKafka(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(k.Brokers()...)}
	if _, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "t", NumPartitions: 3, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 {
		t.Fatalf("metadata = %+v, want topic t with 3 partitions", md.Topics)
	}
	conn, err := kafka.DialLeader(ctx, "tcp", k.Brokers()[0], "t", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteMessages(kafka.Message{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers(), Topic: "t", Partition: 2, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	found := err == nil && string(m.Value) == "v"
	if !found {
		t.Fatal("the record written to partition 2 was not read back")
	}
}
