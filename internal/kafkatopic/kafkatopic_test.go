package kafkatopic_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// countingTransport fails every request with err and counts them.
type countingTransport struct {
	n   atomic.Int64
	err error
}

func (c *countingTransport) RoundTrip(ctx context.Context, _ net.Addr, _ kafka.Request) (kafka.Response, error) {
	c.n.Add(1)
	return nil, c.err
}

// TestValidate: a spec no broker accepts fails before any request.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec kafkatopic.Spec
		want string
	}{
		{"empty name", kafkatopic.Spec{Partitions: 1}, "empty"},
		{"dot", kafkatopic.Spec{Name: ".", Partitions: 1}, "not allowed"},
		{"dotdot", kafkatopic.Spec{Name: "..", Partitions: 1}, "not allowed"},
		{"too long", kafkatopic.Spec{Name: strings.Repeat("a", 250), Partitions: 1}, "at most 249"},
		{"slash", kafkatopic.Spec{Name: "a/b", Partitions: 1}, `'/'`},
		{"space", kafkatopic.Spec{Name: "a b", Partitions: 1}, `' '`},
		{"zero partitions", kafkatopic.Spec{Name: "t", Partitions: 0}, "partitions 0"},
		{"negative partitions", kafkatopic.Spec{Name: "t", Partitions: -3}, "partitions -3"},
		{"replication -2", kafkatopic.Spec{Name: "t", Partitions: 1, Replication: -2}, "replication -2"},
		{"negative wait", kafkatopic.Spec{Name: "t", Partitions: 1, Wait: -time.Second}, "negative wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &countingTransport{err: errors.New("must not be called")}
			tc.spec.Transport = tr
			n, err := kafkatopic.Ensure(context.Background(), []string{"127.0.0.1:1"}, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ensure = %d, %v; want an error containing %q", n, err, tc.want)
			}
			if got := tr.n.Load(); got != 0 {
				t.Errorf("%d requests sent for an invalid spec", got)
			}
		})
	}
	// The longest legal name passes validation (and reaches the transport).
	tr := &countingTransport{err: errors.New("unreachable")}
	_, err := kafkatopic.Ensure(context.Background(), []string{"127.0.0.1:1"},
		kafkatopic.Spec{Name: strings.Repeat("a", 249), Partitions: 1, Wait: 50 * time.Millisecond, Transport: tr})
	if err == nil || tr.n.Load() == 0 {
		t.Fatalf("249-byte name: err %v after %d requests, want the transport's error", err, tr.n.Load())
	}
}

// TestRetryUntilWait: a transient error is retried, and Ensure gives up
// after Wait with that error.
func TestRetryUntilWait(t *testing.T) {
	boom := errors.New("boom")
	tr := &countingTransport{err: boom}
	start := time.Now()
	_, err := kafkatopic.Ensure(context.Background(), []string{"127.0.0.1:1"},
		kafkatopic.Spec{Name: "t", Partitions: 1, Wait: 300 * time.Millisecond, Transport: tr})
	took := time.Since(start)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "not ready after 300ms") {
		t.Fatalf("err %v, want boom after 300ms", err)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("gave up after %v, want about 300ms", took)
	}
	if n := tr.n.Load(); n < 3 {
		t.Errorf("%d attempts in 300ms, want retries", n)
	}
}

// TestCancelUnreachable: cancelling ctx ends the wait at once.
func TestCancelUnreachable(t *testing.T) {
	tr := &countingTransport{err: errors.New("boom")}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := kafkatopic.Ensure(ctx, []string{"127.0.0.1:1"}, kafkatopic.Spec{Name: "t", Partitions: 1, Transport: tr})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("returned %v after the cancel", took)
	}
}

// topic returns a unique topic name, deleted when the test ends.
func topic(t *testing.T, brokers []string, prefix string) string {
	t.Helper()
	name := testenv.UniqueName("kafkatopic-" + prefix)
	t.Cleanup(func() { deleteTopics(brokers, name) })
	return name
}

func deleteTopics(brokers []string, names ...string) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
	_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: names})
}

// partitions asks the broker how many partitions name has, each with a leader.
func partitions(t *testing.T, brokers []string, name string) int {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
	md, err := c.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		t.Fatalf("topic %s: metadata %+v", name, md.Topics)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader.Host == "" {
			t.Errorf("topic %s partition %d has no leader after Ensure", name, p.ID)
		}
	}
	return len(md.Topics[0].Partitions)
}

