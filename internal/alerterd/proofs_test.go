package alerterd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// finish waits until the alerters applied every record, then compares the
// outbox with the reference.
func (p *pipeline) finish(want []refEvent, produced <-chan struct{}) {
	t := p.t
	select {
	case <-produced:
	case <-time.After(120 * time.Second):
		t.Fatal("producer did not finish within 120s")
	}
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	compareEvents(t, t.Name(), want, eventsFromNDJSON(t, p.outbox()))
}

// TestCrashProof: the alerter as a subprocess, SIGKILLed at random moments
// (at least 10 times, each after a random number of further records were
// applied, so mid-batch, mid-commit, mid-fetch or mid-dispatch) and
// restarted; the final outbox equals the reference, 0 missing and 0
// duplicate, and so does the events topic the dispatchers of the killed
// alerters wrote to (each outbox event once, in its partition). The drones
// report pilots (scenario.WithOperators): every raise carries the pilot as
// known at it, through Kafka, the states in Redis and the restarts, and
// the reference remembers it on its own.
func TestCrashProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	sc.Records = scenario.WithOperators(sc.Records)
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	cfg := p.config()
	alerterBinary(t)
	gate := p.produceGated(sc.Records, sc.Received, 2500)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const kills = 10
	// The stream is held while an alerter starts and let on once it owns
	// the partitions; it is killed after a random half to one gap of
	// further records, while the records flow (before this, the stream ran
	// out after 6 kills on a fast machine, the restarts outlasting it).
	total := int64(len(sc.Records))
	gap := total / (kills + 1)
	midStream, behind := 0, 0
	for i := 0; i < kills; i++ {
		pr := p.startProc(fmt.Sprintf("alerter-%d", i), cfg)
		testenv.CheckFor(t, 90*time.Second, func() error {
			n, err := pr.metric("nofly_alerter_assigned_partitions")
			if err == nil && n != float64(p.partitions) {
				err = fmt.Errorf("%s owns %v of %d partitions", pr.name, n, p.partitions)
			}
			return err
		})
		gate.set(total)
		from, _ := p.appliedTotal()
		target := min(from+randBetween(rng, gap/2, gap), total-1)
		p.waitApplied(target, 90*time.Second)
		// A random moment in the work on the next burst of records:
		// mid-fetch, mid-batch, mid-commit or mid-dispatch.
		if !gate.awaitWrite(10 * time.Second) {
			t.Fatal("the producer wrote nothing for 10 s")
		}
		time.Sleep(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
		written := gate.produced()
		pr.kill()
		gate.set(0)
		at, _ := p.appliedTotal()
		if at < total {
			midStream++
		}
		if at < written {
			behind++
		}
		t.Logf("kill %d: SIGKILL after %d of %d records applied, %d written", i+1, at, total, written)
	}
	t.Logf("%d of %d kills landed with written records still to apply", behind, kills)
	if midStream < kills-2 {
		t.Errorf("only %d of %d kills landed before the end of the stream", midStream, kills)
	}
	gate.set(total)
	produced := gate.done
	last := p.startProc("alerter-final", cfg)
	p.finish(want, produced)
	p.checkEventsTopic()
	last.stop()
}

// TestRebalanceProof: 1 → 3 → 1 alerter processes in one group while the
// records flow; the outbox equals the reference. Dispatch is on: as the
// partitions move, so do their dispatchers (the group keeps one per
// partition), and the events topic holds every event exactly once.
func TestRebalanceProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	cfg := p.config()
	alerterBinary(t)
	produced := p.produceInBackground(sc.Records, sc.Received, 2500)
	a := p.startProc("a", cfg)
	p.waitApplied(5000, 90*time.Second)
	b, c := p.startProc("b", cfg), p.startProc("c", cfg)
	// Wait until all three own partitions and have committed batches.
	testenv.CheckFor(t, 90*time.Second, func() error {
		for _, pr := range []*proc{a, b, c} {
			n, err := pr.metric("nofly_alerter_assigned_partitions")
			if err != nil {
				return err
			}
			commits, err := pr.metric("nofly_alerter_commits_total")
			if err != nil {
				return err
			}
			if n < 1 || commits < 1 {
				return fmt.Errorf("%s: %v partitions, %v commits", pr.name, n, commits)
			}
		}
		return nil
	})
	for _, pr := range []*proc{a, b, c} {
		if err := pr.healthz(); err != nil {
			t.Errorf("%s /healthz: %v", pr.name, err)
		}
	}
	// Each runs the dispatchers of the partitions it owns.
	testenv.CheckFor(t, 60*time.Second, func() error {
		for _, pr := range []*proc{a, b, c} {
			n, err := pr.metricSum("nofly_outbox_delivered_total", `output="kafka"`)
			if err != nil {
				return err
			}
			if n < 1 {
				return fmt.Errorf("%s: no event dispatched to the events topic yet", pr.name)
			}
		}
		return nil
	})
	at, _ := p.appliedTotal()
	t.Logf("3 alerters share the partitions at %d records applied", at)
	b.stop()
	c.stop()
	testenv.CheckFor(t, 90*time.Second, func() error {
		n, err := a.metric("nofly_alerter_assigned_partitions")
		if err == nil && n != float64(p.partitions) {
			err = fmt.Errorf("a owns %v partitions", n)
		}
		return err
	})
	at, _ = p.appliedTotal()
	t.Logf("back to 1 alerter at %d records applied", at)
	p.finish(want, produced)
	p.checkEventsTopic()
	a.stop()
}

