package benchcompare

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
)

// Latency is a distribution of durations: nearest-rank percentiles.
type Latency struct {
	N    int           `json:"n"`
	Min  time.Duration `json:"min_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// Percentile is the nearest-rank q-quantile (0 < q ≤ 1) of sorted: the
// smallest value with at least q of the values at or below it; 0 for none.
// headerOutboxID is alerts/outbox.HeaderOutboxID, spelled here because
// importing alerts/outbox would make an import cycle for the producer's
// in-package benchmarks, which use this package (TestHeaderOutboxID holds
// the two equal).
const headerOutboxID = "nofly-outbox-id"

func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// Summarize sorts ds and returns their distribution.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{N: len(ds), Min: ds[0], P50: Percentile(ds, 0.50), P90: Percentile(ds, 0.90),
		P99: Percentile(ds, 0.99), Max: ds[len(ds)-1], Mean: sum / time.Duration(len(ds))}
}

// RedisStats is what INFO says of the work Redis has done since it
// started: commands (scripts' inner commands included), read and write
// events on client sockets (a request, or a pipeline arriving at once, is
// one read; its replies one write: writes are the round trips), and each
// command's calls (INFO commandstats).
type RedisStats struct {
	Commands  int64            `json:"total_commands_processed"`
	Reads     int64            `json:"total_reads_processed"`
	Writes    int64            `json:"total_writes_processed"`
	ByCommand map[string]int64 `json:"commandstats_calls"`
	PID       int              `json:"process_id,omitempty"`
	Version   string           `json:"redis_version,omitempty"`
}

// ParseRedisInfo reads the fields RedisStats holds from the text of INFO
// (any sections; CRLF or LF line ends).
func ParseRedisInfo(info string) (RedisStats, error) {
	s := RedisStats{ByCommand: map[string]int64{}}
	seen := 0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		var err error
		switch {
		case k == "total_commands_processed":
			s.Commands, err = strconv.ParseInt(v, 10, 64)
			seen++
		case k == "total_reads_processed":
			s.Reads, err = strconv.ParseInt(v, 10, 64)
		case k == "total_writes_processed":
			s.Writes, err = strconv.ParseInt(v, 10, 64)
		case k == "process_id":
			s.PID, err = strconv.Atoi(v)
		case k == "redis_version":
			s.Version = v
		case strings.HasPrefix(k, "cmdstat_"):
			calls, found := int64(0), false
			for kv := range strings.SplitSeq(v, ",") {
				if x, ok := strings.CutPrefix(kv, "calls="); ok {
					calls, err = strconv.ParseInt(x, 10, 64)
					found = true
				}
			}
			if !found && err == nil {
				err = errors.New("no calls=")
			}
			s.ByCommand[strings.TrimPrefix(k, "cmdstat_")] = calls
		}
		if err != nil {
			return RedisStats{}, fmt.Errorf("benchcompare: INFO %s: %q: %w", k, v, err)
		}
	}
	if seen == 0 {
		return RedisStats{}, errors.New("benchcompare: INFO without total_commands_processed (section stats missing)")
	}
	return s, nil
}

// Sub is the work done between before and s. INFO's own calls are left
// out of ByCommand; Commands keeps them (one per INFO).
func (s RedisStats) Sub(before RedisStats) RedisStats {
	d := RedisStats{Commands: s.Commands - before.Commands, Reads: s.Reads - before.Reads,
		Writes: s.Writes - before.Writes, ByCommand: map[string]int64{}, PID: s.PID, Version: s.Version}
	for k, v := range s.ByCommand {
		if n := v - before.ByCommand[k]; n > 0 && k != "info" {
			d.ByCommand[k] = n
		}
	}
	return d
}

// ScriptCalls is the calls of EVAL, EVALSHA and FCALL (and their _ro
// variants): each one round trip carrying many commands.
func (s RedisStats) ScriptCalls() int64 {
	var n int64
	for k, v := range s.ByCommand {
		switch k {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			n += v
		}
	}
	return n
}

// MetricValues returns the values of the named unlabelled metrics in a
// Prometheus text exposition; a name not there is missing from the map.
func MetricValues(text string, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("benchcompare: metric %s: %w", name, err)
		}
		out[name] = f
	}
	return out, sc.Err()
}

// groupLag is the group's lag on topic: the partitions' end offsets less
// the offsets the group committed (a partition without a commit counts from
// 0: the run's topics are new).
func groupLag(ctx context.Context, client *kafka.Client, topic, group string, partitions int) (end, done int64, err error) {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	ps := make([]int, partitions)
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
		ps[p] = p
	}
	lo, err := client.ListOffsets(ctx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	for _, po := range lo.Topics[topic] {
		if po.Error != nil {
			return 0, 0, fmt.Errorf("list offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		end += po.LastOffset
	}
	of, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		return 0, 0, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	if of.Error != nil {
		return 0, 0, fmt.Errorf("offsets of group %s: %w", group, of.Error)
	}
	for _, po := range of.Topics[topic] {
		if po.Error != nil {
			return 0, 0, fmt.Errorf("offset of group %s on %s/%d: %w", group, topic, po.Partition, po.Error)
		}
		done += max(po.CommittedOffset, 0)
	}
	return end, done, nil
}

// seenEvent is an alarm event of alerts.events and when the benchmark
// first could read it as read_committed; outbox and produced are when the
// alerter appended it to the Redis outbox (its stream id's milliseconds,
// Redis's clock) and when the dispatcher produced it (the record's
// timestamp), in Unix milliseconds, 0 when unknown. The machine's one
// clock serves all.
type seenEvent struct {
	id               string
	drone            string
	seq              int64
	at               int64 // ns since the run's start
	outbox, produced int64
}

// streamIDMillis is the milliseconds part of a Redis stream id
// ("1733300000000-3"); 0 when id is not one.
func streamIDMillis(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// eventFollower reads every partition of alerts.events as a read_committed
// consumer, each partition by long polls on a connection of its own
// (committed.Reader.Poll: the broker answers once the last stable offset
// moves), and notes when each event became visible.
type eventFollower struct {
	addr       net.Addr
	topic      string
	partitions int
	start      time.Time

	mu     sync.Mutex
	events []seenEvent
	polls  int // fetches answered, empty ones too

	fails failures
}

// failures counts a follower's failed reads (each retried) and keeps the
// last one's error.
type failures struct {
	mu   sync.Mutex
	n    int
	last error
}

// retry notes err, then waits a moment (or until ctx ends) before the
// caller reads again.
func (f *failures) retry(ctx context.Context, err error) {
	f.mu.Lock()
	f.n++
	f.last = err
	f.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// get is the count of failed reads and the last one's error.
func (f *failures) get() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.last
}

func (f *eventFollower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// run polls until ctx ends.
func (f *eventFollower) run(ctx context.Context) {
	var wg sync.WaitGroup
	for p := range f.partitions {
		wg.Go(func() { f.follow(ctx, p) })
	}
	wg.Wait()
}

func (f *eventFollower) follow(ctx context.Context, partition int) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: f.addr, Topic: f.topic, Transport: tr}
	var next int64
	for ctx.Err() == nil {
		recs, after, err := r.Poll(ctx, partition, next)
		now := time.Since(f.start).Nanoseconds()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The topic may not be there yet, or a leader moved: poll
			// again in a moment.
			f.fails.retry(ctx, err)
			continue
		}
		next = after
		if len(recs) == 0 {
			f.mu.Lock()
			f.polls++
			f.mu.Unlock()
			continue
		}
		got := make([]seenEvent, 0, len(recs))
		for _, rec := range recs {
			var e struct {
				ID    string `json:"event_id"`
				Drone string `json:"drone_id"`
				Seq   int64  `json:"seq"`
			}
			if json.Unmarshal(rec.Value, &e) != nil {
				e.ID = fmt.Sprintf("undecodable %d/%d", partition, rec.Offset)
			}
			se := seenEvent{id: e.ID, drone: e.Drone, seq: e.Seq, at: now}
			if oid, ok := rec.Header(headerOutboxID); ok {
				se.outbox = streamIDMillis(string(oid))
			}
			if !rec.Time.IsZero() {
				se.produced = rec.Time.UnixMilli()
			}
			got = append(got, se)
		}
		f.mu.Lock()
		f.events = append(f.events, got...)
		f.polls++
		f.mu.Unlock()
	}
}
