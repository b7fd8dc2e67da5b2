package alerterd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// toggling returns drones×positions records where every drone crosses the
// POLY zone's boundary every `every` positions: a transition rate of
// 1/every per record.
func toggling(drones, positions, every int) []telemetry.Position {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	out := make([]telemetry.Position, 0, drones*positions)
	for s := 0; s < positions; s++ {
		for d := 0; d < drones; d++ {
			lon := -0.49 // inside POLY
			if (s/every)%2 == 1 {
				lon = -0.52 // in no zone
			}
			out = append(out, telemetry.Position{DroneID: fmt.Sprintf("UAV-%04d", d), Seq: int64(s + 1),
				TS: start.Add(time.Duration(s) * time.Second), Lat: 51.47 + float64(d)*1e-5, Lon: lon, AltM: telemetry.Float(80)})
		}
	}
	return out
}

// countingHook counts round trips to Redis (a pipeline is one).
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// cpuSample is the CPU used so far by this process (the benchmark, the
// plain consumer and the in-process alerter), by Redis's main thread and by
// the broker (when brokerPID found it).
type cpuSample struct{ self, redis, broker time.Duration }

// brokerPID is the pid of the broker scripts/kafka.sh started, 0 when its
// pid file is absent (brokers of NOFLY_KAFKA_BROKERS elsewhere): the broker
// figures are then not reported.
var brokerPID = sync.OnceValue(func() int {
	pid, err := benchcompare.KafkaPID()
	if err != nil {
		return 0
	}
	return pid
})

func sampleCPU(rc *redis.Client) cpuSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := cpuSample{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if pid := brokerPID(); pid > 0 {
		s.broker, _ = benchcompare.ProcCPU(pid)
	}
	info, _ := rc.Info(context.Background(), "cpu").Result()
	for _, l := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(l, ":")
		if k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread" {
			f, _ := strconv.ParseFloat(v, 64)
			s.redis += time.Duration(f * float64(time.Second))
		}
	}
	return s
}

func (s cpuSample) sub(o cpuSample) cpuSample {
	return cpuSample{s.self - o.self, s.redis - o.redis, s.broker - o.broker}
}
func (s cpuSample) add(o cpuSample) cpuSample {
	return cpuSample{s.self + o.self, s.redis + o.redis, s.broker + o.broker}
}

// plainConsume reads every partition to its end with one kafka.Reader per
// partition and decodes each record: the baseline.
func plainConsume(b *testing.B, p *pipeline, ends map[int]int64) time.Duration {
	began := time.Now()
	var wg sync.WaitGroup
	for part := 0; part < p.partitions; part++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: p.brokers, Topic: p.topic, Partition: part, MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 250 * time.Millisecond})
			defer r.Close()
			for {
				m, err := r.FetchMessage(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := telemetry.Decode(m.Value); err != nil {
					b.Error(err)
					return
				}
				if m.Offset >= ends[part]-1 {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(began)
}

// kgoConsume reads every partition to its end with one franz-go client
// (direct partition assignment, no group) and decodes each record: the
// fastest plain consumer, the alerter's fetch path's yardstick.
func kgoConsume(b *testing.B, p *pipeline, ends map[int]int64) time.Duration {
	began := time.Now()
	parts := make(map[int32]kgo.Offset, p.partitions)
	left := 0
	for part := 0; part < p.partitions; part++ {
		if ends[part] > 0 {
			parts[int32(part)] = kgo.NewOffset().AtStart()
			left++
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.topic: parts}),
		kgo.FetchMaxBytes(8<<20), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for left > 0 {
		fs := cl.PollFetches(context.Background())
		if err := fs.Err(); err != nil {
			b.Fatal(err)
		}
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			if _, err := telemetry.Decode(r.Value); err != nil && derr == nil {
				derr = err
			}
			if r.Offset == ends[int(r.Partition)]-1 {
				left--
			}
		})
		if derr != nil {
			b.Fatal(derr)
		}
	}
	return time.Since(began)
}

