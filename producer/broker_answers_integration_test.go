package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestBrokerAnswersToResentBatches pins what the real broker answers when a
// batch is sent again with the same producer id, epoch and sequence — the
// case the producer's classification rests on: a duplicate among the last 5
// batches is answered with success and its original offset (not with
// DUPLICATE_SEQUENCE_NUMBER); an older one is not written again either.
func TestBrokerAnswersToResentBatches(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	p := newTestProducer(t, Config{Brokers: brokers, Topic: topic})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := p.initProducerID(ctx) // a session of its own, not the producer's
	if err != nil {
		t.Fatal(err)
	}
	batches := make([][]byte, 7)
	offsets := make([]int64, 7)
	for i := range batches {
		r := Record{Value: []byte(fmt.Sprintf("b%d", i))}
		if batches[i], err = encodeBatch(nil, sess, int32(i), 0, [][]byte{appendRecordTail(nil, &r)}, []int64{time.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		res, err := p.rawProduce(ctx, 0, batches[i])
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		offsets[i] = res.BaseOffset
	}

	// Within the window of the last 5 batches: success, original offset.
	res, err := p.rawProduce(ctx, 0, batches[6])
	if err != nil || res.BaseOffset != offsets[6] {
		t.Fatalf("resent last batch: offset %v err %v, want success at %d", res, err, offsets[6])
	}
	if classify(err) != outcomeOK {
		t.Fatalf("classified as %d", classify(err))
	}
	// Older than the window: OUT_OF_ORDER_SEQUENCE_NUMBER, not written
	// again. With one batch in flight per partition, a retried batch is
	// always the newest, so this never reaches a healthy producer.
	_, err = p.rawProduce(ctx, 0, batches[0])
	if !errors.Is(err, codeOutOfOrderSequence) || classify(err) != outcomeSequence {
		t.Fatalf("resent batch older than the window: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	if got := len(readAllRecords(t, brokers, topic, 1)); got != 7 {
		t.Fatalf("%d records in the log, want 7", got)
	}
}
