package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/segmentio/kafka-go"
)

// Benchmark set-up shared by both producers: same broker, same topic layout,
// acks=all, same batch size and linger, 200-byte values, the same callers.
const (
	benchPartitions = 6
	benchValueSize  = 200
	benchBatch      = 1000 // BatchMaxRecords / Writer.BatchSize
	benchLinger     = 5 * time.Millisecond
	benchCallers    = 4   // concurrent callers, like concurrent HTTP requests
	benchCallSize   = 500 // records per call
)

func benchRecords(n int) (keys, values [][]byte) {
	for i := 0; i < n; i++ {
		keys = append(keys, []byte(fmt.Sprintf("UAV-%04d", i%200)))
		v := []byte(fmt.Sprintf(`{"drone_id":"UAV-%04d","seq":%d,"lat":51.4706,"lon":-0.4619,"pad":"`, i%200, i))
		for len(v) < benchValueSize-2 {
			v = append(v, 'x')
		}
		values = append(values, append(v, '"', '}'))
	}
	return keys, values
}

// sendFunc sends records [from, to) of the benchmark data.
type sendFunc func(ctx context.Context, from, to int) error

// runCallers sends n records in calls of benchCallSize from benchCallers
// goroutines and returns how long it took.
func runCallers(tb testing.TB, n int, send sendFunc) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < benchCallers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				from := next
				next += benchCallSize
				mu.Unlock()
				if from >= n {
					return
				}
				if err := send(ctx, from, min(from+benchCallSize, n)); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

type benchPair struct {
	keys, values [][]byte
	ours         sendFunc
	writer       sendFunc
}

func newBenchPair(b *testing.B, n int) *benchPair {
	brokers := testenv.Kafka(b)
	topic := testenv.CreateTopic(b, brokers, benchPartitions)
	bp := &benchPair{}
	bp.keys, bp.values = benchRecords(n)

	p := newTestProducer(b, Config{Brokers: brokers, Topic: topic, BatchMaxRecords: benchBatch, Linger: benchLinger})
	bp.ours = func(ctx context.Context, from, to int) error {
		recs := make([]Record, 0, to-from)
		for i := from; i < to; i++ {
			recs = append(recs, NewRecord(bp.keys[i], bp.values[i]))
		}
		return p.Produce(ctx, recs)
	}

	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, // a Writer literal defaults to acks=none
		BatchSize:    benchBatch,
		BatchBytes:   1_000_000,
		BatchTimeout: benchLinger,
		Transport:    &kafka.Transport{},
	}
	b.Cleanup(func() { w.Close() })
	bp.writer = func(ctx context.Context, from, to int) error {
		msgs := make([]kafka.Message, 0, to-from)
		for i := from; i < to; i++ {
			msgs = append(msgs, kafka.Message{Key: bp.keys[i], Value: bp.values[i]})
		}
		return w.WriteMessages(ctx, msgs...)
	}
	return bp
}

// BenchmarkProduce measures each producer alone: one op is one record.
func BenchmarkProduce(b *testing.B) {
	for _, side := range []string{"ours", "writer"} {
		b.Run(side, func(b *testing.B) {
			bp := newBenchPair(b, max(b.N, benchCallSize))
			send := bp.ours
			if side == "writer" {
				send = bp.writer
			}
			b.ReportAllocs()
			b.SetBytes(benchValueSize)
			b.ResetTimer()
			d := runCallers(b, b.N, send)
			b.ReportMetric(float64(b.N)/d.Seconds(), "records/s")
		})
	}
}

// BenchmarkProduceVsWriter runs both producers alternately in the same
// process against the same topic, benchVsRecords records per side per
// iteration, and reports both rates and their ratio (ours / Writer).
func BenchmarkProduceVsWriter(b *testing.B) {
	const benchVsRecords = 50_000
	bp := newBenchPair(b, benchVsRecords)
	// Warm both up: connections, metadata, producer id.
	runCallers(b, 2*benchCallSize, bp.ours)
	runCallers(b, 2*benchCallSize, bp.writer)
	b.ReportAllocs()
	b.ResetTimer()
	var ours, writer time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			ours += runCallers(b, benchVsRecords, bp.ours)
			writer += runCallers(b, benchVsRecords, bp.writer)
		} else {
			writer += runCallers(b, benchVsRecords, bp.writer)
			ours += runCallers(b, benchVsRecords, bp.ours)
		}
	}
	n := float64(b.N * benchVsRecords)
	b.ReportMetric(n/ours.Seconds(), "ours_records/s")
	b.ReportMetric(n/writer.Seconds(), "writer_records/s")
	b.ReportMetric(writer.Seconds()/ours.Seconds(), "ratio")
}

// BenchmarkEncodeBatch measures encoding alone: one op is one batch of
// benchBatch 200-byte records.
func BenchmarkEncodeBatch(b *testing.B) {
	keys, values := benchRecords(benchBatch)
	tails := make([][]byte, benchBatch)
	times := make([]int64, benchBatch)
	now := time.Now().UnixMilli()
	size := 0
	for i := range tails {
		r := NewRecord(keys[i], values[i])
		tails[i] = appendRecordTail(nil, &r)
		times[i] = now
		size += len(tails[i]) + recordOverhead
	}
	for _, codec := range []kafka.Compression{0, kafka.Snappy, kafka.Lz4, kafka.Zstd} {
		b.Run(codecName(codec), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(benchBatch * benchValueSize))
			buf := make([]byte, 0, size+batchHeaderSize+4)
			for i := 0; i < b.N; i++ {
				var err error
				if buf, err = encodeBatch(buf[:0], batchSession{producerID: 1}, 0, codec, tails, times); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
