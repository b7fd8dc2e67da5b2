package main

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts/scenario"
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
// alerters wrote to (each outbox event once, in its partition).
func TestCrashProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := reference(loadRefZones(t, zonesPath()), sc.Records)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	cfg := p.config()
	alerterBinary(t)
	produced := p.produceInBackground(sc.Records, 2500)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const kills = 10
	// Kill i lands near (i+1)/(kills+1) of the stream, jittered, so the kills
	// spread over the whole scenario however fast the alerter catches up
	// after a restart; a target is never past the last record, so no wait
	// can outlive the stream.
	total := int64(len(sc.Records))
	gap := total / (kills + 1)
	midStream := 0
	for i := 0; i < kills; i++ {
		pr := p.startProc(fmt.Sprintf("alerter-%d", i), cfg)
		from, _ := p.appliedTotal()
		target := gap*int64(i+1) + randBetween(rng, -gap/3, gap/3)
		target = min(max(target, from+200), total)
		p.waitApplied(target, 90*time.Second)
		pr.kill()
		at, _ := p.appliedTotal()
		if at < total {
			midStream++
		}
		t.Logf("kill %d: SIGKILL after %d of %d records applied", i+1, at, total)
	}
	if midStream < kills-2 {
		t.Errorf("only %d of %d kills landed while records were still to apply", midStream, kills)
	}
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
	want := reference(loadRefZones(t, zonesPath()), sc.Records)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	cfg := p.config()
	alerterBinary(t)
	produced := p.produceInBackground(sc.Records, 2500)
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

// TestZombieProof: an alerter frozen with SIGSTOP until its partitions
// moved to another, then resumed with fetched records in hand: its commits
// are refused (fenced) and no event is duplicated.
func TestZombieProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := reference(loadRefZones(t, zonesPath()), sc.Records)
	p := newPipeline(t, brokers, raddr, 6)
	cfg := p.config()
	alerterBinary(t)
	// All records up front and small batches: the zombie is busy, one
	// batch committing and the next applied and queued, when it is frozen;
	// when it resumes it sends the queued batch before its heartbeat ends
	// the generation (timing decides how often; the refusal itself is
	// proven deterministically by TestStoreContract and
	// TestEngineRestartEquivalence).
	p.produce(sc.Records)
	produced := closed()
	zcfg := cfg
	zcfg.Batch = 20
	zombie := p.startProc("zombie", zcfg)
	p.waitApplied(8000, 90*time.Second)
	zombie.signal(syscall.SIGSTOP)
	frozenAt, _ := p.appliedTotal()
	if frozenAt >= int64(len(sc.Records))-5000 {
		t.Fatalf("zombie frozen at %d of %d records: too late to matter", frozenAt, len(sc.Records))
	}
	heir := p.startProc("heir", cfg)
	// The heir gets every partition once the zombie's session expired, and
	// moves the version on.
	testenv.CheckFor(t, 90*time.Second, func() error {
		n, err := heir.metric("nofly_alerter_assigned_partitions")
		if err == nil && n != float64(p.partitions) {
			err = fmt.Errorf("heir owns %v partitions", n)
		}
		return err
	})
	p.waitApplied(frozenAt+3000, 90*time.Second)
	zombie.signal(syscall.SIGCONT)
	t.Logf("zombie frozen at %d records applied, resumed after the heir took over", frozenAt)
	p.finish(want, produced)
	fenced, err := zombie.metric("nofly_alerter_commits_fenced_total")
	t.Logf("zombie's fenced commits: %v (%v)", fenced, err)
	zombie.stop()
	heir.stop()
	t.Logf("zombie log:\n%s", zombie.tail())
}
