//go:build cluster

package alerterd

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// newClusterPipeline is newPipeline on a 3-node cluster: the telemetry
// topic with replication 3; the events topic is the alerter's to create,
// with the broker's default replication (3 on the cluster). Redis is the
// one shared server.
func newClusterPipeline(t testing.TB, k *testenv.KafkaCluster, redisAddr string, partitions int) *pipeline {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rc.Close() })
	p := &pipeline{t: t, brokers: k.Brokers(), redisAddr: redisAddr, partitions: partitions,
		topic:  k.CreateTopic(t, partitions),
		group:  testenv.UniqueName("alerter"),
		prefix: testenv.RedisPrefix(t, "nofly"),
		rc:     rc,
		resend: true,
	}
	return p.withEvents()
}

// TestClusterBrokerKillProof: the reference proof on a 3-node cluster with
// the node that coordinates the alerter's consumer group SIGKILLed
// mid-run (it leads telemetry and events partitions too), and restarted
// later. The outbox and alerts.events read committed equal the reference:
// 0 missing, 0 duplicate.
func TestClusterBrokerKillProof(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	runClusterKillProof(t, clusterKill{
		victim: func(ctx context.Context, k *testenv.KafkaCluster, p *pipeline) (int, []int, error) {
			n, err := k.GroupCoordinator(ctx, p.group)
			if err != nil {
				return 0, nil, err
			}
			var led []int // the events partitions it leads: their dispatch must resume
			for part := range p.partitions {
				if l, err := k.Leader(ctx, p.events, part); err == nil && l == n {
					led = append(led, part)
				}
			}
			return n, led, nil
		},
	})
}

// TestClusterTxnCoordinatorKillProof: the same with the node that is the
// transaction coordinator of the most dispatchers' transactional ids
// (outbox.TransactionalID, one per partition) SIGKILLed while one of their
// transactions is held open on its events partition (see
// waitHeldTransaction): the transaction state moves to a surviving node,
// the open transaction is decided there, and the dispatchers go on.
// alerts.events read committed still equals the reference.
func TestClusterTxnCoordinatorKillProof(t *testing.T) {
	// Not parallel: it must catch a transaction held open, and beside the
	// package's other proofs it saw none in 1,375 polls (the dispatch it
	// watches stalled on reads timing out); alone first, it has the cores.
	runClusterKillProof(t, clusterKill{
		victim: func(ctx context.Context, k *testenv.KafkaCluster, p *pipeline) (int, []int, error) {
			byNode := map[int][]int{}
			for part := range p.partitions {
				n, err := k.Coordinator(ctx, outbox.TransactionalID(p.events, part))
				if err != nil {
					return 0, nil, err
				}
				byNode[n] = append(byNode[n], part)
			}
			victim := 0
			for n, parts := range byNode {
				if victim == 0 || len(parts) > len(byNode[victim]) || (len(parts) == len(byNode[victim]) && n < victim) {
					victim = n
				}
			}
			p.t.Logf("transaction coordinators of the dispatchers' ids: node → events partitions %v", byNode)
			return victim, byNode[victim], nil
		},
		moment: waitHeldTransaction,
	})
}

// clusterKill says whom a cluster proof kills and when.
type clusterKill struct {
	// victim names the node to kill, and the events partitions whose
	// dispatch the kill concerns most (each must dispatch again after it).
	victim func(context.Context, *testenv.KafkaCluster, *pipeline) (node int, parts []int, err error)
	// moment, if set, returns when the kill is to land, with what it saw,
	// and may leave the alerter stopped (SIGSTOP): the caller continues it
	// right after the kill. nil: as soon as dispatch is seen running.
	// more lets a further burst of records into the stream: the moment
	// is looked for while records (so transactions) still flow, however
	// fast the stream ran until then.
	moment func(ctx context.Context, p *pipeline, a *proc, parts []int, more func()) (openTxn, error)
}

// openTxn is a transaction seen open on an events partition: its last
// stable offset below its end.
type openTxn struct {
	partition   int
	stable, end int64
}