// runAlerter runs an alerter (own group and prefix) until it applied every
// record, timing from the moment it joined the group; it returns the time
// and the Redis round trips.
func runAlerter(b *testing.B, p *pipeline, total int64) (time.Duration, int64) {
	p.group = testenv.UniqueName("bench")
	p.prefix = testenv.RedisPrefix(b, "bench")
	cfg := p.config()
	cfg.Batch = 500
	cfg.Linger = 20 * time.Millisecond
	hook := &countingHook{}
	rc := newRedisClient(cfg.RedisAddr, "bench")
	defer rc.Close()
	rc.AddHook(hook)
	ix, err := loadZones(cfg.Zones)
	if err != nil {
		b.Fatal(err)
	}
	var zones geofence.Current
	zones.Store(ix)
	a, err := consume.New(cfg.groupOptions(rc, &zones, slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !a.Joined() {
		<-tick.C
	}
	began := time.Now()
	base := hook.n.Load()
	for a.Processed() < total {
		<-tick.C
	}
	took := time.Since(began)
	if err := p.caughtUp(); err != nil {
		b.Fatal(err)
	}
	return took, hook.n.Load() - base
}

// BenchmarkAlerterVsPlainConsumer: the alerter flat out over a topic
// already filled, against a plain kafka-go consumer that only decodes the
// same topic and a franz-go one that does the same, in the same run; and the alerter's Redis round trips per
// 1,000 positions at the scenario's (~1.6%), 1% and 20% transitions.
func BenchmarkAlerterVsPlainConsumer(b *testing.B) {
	brokers, raddr := testenv.Kafka(b), testenv.Redis(b)
	cases := []struct {
		name string
		recs []telemetry.Position
	}{
		{"scenario-400x500", scenario.Generate(scenario.Config{Seed: 1, Drones: 400, Positions: 500, DupRate: 0.04, StaleRate: 0.01}).Records},
		{"transitions-1pct", toggling(400, 500, 100)},
		{"transitions-20pct", toggling(400, 500, 5)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			p := &pipeline{t: b, brokers: brokers, redisAddr: raddr, partitions: 12, topic: testenv.CreateTopic(b, brokers, 12)}
			p.rc = redis.NewClient(&redis.Options{Addr: raddr})
			defer p.rc.Close()
			if err := p.produceErr(tc.recs); err != nil {
				b.Fatal(err)
			}
			ends, err := p.endOffsets()
			if err != nil {
				b.Fatal(err)
			}
			var plain, franz, alert time.Duration
			var plainCPU, franzCPU, alertCPU cpuSample
			var trips int64
			runPlain := func() {
				c0 := sampleCPU(p.rc)
				plain += plainConsume(b, p, ends)
				plainCPU = plainCPU.add(sampleCPU(p.rc).sub(c0))
			}
			runKgo := func() {
				c0 := sampleCPU(p.rc)
				franz += kgoConsume(b, p, ends)
				franzCPU = franzCPU.add(sampleCPU(p.rc).sub(c0))
			}
			for i := 0; i < b.N; i++ {
				// Alternate the order: the machine is shared and its load drifts.
				if i%2 == 0 {
					runPlain()
					runKgo()
				}
				c0 := sampleCPU(p.rc)
				d, n := runAlerter(b, p, int64(len(tc.recs)))
				alertCPU = alertCPU.add(sampleCPU(p.rc).sub(c0))
				alert += d
				trips += n
				if i%2 == 1 {
					runKgo()
					runPlain()
				}
			}
			n := float64(len(tc.recs) * b.N)
			b.ReportMetric(n/plain.Seconds(), "plain_records/s")
			b.ReportMetric(n/alert.Seconds(), "alerter_records/s")
			b.ReportMetric(n/franz.Seconds(), "kgo_records/s")
			b.ReportMetric(plain.Seconds()/alert.Seconds(), "ratio")
			b.ReportMetric(franz.Seconds()/alert.Seconds(), "kgo_ratio")
			b.ReportMetric(float64(trips)/n*1000, "redis_trips/1000rec")
			// Where the CPU goes, per record: this process (decoding, and for
			// the alerter the engine and the Redis client; the alerter's
			// figure includes its group join and load) and Redis's main thread
			// (scripts, AOF write and fsync). The broker is not counted.
			b.ReportMetric(float64(plainCPU.self.Nanoseconds())/n, "plain_go_cpu_ns/rec")
			b.ReportMetric(float64(franzCPU.self.Nanoseconds())/n, "kgo_go_cpu_ns/rec")
			b.ReportMetric(float64(alertCPU.self.Nanoseconds())/n, "alerter_go_cpu_ns/rec")
			b.ReportMetric(float64(alertCPU.redis.Nanoseconds())/n, "alerter_redis_cpu_ns/rec")
			// The broker serving each side's fetches (and the alerter's
			// group and offset commits); 10 ms ticks of /proc/PID/stat.
			if brokerPID() > 0 {
				b.ReportMetric(float64(plainCPU.broker.Nanoseconds())/n, "plain_broker_cpu_ns/rec")
				b.ReportMetric(float64(franzCPU.broker.Nanoseconds())/n, "kgo_broker_cpu_ns/rec")
				b.ReportMetric(float64(alertCPU.broker.Nanoseconds())/n, "alerter_broker_cpu_ns/rec")
			} else {
				b.Log("no pid file of scripts/kafka.sh's broker: its CPU is not reported")
			}
		})
	}
}
