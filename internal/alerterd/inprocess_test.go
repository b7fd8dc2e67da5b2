package alerterd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// member is one alerter of the group run in this process through the
// runtime package, with clients of its own.
type member struct {
	g    *consume.Group
	m    *metrics
	stop func()
}

// counter is the value of the member's counter name (-1 when absent).
func (mb *member) counter(t testing.TB, name string) float64 {
	t.Helper()
	mf, err := mb.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range mf {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// startMember starts a group member the way a demo or a benchmark would:
// alerts/consume with an injected Kafka dialer and go-redis client, its own
// outbox dispatcher and metrics registry, no subprocess and no serve().
func (p *pipeline) startMember(name string, zones *geofence.Current) *member {
	t := p.t
	cfg := p.config()
	log := testLog(t).With("member", name)
	rc := newRedisClient(cfg.RedisAddr, "inprocess-"+name)
	m := newMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := newDispatcher(ctx, cfg, kafkaconn.Conn{}, p.partitions, m, log)
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.groupOptions(rc, zones, log)
	o.Dialer = &kafka.Dialer{ClientID: "nofly-inprocess-" + name, Timeout: 10 * time.Second, DualStack: true}
	o.Registerer = m.reg
	o.Dispatcher = d.d
	g, err := consume.New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("member %s: %v", name, err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("member %s did not stop within 60s", name)
		}
		d.close()
		_ = rc.Close()
	}
	t.Cleanup(stop)
	return &member{g: g, m: m, stop: stop}
}

// TestInProcessGroupProof: two alerters in one process, started through
// alerts/consume, share the scenario's partitions: the first runs alone,
// the second joins mid-stream (a rebalance 1 -> 2), the first leaves before
// the end (2 -> 1). The outbox equals the independent reference (0
// missing, 0 duplicate) and the events topic holds every event once. It
// runs on the real services and on the embedded default (cmd/demo's
// in-process broker and Redis), which must pass the same proof.
func TestInProcessGroupProof(t *testing.T) {
	t.Parallel()
	stacks := []struct {
		name  string
		start func(t *testing.T) (brokers []string, redisAddr string)
	}{
		{"real", func(t *testing.T) ([]string, string) { return testenv.Kafka(t), testenv.Redis(t) }},
		{"embedded", func(t *testing.T) ([]string, string) {
			s := testenv.Embedded(t)
			return s.Brokers(), s.RedisAddr()
		}},
	}
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			brokers, raddr := st.start(t)
			inProcessGroupProof(t, brokers, raddr)
		})
	}
}

func inProcessGroupProof(t *testing.T, brokers []string, raddr string) {
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	ix, err := loadZones(zonesPath())
	if err != nil {
		t.Fatal(err)
	}
	var zones geofence.Current
	zones.Store(ix)

	third := len(sc.Records) / 3
	a := p.startMember("a", &zones)
	p.produceAt(sc.Records[:third], sc.Received[:third])
	testenv.CheckFor(t, 60*time.Second, func() error {
		if a.g.Processed() == 0 {
			return errors.New("a has processed nothing yet")
		}
		return nil
	})
	b := p.startMember("b", &zones)
	testenv.CheckFor(t, 60*time.Second, func() error {
		na, nb := a.g.Partitions(), b.g.Partitions()
		if na == 0 || nb == 0 || na+nb != p.partitions {
			return fmt.Errorf("partitions a=%d b=%d, want both owning some of %d", na, nb, p.partitions)
		}
		return nil
	})
	p.produceAt(sc.Records[third:2*third], sc.Received[third:2*third])
	testenv.CheckFor(t, 60*time.Second, func() error {
		if b.g.Processed() == 0 {
			return errors.New("b has processed nothing yet")
		}
		return nil
	})
	a.stop()
	aDone := a.g.Processed()
	p.produceAt(sc.Records[2*third:], sc.Received[2*third:])
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	// b may be between generations when it has caught up (a slow group
	// rebalanced again after a left): it must end up with every partition.
	testenv.CheckFor(t, 60*time.Second, func() error {
		if n := b.g.Partitions(); n != p.partitions {
			return fmt.Errorf("b runs %d partitions after a left, want %d", n, p.partitions)
		}
		return nil
	})
	t.Logf("a processed %d records, b %d", aDone, b.g.Processed())
	p.checkEventsTopic()
	b.stop()
	compareEvents(t, "two in-process alerters", want, eventsFromNDJSON(t, p.outbox()))
}