// TestEnsureBroker runs Ensure against the shared broker.
func TestEnsureBroker(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx := context.Background()

	t.Run("create then exists", func(t *testing.T) {
		name := topic(t, brokers, "create")
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		for i, s := range []kafkatopic.Spec{
			{Name: name, Partitions: 3},
			{Name: name, Partitions: 3},                                        // exists, same count
			{Name: name, Partitions: 3, Transport: tr},                         // the caller's transport
			{Name: name, Partitions: 3, Replication: 1, Wait: 5 * time.Second}, // explicit replication
		} {
			n, err := kafkatopic.Ensure(ctx, brokers, s)
			if err != nil || n != 3 {
				t.Fatalf("call %d: Ensure = %d, %v; want 3, nil", i, n, err)
			}
		}
		if n := partitions(t, brokers, name); n != 3 {
			t.Errorf("broker says %d partitions, want 3", n)
		}
	})

	t.Run("other count", func(t *testing.T) {
		name := topic(t, brokers, "other")
		if _, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: name, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: name, Partitions: 5})
		if !errors.Is(err, kafkatopic.ErrPartitionCount) {
			t.Fatalf("Ensure = %d, %v; want ErrPartitionCount", n, err)
		}
		if want := fmt.Sprintf("topic %s has 2 partitions, want 5", name); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		if n != 2 {
			t.Errorf("count %d returned with the error, want the topic's 2", n)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("mismatch reported after %v, want at once", took)
		}
		if n := partitions(t, brokers, name); n != 2 {
			t.Errorf("broker says %d partitions after the mismatch, want 2 untouched", n)
		}
	})

	t.Run("any count", func(t *testing.T) {
		name := topic(t, brokers, "any")
		if _, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: name, Partitions: 4}); err != nil {
			t.Fatal(err)
		}
		n, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: name, Partitions: 1, AnyCount: true})
		if err != nil || n != 4 {
			t.Fatalf("Ensure = %d, %v; want the existing 4, nil", n, err)
		}
		// AnyCount still creates with Partitions when the topic is missing.
		fresh := topic(t, brokers, "anyfresh")
		n, err = kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: fresh, Partitions: 2, AnyCount: true})
		if err != nil || n != 2 {
			t.Fatalf("fresh: Ensure = %d, %v; want 2, nil", n, err)
		}
	})

	t.Run("invalid topic from the broker", func(t *testing.T) {
		// Names that differ only in '.' versus '_' collide in Kafka's metric
		// names: the broker refuses the second with INVALID_TOPIC_EXCEPTION,
		// which local validation cannot know.
		base := testenv.UniqueName("kafkatopic-collide")
		dotted, underscored := base+".x", base+"_x"
		t.Cleanup(func() { deleteTopics(brokers, dotted, underscored) })
		if _, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: dotted, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: underscored, Partitions: 1})
		if !errors.Is(err, kafka.InvalidTopic) {
			t.Fatalf("err %v, want kafka.InvalidTopic", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("invalid topic reported after %v, want at once", took)
		}
	})

	// One node cannot hold 3 replicas: InvalidReplicationFactor, which a
	// broker joining would fix, so it is retried until Wait or ctx.
	t.Run("retried until wait", func(t *testing.T) {
		name := topic(t, brokers, "rf3")
		start := time.Now()
		_, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: name, Partitions: 1, Replication: 3, Wait: time.Second})
		took := time.Since(start)
		if !errors.Is(err, kafka.InvalidReplicationFactor) || !strings.Contains(err.Error(), "not ready after 1s") {
			t.Fatalf("err %v, want InvalidReplicationFactor after 1s", err)
		}
		if took < time.Second || took > 10*time.Second {
			t.Errorf("gave up after %v, want about 1s", took)
		}
	})

	t.Run("ctx cancel", func(t *testing.T) {
		name := topic(t, brokers, "cancel")
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		_, err := kafkatopic.Ensure(cctx, brokers, kafkatopic.Spec{Name: name, Partitions: 1, Replication: 3})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "replication") {
			t.Fatalf("err %v, want context.Canceled with the last error", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("returned %v after start, want soon after the cancel at 300ms", took)
		}
	})
}
