package alerterd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// pipeline is one live test setup: a unique topic, group and Redis prefix
// on the given Kafka and Redis.
type pipeline struct {
	t          testing.TB
	brokers    []string
	redisAddr  string
	topic      string
	partitions int
	group      string
	prefix     string
	rc         *redis.Client
	// cluster, when set, is the Redis Cluster client the test reads the
	// store through (redisAddr then names the cluster's nodes).
	cluster redis.UniversalClient
	// events is the events topic the alerters dispatch to: empty (the
	// Kafka output off) unless the test calls withEvents.
	events string
	// resend: produce resends the records a write failed for, up to a
	// minute, instead of failing: on a cluster a leader may die under the
	// write. A resent record the broker had written is a duplicate, which
	// the seq rule ignores, as the reference does.
	resend bool
}

func newPipeline(t testing.TB, brokers []string, redisAddr string, partitions int) *pipeline {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rc.Close() })
	return &pipeline{t: t, brokers: brokers, redisAddr: redisAddr, partitions: partitions,
		topic:  testenv.CreateTopic(t, brokers, partitions),
		group:  testenv.UniqueName("alerter"),
		prefix: testenv.RedisPrefix(t, "nofly"),
		rc:     rc,
	}
}

func (p *pipeline) config() Config {
	c := DefaultConfig()
	c.Brokers = p.brokers
	c.Topic = p.topic
	c.Partitions = p.partitions
	c.Group = p.group
	c.RedisAddr = p.redisAddr
	c.RedisPrefix = p.prefix
	c.Zones = zonesPath()
	c.Batch = 200
	c.Linger = 10 * time.Millisecond
	// A SIGKILLed alerter's partitions move once its session times out:
	// 2 s (the test broker allows 1 s, scripts/kafka.sh) keeps the crash,
	// zombie and rebalance proofs' many restarts short.
	c.SessionTimeout = 2 * time.Second
	c.HeartbeatInterval = 400 * time.Millisecond
	c.RebalanceTimeout = 10 * time.Second
	c.EventsTopic = p.events
	// The audit topic's default is one per deployment: every test's
	// alerters sharing it would fence one another's writer and find the
	// first test's trail in it (ErrOtherTrail). Its sending is proven in
	// audit/auditkafka and TestDashboardAuditTrail.
	c.AuditTopic = ""
	c.HTTPAddr = "127.0.0.1:0"
	c.LogLevel = "warn"
	return c
}

