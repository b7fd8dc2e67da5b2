package producer

import (
	"context"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkTxnWriterVsProducer prices the transaction per batch that fences
// zombie outbox dispatchers: one partition, batches of the sizes the outbox
// dispatcher sends, each written and waited for (as the dispatcher does),
// once through the idempotent Producer (linger 0) and once through a
// TxnWriter (AddPartitionsToTxn, Produce, EndTxn), alternating in the same
// run on the same broker. Reported: records/s of each and their ratio.
func BenchmarkTxnWriterVsProducer(b *testing.B) {
	for _, size := range []int{100, 500} {
		b.Run(map[int]string{100: "batch100", 500: "batch500"}[size], func(b *testing.B) {
			brokers := testenv.Kafka(b)
			topic := testenv.CreateTopic(b, brokers, 1)
			ctx := context.Background()
			_, values := benchRecords(size)
			recs := make([]Record, size)
			for i := range recs {
				recs[i] = Record{Key: []byte("UAV-0001"), Value: values[i]}
			}
			idem := newTestProducer(b, Config{Brokers: brokers, Topic: topic, Linger: -1})
			txn, err := NewTxnWriter(ctx, Config{Brokers: brokers, Topic: topic, Logger: testLogger(b)},
				TxnOptions{TransactionalID: testenv.UniqueName("bench")})
			if err != nil {
				b.Fatal(err)
			}
			defer txn.Close(ctx)
			var tIdem, tTxn time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := idem.Produce(ctx, recs); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := txn.Produce(ctx, recs); err != nil {
					b.Fatal(err)
				}
				tIdem += t1.Sub(t0)
				tTxn += time.Since(t1)
			}
			b.StopTimer()
			idemRate := float64(b.N*size) / tIdem.Seconds()
			txnRate := float64(b.N*size) / tTxn.Seconds()
			b.ReportMetric(idemRate, "idempotent-records/s")
			b.ReportMetric(txnRate, "txn-records/s")
			b.ReportMetric(txnRate/idemRate, "txn/idempotent")
			b.ReportMetric(float64(tTxn.Microseconds())/float64(b.N), "txn-µs/batch")
		})
	}
}
