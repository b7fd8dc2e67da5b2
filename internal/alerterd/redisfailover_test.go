//go:build cluster

package alerterd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/redislayout"
	ref "github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestClusterRedisFailoverProof: a Redis Cluster primary killed mid-run
// while its replica lags, and the replica promoted; once without and once
// with --redis-min-replicas 1. The lag is made exact: the replica is cut
// off its primary (testenv's Cut) for two seconds of the run, so every
// batch commit the primary acknowledges meanwhile is on the primary alone,
// then the primary is SIGKILLed, the replica healed and promoted, and the
// old primary restarted (it rejoins as the replica of its successor).
//
// Without protection the run measures what the failover loses: the
// records whose commit the alerter counted (its Kafka offset commit
// follows each acknowledged batch) but the promoted replica lacks, and
// what that does downstream: the alerter re-applies them and alerts.events
// holds their events twice. With --redis-min-replicas 1 nothing it counted
// is missing on the promoted replica, and the outbox and alerts.events
// equal the reference: 0 missing, 0 duplicate.
func TestClusterRedisFailoverProof(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	brokers := testenv.Kafka(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)

	t.Run("unprotected", func(t *testing.T) {
		r := runRedisFailover(t, brokers, sc, 0)
		// The fault must have bitten, or this run proves nothing.
		if r.lostCounted <= 0 {
			t.Errorf("the promoted replica lacks %d records the alerter counted as committed; the cut lost nothing", r.lostCounted)
		}
		outbox := mustCompare(t, want, r.outbox)
		events := mustCompare(t, want, r.events)
		t.Logf("without protection: %d records the alerter had committed (Kafka offsets) missing on the promoted replica, %d acknowledged by the primary alone; %v commits fenced, %v failed; "+
			"outbox after the re-apply: %v; alerts.events: %v",
			r.lostCounted, r.lostAcked, r.fenced, r.commitErrs, outbox, events)
		if outbox.NMissing > 0 || events.NMissing > 0 {
			t.Logf("events missing: the failover lost alarms outright")
		}
	})
	t.Run("min-replicas-1", func(t *testing.T) {
		r := runRedisFailover(t, brokers, sc, 1)
		if r.lostCounted > 0 {
			t.Errorf("the promoted replica lacks %d records the alerter counted as committed", r.lostCounted)
		}
		compareEvents(t, "outbox after the failover", want, r.outbox)
		compareEvents(t, "alerts.events after the failover", want, r.events)
		t.Logf("with --redis-min-replicas 1: 0 records counted as committed missing on the promoted replica (%d acknowledged by the primary alone, never counted); %v commits fenced, %v failed (not replicated or the primary gone); partitions %v stalled %v, until the old primary was back as a replica",
			r.lostAcked, r.fenced, r.commitErrs, r.parts, r.stalled.Round(time.Millisecond))
	})
}

// failoverRun is what one failover run measured.
type failoverRun struct {
	parts []int // the partitions the killed primary served
	// lostCounted: records past the promoted replica's applied offset up
	// to the group's committed Kafka offset (what the alerter counted as
	// committed), summed over parts; lostAcked: up to the killed primary's
	// own applied offset (what it had run, counted or not).
	lostCounted, lostAcked int64
	fenced, commitErrs     float64
	// stalled: from the kill until every one of parts applied past its
	// offset at the kill.
	stalled        time.Duration
	outbox, events []refEvent
}

