package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func newTxnWriter(t *testing.T, brokers []string, topic, id string) *TxnWriter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := NewTxnWriter(ctx, Config{Brokers: brokers, Topic: topic, Logger: testLogger(t)},
		TxnOptions{Partition: 0, TransactionalID: id})
	if err != nil {
		t.Fatalf("NewTxnWriter: %v", err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

func txnRecords(from, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte("k"), Value: []byte(fmt.Sprintf("v%05d", from+i))}
	}
	return recs
}

// committedValues reads partition 0 read-committed once every transaction
// on it is decided: EndTxn returns before the coordinator has written the
// markers, and a loaded broker took seconds to (a read right after the
// commit saw only the transactions before it).
func committedValues(t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	testenv.CheckFor(t, 30*time.Second, func() error {
		if stable, end := partitionEnds(t, brokers, topic); stable != end {
			return fmt.Errorf("a transaction is undecided: last stable offset %d, end %d", stable, end)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	recs, err := r.ReadAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, rec := range recs {
		vals = append(vals, string(rec.Value))
	}
	return vals
}

func wantValues(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("v%05d", i))
	}
	return out
}

// TestTxnWriterFencing: a second writer of the same transactional id fences
// the first at the broker; the first's next Produce fails with ErrFenced and
// writes nothing; the committed log holds every acknowledged batch once.
func TestTxnWriterFencing(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	id := testenv.UniqueName("txn")
	ctx := context.Background()

	old := newTxnWriter(t, brokers, topic, id)
	for i := 0; i < 30; i += 10 {
		if err := old.Produce(ctx, txnRecords(i, 10)); err != nil {
			t.Fatalf("Produce %d: %v", i, err)
		}
	}
	heir := newTxnWriter(t, brokers, topic, id)
	oldPID, oldEpoch := old.Session()
	pid, epoch := heir.Session()
	if pid != oldPID || epoch <= oldEpoch {
		t.Errorf("heir session %d/%d, want the same producer id as %d/%d with a higher epoch", pid, epoch, oldPID, oldEpoch)
	}
	if err := old.Produce(ctx, txnRecords(1000, 10)); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced writer's Produce = %v, want ErrFenced", err)
	}
	if err := heir.Produce(ctx, txnRecords(30, 10)); err != nil {
		t.Fatalf("heir Produce: %v", err)
	}
	if got := committedValues(t, brokers, topic); !slices.Equal(got, wantValues(40)) {
		t.Fatalf("committed values %v, want v00000..v00039 once each", got)
	}
}

