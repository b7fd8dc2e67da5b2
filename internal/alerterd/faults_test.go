package alerterd

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestRedisConnectionsDroppedProof: the alerter's (a subprocess) Redis connections are
// closed (CLIENT KILL) every few milliseconds while it works, so scripts
// fail before, during and after they run; the alerter reloads and the
// outbox equals the reference.
func TestRedisConnectionsDroppedProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, raddr, 6)
	cfg := p.config()
	alerterBinary(t)
	p.produceAt(sc.Records, sc.Received)
	a := p.startProc("alerter", cfg)
	// The kills begin once the alerter works: a connection dropped while
	// it starts (before it takes a batch) ends the start with the error,
	// for its supervisor to start it again, which is not what this proves.
	a.up(60 * time.Second)
	testenv.CheckFor(t, 60*time.Second, a.healthz)
	ctx, cancel := context.WithCancel(context.Background())
	kills := make(chan int)
	var killed atomic.Int64
	go func() {
		n := 0
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				kills <- n
				return
			case <-tick.C:
				n += testenv.KillRedisClients(ctx, p.rc, "nofly-alerter:"+cfg.Group)
				killed.Store(int64(n))
			}
		}
	}()
	p.waitApplied(int64(len(sc.Records))/2, 120*time.Second)
	// On a loaded machine the first half can be applied before a kill
	// lands: the killing goes on until one has (the rest of the run is
	// then still under fire).
	testenv.CheckFor(t, 60*time.Second, func() error {
		if killed.Load() == 0 {
			return errors.New("no alerter connection killed yet")
		}
		return nil
	})
	cancel()
	n := <-kills
	if n == 0 {
		t.Fatal("no connection was killed")
	}
	t.Logf("%d alerter connections killed during the first half of the run", n)
	p.finish(want, closed())
	a.stop()
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// TestRedisRestartProof: a private Redis (AOF, appendfsync always) killed
// with SIGKILL mid-run and started again, then stopped and started again;
// the outbox equals the reference.
func TestRedisRestartProof(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	r := testenv.StartRedis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, r.Addr(), 6)
	cfg := p.config()
	alerterBinary(t)
	produced := p.produceInBackground(sc.Records, sc.Received, 5000)
	a := p.startProc("alerter", cfg)
	p.waitApplied(10000, 120*time.Second)
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, _ := p.appliedTotal()
	t.Logf("redis SIGKILLed and restarted; %d records applied", at)
	p.waitApplied(at+10000, 120*time.Second)
	if err := r.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, _ = p.appliedTotal()
	t.Logf("redis restarted; %d records applied", at)
	p.finish(want, produced)
	a.stop()
}

// TestKafkaRestartProof: a private Kafka broker restarted mid-run; the
// alerter rejoins and the outbox equals the reference.
func TestKafkaRestartProof(t *testing.T) {
	t.Parallel()
	k := testenv.StartKafka(t)
	raddr := testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, k.Brokers(), raddr, 6)
	cfg := p.config()
	alerterBinary(t)
	p.produceAt(sc.Records, sc.Received)
	a := p.startProc("alerter", cfg)
	p.waitApplied(15000, 120*time.Second)
	if err := k.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, _ := p.appliedTotal()
	t.Logf("kafka restarted at %d records applied", at)
	p.finish(want, closed())
	a.stop()
}