// TestZombieProof: an alerter frozen with a batch applied and its commit
// not yet sent, until its partitions moved to another alerter (the heir)
// and their versions moved on, then resumed: that commit is refused
// (fenced), the zombie writes nothing more (it stops the partition, and
// after it rejoined it reloads from Redis), and no event is duplicated,
// neither in the outbox nor in alerts.events read committed (the zombie's
// dispatchers, frozen with it, are fenced by the heir's transactional ids).
//
// The freeze is the test-only fault point of faults.go: the zombie stops
// itself (SIGSTOP) just before its zombieStopAt-th batch commit, so the
// stale commit is sent on every run, whatever the timing of its heartbeat.
func TestZombieProof(t *testing.T) {
	t.Parallel()
	const zombieStopAt = 40 // commits of up to 200 records: about 8000 of the 52000 records
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	cfg := p.config()
	alerterBinary(t)
	p.produceAt(sc.Records, sc.Received)
	total := int64(len(sc.Records))
	// startProc's cleanup kills (SIGKILL) both if the test fails.
	zombie := p.startProc("zombie", cfg, fmt.Sprintf("%s=%d", faultStopBeforeCommitEnv, zombieStopAt))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("zombie log:\n%s", zombie.tail())
		}
	})
	zombie.waitStopped(90 * time.Second)
	stop := zombie.faultStop()
	frozenAt, err := p.appliedTotal()
	if err != nil {
		t.Fatal(err)
	}
	if frozenAt == 0 || frozenAt >= total-5000 {
		t.Fatalf("zombie frozen at %d of %d records: want some applied and at least 5000 to go", frozenAt, total)
	}
	t.Logf("zombie stopped itself before commit %d (partition %d, generation %d, expected version %d) at %d of %d records applied",
		zombieStopAt, stop.Partition, stop.Generation, stop.Expected, frozenAt, total)

	heir := p.startProc("heir", cfg)
	// The heir gets every partition once the zombie's session expired, and
	// applies the rest of the stream: every partition's version moves past
	// the one the zombie's batches name.
	testenv.CheckFor(t, 90*time.Second, func() error {
		n, err := heir.metric("nofly_alerter_assigned_partitions")
		if err == nil && n != float64(p.partitions) {
			err = fmt.Errorf("heir owns %v partitions", n)
		}
		return err
	})
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	if snap, err := p.store().Load(context.Background(), stop.Partition); err != nil || snap.Applied <= stop.Expected {
		t.Fatalf("partition %d at version %d (%v): the heir did not move it past the zombie's %d", stop.Partition, snap.Applied, err, stop.Expected)
	}
	before, err := p.storeState()
	if err != nil {
		t.Fatal(err)
	}

	zombie.signal(syscall.SIGCONT)
	testenv.CheckFor(t, 60*time.Second, func() error {
		n, err := zombie.metric("nofly_alerter_commits_fenced_total")
		if err == nil && n < 1 {
			err = fmt.Errorf("zombie: %v fenced commits", n)
		}
		return err
	})
	// The zombie's generation ends; it rejoins (after its old partition
	// goroutines returned) and shares the partitions with the heir,
	// loading them from Redis.
	restarts := func() (started []map[string]any) {
		for _, l := range zombie.logLines("partition started") {
			if gen, _ := l["generation"].(float64); int32(gen) > stop.Generation {
				started = append(started, l)
			}
		}
		return started
	}
	testenv.CheckFor(t, 90*time.Second, func() error {
		z, err := zombie.metric("nofly_alerter_assigned_partitions")
		if err != nil {
			return err
		}
		h, err := heir.metric("nofly_alerter_assigned_partitions")
		if err != nil {
			return err
		}
		if n := len(restarts()); z < 1 || z+h != float64(p.partitions) || float64(n) < z {
			return fmt.Errorf("zombie owns %v partitions (%d restarted), heir %v", z, n, h)
		}
		return nil
	})
	fenced, err := zombie.metric("nofly_alerter_commits_fenced_total")
	if err != nil {
		t.Fatal(err)
	}
	after, err := p.storeState()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("Redis changed after the zombie resumed (nothing was left to apply):\nbefore %s\nafter  %s", before, after)
	}
	if fenced < 1 {
		t.Errorf("zombie: %v fenced commits, want at least 1", fenced)
	}
	// Each partition the zombie runs again started from Redis's version.
	restarted := restarts()
	for _, l := range restarted {
		part, _ := l["partition"].(float64)
		snap, err := p.store().Load(context.Background(), int(part))
		if err != nil {
			t.Fatal(err)
		}
		if applied, _ := l["applied"].(float64); int64(applied) != snap.Applied {
			t.Errorf("zombie restarted partition %v from version %v, Redis has %d", part, applied, snap.Applied)
		}
	}
	t.Logf("zombie resumed after the heir applied the whole stream: %v fenced commits, Redis unchanged, %d partitions restarted from Redis", fenced, len(restarted))
	p.finish(want, closed())
	// alerts.events too: the zombie's dispatchers were frozen with the rest
	// of it, some perhaps mid-transaction; the heir's writers fenced them.
	p.checkEventsTopic()
	if n, err := zombie.metricSum("nofly_outbox_fenced_total"); err == nil {
		t.Logf("zombie's Kafka batches refused by the broker (fenced): %v", n)
	}
	zombie.stop()
	heir.stop()
}
