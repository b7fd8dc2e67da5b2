package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

func produceN(t *testing.T, p *Producer, prefix string, n int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte("UAV-1"), Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Partition: 0}
	}
	return p.Produce(ctx, recs)
}

// TestOutOfOrderSequenceFailsBatchAbortsQueueAndBumpsEpoch makes the broker
// answer OUT_OF_ORDER_SEQUENCE_NUMBER (the producer's sequence is moved
// ahead behind its back) and checks what the Java producer does: the batch
// fails (never a silent drop), what was queued behind it is not sent ahead
// of it, the epoch is bumped, and the next records go through under the new
// epoch starting at sequence 0.
func TestOutOfOrderSequenceFailsBatchAbortsQueueAndBumpsEpoch(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, BatchMaxRecords: 5, RetryBackoff: 10 * time.Millisecond})

	if err := produceN(t, p, "a", 10); err != nil {
		t.Fatal(err)
	}
	before := p.Stats()
	ps := p.parts[0]
	ps.mu.Lock()
	ps.seq += 1000 // the broker expects 10
	ps.mu.Unlock()

	err := produceN(t, p, "b", 10)
	var pe *ProduceError
	if !errors.As(err, &pe) || len(pe.Records) != 10 {
		t.Fatalf("want a ProduceError for all 10 records, got %v", err)
	}
	for _, r := range pe.Records {
		want := ErrSequence
		if r.Index >= 5 {
			want = ErrAborted // queued behind the failed batch
		}
		if !errors.Is(r.Err, want) || !Retriable(r.Err) {
			t.Errorf("record %d: %v, want %v", r.Index, r.Err, want)
		}
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		if st := p.Stats(); st.EpochBumps != 1 {
			return fmt.Errorf("epoch bumps %d", st.EpochBumps)
		}
		return nil
	})
	after := p.Stats()
	if after.ProducerID != before.ProducerID || after.Epoch != before.Epoch+1 {
		t.Fatalf("want the same id with epoch %d, got %+v (before %+v)", before.Epoch+1, after, before)
	}
	if err := produceN(t, p, "c", 10); err != nil {
		t.Fatalf("after the bump: %v", err)
	}
	var vals []string
	for _, r := range readAllRecords(t, brokers, topic, 1) {
		vals = append(vals, string(r.Value))
	}
	want := "[a-0 a-1 a-2 a-3 a-4 a-5 a-6 a-7 a-8 a-9 c-0 c-1 c-2 c-3 c-4 c-5 c-6 c-7 c-8 c-9]"
	if got := fmt.Sprint(vals); got != want {
		t.Fatalf("log %s, want %s", got, want)
	}
}

// TestFencedEpochReinitialises writes a batch with our producer id and a
// higher epoch from outside (as a second process with the same id would):
// the broker then refuses our epoch, the batch fails with ErrSequence, and
// the producer takes a new id instead of bumping into the other's epochs.
func TestFencedEpochReinitialises(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, RetryBackoff: 10 * time.Millisecond})
	if err := produceN(t, p, "a", 3); err != nil {
		t.Fatal(err)
	}
	before := p.Stats()
	intruder := batchSession{producerID: before.ProducerID, epoch: before.Epoch + 5}
	r := Record{Value: []byte("intruder")}
	enc, err := encodeBatch(nil, intruder, 0, 0, [][]byte{appendRecordTail(nil, &r)}, []int64{time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.rawProduce(ctx, 0, enc); err != nil {
		t.Fatalf("intruder batch: %v", err)
	}

	err = produceN(t, p, "b", 3)
	if !errors.Is(err, ErrSequence) {
		t.Fatalf("want ErrSequence, got %v", err)
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		if st := p.Stats(); st.EpochBumps != 1 {
			return fmt.Errorf("epoch bumps %d", st.EpochBumps)
		}
		return nil
	})
	if st := p.Stats(); st.ProducerID == before.ProducerID {
		t.Fatalf("still on the fenced id: %+v", st)
	}
	if err := produceN(t, p, "c", 3); err != nil {
		t.Fatalf("after re-initialising: %v", err)
	}
	if got := len(readAllRecords(t, brokers, topic, 1)); got != 7 {
		t.Fatalf("%d records in the log, want 7 (a, intruder, c)", got)
	}
}

// TestCloseDrainsLingeringBatches: Close sends what waits for its linger
// and returns when it is acknowledged, not after the linger.
func TestCloseDrainsLingeringBatches(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 2)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, Linger: time.Hour, AlwaysLinger: true})

	errc := make(chan error, 1)
	go func() { errc <- produceN(t, p, "x", 7) }()
	testenv.CheckFor(t, 10*time.Second, func() error {
		p.parts[0].mu.Lock()
		defer p.parts[0].mu.Unlock()
		if len(p.parts[0].pend) != 7 {
			return fmt.Errorf("%d records queued", len(p.parts[0].pend))
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Produce during Close: %v", err)
	}
	if err := produceN(t, p, "y", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Produce after Close: %v, want ErrClosed", err)
	}
	if got := len(readAllRecords(t, brokers, topic, 2)); got != 7 {
		t.Fatalf("%d records in the log, want 7", got)
	}
}

// TestProduceContextEndsEarly: a Produce whose context ends reports every
// record not yet acknowledged, and the records still reach the log once.
func TestProduceContextEndsEarly(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, Linger: 300 * time.Millisecond, AlwaysLinger: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	recs := []Record{{Value: []byte("late-0")}, {Value: []byte("late-1")}}
	err := p.Produce(ctx, recs)
	var pe *ProduceError
	if !errors.As(err, &pe) || len(pe.Records) != 2 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want both records reported with the deadline, got %v", err)
	}
	recs[0].Value[0] = 'X' // the producer copied the record: this must not reach the log
	testenv.CheckFor(t, 10*time.Second, func() error {
		if n := p.Stats().Records; n != 2 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	got := readAllRecords(t, brokers, topic, 1)
	if len(got) != 2 || string(got[0].Value) != "late-0" {
		t.Fatalf("log %+v", got)
	}
}

// TestWaitingCallerDoesNotLinger: without AlwaysLinger a partition sends a
// call's records once they are queued, whatever Linger says (the caller is
// waiting for the acknowledgement, as with franz-go's ProduceSync); with it,
// the same call waits out the linger.
func TestWaitingCallerDoesNotLinger(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 2)
	const linger = 2 * time.Second
	for _, tc := range []struct {
		name         string
		alwaysLinger bool
		min, max     time.Duration
	}{
		{"default", false, 0, linger / 2},
		{"always linger", true, linger, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProducer(t, Config{Brokers: brokers, Topic: topic, Linger: linger, AlwaysLinger: tc.alwaysLinger})
			if err := produceN(t, p, "warm", 1); err != nil { // connections, metadata
				t.Fatalf("warm-up: %v", err)
			}
			start := time.Now()
			if err := produceN(t, p, tc.name, 10); err != nil {
				t.Fatalf("Produce: %v", err)
			}
			if d := time.Since(start); d < tc.min || d > tc.max {
				t.Fatalf("Produce took %v, want between %v and %v", d, tc.min, tc.max)
			}
		})
	}
}
