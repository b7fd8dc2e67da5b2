package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/geofence"
)

// loadZones reads the zone file with the default options and builds its
// index (tests and benchmarks; serve and replay use Config.zoneSource).
func loadZones(path string) (*geofence.Index, error) {
	ix, _, err := zoneSource{path: path}.load()
	return ix, err
}

// errPartitionCount: the events topic exists with another partition count
// than the telemetry topic. Partition p's outbox goes to partition p, so the
// counts must match.
var errPartitionCount = errors.New("partition counts differ")

// ensureTopic creates topic with partitions partitions unless it exists,
// waits until every partition has a leader, and returns the topic's
// partition count. With exact, an existing topic with another count is an
// error (errPartitionCount), reported at once.
func ensureTopic(ctx context.Context, brokers []string, topic string, partitions int, exact bool) (int, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 15 * time.Second, Transport: tr}
	deadline := time.Now().Add(60 * time.Second)
	created := false
	for {
		n, err := func() (int, error) {
			if !created {
				res, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
					Topic: topic, NumPartitions: partitions, ReplicationFactor: -1}}})
				if err != nil {
					return 0, fmt.Errorf("create topic %s: %w", topic, err)
				}
				if err := res.Errors[topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
					return 0, fmt.Errorf("create topic %s: %w", topic, err)
				}
				created = true
			}
			md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
			if err != nil {
				return 0, err
			}
			if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
				return 0, fmt.Errorf("topic %s not in metadata yet", topic)
			}
			n := len(md.Topics[0].Partitions)
			if exact && n != partitions {
				return n, fmt.Errorf("topic %s has %d partitions, want %d: %w", topic, n, partitions, errPartitionCount)
			}
			for _, p := range md.Topics[0].Partitions {
				if p.Error != nil || p.Leader.Host == "" {
					return n, fmt.Errorf("topic %s partition %d has no leader yet", topic, p.ID)
				}
			}
			return n, nil
		}()
		if err == nil || errors.Is(err, errPartitionCount) {
			return n, err
		}
		if time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// newRedisClient returns the store's client: no automatic retries, because
// the outcome of a failed script is unknown and only a reload tells it.
func newRedisClient(addr, name string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ClientName: name, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
}
