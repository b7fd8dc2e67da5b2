//go:build cluster

package ingestd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestClusterLeaderKillEvery202IsInTheLogOnce: ingest (the real service,
// its idempotent producer, over HTTP) on a 3-node cluster, replication 3,
// min.insync.replicas 2. While clients post continuously, the leader of
// partition 0 is SIGKILLed, writing goes on through the leader move, and the
// node is restarted later. Every (drone_id, seq) is offered exactly once (a
// client that gets no 202 moves on to new records instead of resending), so
// afterwards, read back by kcat (librdkafka, none of our code): every
// record answered 202 is in the log exactly once, and no record at all is
// there twice (a producer retry written twice would be).
func TestClusterLeaderKillEvery202IsInTheLogOnce(t *testing.T) {
	began := time.Now()
	k := testenv.StartKafkaCluster(t)
	t.Logf("cluster of 3 started in %v", time.Since(began).Round(time.Millisecond))
	brokers := k.Brokers()
	const (
		partitions = 3
		clients    = 4
		batchN     = 25 // one record per drone of the client: every request touches every partition
		before     = 2000
		afterKill  = 2000 // acknowledged from requests that began after the kill
		afterBack  = 1000 // and after the node is back in the ISR
	)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Partitions = brokers, partitions
	cfg.Topic = k.CreateTopic(t, partitions)
	rs := startService(t, cfg)

	type ack struct {
		start, end time.Time
	}
	var (
		mu      sync.Mutex
		acked   = map[string]ack{} // "drone/seq" answered 202
		offered = map[string]bool{}
		codes   = map[int]int{}
		errs    int
		killAt  atomic.Pointer[time.Time]
		nAcked  atomic.Int64
		nAfter  atomic.Int64 // acked from requests begun after the kill
	)
	ctx, stopClients := context.WithTimeout(context.Background(), 4*time.Minute)
	defer stopClients()
	hc := &http.Client{Timeout: time.Minute}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				ps := make([]telemetry.Position, batchN)
				for i := range ps {
					ps[i] = position(fmt.Sprintf("C%d-D%02d", c, i), seq)
				}
				mu.Lock()
				for _, p := range ps {
					offered[fmt.Sprintf("%s/%d", p.DroneID, p.Seq)] = true
				}
				mu.Unlock()
				start := time.Now()
				code, _, err := postNDJSON(ctx, hc, rs.url, ps)
				end := time.Now()
				if ctx.Err() != nil && err != nil {
					return // the test is over: this request's fate is unknown, it counts as not acknowledged
				}
				mu.Lock()
				if err != nil {
					errs++
				} else {
					codes[code]++
				}
				if err == nil && code == http.StatusAccepted {
					for _, p := range ps {
						acked[fmt.Sprintf("%s/%d", p.DroneID, p.Seq)] = ack{start, end}
					}
					nAcked.Add(batchN)
					if ka := killAt.Load(); ka != nil && start.After(*ka) {
						nAfter.Add(batchN)
					}
				}
				mu.Unlock()
				if err != nil || code != http.StatusAccepted {
					// A feed's back-off; the next request carries new records.
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}()
	}
	waitFor := func(what string, n *atomic.Int64, want int64) {
		t.Helper()
		testenv.CheckFor(t, 2*time.Minute, func() error {
			if got := n.Load(); got < want {
				return fmt.Errorf("%s: %d records acknowledged, waiting for %d", what, got, want)
			}
			return nil
		})
	}
	leaders := func() string {
		var s []string
		for p := range partitions {
			l, err := k.Leader(ctx, cfg.Topic, p)
			if err != nil {
				s = append(s, fmt.Sprintf("p%d: %v", p, err))
				continue
			}
			s = append(s, fmt.Sprintf("p%d→%d", p, l))
		}
		return strings.Join(s, " ")
	}

	waitFor("before the kill", &nAcked, before)
	victim, err := k.Leader(ctx, cfg.Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leaders before the kill: %s; killing node %d, partition 0's leader", leaders(), victim)
	if err := k.Kill(victim); err != nil {
		t.Fatal(err)
	}
	// After Kill returned: the process is gone, so a request begun later
	// cannot have been answered by the victim.
	now := time.Now()
	killAt.Store(&now)
	var moved time.Duration
	testenv.CheckFor(t, time.Minute, func() error {
		l, err := k.Leader(ctx, cfg.Topic, 0)
		if err != nil {
			return err
		}
		if l == victim {
			return fmt.Errorf("partition 0 still led by the killed node %d", victim)
		}
		moved = time.Since(now)
		return nil
	})
	t.Logf("partition 0's leadership moved %v after the kill; leaders now %s", moved.Round(time.Millisecond), leaders())
	waitFor("after the kill", &nAfter, afterKill)
	t.Logf("%d records acknowledged from requests begun after the kill, with node %d down", nAfter.Load(), victim)

	restartAt := time.Now()
	if err := k.Start(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := k.WaitInSync(ctx, cfg.Topic); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d restarted and back in every partition's ISR in %v; leaders %s", victim, time.Since(restartAt).Round(time.Millisecond), leaders())
	waitFor("after the restart", &nAcked, nAcked.Load()+afterBack)
	stopClients()
	wg.Wait()
	if err := rs.stop(); err != nil {
		t.Fatalf("service: %v", err)
	}
	if cur, peak, err := k.RSS(); err == nil {
		t.Logf("cluster RSS now %v MiB, peak %v MiB (node %d's peak since its restart)", mib(cur[:]), mib(peak[:]), victim)
	}

	inLog := readWithKcat(t, brokers, cfg.Topic)
	mu.Lock()
	defer mu.Unlock()
	k0 := *killAt.Load()
	var missing, twice, unknown []string
	stall, firstAfter := time.Duration(0), time.Duration(-1)
	afterOnP0 := 0
	for key, a := range acked {
		locs := inLog[key]
		switch len(locs) {
		case 0:
			missing = append(missing, key)
		case 1:
			if a.start.After(k0) && locs[0].partition == 0 {
				afterOnP0++
			}
		}
		if a.start.After(k0) && (firstAfter < 0 || a.end.Sub(k0) < firstAfter) {
			firstAfter = a.end.Sub(k0)
		}
	}
	for key, locs := range inLog {
		if len(locs) > 1 {
			twice = append(twice, fmt.Sprintf("%s at %v", key, locs))
		}
		if !offered[key] {
			unknown = append(unknown, key)
		}
	}
	// The longest time without any 202 around the kill.
	var ends []time.Time
	for _, a := range acked {
		ends = append(ends, a.end)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	for i := 1; i < len(ends); i++ {
		if ends[i].After(k0) && ends[i-1].Before(k0.Add(time.Minute)) {
			stall = max(stall, ends[i].Sub(ends[i-1]))
		}
	}
	t.Logf("requests: %v by status, %d transport errors; %d records offered, %d answered 202; log: %d distinct records",
		codes, errs, len(offered), len(acked), len(inLog))
	t.Logf("after the kill: first 202 of a request begun after it %v later, longest gap between 202s %v; %d records of partition 0 (the killed leader's) acknowledged from requests begun after the kill",
		firstAfter.Round(time.Millisecond), stall.Round(time.Millisecond), afterOnP0)
	first := func(s []string) []string { sort.Strings(s); return s[:min(len(s), 5)] }
	if len(missing)+len(twice)+len(unknown) > 0 {
		t.Fatalf("%d acknowledged records missing from the log %v, %d records in the log more than once %v, %d never offered %v",
			len(missing), first(missing), len(twice), first(twice), len(unknown), first(unknown))
	}
	t.Logf("every one of the %d acknowledged records is in the log exactly once; no record twice", len(acked))
	if afterOnP0 == 0 {
		t.Fatal("no record of partition 0 was acknowledged after its leader was killed: the kill was not mid-stream")
	}
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}

type logPos struct {
	partition int
	offset    int64
}

func (l logPos) String() string { return fmt.Sprintf("p%d@%d", l.partition, l.offset) }

// readWithKcat reads every record of topic with kcat (librdkafka) and
// returns where each "drone_id/seq" is.
func readWithKcat(t *testing.T, brokers []string, topic string) map[string][]logPos {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", strings.Join(brokers, ","), "-t", topic,
		"-o", "beginning", "-e", "-q", "-f", "%p\t%o\t%s\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v: %s (kcat is installed by scripts/kafka.sh install)", err, stderr.String())
	}
	got := map[string][]logPos{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var lp logPos
		f := strings.SplitN(sc.Text(), "\t", 3)
		if len(f) != 3 {
			t.Fatalf("kcat line %q", sc.Text())
		}
		if _, err := fmt.Sscan(f[0], &lp.partition); err != nil {
			t.Fatalf("kcat line %q: %v", sc.Text(), err)
		}
		if _, err := fmt.Sscan(f[1], &lp.offset); err != nil {
			t.Fatalf("kcat line %q: %v", sc.Text(), err)
		}
		if _, tick := telemetry.ParseTick([]byte(f[2])); tick {
			continue // ingest's clock ticks, beside the positions
		}
		p, err := telemetry.Decode([]byte(f[2]))
		if err != nil {
			t.Fatalf("%v: %v", lp, err)
		}
		key := fmt.Sprintf("%s/%d", p.DroneID, p.Seq)
		got[key] = append(got[key], lp)
	}
	return got
}

func mib(bs []int64) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b >> 20
	}
	return out
}
