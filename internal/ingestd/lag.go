package ingestd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// lagInterval is how often ingest measures the consumer groups' lag on its
// topic and whether Kafka answers.
const lagInterval = 5 * time.Second

// The alerters' lag is measured here, not by the alerters: a stalled,
// stopped or crashed alerter exports nothing (its /metrics is dark), and
// that is exactly the alerter whose lag matters. Ingest writes the topic,
// runs wherever nofly runs, and already talks to Kafka; the groups named by
// --lag-groups (the alerters' group by default; the alerters commit each
// batch's offset after Redis: docs/exactly-once.md) are measured, the way a
// Kafka lag exporter does, without one more process to deploy. Named, not
// listed: a broker shared by many groups pays one offset request per named
// group, not one per group it holds.
//
// The lag in seconds is the age of the oldest record a group has not
// committed: its Kafka timestamp is ingest's receive time. Ticks are
// written to every partition every --tick-interval, so a group that stops
// is a second further behind every second, whether telemetry flows or not;
// a record count would grow by one a second on a quiet topic and by
// thousands on a busy one.

// lagWatcher exports nofly_ingest_kafka_up and the consumer lag gauges.
type lagWatcher struct {
	client *kafka.Client
	topic  string
	groups []string
	log    *slog.Logger
	now    func() time.Time

	up      prometheus.Gauge
	records *prometheus.GaugeVec
	seconds *prometheus.GaugeVec

	set     map[lagSeries]bool       // the series the last poll set
	times   map[partOffset]time.Time // record times read by the last poll
	failing bool                     // the last poll failed (logged once)
	denied  map[string]bool          // groups whose offsets Kafka refused (logged once)
}

type lagSeries struct {
	group     string
	partition int
}

type partOffset struct {
	partition int
	offset    int64
}

// newLagWatcher returns the watcher of topic over client, its metrics
// registered on reg.
func newLagWatcher(client *kafka.Client, topic string, groups []string, reg prometheus.Registerer, log *slog.Logger) *lagWatcher {
	labels := []string{"group", "partition"}
	w := &lagWatcher{client: client, topic: topic, groups: groups, log: log, now: time.Now,
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nofly_ingest_kafka_up",
			Help: "1 when Kafka answered ingest's last metadata request for the telemetry topic (every 5 s), 0 when it did not."}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nofly_ingest_consumer_lag_records",
			Help: "Records of the telemetry topic's partition after the offset the consumer group committed (the alerters commit after Redis), " +
				"for every consumer group with offsets on the topic, measured every 5 s."}, labels),
		seconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nofly_ingest_consumer_lag_seconds",
			Help: "Age of the oldest record of the partition the consumer group has not committed (now less its Kafka timestamp, ingest's receive time); " +
				"0 when the group is at the end. Ticks reach every partition every --tick-interval, so a stopped group falls a second behind every second."}, labels),
		set: map[lagSeries]bool{}, times: map[partOffset]time.Time{}, denied: map[string]bool{},
	}
	reg.MustRegister(w.up, w.records, w.seconds)
	return w
}

