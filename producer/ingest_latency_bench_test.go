package producer_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
	"github.com/nofly-dev/nofly/telemetry"
)

// producerFunc makes a function an ingest.Producer.
type producerFunc func(ctx context.Context, recs []producer.Record) error

func (f producerFunc) Produce(ctx context.Context, recs []producer.Record) error { return f(ctx, recs) }

// BenchmarkIngest202Linger measures what issue 14 asks of ingest: the
// latency of the 202 at 5,000 records/s offered in requests of 100, with
// the producer lingering for waiting callers (AlwaysLinger, the behaviour
// before it became an option) and without (the default), alternately in
// one process, each round on its own producer and server over the same
// 12-partition topic, default producer settings (linger 5 ms, batch 1000).
//
// The real handler (ingest.NewServer over producer.Producer, behind an HTTP
// server on loopback) takes NDJSON requests from 10 feeds, each owning 100
// drones and posting their next positions every 200 ms, feeds staggered
// 20 ms apart; a feed posts its next request only after the previous 202
// (ingest's contract), at once if that came late. The latency is the
// client's, from sending the request to reading the 202; produce_* is the
// handler's wait in Produce alone. Records per acknowledged batch come from
// the producer.
func BenchmarkIngest202Linger(b *testing.B) {
	brokers := testenv.Kafka(b)
	topic := testenv.CreateTopic(b, brokers, 12)
	const (
		rate     = 5000
		perReq   = 100
		feeds    = 10
		measured = 6 // seconds per side and iteration
		period   = time.Second * feeds * perReq / rate
	)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	type side struct {
		name     string
		always   bool
		perBatch bool      // a Produce request per partition batch (the old way)
		lat      []float64 // ms
		prod     []float64 // ms, Produce alone (inside the handler)
		sizes    []int
		reqs     int
	}
	sides := []*side{{name: "linger", always: true}, {name: "ours"}, {name: "perbatch", perBatch: true}}
	var seqBase int64

	run := func(s *side, seconds int) {
		var mu sync.Mutex
		var sizes []int
		cfg := producer.WithBatchAcked(producer.Config{Brokers: brokers, Topic: topic, Logger: discard, AlwaysLinger: s.always},
			func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() })
		if s.perBatch {
			cfg = producer.WithRequestPerBatch(cfg)
		}
		prod, err := producer.New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		var prodLat []float64
		timed := producerFunc(func(ctx context.Context, recs []producer.Record) error {
			start := time.Now()
			err := prod.Produce(ctx, recs)
			d := float64(time.Since(start)) / float64(time.Millisecond)
			mu.Lock()
			prodLat = append(prodLat, d)
			mu.Unlock()
			return err
		})
		srv, err := ingest.NewServer(ingest.Options{Producer: timed, Logger: discard})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		defer hs.Close()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: feeds}, Timeout: 30 * time.Second}
		post := func(body []byte) (time.Duration, error) {
			start := time.Now()
			resp, err := client.Post(hs.URL+"/v1/telemetry", "application/x-ndjson", bytes.NewReader(body))
			if err != nil {
				return 0, err
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				return 0, fmt.Errorf("%d %s", resp.StatusCode, msg)
			}
			return time.Since(start), nil
		}
		body := func(f, k int, seq int64) []byte {
			var out []byte
			now := time.Now().UTC()
			for d := 0; d < perReq; d++ {
				pos := telemetry.Position{DroneID: fmt.Sprintf("LAT-%02d-%03d", f, d), Seq: seq, TS: now,
					Lat: 51.47 + float64(d)*1e-4, Lon: -0.46 + float64(k)*1e-5}
				out = append(pos.AppendJSON(out), '\n')
			}
			return out
		}
		// Warm up: connections, metadata, every partition.
		seqBase++
		if _, err := post(body(0, 0, seqBase)); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		sizes, prodLat = nil, nil
		mu.Unlock()

		rounds := seconds * int(time.Second/period)
		lat := make([][]float64, feeds)
		errs := make(chan error, feeds)
		began := time.Now()
		var wg sync.WaitGroup
		for f := 0; f < feeds; f++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < rounds; k++ {
					bd := body(f, k, seqBase+int64(k)+1)
					time.Sleep(time.Until(began.Add(time.Duration(f)*period/feeds + time.Duration(k)*period)))
					d, err := post(bd)
					if err != nil {
						errs <- err
						return
					}
					lat[f] = append(lat[f], float64(d)/float64(time.Millisecond))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		seqBase += int64(rounds) + 1
		if err := prod.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		for _, l := range lat {
			s.lat = append(s.lat, l...)
		}
		s.reqs += feeds * rounds
		mu.Lock()
		s.sizes = append(s.sizes, sizes...)
		s.prod = append(s.prod, prodLat...)
		mu.Unlock()
	}

	// A fresh topic's first seconds are slow whoever goes first: warm it.
	run(&side{name: "warm-up"}, 2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range sides {
			run(sides[(i+k)%len(sides)], measured)
		}
	}
	b.StopTimer()
	for _, s := range sides {
		slices.Sort(s.lat)
		slices.Sort(s.sizes)
		slices.Sort(s.prod)
		pct := func(v []float64, p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
		b.ReportMetric(pct(s.lat, 0.50), s.name+"_p50_ms")
		b.ReportMetric(pct(s.lat, 0.99), s.name+"_p99_ms")
		b.ReportMetric(pct(s.prod, 0.50), s.name+"_produce_p50_ms")
		b.ReportMetric(pct(s.prod, 0.99), s.name+"_produce_p99_ms")
		b.ReportMetric(s.lat[len(s.lat)-1], s.name+"_max_ms")
		sum := 0
		for _, n := range s.sizes {
			sum += n
		}
		b.ReportMetric(float64(sum)/float64(len(s.sizes)), s.name+"_batch_mean")
		b.ReportMetric(float64(s.sizes[len(s.sizes)/2]), s.name+"_batch_p50")
		b.ReportMetric(float64(len(s.sizes))/float64(s.reqs), s.name+"_batches/request")
	}
}
