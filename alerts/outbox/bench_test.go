package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// fillOutbox appends n events with pipelined XADDs.
func fillOutbox(b *testing.B, rdb redis.UniversalClient, k redislayout.Keys, n int) {
	b.Helper()
	ctx := context.Background()
	for from := 0; from < n; from += 1000 {
		pipe := rdb.Pipeline()
		for i := from; i < min(n, from+1000); i++ {
			evID, body := testEvent(i)
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: redislayout.Entry{EventID: evID, Event: body}.Values()})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// drain runs d on partition until the output's delivered counter reaches n,
// timing only that, and reports events/s.
func drain(b *testing.B, d *Dispatcher, reg *prometheus.Registry, partition int, output string, n int) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { done <- d.Run(ctx, partition) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	pl := strconv.Itoa(partition)
	for metricValue(b, reg, "nofly_outbox_delivered_total", pl, output) < float64(n) {
		<-tick.C
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
}

// BenchmarkKafkaOutput drains b.N outbox entries into alerts.events through
// the idempotent producer, against the real broker and Redis.
func BenchmarkKafkaOutput(b *testing.B) {
	brokers := testenv.Kafka(b)
	for _, batch := range []int{100, 500, 2000} {
		b.Run("batch"+strconv.Itoa(batch), func(b *testing.B) {
			b.ReportAllocs()
			rdb := testenv.RedisClient(b)
			topic := testenv.CreateTopic(b, brokers, 1)
			reg := prometheus.NewRegistry()
			cfg := Config{Prefix: testenv.RedisPrefix(b, "bench"), Topic: "t", BatchSize: batch, Registerer: reg, Logger: testLogger()}
			k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
			b.Cleanup(func() { rdb.Del(context.Background(), k.Outbox(), k.Cursor(kafkaOutputName)) })
			fillOutbox(b, rdb, k, b.N)
			d, err := NewDispatcher(cfg, rdb, NewKafkaOutput(brokers, topic, producer.Config{Logger: testLogger()}))
			if err != nil {
				b.Fatal(err)
			}
			drain(b, d, reg, 0, kafkaOutputName, b.N)
		})
	}
}

// BenchmarkWebhookOutput drains b.N entries into a local endpoint that
// answers 204 at once: the cost of one POST and one cursor script per event.
func BenchmarkWebhookOutput(b *testing.B) {
	b.ReportAllocs()
	rdb := testenv.RedisClient(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	cfg := Config{Prefix: testenv.RedisPrefix(b, "bench"), Topic: "t", Webhooks: []Webhook{{Name: "local", URL: srv.URL}},
		Registerer: reg, Logger: testLogger()}
	k := redislayout.Of(cfg.Prefix, cfg.Topic, 0)
	b.Cleanup(func() { rdb.Del(context.Background(), k.Outbox(), k.Cursor(redislayout.WebhookOutput("local"))) })
	fillOutbox(b, rdb, k, b.N)
	d, err := NewDispatcher(cfg, rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	drain(b, d, reg, 0, "webhook:local", b.N)
}
