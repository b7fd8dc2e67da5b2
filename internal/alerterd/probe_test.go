package alerterd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestProbes: the up gauges follow their checks, the first at once; and
// over the real services the alerter's Redis and Kafka probes read 1, and
// 0 against ports nothing listens on.
func TestProbes(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	var failing atomic.Bool
	p := newProbe(reg, "thing", "nofly_test_thing_up", "test", func(context.Context) error {
		if failing.Load() {
			return errors.New("away")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); runProbes(ctx, 10*time.Millisecond, []*probe{p}, log) }()
	want := func(v float64) {
		t.Helper()
		testenv.CheckFor(t, 5*time.Second, func() error {
			if got := testutil.ToFloat64(p.gauge); got != v {
				return errors.New("gauge not yet " + map[float64]string{0: "0", 1: "1"}[v])
			}
			return nil
		})
	}
	want(1)
	failing.Store(true)
	want(0)
	failing.Store(false)
	want(1)
	cancel()
	<-done

	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, c := range []struct {
		name          string
		redis, broker string
		want          float64
	}{{"up", raddr, brokers[0], 1}, {"down", closed, closed, 0}} {
		reg := prometheus.NewRegistry()
		rc := redis.NewClient(&redis.Options{Addr: c.redis, MaxRetries: -1})
		ps, closeProbes := newProbes(reg, rc, kafkaconn.Conn{}, []string{c.broker}, topic)
		for _, p := range ps {
			p.run(context.Background(), log)
			if got := testutil.ToFloat64(p.gauge); got != c.want {
				t.Errorf("%s: %s probe %v, want %v", c.name, p.name, got, c.want)
			}
		}
		closeProbes()
		rc.Close()
		if n, err := testutil.GatherAndCount(reg, "nofly_alerter_redis_up", "nofly_alerter_kafka_up"); err != nil || n != 2 {
			t.Errorf("%s: %d up gauges registered (%v), want 2", c.name, n, err)
		}
	}
}
