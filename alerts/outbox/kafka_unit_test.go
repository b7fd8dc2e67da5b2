package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// fakeLog is an in-memory alerts.events partition behind the Producer and
// TailReader interfaces.
type fakeLog struct {
	mu      sync.Mutex
	recs    []producer.Record
	deleted int // records removed by "retention" (offsets before len(recs)+deleted)
	// partial, when > 0, makes the next Produce write only that many
	// records and then fail, as a lost connection would.
	partial int
	calls   int
	// intrude, when set, runs once at the next Produce, which then fails
	// with producer.ErrFenced: another writer started and appended.
	intrude func(f *fakeLog)
}

func (f *fakeLog) Produce(_ context.Context, recs []producer.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.intrude != nil {
		f.intrude(f)
		f.intrude = nil
		return fmt.Errorf("test: %w", producer.ErrFenced)
	}
	if f.partial > 0 && len(recs) > f.partial {
		f.recs = append(f.recs, recs[:f.partial]...)
		f.partial = 0
		return fmt.Errorf("test: %w", producer.ErrBrokerUnavailable)
	}
	f.recs = append(f.recs, recs...)
	return nil
}

func (f *fakeLog) Close(context.Context) error { return nil }

func (f *fakeLog) Tail(_ context.Context, partition int) (Tail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := Tail{Start: int64(f.deleted), End: int64(f.deleted + len(f.recs))}
	if len(f.recs) > 0 {
		t.Found = true
		t.Offset = t.End - 1
		t.Headers = f.recs[len(f.recs)-1].Headers
	}
	return t, nil
}

func (f *fakeLog) snapshot() []producer.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]producer.Record(nil), f.recs...)
}

func outboxIDs(recs []producer.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		for _, h := range r.Headers {
			if h.Key == HeaderOutboxID {
				ids[i] = string(h.Value)
			}
		}
	}
	return ids
}

// TestKafkaOutputResume pins where the Kafka output resumes, with a fake
// partition: after the outbox id of the last record, from the start of an
// empty partition, after the Redis cursor when retention emptied it, never
// when the last record is not ours; and it re-reads the tail after a
// produce that failed half-way or was fenced.
func TestKafkaOutputResume(t *testing.T) {
	const n = 30
	cases := []struct {
		name string
		// setup prepares the fake partition given the stream ids, and
		// returns the ids the output must add to it (nil: nothing, it
		// must not send at all).
		setup func(t *testing.T, f *fakeLog, ids []string, cursor func(id string)) []string
	}{
		{"empty partition: from the start", func(t *testing.T, f *fakeLog, ids []string, _ func(string)) []string {
			return ids
		}},
		{"after the last record's outbox id", func(t *testing.T, f *fakeLog, ids []string, _ func(string)) []string {
			o := &output{partition: 0}
			f.recs = o.records(entriesOf(ids[:12]))
			return ids[12:]
		}},
		{"produce failed half-way: re-read the tail", func(t *testing.T, f *fakeLog, ids []string, _ func(string)) []string {
			f.partial = 7
			return ids
		}},
		{"fenced by another writer that appended: re-read the tail, do not resend", func(t *testing.T, f *fakeLog, ids []string, _ func(string)) []string {
			f.intrude = func(f *fakeLog) {
				o := &output{partition: 0}
				f.recs = append(f.recs, o.records(entriesOf(ids[:15]))...)
			}
			return ids
		}},
		{"retention emptied the partition: after the Redis cursor", func(t *testing.T, f *fakeLog, ids []string, cursor func(string)) []string {
			f.deleted = 20
			cursor(ids[19])
			return ids[20:]
		}},
		{"last record is not ours: send nothing", func(t *testing.T, f *fakeLog, ids []string, _ func(string)) []string {
			f.recs = []producer.Record{{Value: []byte("foreign")}}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testenv.RedisClient(t)
			reg := prometheus.NewRegistry()
			cfg := Config{Prefix: testenv.RedisPrefix(t, "outbox"), Topic: "t", BatchSize: 10, Block: 20 * time.Millisecond,
				Backoff: time.Millisecond, BackoffMax: 10 * time.Millisecond, Registerer: reg, Logger: testLogger()}
			k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
			ctx := context.Background()
			t.Cleanup(func() { rdb.Del(ctx, k.Outbox(), k.Cursor(kafkaOutputName)) })
			ids, err := appendEvents(ctx, rdb, k, 0, n)
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeLog{}
			want := tc.setup(t, f, ids, func(id string) { rdb.Set(ctx, k.Cursor(kafkaOutputName), id, 0) })
			before := len(f.recs)
			d, err := NewDispatcher(cfg, rdb, &KafkaOutput{NewProducer: func(context.Context, int) (Producer, error) { return f, nil }, Tail: f})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- d.Run(runCtx, 0) }()
			if want == nil {
				testenv.CheckFor(t, 10*time.Second, func() error {
					if metricValue(t, reg, "nofly_outbox_errors_total", "0", "kafka") < 2 {
						return errors.New("no error counted yet")
					}
					return nil
				})
			} else {
				testenv.CheckFor(t, 10*time.Second, func() error {
					if got := len(f.snapshot()) - before; got < len(want) {
						return fmt.Errorf("%d of %d records", got, len(want))
					}
					return nil
				})
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := outboxIDs(f.snapshot()[before:]); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the output added\n%v\nwant\n%v", got, want)
			}
			// Acknowledged records only: a batch that failed half-way is
			// not counted, though part of it is in the partition.
			if want != nil && metricValue(t, reg, "nofly_outbox_delivered_total", "0", "kafka") == 0 {
				t.Fatal("delivered metric not counted")
			}
		})
	}
}

func entriesOf(ids []string) []redislayout.Entry {
	es := make([]redislayout.Entry, len(ids))
	for i, id := range ids {
		evID, body := testEvent(i)
		es[i] = redislayout.Entry{ID: id, EventID: evID, Event: body}
	}
	return es
}

// TestRecords pins the record built from an entry: partition p, key =
// drone_id, value = the event bytes, both headers.
func TestRecords(t *testing.T) {
	evID, body := testEvent(5)
	o := &output{partition: 3, log: testLogger()}
	recs := o.records([]redislayout.Entry{{ID: "17-2", EventID: evID, Event: body}, {ID: "17-3", EventID: "x", Event: []byte("not json")}})
	r := recs[0]
	if r.Partition != 3 || string(r.Key) != "UAV-0005" || string(r.Value) != string(body) {
		t.Fatalf("record %+v", r)
	}
	if got := fmt.Sprint(r.Headers); got != fmt.Sprint([]producer.Header{{Key: HeaderOutboxID, Value: []byte("17-2")}, {Key: HeaderEventID, Value: []byte(evID)}}) {
		t.Fatalf("headers %s", got)
	}
	if recs[1].Key != nil || recs[1].Partition != 3 {
		t.Fatalf("an event without drone_id must still be sent, without a key: %+v", recs[1])
	}
}
