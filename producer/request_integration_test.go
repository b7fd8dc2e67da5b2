package producer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestOneRequestPerLeader: a Produce call's batches of every partition go
// in one Produce request (a single broker leads them all), not one per
// batch: one caller's calls take few requests each (at least 4 partitions
// a request; ~10 on a quiet machine); four callers at once still share
// requests (at least 2); every record lands once, each caller's
// records of a partition in its order. The same load through one request
// per batch (the old way) is the control: its requests equal its
// attempts, so the counter counts.
func TestOneRequestPerLeader(t *testing.T) {
	brokers := testenv.Kafka(t)
	const parts, calls, perPart = 12, 40, 8
	for _, tc := range []struct {
		name       string
		callers    int
		perRequest bool
	}{{"one caller", 1, false}, {"four callers", 4, false}, {"request per batch", 4, true}} {
		callers := tc.callers
		t.Run(tc.name, func(t *testing.T) {
			topic := testenv.CreateTopic(t, brokers, parts)
			p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, perPartitionRequests: tc.perRequest})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						var recs []Record
						for pt := range parts {
							for k := range perPart {
								v := fmt.Sprintf("c%d/%06d", c, i*perPart+k)
								recs = append(recs, Record{Key: []byte(v), Value: []byte(v), Partition: pt})
							}
						}
						if err := p.Produce(ctx, recs); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			st := p.Stats()
			want := callers * calls * parts * perPart
			if st.Records != int64(want) {
				t.Fatalf("stats %+v, want %d records", st, want)
			}
			t.Logf("%d batches in %d Produce requests (%.1f partitions a request)", st.Batches, st.Requests, float64(st.Batches)/float64(st.Requests))
			if tc.perRequest {
				// (A just-created topic can answer a first attempt with
				// UNKNOWN_TOPIC_OR_PARTITION: a retry is a request too.)
				if st.Requests != st.Batches+st.Retries {
					t.Fatalf("one request per batch: %d requests for %d batches and %d retries", st.Requests, st.Batches, st.Retries)
				}
			} else if callers == 1 && st.Requests*4 > st.Batches {
				// ~1.2 requests a call of 12 partitions on a quiet machine;
				// the sender's wait for a slow partition is capped (200 µs),
				// so a loaded one splits more calls, but never most of them.
				t.Fatalf("%d requests for %d calls of %d partitions each: a call's batches were not sent together", st.Requests, calls, parts)
			} else if st.Requests*2 > st.Batches {
				t.Fatalf("%d requests for %d batches: the partitions' batches were not sent together", st.Requests, st.Batches)
			}
			got := readAllRecords(t, brokers, topic, parts)
			if len(got) != want {
				t.Fatalf("read %d records, produced %d", len(got), want)
			}
			last := make(map[string]int) // partition/caller -> last sequence
			for _, r := range got {
				caller, seq, _ := strings.Cut(string(r.Value), "/")
				n, err := strconv.Atoi(seq)
				if err != nil {
					t.Fatalf("value %q", r.Value)
				}
				k := fmt.Sprintf("%d/%s", r.Partition, caller)
				if prev, ok := last[k]; ok && n != prev+1 {
					t.Fatalf("partition %d, caller %s: %d after %d", r.Partition, caller, n, prev)
				}
				last[k] = n
			}
		})
	}
}