// waitHeldTransaction polls the last stable offset and the end of the
// parts' events partitions until a transaction is open on one (up to a
// minute), then stops the alerter (SIGSTOP) and looks again 300 ms later.
// A transaction still open then is held by the frozen dispatcher, not in
// the middle of being committed: the coordinator has not begun to decide
// it, so killing the coordinator leaves it open until its state has moved
// to another node. (Killed the moment it is merely seen open, the
// transaction, open for a few milliseconds, is often already committing:
// the markers land and nothing is left for the new coordinator to decide.)
// It returns with the alerter stopped; otherwise it continues it and polls
// again.
func waitHeldTransaction(ctx context.Context, p *pipeline, a *proc, parts []int, more func()) (openTxn, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(p.brokers...), Timeout: 5 * time.Second, Transport: tr}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lastMore := time.Now()
	for polls := 0; ; polls++ {
		if time.Since(lastMore) > 500*time.Millisecond {
			more()
			lastMore = time.Now()
		}
		for _, part := range parts {
			stable, end, err := partitionEnds(ctx, c, p.events, part)
			if err != nil || stable >= end {
				continue
			}
			a.signal(syscall.SIGSTOP)
			time.Sleep(300 * time.Millisecond)
			s2, e2, err := partitionEnds(ctx, c, p.events, part)
			if err == nil && s2 == stable && s2 < e2 {
				p.t.Logf("a transaction held open on events partition %d after %d polls (last stable offset %d, end %d, 300 ms after the alerter was stopped)", part, polls, s2, e2)
				return openTxn{part, s2, e2}, nil
			}
			a.signal(syscall.SIGCONT)
		}
		if ctx.Err() != nil {
			return openTxn{}, fmt.Errorf("no transaction seen held open on events partitions %v in %d polls", parts, polls)
		}
	}
}

// partitionEnds reads the last stable offset, then the end (both only
// grow: stable < end means a transaction was open at the second read or
// just before).
func partitionEnds(ctx context.Context, c *kafka.Client, topic string, part int) (stable, end int64, err error) {
	for _, iso := range []kafka.IsolationLevel{kafka.ReadCommitted, kafka.ReadUncommitted} {
		res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(part)}}, IsolationLevel: iso,
		})
		if err != nil {
			return 0, 0, err
		}
		po := res.Topics[topic]
		if len(po) != 1 || po[0].Error != nil {
			return 0, 0, fmt.Errorf("list offsets %s/%d: %v", topic, part, po)
		}
		if iso == kafka.ReadCommitted {
			stable = po[0].LastOffset
		} else {
			end = po[0].LastOffset
		}
	}
	return stable, end, nil
}

