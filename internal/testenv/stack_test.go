package testenv_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestKafkaGroupResumesAfterLastCommit proves the broker and kafka-go's
// consumer groups behave as the alerter relies on: a consumer that commits
// explicitly, is stopped mid-way and started again resumes right after its
// last committed offset, so every message is processed once and none missed.
// A client nobody here wrote (kcat) then reads the same topic back.
func TestKafkaGroupResumesAfterLastCommit(t *testing.T) {
	const (
		partitions = 6
		total      = 20000
		firstRun   = 7000
		batch      = 100
	)
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, partitions)
	group := testenv.UniqueName("resume")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, // a Writer literal defaults to acks=none
		BatchSize:    500,
		BatchTimeout: 5 * time.Millisecond,
	}
	msgs := make([]kafka.Message, total)
	want := make(map[string]string, total)
	for i := range msgs {
		k, v := fmt.Sprintf("key-%05d", i), fmt.Sprintf("value-%05d-%x", i, i*7919)
		msgs[i] = kafka.Message{Key: []byte(k), Value: []byte(v)}
		want[k] = v
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	seen := make(map[string]int, total)
	newReader := func() *kafka.Reader {
		return kafka.NewReader(kafka.ReaderConfig{
			Brokers:        brokers,
			GroupID:        group,
			Topic:          topic,
			StartOffset:    kafka.FirstOffset,
			CommitInterval: 0, // synchronous commits: an async one is dropped on rebalance
			MaxWait:        100 * time.Millisecond,
		})
	}
	// consume processes whole batches: a batch counts as seen only once its
	// commit returned, which is what "processed" means for this consumer.
	consume := func(r *kafka.Reader, limit int, first map[int]int64) int {
		n := 0
		var pending []kafka.Message
		for n < limit {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("fetch after %d messages: %v", n, err)
			}
			if _, ok := first[m.Partition]; !ok {
				first[m.Partition] = m.Offset
			}
			pending = append(pending, m)
			if len(pending) == batch || n+len(pending) == limit {
				if err := r.CommitMessages(ctx, pending...); err != nil {
					t.Fatalf("commit: %v", err)
				}
				for _, p := range pending {
					seen[string(p.Key)]++
				}
				n += len(pending)
				pending = pending[:0]
			}
		}
		return n
	}

	r1 := newReader()
	consume(r1, firstRun, map[int]int64{})
	if err := r1.Close(); err != nil {
		t.Fatalf("close first consumer: %v", err)
	}

	committed := fetchCommitted(ctx, t, brokers, group, topic, partitions)
	var sum int64
	for _, off := range committed {
		sum += off
	}
	if sum != firstRun {
		t.Fatalf("committed offsets add up to %d, want %d (%v)", sum, firstRun, committed)
	}

	r2 := newReader()
	defer r2.Close()
	first := map[int]int64{}
	consume(r2, total-firstRun, first)
	for p, off := range first {
		if off != committed[p] {
			t.Errorf("partition %d: second consumer started at offset %d, last commit was %d", p, off, committed[p])
		}
	}
	if len(seen) != total {
		t.Fatalf("saw %d distinct keys, want %d", len(seen), total)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("key %s processed %d times", k, c)
		}
	}

	t.Run("kcat reads what kafka-go wrote", func(t *testing.T) {
		kcatCompare(t, brokers[0], topic, want)
	})
}

func fetchCommitted(ctx context.Context, t *testing.T, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	res, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("offset fetch partition %d: %v", p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

func kcatCompare(t *testing.T, broker, topic string, want map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", broker, "-t", topic, "-e", "-q",
		"-f", "%k\t%s\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v: %s (kcat is installed by scripts/kafka.sh install)", err, stderr.String())
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	lines := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("kcat line %q has no tab", sc.Text())
		}
		lines++
		if prev, dup := got[k]; dup {
			t.Errorf("kcat saw key %s twice (%q, %q)", k, prev, v)
		}
		got[k] = v
	}
	if lines != len(want) {
		t.Errorf("kcat read %d records, kafka-go wrote %d", lines, len(want))
	}
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d keys differ between kcat and what was written, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
}

// TestRedisScriptFallsBackToEval proves the Redis round trip the dedup store
// is built on: go-redis runs a Lua script by EVALSHA and, when the server
// answers NOSCRIPT (after a restart or SCRIPT FLUSH), sends it with EVAL.
func TestRedisScriptFallsBackToEval(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	rec := &cmdRecorder{}
	rdb.AddHook(rec)
	key := testenv.UniqueName("lua-roundtrip")
	t.Cleanup(func() { rdb.Del(ctx, key) })

	script := redis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
return {v, redis.call('TYPE', KEYS[1])['ok']}`)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		incr     int
		want     int64
		wantCmds []string
	}{
		{"after SCRIPT FLUSH: NOSCRIPT then EVAL", 5, 5, []string{"evalsha", "eval"}},
		{"cached: EVALSHA alone", 7, 12, []string{"evalsha"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec.reset()
			res, err := script.Run(ctx, rdb, []string{key}, tc.incr).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if got := res[0].(int64); got != tc.want || res[1] != "string" {
				t.Errorf("script returned %v, want [%d string]", res, tc.want)
			}
			if got := rec.names(); strings.Join(got, ",") != strings.Join(tc.wantCmds, ",") {
				t.Errorf("commands sent %v, want %v", got, tc.wantCmds)
			}
		})
	}
	var rerr redis.Error
	err := rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{key}).Err()
	if !errors.As(err, &rerr) || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Errorf("unknown sha: got %v, want a NOSCRIPT error", err)
	}
}

type cmdRecorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *cmdRecorder) reset() { r.mu.Lock(); r.cmds = nil; r.mu.Unlock() }
func (r *cmdRecorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.cmds...)
}
func (r *cmdRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *cmdRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.cmds = append(r.cmds, cmd.Name())
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (r *cmdRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