// TestTxnAbortedWriteHidden: a writer stalls with a batch written but its
// transaction open (a zombie frozen between produce and commit). The heir's
// InitProducerId aborts it; the committed reader drops the aborted batch
// that kafka-go's plain Fetch still returns, and the stalled writer cannot
// commit afterwards.
func TestTxnAbortedWriteHidden(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	id := testenv.UniqueName("txn")
	ctx := context.Background()

	zombie := newTxnWriter(t, brokers, topic, id)
	if err := zombie.Produce(ctx, txnRecords(0, 10)); err != nil {
		t.Fatal(err)
	}
	// Half a transaction: partition added, batch written, no EndTxn.
	enc, err := zombie.encode(txnRecords(5000, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := zombie.addPartition(ctx); err != nil {
		t.Fatal(err)
	}
	if err := zombie.send(ctx, enc, 10); err != nil {
		t.Fatal(err)
	}
	heir := newTxnWriter(t, brokers, topic, id)
	if err := heir.Produce(ctx, txnRecords(10, 10)); err != nil {
		t.Fatal(err)
	}
	err = zombie.retry(ctx, "commit transaction", func(ctx context.Context) error { return zombie.endTxn(ctx, true) })
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie's commit after the heir's init = %v, want ErrFenced", err)
	}
	if got := committedValues(t, brokers, topic); !slices.Equal(got, wantValues(20)) {
		t.Fatalf("committed values %v, want v00000..v00019 (the aborted v05000.. hidden)", got)
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	// kafka-go's own read_committed Fetch, in one answer (the log is small).
	plain, err := (&kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}).Fetch(ctx, &kafka.FetchRequest{
		Topic: topic, Partition: 0, Offset: 0, MinBytes: 1, MaxBytes: 8 << 20,
		MaxWait: time.Second, IsolationLevel: kafka.ReadCommitted,
	})
	if err != nil {
		t.Fatal(err)
	}
	aborted := 0
	for {
		r, err := plain.Records.ReadRecord()
		if err != nil {
			break
		}
		if v, _ := io.ReadAll(r.Value); string(v) >= "v05000" {
			aborted++
		}
	}
	if aborted != 10 {
		t.Fatalf("kafka-go's Fetch returned %d of the aborted records, want 10: the test no longer shows what the filter is for", aborted)
	}

	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	last, ok, _, _, err := r.Last(ctx, 0)
	if err != nil || !ok || string(last.Value) != "v00019" {
		t.Fatalf("Last = %q, %v, %v; want v00019", last.Value, ok, err)
	}
}

// TestTxnWriterClosesHangingTransaction: a batch of an earlier writer of the
// id sits on the partition in a transaction the coordinator does not know
// of (a "hanging" transaction: what a coordinator that lost or never wrote
// its markers leaves, here built with partition verification off). The next
// writer must close it before anyone reads the committed tail: otherwise its
// own first commit marker commits the stray batch too, and a dispatcher that
// resumed from the tail writes those events twice.
func TestTxnWriterClosesHangingTransaction(t *testing.T) {
	kp := testenv.StartKafkaWith(t, "transaction.partition.verification.enable=false")
	brokers := kp.Brokers()
	topic := testenv.CreateTopic(t, brokers, 1)
	id := testenv.UniqueName("txn")
	ctx := context.Background()

	old := newTxnWriter(t, brokers, topic, id)
	if err := old.Produce(ctx, txnRecords(0, 10)); err != nil {
		t.Fatal(err)
	}
	// EndTxn returns before the coordinator wrote the commit marker; a batch
	// sent before it would join the committed transaction.
	testenv.CheckFor(t, 10*time.Second, func() error {
		if stable, end := partitionEnds(t, brokers, topic); stable != end {
			return fmt.Errorf("last stable offset %d, end %d", stable, end)
		}
		return nil
	})
	// A transactional batch without AddPartitionsToTxn: the partition opens
	// a transaction for the producer id, the coordinator has none.
	enc, err := old.encode(txnRecords(5000, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.send(ctx, enc, 10); err != nil {
		t.Fatal(err)
	}
	heir := newTxnWriter(t, brokers, topic, id)
	// What a dispatcher does next: read the committed tail, resume after it.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	last, ok, _, _, err := r.Last(ctx, 0)
	if err != nil || !ok || string(last.Value) != "v00009" {
		t.Fatalf("tail after the heir's start = %q at %d, %v, %v; want v00009", last.Value, last.Offset, ok, err)
	}
	if stable, end := partitionEnds(t, brokers, topic); stable != end {
		t.Fatalf("after the heir's start the last stable offset is %d, the end %d: a transaction is still open", stable, end)
	}
	if err := heir.Produce(ctx, txnRecords(10, 10)); err != nil {
		t.Fatal(err)
	}
	if got := committedValues(t, brokers, topic); !slices.Equal(got, wantValues(20)) {
		t.Fatalf("committed values %v, want v00000..v00019 (the stray v05000.. aborted)", got)
	}
}

// partitionEnds returns partition 0's last stable offset and its end (high
// watermark), read in that order.
func partitionEnds(t *testing.T, brokers []string, topic string) (stable, end int64) {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}
	for _, iso := range []kafka.IsolationLevel{kafka.ReadCommitted, kafka.ReadUncommitted} {
		res, err := c.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}, IsolationLevel: iso,
		})
		if err != nil {
			t.Fatal(err)
		}
		po := res.Topics[topic][0]
		if po.Error != nil {
			t.Fatal(po.Error)
		}
		if iso == kafka.ReadCommitted {
			stable = po.LastOffset
		} else {
			end = po.LastOffset
		}
	}
	return stable, end
}