// runClusterKillProof runs one alerter process against a 3-node cluster
// while the scenario is produced at a fixed rate; once a quarter of it is
// applied and events are being dispatched, it SIGKILLs the victim, measures
// the recovery, restarts the node, and compares the outbox and
// alerts.events (read committed by our reader and by kcat) with the
// reference.
func runClusterKillProof(t *testing.T, kill clusterKill) {
	began := time.Now()
	ctx := context.Background()
	k := testenv.StartKafkaCluster(t)
	t.Logf("cluster of 3 started in %v", time.Since(began).Round(time.Millisecond))
	raddr := testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newClusterPipeline(t, k, raddr, 6)
	cfg := p.config()
	// A killed broker's leaderships move after the controller misses it
	// (seconds): the alerter's session is the production-like 6 s here, not
	// the 2 s that keeps the single-broker proofs' restarts short.
	cfg.SessionTimeout, cfg.HeartbeatInterval = 6*time.Second, 500*time.Millisecond
	alerterBinary(t)
	gate := p.produceGated(sc.Records, sc.Received, 2500)
	a := p.startProc("alerter", cfg)
	testenv.CheckFor(t, 90*time.Second, func() error {
		n, err := a.metric("nofly_alerter_assigned_partitions")
		if err == nil && n != float64(p.partitions) {
			err = fmt.Errorf("alerter owns %v of %d partitions", n, p.partitions)
		}
		return err
	})
	// The alerter created the events topic with the broker's default: it
	// must be replicated like the rest, or the kill could lose events.
	testenv.CheckFor(t, 30*time.Second, func() error { return k.InSync(ctx, p.events) })

	total := int64(len(sc.Records))
	// Half the stream before the kill, a burst at a time after that while
	// the moment is looked for, the rest after the kill.
	let := total / 2
	gate.set(let)
	more := func() { let = min(let+250, total); gate.set(let) }
	p.waitApplied(total/4, 90*time.Second)
	delivered := func(labels ...string) float64 {
		n, _ := a.metricSum("nofly_outbox_delivered_total", append([]string{`output="kafka"`}, labels...)...)
		return n
	}
	// Failed dispatcher operations (a new writer after each) and retries.
	outboxTrouble := func() float64 {
		e, _ := a.metricSum("nofly_outbox_errors_total", `output="kafka"`)
		r, _ := a.metricSum("nofly_outbox_retries_total", `output="kafka"`)
		return e + r
	}
	// Mid-dispatch: transactions are being committed right now.
	d0 := delivered()
	testenv.CheckFor(t, 30*time.Second, func() error {
		if delivered() <= d0 {
			return fmt.Errorf("no event dispatched since %v", d0)
		}
		return nil
	})
	victim, parts, err := kill.victim(ctx, k, p)
	if err != nil {
		t.Fatal(err)
	}
	leaders := func(topic string) string {
		var s []string
		for part := range p.partitions {
			if l, err := k.Leader(ctx, topic, part); err == nil {
				s = append(s, fmt.Sprintf("p%d→%d", part, l))
			} else {
				s = append(s, fmt.Sprintf("p%d: %v", part, err))
			}
		}
		return strings.Join(s, " ")
	}
	t.Logf("before the kill: telemetry leaders %s; events leaders %s; node %d concerns events partitions %v",
		leaders(p.topic), leaders(p.events), victim, parts)
	trouble0, del0 := outboxTrouble(), delivered()
	ends, err := p.endOffsets()
	if err != nil {
		t.Fatal(err)
	}
	var open openTxn
	if kill.moment != nil {
		waited := time.Now()
		if open, err = kill.moment(ctx, p, a, parts, more); err != nil {
			t.Fatal(err)
		}
		t.Logf("the moment to kill came %v after the end offsets were read", time.Since(waited).Round(time.Millisecond))
	}
	err = k.Kill(victim)
	a.signal(syscall.SIGCONT) // if the moment left it stopped
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	gate.set(total)
	applied, _ := p.appliedTotal()
	t.Logf("SIGKILL node %d at %d of %d records applied, %d written, %v events dispatched", victim, applied, total, gate.produced(), del0)
	if kill.moment != nil {
		t.Logf("killed with a transaction held open on events partition %d (last stable offset %d, end %d)", open.partition, open.stable, open.end)
		tr := &kafka.Transport{}
		c := &kafka.Client{Addr: kafka.TCP(p.brokers...), Timeout: 5 * time.Second, Transport: tr}
		testenv.CheckFor(t, 2*time.Minute, func() error {
			stable, _, err := partitionEnds(ctx, c, p.events, open.partition)
			if err == nil && stable < open.end {
				err = fmt.Errorf("events partition %d: last stable offset %d, below %d: the transaction is undecided", open.partition, stable, open.end)
			}
			return err
		})
		tr.CloseIdleConnections()
		t.Logf("that transaction was decided (committed or aborted) %v after the kill", time.Since(killedAt).Round(time.Millisecond))
		// Its coordinator is dead: only a surviving node can have decided
		// it, so every id the victim coordinated moves (the controller
		// fences the node after its session timeout).
		testenv.CheckFor(t, 2*time.Minute, func() error {
			for _, part := range parts {
				id := outbox.TransactionalID(p.events, part)
				n, err := k.Coordinator(ctx, id)
				if err != nil {
					return err
				}
				if n == victim {
					return fmt.Errorf("%s still coordinated by the killed node %d", id, n)
				}
			}
			return nil
		})
		t.Logf("the %d transactional ids node %d coordinated were coordinated elsewhere %v after the kill", len(parts), victim, time.Since(killedAt).Round(time.Millisecond))
	}
	// Dispatch resumes: counted from here, after the kill (and after the
	// coordinators moved), so nothing sent before it passes for resumption.
	byPart := map[int]float64{}
	for _, part := range parts {
		byPart[part] = delivered(`partition="` + strconv.Itoa(part) + `"`)
	}

	// Recovery: every partition applies records past its end read just
	// before the kill (three quarters of the stream are still to come), and
	// each partition the kill concerns dispatches again.
	testenv.CheckFor(t, 2*time.Minute, func() error {
		s := p.store()
		for part, end := range ends {
			snap, err := s.Load(ctx, part)
			if err != nil {
				return err
			}
			if snap.Applied < end {
				return fmt.Errorf("p%d applied up to %d, not yet past its end %d before the kill", part, snap.Applied, end)
			}
		}
		return nil
	})
	consumed := time.Since(killedAt)
	var each []string
	for _, part := range sorted(parts) {
		testenv.CheckFor(t, 2*time.Minute, func() error {
			if n := delivered(`partition="` + strconv.Itoa(part) + `"`); n <= byPart[part] {
				return fmt.Errorf("partition %d: %v events dispatched, as just after the kill", part, n)
			}
			return nil
		})
		each = append(each, fmt.Sprintf("p%d after %v", part, time.Since(killedAt).Round(time.Millisecond)))
	}
	t.Logf("after the kill: every partition applied records past its end before the kill %v later; dispatch of the partitions it concerns resumed: %s; %v failed or retried dispatcher operations since the kill (%v before it)",
		consumed.Round(time.Millisecond), strings.Join(each, ", "), outboxTrouble()-trouble0, trouble0)
	t.Logf("with node %d down: telemetry leaders %s; events leaders %s", victim, leaders(p.topic), leaders(p.events))

	restartAt := time.Now()
	if err := k.Start(ctx, victim); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{p.topic, p.events} {
		if err := k.WaitInSync(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
	at, _ := p.appliedTotal()
	t.Logf("node %d restarted, back in every partition's ISR in %v, at %d records applied", victim, time.Since(restartAt).Round(time.Millisecond), at)
	p.finish(want, gate.done)
	p.checkEventsTopic()
	p.kcatEvents(k, killedAt)
	if cur, peak, err := k.RSS(); err == nil {
		t.Logf("cluster RSS %d MiB, peaks %v MiB (node %d's since its restart)", (cur[0]+cur[1]+cur[2])>>20, []int64{peak[0] >> 20, peak[1] >> 20, peak[2] >> 20}, victim)
	}
	a.stop()
	t.Logf("whole proof %v", time.Since(began).Round(time.Millisecond))
}

// kcatEvents reads the events topic with kcat (librdkafka, none of our
// code) read committed: each outbox event is there once, in its partition.
// Read uncommitted too, the difference is what aborted transactions left;
// where those records are, and when they were written relative to the
// kill, is logged.
func (p *pipeline) kcatEvents(k *testenv.KafkaCluster, killedAt time.Time) {
	t := p.t
	t.Helper()
	type rec struct {
		part   int
		offset int64
		ts     time.Time
		id     string
	}
	read := func(iso string) []rec {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", strings.Join(k.Brokers(), ","), "-t", p.events,
			"-X", "isolation.level="+iso, "-o", "beginning", "-e", "-q", "-f", "%p\t%o\t%T\t%h\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v: %s (kcat is installed by scripts/kafka.sh install)", err, stderr.String())
		}
		var recs []rec
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.SplitN(line, "\t", 4)
			if len(f) != 4 {
				t.Fatalf("kcat line %q", line)
			}
			var r rec
			var ms int64
			if _, err := fmt.Sscan(f[0], &r.part); err != nil {
				t.Fatalf("kcat line %q: %v", line, err)
			}
			if _, err := fmt.Sscan(f[1], &r.offset); err != nil {
				t.Fatalf("kcat line %q: %v", line, err)
			}
			if _, err := fmt.Sscan(f[2], &ms); err != nil {
				t.Fatalf("kcat line %q: %v", line, err)
			}
			r.ts = time.UnixMilli(ms)
			for _, h := range strings.Split(f[3], ",") {
				if v, ok := strings.CutPrefix(h, outbox.HeaderEventID+"="); ok {
					r.id = v
				}
			}
			recs = append(recs, r)
		}
		return recs
	}
	committed, all := read("read_committed"), read("read_uncommitted")
	want := map[string]int{}
	s := p.store()
	for part := range p.partitions {
		es, err := s.Outbox(context.Background(), part)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			want[e.EventID] = part
		}
	}
	got := map[string][]int{}
	at := map[[2]int64]bool{}
	for _, r := range committed {
		got[r.id] = append(got[r.id], r.part)
		at[[2]int64{int64(r.part), r.offset}] = true
	}
	var bad []string
	for id, part := range want {
		if ps := got[id]; len(ps) != 1 || ps[0] != part {
			bad = append(bad, fmt.Sprintf("%s: partitions %v, want [%d]", id, ps, part))
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			bad = append(bad, fmt.Sprintf("%q not in the outbox", id))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("kcat read committed: %d events wrong, e.g. %v", len(bad), bad[:min(5, len(bad))])
		return
	}
	var aborted []string
	for _, r := range all {
		if !at[[2]int64{int64(r.part), r.offset}] {
			aborted = append(aborted, fmt.Sprintf("p%d@%d written %+.3fs from the kill", r.part, r.offset, r.ts.Sub(killedAt).Seconds()))
		}
	}
	t.Logf("kcat read committed: %d records, each of the %d outbox events once in its partition; read uncommitted %d, %d of them of aborted transactions %v",
		len(committed), len(want), len(all), len(aborted), aborted[:min(len(aborted), 8)])
}

func sorted(xs []int) []int {
	out := append([]int(nil), xs...)
	sort.Ints(out)
	return out
}
