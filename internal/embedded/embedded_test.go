package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestXInfoEntriesAddedNeverAheadOfTheStream: while clients append to a
// stream (plain XADDs, and XADDs from a Lua script, as the commit script
// makes them) and nothing is ever trimmed, every XINFO STREAM reports
// entries-added equal to the length it reports. The alert API reads
// entries-added above length as "trimmed" and ends a live stream with a
// 410: counting an XADD before it was applied did that to a stream that
// started while the outbox was empty (CI, the embedded step).
func TestXInfoEntriesAddedNeverAheadOfTheStream(t *testing.T) {
	r, err := embedded.StartRedis(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	const key = "{p}:outbox"
	script := redis.NewScript(`return redis.call('XADD', KEYS[1], '*', 'event', ARGV[1])`)
	writers := make(chan error, 4)
	for w := range 4 {
		go func() {
			c := redis.NewClient(&redis.Options{Addr: r.Addr()})
			defer c.Close()
			for i := 0; ctx.Err() == nil; i++ {
				var err error
				if (w+i)%2 == 0 {
					err = c.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"event", "{}"}}).Err()
				} else {
					err = script.Run(ctx, c, []string{key}, "{}").Err()
				}
				if err != nil && ctx.Err() == nil {
					writers <- err
					return
				}
			}
			writers <- nil
		}()
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	reads, ahead := 0, 0
	for ctx.Err() == nil {
		info, err := c.XInfoStream(ctx, key).Result()
		if err != nil {
			if ctx.Err() != nil || strings.Contains(err.Error(), "no such key") {
				continue
			}
			t.Fatal(err)
		}
		reads++
		if info.EntriesAdded != info.Length {
			ahead++
			if ahead <= 3 {
				t.Errorf("XINFO STREAM: entries-added %d, length %d, nothing trimmed", info.EntriesAdded, info.Length)
			}
		}
	}
	for range 4 {
		if err := <-writers; err != nil {
			t.Fatal(err)
		}
	}
	if reads < 100 {
		t.Errorf("only %d XINFO reads in 3 s", reads)
	}
	if ahead > 0 {
		t.Errorf("%d of %d reads had entries-added off the length", ahead, reads)
	}
}
