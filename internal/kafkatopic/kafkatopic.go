// Package kafkatopic creates a Kafka topic unless it exists and waits until it
// can be used: the one topic check of the services and the tests.
//
// Auto-creation is off on our brokers, and the partition count is part of the
// contract (murmur2 maps a drone to a partition by the count, and the
// alerter's per-partition state relies on that mapping), so an existing topic
// with another count is an error unless the caller says any count will do.
package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// ErrPartitionCount: the topic exists with another partition count than required.
var ErrPartitionCount = errors.New("partition count differs")

// Spec says which topic Ensure makes sure of.
type Spec struct {
	Name        string
	Partitions  int           // created with this many; an existing topic must have exactly this many unless AnyCount
	Replication int           // 0 (or -1) means the broker's default (-1 in CreateTopics)
	AnyCount    bool          // accept an existing topic with another count (its count is returned)
	Wait        time.Duration // how long to wait for the topic and every partition leader; 0 means 60s
	// Configs are topic configs set when Ensure creates the topic (an
	// existing topic keeps its own), e.g. retention.ms.
	Configs map[string]string
	// Transport carries the requests. nil: a fresh *kafka.Transport closed on
	// return (pooled DefaultTransport conns go stale across broker restarts).
	Transport kafka.RoundTripper
}

const (
	defaultWait    = 60 * time.Second
	requestTimeout = 15 * time.Second
	maxDelay       = 500 * time.Millisecond
	maxNameLen     = 249 // Kafka's limit on a topic name
)

// Ensure creates the topic unless it exists, waits until every partition has a leader, and returns its partition count.
// A count mismatch is returned at once, wrapping ErrPartitionCount, with text "topic X has N partitions, want M";
// the returned count is then the topic's.
// Invalid topic / invalid partition number errors are returned at once too; other errors are retried until Wait.
func Ensure(ctx context.Context, brokers []string, s Spec) (int, error) {
	if err := s.validate(); err != nil {
		return 0, err
	}
	if len(brokers) == 0 {
		return 0, fmt.Errorf("topic %s: no brokers", s.Name)
	}
	wait := s.Wait
	if wait == 0 {
		wait = defaultWait
	}
	tr := s.Transport
	if tr == nil {
		t := &kafka.Transport{}
		defer t.CloseIdleConnections()
		tr = t
	}
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: requestTimeout, Transport: tr}

	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	created, denied := false, false
	delay := 10 * time.Millisecond
	var last error // the last error not caused by wctx ending
	for {
		n, err := s.try(wctx, c, &created, &denied)
		if err == nil {
			return n, nil
		}
		var perm permanent
		if errors.As(err, &perm) {
			return n, perm.error
		}
		if wctx.Err() == nil || last == nil {
			last = err
		}
		if wctx.Err() == nil {
			select {
			case <-wctx.Done():
			case <-time.After(delay):
			}
			delay = min(2*delay, maxDelay)
		}
		if err := ctx.Err(); err != nil {
			if errors.Is(last, err) {
				return 0, fmt.Errorf("topic %s: %w", s.Name, err)
			}
			return 0, fmt.Errorf("topic %s: %w (last: %v)", s.Name, err, last)
		}
		if wctx.Err() != nil {
			return 0, fmt.Errorf("topic %s not ready after %v: %w", s.Name, wait, last)
		}
	}
}

// try is one round: create unless done already, then check the metadata.
// A principal without CREATE on the topic (least privilege: the admin
// creates the topics) gets TOPIC_AUTHORIZATION_FAILED whether the topic
// exists or not; the topic is then only checked, and *denied set so that
// a missing topic is said plainly instead of waited for.
func (s Spec) try(ctx context.Context, c *kafka.Client, created, denied *bool) (int, error) {
	if !*created {
		rf := s.Replication
		if rf == 0 {
			rf = -1
		}
		var entries []kafka.ConfigEntry
		for _, k := range slices.Sorted(maps.Keys(s.Configs)) {
			entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: s.Configs[k]})
		}
		res, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: s.Name, NumPartitions: s.Partitions, ReplicationFactor: rf, ConfigEntries: entries,
		}}})
		if err != nil {
			return 0, fmt.Errorf("create topic %s: %w", s.Name, err)
		}
		err = res.Errors[s.Name]
		if errors.Is(err, kafka.TopicAuthorizationFailed) {
			*denied, err = true, nil
		}
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			err = fmt.Errorf("create topic %s: %w", s.Name, err)
			// Retrying cannot fix these; a replication factor above the
			// live broker count can be fixed by a broker joining, so it is
			// retried.
			if errors.Is(err, kafka.InvalidTopic) || errors.Is(err, kafka.InvalidPartitionNumber) {
				return 0, permanent{err}
			}
			return 0, err
		}
		*created = true
	}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.Name}})
	if err != nil {
		return 0, fmt.Errorf("metadata of topic %s: %w", s.Name, err)
	}
	if len(md.Topics) != 1 {
		return 0, fmt.Errorf("topic %s not in metadata yet", s.Name)
	}
	t := md.Topics[0]
	switch {
	case errors.Is(t.Error, kafka.TopicAuthorizationFailed):
		return 0, permanent{fmt.Errorf("topic %s: this principal may neither create nor describe it: %w", s.Name, t.Error)}
	case *denied && errors.Is(t.Error, kafka.UnknownTopicOrPartition):
		return 0, permanent{fmt.Errorf("topic %s does not exist and this principal may not create it (create it as the admin, docs/operations.md): %w", s.Name, t.Error)}
	case t.Error != nil:
		return 0, fmt.Errorf("topic %s not in metadata yet: %w", s.Name, t.Error)
	}
	n := len(t.Partitions)
	if n == 0 {
		return 0, fmt.Errorf("topic %s has no partitions in metadata yet", s.Name)
	}
	if !s.AnyCount && n != s.Partitions {
		return n, permanent{fmt.Errorf("topic %s has %d partitions, want %d: %w", s.Name, n, s.Partitions, ErrPartitionCount)}
	}
	for _, p := range t.Partitions {
		if p.Error != nil || p.Leader.Host == "" {
			return 0, fmt.Errorf("topic %s partition %d has no leader yet", s.Name, p.ID)
		}
	}
	return n, nil
}

// validate rejects what no broker would accept, before any dial. The name
// rules are Kafka's (org.apache.kafka.common.internals.Topic.validate).
func (s Spec) validate() error {
	switch {
	case s.Name == "":
		return errors.New("topic name is empty")
	case s.Name == "." || s.Name == "..":
		return fmt.Errorf("topic name %q is not allowed", s.Name)
	case len(s.Name) > maxNameLen:
		return fmt.Errorf("topic name %.20q... is %d bytes long, at most %d allowed", s.Name, len(s.Name), maxNameLen)
	case s.Partitions < 1:
		return fmt.Errorf("topic %s: partitions %d, want at least 1", s.Name, s.Partitions)
	case s.Replication < -1:
		return fmt.Errorf("topic %s: replication %d, want at least 1, or 0 or -1 for the broker's default", s.Name, s.Replication)
	case s.Wait < 0:
		return fmt.Errorf("topic %s: negative wait %v", s.Name, s.Wait)
	}
	for i := 0; i < len(s.Name); i++ {
		switch b := s.Name[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-':
		default:
			return fmt.Errorf("topic name %q: byte %q at %d is not in [a-zA-Z0-9._-]", s.Name, b, i)
		}
	}
	return nil
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }
