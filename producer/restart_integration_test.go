package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestBrokerRestartKeepsAcknowledgedRecords restarts a private broker while
// the producer is sending: every record whose Produce returned nil (what
// becomes an HTTP 202) must be in the log, and none twice.
func TestBrokerRestartKeepsAcknowledgedRecords(t *testing.T) {
	t.Parallel() // its own broker: its start-up overlaps the shared-broker tests
	k := testenv.StartKafka(t)
	brokers := k.Brokers()
	const partitions = 3
	topic := testenv.CreateTopic(t, brokers, partitions)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, DeliveryTimeout: 90 * time.Second, BatchMaxRecords: 100})

	const callSize = 50
	var (
		mu        sync.Mutex
		acked     = make(map[string]bool)
		failed    int
		afterBack int // calls acknowledged after the restart finished
		restarted bool
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for call := 0; ctx.Err() == nil; call++ {
			recs := make([]Record, callSize)
			for i := range recs {
				recs[i] = NewRecord([]byte(fmt.Sprintf("UAV-%02d", i%10)), []byte(fmt.Sprintf("%d-%d", call, i)))
			}
			err := p.Produce(ctx, recs)
			mu.Lock()
			if err == nil {
				for _, r := range recs {
					acked[string(r.Value)] = true
				}
				if restarted {
					afterBack++
				}
			} else {
				failed++
				t.Logf("call %d: %v", call, err)
			}
			stop := restarted && afterBack >= 100
			mu.Unlock()
			if stop {
				return
			}
		}
	}()

	testenv.CheckFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 20*callSize {
			return fmt.Errorf("only %d records acknowledged before the restart", len(acked))
		}
		return nil
	})
	start := time.Now()
	if err := k.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	mu.Lock()
	restarted = true
	mu.Unlock()
	t.Logf("broker restarted in %v", time.Since(start))
	<-done
	if ctx.Err() != nil {
		t.Fatalf("producer did not recover after the restart: %v", ctx.Err())
	}

	seen := make(map[string]int)
	for _, r := range readAllRecords(t, brokers, topic, partitions) {
		seen[string(r.Value)]++
	}
	mu.Lock()
	defer mu.Unlock()
	missing, dups := 0, 0
	for v := range acked {
		if seen[v] == 0 {
			missing++
		}
	}
	for _, n := range seen {
		dups += n - 1
	}
	st := p.Stats()
	t.Logf("acknowledged %d records, %d calls failed, %d in the log, %d acknowledged missing, %d duplicates; stats %+v",
		len(acked), failed, len(seen), missing, dups, st)
	if missing != 0 {
		t.Errorf("%d acknowledged records are not in the log", missing)
	}
	if dups != 0 {
		t.Errorf("%d duplicates in the log", dups)
	}
}
