package ingestd

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestBrokerRestartEvery202IsInTheLog is issue 4's "restart the broker in
// the middle of a run; every record that got a 202 is in the log": clients
// POST continuously to the intake (real producer, private broker) while the
// broker is stopped and started again. Each client retries a batch that did
// not get a 202, as a feed would. Afterwards the topic is read back: every
// (drone_id, seq) that was answered 202 must be there. Requests during the
// outage must get 503 with Retry-After, or a 202 that waited for the broker
// to come back.
func TestBrokerRestartEvery202IsInTheLog(t *testing.T) {
	k := testenv.StartKafka(t)
	brokers := k.Brokers()
	const (
		partitions = 4
		clients    = 4
		batchN     = 25
		before     = 1000 // records acknowledged before the restart begins
		after      = 1000 // and after it ends
		maxRecords = 200_000
	)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Partitions = brokers, partitions
	cfg.Topic = testenv.UniqueName("ingest-restart")
	cfg.ProduceTimeout = 5 * time.Second
	cfg.RetryAfter = time.Second
	rs := startService(t, cfg)

	type req struct {
		start, end time.Time
		code       int
		retryAfter string
		err        error
	}
	var (
		mu       sync.Mutex
		reqs     []req
		acked    = map[string]bool{} // "drone/seq" answered 202
		nAcked   atomic.Int64
		produced atomic.Int64 // records offered
	)
	ctx, stopClients := context.WithTimeout(context.Background(), 4*time.Minute)
	defer stopClients()
	hc := &http.Client{Timeout: time.Minute}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := 0
			for ctx.Err() == nil && produced.Load() < maxRecords {
				ps := make([]telemetry.Position, batchN)
				for i := range ps {
					ps[i] = position(fmt.Sprintf("C%d-D%d", c, (seq+i)%3), seq+i)
				}
				for ctx.Err() == nil { // until this batch gets a 202
					produced.Add(batchN)
					r := req{start: time.Now()}
					var h http.Header
					r.code, h, r.err = postNDJSON(ctx, hc, rs.url, ps)
					r.end = time.Now()
					if h != nil {
						r.retryAfter = h.Get("Retry-After")
					}
					if ctx.Err() != nil {
						return
					}
					mu.Lock()
					reqs = append(reqs, r)
					if r.code == http.StatusAccepted {
						for _, p := range ps {
							acked[fmt.Sprintf("%s/%d", p.DroneID, p.Seq)] = true
						}
						nAcked.Add(batchN)
					}
					mu.Unlock()
					if r.code == http.StatusAccepted {
						break
					}
					// A feed's back-off before it retries the same batch.
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
				seq += batchN
			}
		}()
	}

	waitAcked := func(n int64) {
		t.Helper()
		testenv.CheckFor(t, 2*time.Minute, func() error {
			if got := nAcked.Load(); got < n {
				return fmt.Errorf("%d records acknowledged, waiting for %d", got, n)
			}
			return nil
		})
	}
	waitAcked(before)
	outageStart := time.Now()
	if err := k.Restart(context.Background()); err != nil {
		t.Fatalf("restart broker: %v", err)
	}
	outageEnd := time.Now()
	t.Logf("broker restarted in %v with %d records acknowledged before", outageEnd.Sub(outageStart).Round(time.Millisecond), before)
	waitAcked(nAcked.Load() + after)
	stopClients()
	wg.Wait()
	if err := rs.stop(); err != nil {
		t.Fatalf("service: %v", err)
	}

	// What the requests saw.
	var during, during503, during202, other, after202 int
	for _, r := range reqs {
		overlaps := r.start.Before(outageEnd) && r.end.After(outageStart)
		switch {
		case r.err != nil:
			other++
			t.Errorf("request at %v: transport error %v", r.start.Format(time.StampMilli), r.err)
		case r.code == http.StatusServiceUnavailable:
			if r.retryAfter != "1" {
				t.Errorf("503 with Retry-After %q, want 1", r.retryAfter)
			}
			if overlaps {
				during503++
			} else {
				other++
			}
		case r.code == http.StatusAccepted:
			if overlaps {
				during202++
			}
			if r.start.After(outageEnd) {
				after202++
			}
		default:
			other++
			t.Errorf("request at %v: status %d", r.start.Format(time.StampMilli), r.code)
		}
		if overlaps {
			during++
		}
	}
	t.Logf("%d requests, %d overlapping the outage (%d got 503, %d a slow 202), %d 202 after it, %d other; %d records acknowledged",
		len(reqs), during, during503, during202, after202, other, len(acked))
	if during == 0 {
		t.Fatal("no request overlapped the broker's outage: the test proved nothing")
	}
	if after202 == 0 {
		t.Fatal("no request was accepted after the restart")
	}

	// Every 202 is in the log.
	msgs := readTopic(t, brokers, cfg.Topic, partitions)
	inLog := map[string]int{}
	for _, m := range msgs {
		p, err := telemetry.Decode(m.Value)
		if err != nil {
			t.Fatalf("partition %d offset %d: %v", m.Partition, m.Offset, err)
		}
		inLog[fmt.Sprintf("%s/%d", p.DroneID, p.Seq)]++
	}
	missing, dups := 0, 0
	for key := range acked {
		if inLog[key] == 0 {
			missing++
			if missing <= 10 {
				t.Errorf("%s got a 202 and is not in the log", key)
			}
		}
	}
	for _, n := range inLog {
		dups += n - 1
	}
	t.Logf("log: %d records, %d distinct (drone_id, seq), %d duplicates (retries of batches answered 503: allowed, the alerter dedups by seq); %d acknowledged records missing",
		len(msgs), len(inLog), dups, missing)
	if missing > 0 {
		t.Fatalf("%d of %d records answered 202 are not in the log", missing, len(acked))
	}
}
