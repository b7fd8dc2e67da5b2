package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkEventLatency: records produced at 5,000/s (acks=all, in chunks
// of 50 every 10 ms) while an alerter runs; for every event, the time from
// the producer's acknowledgement of its record (what ingest's 202 waits
// for) to the event's outbox entry (the stream id's milliseconds, Redis's
// clock on the same machine). Reports p50 and p99.
func BenchmarkEventLatency(b *testing.B) {
	brokers, raddr := testenv.Kafka(b), testenv.Redis(b)
	const rate, chunk, seconds = 5000, 50, 10
	recs := toggling(200, rate*seconds/200, 10) // 10% transitions
	var lat []float64
	for i := 0; i < b.N; i++ {
		p := &pipeline{t: b, brokers: brokers, redisAddr: raddr, partitions: 12, topic: testenv.CreateTopic(b, brokers, 12),
			group: testenv.UniqueName("lat"), prefix: testenv.UniqueName("lat")}
		p.rc = redis.NewClient(&redis.Options{Addr: raddr})
		cfg := p.config()
		rc := newRedisClient(cfg.RedisAddr, "lat")
		store, _ := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: cfg.RedisPrefix, Topic: cfg.Topic})
		ix, err := loadZones(cfg.Zones)
		if err != nil {
			b.Fatal(err)
		}
		var zones geofence.Current
		zones.Store(ix)
		a := NewAlerter(cfg, store, &zones, newMetrics(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		// Start measuring once the alerter owns every partition.
		testenv.CheckFor(b, 60*time.Second, func() error {
			if a.running.Load() != int32(p.partitions) {
				return io.ErrNoProgress
			}
			return nil
		})
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: p.topic, Balancer: &kafka.Murmur2Balancer{},
			RequiredAcks: kafka.RequireAll, BatchSize: chunk, BatchTimeout: time.Millisecond, Transport: &kafka.Transport{}}
		acked := make(map[string]time.Time, len(recs))
		tick := time.NewTicker(time.Second * chunk / rate)
		for j := 0; j < len(recs); j += chunk {
			<-tick.C
			part := recs[j:min(j+chunk, len(recs))]
			msgs := make([]kafka.Message, len(part))
			for k := range part {
				msgs[k] = kafka.Message{Key: part[k].Key(), Value: part[k].AppendJSON(nil)}
			}
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for k := range part {
				acked[part[k].DroneID+"/"+strconv.FormatInt(part[k].Seq, 10)] = now
			}
		}
		tick.Stop()
		w.Close()
		testenv.CheckFor(b, 60*time.Second, p.caughtUp)
		cancel()
		<-done
		for part := 0; part < p.partitions; part++ {
			es, err := store.Outbox(context.Background(), part)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range es {
				var ev struct {
					DroneID string `json:"drone_id"`
					Seq     int64  `json:"seq"`
				}
				if err := json.Unmarshal(e.Event, &ev); err != nil {
					b.Fatal(err)
				}
				ms, _ := strconv.ParseInt(strings.SplitN(e.ID, "-", 2)[0], 10, 64)
				at := acked[ev.DroneID+"/"+strconv.FormatInt(ev.Seq, 10)]
				lat = append(lat, float64(time.UnixMilli(ms).Sub(at))/float64(time.Millisecond))
			}
		}
		rc.Close()
		p.rc.Close()
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no events")
	}
	b.ReportMetric(lat[len(lat)/2], "p50_ms")
	b.ReportMetric(lat[len(lat)*99/100], "p99_ms")
	b.ReportMetric(float64(len(lat)), "events")
}