// startInProcess runs an alerter in this process until the returned stop
// is called (or the test ends).
func (p *pipeline) startInProcess(cfg Config) (stop func()) {
	t := p.t
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() { done <- serve(ctx, cfg, log, nil) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("alerter: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Error("alerter did not stop within 60s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// produce writes the records to the topic, key = drone id (murmur2, as
// ingest partitions), in order, acks=all.
func (p *pipeline) produce(recs []telemetry.Position) {
	if err := p.produceErr(recs); err != nil {
		p.t.Fatal(err)
	}
}

// produceAt is produce with each record's Kafka timestamp — the time
// ingest would have received it, the log's clock — from times (parallel
// to recs).
func (p *pipeline) produceAt(recs []telemetry.Position, times []time.Time) {
	if err := p.produceErrAt(recs, times); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pipeline) produceErr(recs []telemetry.Position) error { return p.produceErrAt(recs, nil) }

func (p *pipeline) produceErrAt(recs []telemetry.Position, times []time.Time) error {
	w := &kafka.Writer{Addr: kafka.TCP(p.brokers...), Topic: p.topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, MaxAttempts: 20,
		Transport: &kafka.Transport{}}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	for i := range recs {
		msgs[i] = kafka.Message{Key: recs[i].Key(), Value: recs[i].AppendJSON(nil)}
		if times != nil {
			msgs[i].Time = times[i]
		}
	}
	for i := 0; i < len(msgs); i += 5000 {
		chunk := msgs[i:min(i+5000, len(msgs))]
		deadline := time.Now().Add(time.Minute)
		for {
			err := w.WriteMessages(context.Background(), chunk...)
			if err == nil {
				break
			}
			if !p.resend || time.Now().After(deadline) {
				return fmt.Errorf("produce: %w", err)
			}
			// Only the failed ones: a chunk below BatchSize records per
			// partition is one batch per partition, failed or written
			// whole, so resending keeps each partition's order.
			var we kafka.WriteErrors
			if errors.As(err, &we) && len(we) == len(chunk) {
				var failed []kafka.Message
				for j, e := range we {
					if e != nil {
						failed = append(failed, chunk[j])
						err = e // one of them for the log: all of them can be thousands
					}
				}
				chunk = failed
			}
			p.t.Logf("produce: resending %d records after %v", len(chunk), err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// endOffsets returns each partition's next offset.
func (p *pipeline) endOffsets() (map[int]int64, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(p.brokers...), Timeout: 10 * time.Second, Transport: tr}
	req := make([]kafka.OffsetRequest, p.partitions)
	for i := range req {
		req[i] = kafka.LastOffsetOf(i)
	}
	res, err := c.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{p.topic: req}})
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, po := range res.Topics[p.topic] {
		if po.Error != nil {
			return nil, po.Error
		}
		out[po.Partition] = po.LastOffset
	}
	return out, nil
}

func (p *pipeline) store() *dedup.Redis {
	var c redis.UniversalClient = p.rc
	if p.cluster != nil {
		c = p.cluster
	}
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: p.prefix, Topic: p.topic})
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// caughtUp is nil once every partition's applied offset is its last
// record's.
func (p *pipeline) caughtUp() error {
	ends, err := p.endOffsets()
	if err != nil {
		return err
	}
	s := p.store()
	var behind []string
	for part := 0; part < p.partitions; part++ {
		snap, err := s.Load(context.Background(), part)
		if err != nil {
			return err
		}
		if snap.Applied != ends[part]-1 {
			behind = append(behind, fmt.Sprintf("p%d at %d of %d", part, snap.Applied, ends[part]-1))
		}
	}
	if len(behind) > 0 {
		return fmt.Errorf("alerter behind: %s", strings.Join(behind, ", "))
	}
	return nil
}

// outbox returns every event JSON in the partitions' outboxes.
func (p *pipeline) outbox() [][]byte {
	s := p.store()
	var out [][]byte
	for part := 0; part < p.partitions; part++ {
		es, err := s.Outbox(context.Background(), part)
		if err != nil {
			p.t.Fatal(err)
		}
		for _, e := range es {
			out = append(out, e.Event)
		}
	}
	return out
}

// TestReferenceProof: the scenario produced to a real topic, one alerter
// against the real Kafka and Redis; the outbox equals the independent
// reference (0 missing, 0 duplicate) and replay's output field for field
// (all but partition and offset). Dispatch is on: the events topic holds
// every outbox event exactly once, in its partition.
func TestReferenceProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	stop := p.startInProcess(p.config())
	began := time.Now()
	p.produceAt(sc.Records, sc.Received)
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	t.Logf("%d records (%d unique, %d duplicates, %d stale) applied in %v", len(sc.Records), sc.Unique, sc.Duplicates, sc.Stale, time.Since(began).Round(time.Millisecond))
	p.checkEventsTopic()
	stop()
	live := p.outbox()
	compareEvents(t, "live pipeline", want, eventsFromNDJSON(t, live))
	compareWithReplay(t, live, runReplayPartitions(t, sc, p.partitions))
}

// compareWithReplay checks that live and replayed events are equal in
// every field but partition, offset and zone_version.
func compareWithReplay(t *testing.T, live [][]byte, replayed []byte) {
	t.Helper()
	norm := func(lines [][]byte) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			var ev map[string]any
			if err := json.Unmarshal(l, &ev); err != nil {
				t.Fatal(err)
			}
			delete(ev, "partition")
			delete(ev, "offset")
			// Live runs the zone store's version (seeded from the file:
			// 1), a replay of the file alone version 0; a replay with the
			// zone history matches it too (TestZoneChangeReachesEveryInstance).
			delete(ev, "zone_version")
			b, _ := json.Marshal(ev)
			m[string(b)]++
		}
		return m
	}
	lm, rm := norm(live), norm(splitLines(replayed))
	diff := 0
	for k, n := range lm {
		if rm[k] != n {
			if diff < 5 {
				t.Errorf("live event x%d, replay x%d: %s", n, rm[k], k)
			}
			diff++
		}
	}
	for k, n := range rm {
		if lm[k] == 0 {
			if diff < 5 {
				t.Errorf("replay event x%d not live: %s", n, k)
			}
			diff++
		}
	}
	if diff == 0 {
		t.Logf("replay equals the live pipeline: %d events, every field but partition and offset", len(live))
	}
}