// run polls every interval until ctx ends.
func (w *lagWatcher) run(ctx context.Context, every time.Duration) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(every, 3*time.Second))
		err := w.poll(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !w.failing:
			w.failing = true
			w.log.Warn("consumer lag not measured", "error", err)
		case err == nil && w.failing:
			w.failing = false
			w.log.Info("consumer lag measured again")
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// poll measures once. A Kafka that does not answer metadata sets up to 0.
// A poll that fails removes the lag series: a lag nobody measured is not
// shown as the last one seen.
func (w *lagWatcher) poll(ctx context.Context) error {
	parts, err := w.partitions(ctx)
	if err != nil {
		w.up.Set(0)
		w.keep(nil)
		return err
	}
	w.up.Set(1)
	if err := w.measure(ctx, parts); err != nil {
		w.keep(nil)
		return err
	}
	return nil
}

// measure sets the lag series of every group on the topic's partitions.
func (w *lagWatcher) measure(ctx context.Context, parts []int) error {
	if len(parts) == 0 { // no topic yet
		w.keep(nil)
		return nil
	}
	first, last, err := w.bounds(ctx, parts)
	if err != nil {
		return err
	}
	committed, err := w.committed(ctx, parts)
	if err != nil {
		return err
	}
	now := w.now()
	seen := map[lagSeries]bool{}
	times := map[partOffset]time.Time{}
	for group, offs := range committed {
		for p, c := range offs {
			// A partition the group has not committed yet (-1), or whose
			// committed records retention deleted, waits from the first
			// record still there.
			from := max(c, first[p])
			n := max(last[p]-from, 0)
			secs := 0.0
			if n > 0 {
				at, err := w.recordTime(ctx, p, from, times)
				if err != nil {
					return fmt.Errorf("time of %s/%d@%d: %w", w.topic, p, from, err)
				}
				secs = max(now.Sub(at).Seconds(), 0)
			}
			k := lagSeries{group, p}
			seen[k] = true
			lv := []string{group, strconv.Itoa(p)}
			w.records.WithLabelValues(lv...).Set(float64(n))
			w.seconds.WithLabelValues(lv...).Set(secs)
		}
	}
	w.times = times
	w.keep(seen)
	return nil
}

// keep deletes the series not in seen (a group gone, a topic recreated).
func (w *lagWatcher) keep(seen map[lagSeries]bool) {
	for k := range w.set {
		if !seen[k] {
			lv := []string{k.group, strconv.Itoa(k.partition)}
			w.records.DeleteLabelValues(lv...)
			w.seconds.DeleteLabelValues(lv...)
		}
	}
	if seen == nil {
		seen = map[lagSeries]bool{}
	}
	w.set = seen
}

// partitions returns the topic's partition ids; none when the topic does
// not exist (yet). An error means Kafka did not answer.
func (w *lagWatcher) partitions(ctx context.Context) ([]int, error) {
	md, err := w.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{w.topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var ps []int
	for _, t := range md.Topics {
		if t.Name != w.topic || t.Error != nil {
			continue
		}
		for _, p := range t.Partitions {
			ps = append(ps, p.ID)
		}
	}
	slices.Sort(ps)
	return ps, nil
}

// bounds returns each partition's first and end offsets.
func (w *lagWatcher) bounds(ctx context.Context, parts []int) (first, last map[int]int64, err error) {
	ask := func(req func(int) kafka.OffsetRequest) (map[int]kafka.PartitionOffsets, error) {
		r := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
		for _, p := range parts {
			r.Topics[w.topic] = append(r.Topics[w.topic], req(p))
		}
		res, err := w.client.ListOffsets(ctx, r)
		if err != nil {
			return nil, err
		}
		out := map[int]kafka.PartitionOffsets{}
		for _, po := range res.Topics[w.topic] {
			if po.Error != nil {
				return nil, fmt.Errorf("partition %d: %w", po.Partition, po.Error)
			}
			out[po.Partition] = po
		}
		if len(out) != len(parts) {
			return nil, fmt.Errorf("offsets of %d partitions of %s, want %d", len(out), w.topic, len(parts))
		}
		return out, nil
	}
	lo, err := ask(kafka.FirstOffsetOf)
	if err != nil {
		return nil, nil, fmt.Errorf("first offsets of %s: %w", w.topic, err)
	}
	hi, err := ask(kafka.LastOffsetOf)
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s: %w", w.topic, err)
	}
	first, last = map[int]int64{}, map[int]int64{}
	for _, p := range parts {
		first[p], last[p] = lo[p].FirstOffset, hi[p].LastOffset
	}
	return first, last, nil
}

// committed returns, for every watched consumer group with a committed
// offset on at least one partition of the topic, its offset on each (-1:
// none). A group whose offsets Kafka refuses (no Describe permission on a
// secured cluster) is left out, logged once.
func (w *lagWatcher) committed(ctx context.Context, parts []int) (map[string]map[int]int64, error) {
	out := map[string]map[int]int64{}
	for _, group := range w.groups {
		g := struct{ GroupID string }{group}
		of, err := w.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: g.GroupID, Topics: map[string][]int{w.topic: parts}})
		if err == nil && of.Error != nil {
			err = of.Error
		}
		if err != nil {
			var ke kafka.Error
			if errors.As(err, &ke) && !ke.Temporary() {
				if !w.denied[g.GroupID] {
					w.denied[g.GroupID] = true
					w.log.Warn("consumer lag: offsets of a group refused; its lag is not measured", "group", g.GroupID, "error", err)
				}
				continue
			}
			return nil, fmt.Errorf("offsets of group %s: %w", g.GroupID, err)
		}
		offs := map[int]int64{}
		reads := false
		for _, po := range of.Topics[w.topic] {
			c := po.CommittedOffset
			if po.Error != nil {
				c = -1
			}
			offs[po.Partition] = c
			reads = reads || c >= 0
		}
		if !reads {
			continue // not a consumer of this topic
		}
		for _, p := range parts {
			if _, ok := offs[p]; !ok {
				offs[p] = -1
			}
		}
		out[g.GroupID] = offs
	}
	return out, nil
}

// recordTime is the Kafka timestamp of the first record of partition p at
// or after offset, from the last poll's reads or a fetch (several groups
// at one offset, and a stalled group poll after poll, cost one fetch).
// Reads are kept in next.
func (w *lagWatcher) recordTime(ctx context.Context, p int, offset int64, next map[partOffset]time.Time) (time.Time, error) {
	k := partOffset{p, offset}
	if at, ok := next[k]; ok {
		return at, nil
	}
	if at, ok := w.times[k]; ok {
		next[k] = at
		return at, nil
	}
	res, err := w.client.Fetch(ctx, &kafka.FetchRequest{Topic: w.topic, Partition: p, Offset: offset,
		MinBytes: 1, MaxBytes: 64 << 10, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return time.Time{}, err
	}
	if res.Error != nil {
		return time.Time{}, res.Error
	}
	if res.Records == nil {
		return time.Time{}, errors.New("no records")
	}
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			return time.Time{}, fmt.Errorf("no record at or after the offset: %w", err)
		}
		// A batch may begin before the offset asked for.
		if r.Offset >= offset {
			next[k] = r.Time
			return r.Time, nil
		}
	}
}