func mustCompare(t *testing.T, want, got []refEvent) ref.Diff {
	t.Helper()
	d, err := ref.Compare(want, got)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func runRedisFailover(t *testing.T, brokers []string, sc *scenario.Scenario, minReplicas int) failoverRun {
	recs := sc.Records
	ctx := context.Background()
	began := time.Now()
	rc := testenv.StartRedisCluster(t, true)
	t.Logf("redis cluster of 3 primaries and 3 replicas started in %v", time.Since(began).Round(time.Millisecond))
	p := newPipeline(t, brokers, strings.Join(rc.Addrs(), ","), 6).withEvents()
	p.cluster = rc.Client(t)
	by := spreadPrefix(t, rc, p)

	// The victim: the primary serving the most partitions.
	victim := 0
	for n, parts := range by {
		if victim == 0 || len(parts) > len(by[victim]) || (len(parts) == len(by[victim]) && n < victim) {
			victim = n
		}
	}
	run := failoverRun{parts: slices.Sorted(slices.Values(by[victim]))}
	replica, err := rc.ReplicaOf(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(part int) redislayout.Keys { return redislayout.Of(p.prefix, p.topic, part) }
	appliedOn := func(node, part int) int64 {
		v, err := rc.Get(ctx, node, keys(part).Applied())
		if errors.Is(err, redis.Nil) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	cfg := p.config()
	cfg.RedisMinReplicas = minReplicas
	alerterBinary(t)
	a := p.startProc("alerter", cfg)
	testenv.CheckFor(t, 90*time.Second, func() error {
		n, err := a.metric("nofly_alerter_assigned_partitions")
		if err == nil && n != float64(p.partitions) {
			err = fmt.Errorf("alerter owns %v of %d partitions", n, p.partitions)
		}
		return err
	})
	total := int64(len(recs))
	gate := p.produceGated(recs, sc.Received, 2500)
	gate.set(total)
	p.waitApplied(total/4, 90*time.Second)

	// Cut the replica off, and hold the cut while the primary runs
	// commits the replica never gets (with the protection on, one batch a
	// partition: its WAIT fails and the alerter stops there).
	if err := rc.Cut(ctx, replica); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	frozen := map[int]int64{}
	for _, part := range run.parts {
		frozen[part] = appliedOn(replica, part)
	}
	testenv.CheckFor(t, 30*time.Second, func() error {
		for _, part := range run.parts {
			if appliedOn(victim, part) > frozen[part] {
				return nil
			}
		}
		return fmt.Errorf("primary node %d has committed nothing on partitions %v since the cut", victim, run.parts)
	})
	time.Sleep(2*time.Second - time.Since(cutAt))
	primary := map[int]int64{}
	for _, part := range run.parts {
		primary[part] = appliedOn(victim, part)
	}

	if err := rc.Kill(victim); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	// The group's committed offsets now, before a promotion lets the
	// alerter commit again: each follows a batch commit Redis acknowledged.
	counted := groupOffsets(t, p)
	for _, part := range run.parts {
		run.lostCounted += max(0, counted[part]-1-frozen[part])
		run.lostAcked += max(0, primary[part]-frozen[part])
	}
	t.Logf("cut replica node %d for %v, then SIGKILL of primary node %d serving partitions %v at %d of %d records written: applied on the replica %v, on the primary %v, committed to Kafka %v",
		replica, killedAt.Sub(cutAt).Round(time.Millisecond), victim, run.parts, gate.produced(), total, frozen, primary, counted)
	if err := rc.Heal(ctx, replica); err != nil {
		t.Fatal(err)
	}
	promoted, err := rc.WaitPromoted(ctx, keys(run.parts[0]).Applied(), victim)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != replica {
		t.Fatalf("node %d promoted, not the cut replica node %d", promoted, replica)
	}
	t.Logf("replica node %d promoted %v after the kill", promoted, time.Since(killedAt).Round(time.Millisecond))
	restartAt := time.Now()
	if err := rc.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d back as a replica %v later", victim, time.Since(restartAt).Round(time.Millisecond))
	testenv.CheckFor(t, 2*time.Minute, func() error {
		s := p.store()
		for _, part := range run.parts {
			snap, err := s.Load(ctx, part)
			if err != nil {
				return err
			}
			if snap.Applied <= max(primary[part], counted[part]-1) {
				return fmt.Errorf("p%d applied up to %d, not past %d", part, snap.Applied, max(primary[part], counted[part]-1))
			}
		}
		return nil
	})
	run.stalled = time.Since(killedAt)

	select {
	case <-gate.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("producer did not finish within 2 minutes")
	}
	if err := testenv.WaitFor(ctx, 2*time.Minute, p.caughtUp); err != nil {
		// A partition whose commit reached the promoted replica with the
		// version the dead primary had is fenced until a rebalance: a
		// second alerter's start is one.
		fenced, _ := a.metric("nofly_alerter_commits_fenced_total")
		if minReplicas > 0 || fenced == 0 {
			t.Fatalf("%v (%v commits fenced); alerter log:\n%s", err, fenced, a.tail())
		}
		t.Logf("%v with %v commits fenced: restarting the alerter", err, fenced)
		run.fenced += fenced
		a.stop()
		a = p.startProc("alerter-2", cfg)
		testenv.CheckFor(t, 2*time.Minute, p.caughtUp)
	}
	testenv.CheckFor(t, 2*time.Minute, p.eventsCaughtUp)
	f, _ := a.metric("nofly_alerter_commits_fenced_total")
	e, _ := a.metric("nofly_alerter_commit_errors_total")
	run.fenced += f
	run.commitErrs = e
	if minReplicas > 0 {
		p.checkEventsTopic()
	}
	recsOut, err := p.eventsTopic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	values := make([][]byte, len(recsOut))
	for i, r := range recsOut {
		values[i] = r.value
	}
	run.outbox = eventsFromNDJSON(t, p.outbox())
	run.events = eventsFromNDJSON(t, values)
	a.stop()
	t.Logf("whole run %v", time.Since(began).Round(time.Millisecond))
	return run
}

// spreadPrefix sets p's prefix to one whose partitions' hash tags fall on
// all three primaries, and returns primary → partitions.
func spreadPrefix(t *testing.T, rc *testenv.RedisCluster, p *pipeline) map[int][]int {
	t.Helper()
	ctx := context.Background()
	base := p.prefix
	for i := 0; i < 1000; i++ {
		prefix := fmt.Sprintf("%s%d", base, i)
		by := map[int][]int{}
		for part := range p.partitions {
			n, err := rc.PrimaryOf(ctx, redislayout.Of(prefix, p.topic, part).Applied())
			if err != nil {
				t.Fatal(err)
			}
			by[n] = append(by[n], part)
		}
		if len(by) == 3 {
			p.prefix = prefix
			t.Logf("prefix %s: primary → partitions %v", p.prefix, by)
			return by
		}
	}
	t.Fatalf("no prefix %s<n> spreads %d partitions over 3 primaries", base, p.partitions)
	return nil
}

// groupOffsets is the alerter group's committed offset of each partition
// (-1 where none).
func groupOffsets(t *testing.T, p *pipeline) map[int]int64 {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(p.brokers...), Timeout: 10 * time.Second, Transport: tr}
	parts := make([]int, p.partitions)
	for i := range parts {
		parts[i] = i
	}
	res, err := c.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: p.group, Topics: map[string][]int{p.topic: parts}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	out := map[int]int64{}
	for _, po := range res.Topics[p.topic] {
		if po.Error != nil {
			t.Fatalf("offset fetch partition %d: %v", po.Partition, po.Error)
		}
		out[po.Partition] = po.CommittedOffset
	}
	return out
}
