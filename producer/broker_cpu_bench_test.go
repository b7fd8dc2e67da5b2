package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkBrokerCPU measures what a record costs the broker (issue 14
// point 6): the broker process's CPU (utime+stime of the pid in
// scripts/kafka.sh's pid file) per record, by records per partition batch
// (8: ingest's batches at 5,000 records/s in requests of 100 over 12
// partitions; up to 500) and by compression, for our producer (one
// Produce request per leader carrying every partition's ready batch), for
// it as it was before (perbatch: one request per partition batch) and for
// franz-go's ProduceSync of the same records (one request per broker
// carrying every partition's batch). One caller sends calls of k records for each of the 12
// partitions and waits for each; values are canonical telemetry records
// of the scenario (~150 bytes); acks=all, idempotent. Cells alternate,
// the order rotated every iteration; the machine is shared.
//
//	go test -run '^$' -bench BrokerCPU -benchtime 2x ./producer
func BenchmarkBrokerCPU(b *testing.B) {
	const parts, perCell = 12, 96_000
	brokers := testenv.Kafka(b)
	pid, err := benchcompare.KafkaPID()
	if err != nil {
		b.Fatalf("the broker's CPU is read through scripts/kafka.sh's pid file: %v", err)
	}
	var keys, values [][]byte
	for _, p := range scenario.Generate(scenario.Config{Seed: 1, Drones: 400, Positions: 500}).Records[:perCell] {
		keys = append(keys, []byte(p.DroneID))
		values = append(values, p.AppendJSON(nil))
	}
	type cell struct {
		name      string
		k         int
		send      func(ctx context.Context, recs [][2][]byte, part []int) error
		cpu, wall time.Duration
		bytes     int64
		n         int
	}
	var cells []*cell
	codecs := []struct {
		name  string
		ours  kafka.Compression
		franz kgo.CompressionCodec
	}{
		{"none", 0, kgo.NoCompression()},
		{"lz4", kafka.Lz4, kgo.Lz4Compression()},
		{"zstd", kafka.Zstd, kgo.ZstdCompression()},
	}
	for _, k := range []int{8, 50, 150, 500} {
		for _, c := range codecs {
			// Our producer on a topic of its own, as configured.
			ours := func(name string, cfg Config) {
				cfg.Brokers, cfg.Topic, cfg.Compression = brokers, testenv.CreateTopic(b, brokers, parts), c.ours
				p := newTestProducer(b, cfg)
				cells = append(cells, &cell{name: fmt.Sprintf("%s/k=%d/%s", name, k, c.name), k: k,
					send: func(ctx context.Context, recs [][2][]byte, part []int) error {
						rs := make([]Record, len(recs))
						for i, r := range recs {
							rs[i] = Record{Key: r[0], Value: r[1], Partition: part[i]}
						}
						return p.Produce(ctx, rs)
					}})
			}
			ours("ours", Config{})
			if c.name == "lz4" {
				continue // the old way and franz-go: none and zstd suffice for the comparison
			}
			ours("perbatch", Config{perPartitionRequests: true})
			ktopic := testenv.CreateTopic(b, brokers, parts)
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(ktopic),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(c.franz),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cl.Close)
			cells = append(cells, &cell{name: fmt.Sprintf("kgo/k=%d/%s", k, c.name), k: k,
				send: func(ctx context.Context, recs [][2][]byte, part []int) error {
					rs := make([]*kgo.Record, len(recs))
					for i, r := range recs {
						rs[i] = &kgo.Record{Key: r[0], Value: r[1], Partition: int32(part[i])}
					}
					return cl.ProduceSync(ctx, rs...).FirstErr()
				}})
		}
	}
	run := func(c *cell) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		call := c.k * parts
		recs := make([][2][]byte, 0, call)
		part := make([]int, 0, call)
		cpu0, err := benchcompare.ProcCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		for i := 0; i < perCell; i += call {
			recs, part = recs[:0], part[:0]
			for j := i; j < min(i+call, perCell); j++ {
				recs = append(recs, [2][]byte{keys[j], values[j]})
				part = append(part, (j-i)%parts)
				c.bytes += int64(len(values[j]))
			}
			if err := c.send(ctx, recs, part); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
		c.wall += time.Since(began)
		cpu1, err := benchcompare.ProcCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		c.cpu += cpu1 - cpu0
		c.n += perCell
	}
	for i := 0; i < b.N; i++ {
		for j := range cells {
			run(cells[(i+j)%len(cells)])
		}
	}
	for _, c := range cells {
		b.ReportMetric(float64(c.cpu.Nanoseconds())/float64(c.n)/1000, c.name+"_broker_µs/rec")
		b.ReportMetric(float64(c.n)/c.wall.Seconds(), c.name+"_rec/s")
	}
	b.ReportMetric(float64(cells[0].bytes)/float64(cells[0].n), "value_bytes")
	b.ReportMetric(0, "ns/op")
}
