package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
)

// commitTimeout bounds one batch's Redis commit.
const commitTimeout = 15 * time.Second

// applied is a batch applied by the engine and not yet committed.
type applied struct {
	out   *alerts.Outcome
	began time.Time
}

// consume runs one partition from its state in Redis until an error or the
// end of ctx: load, seek past the applied offset, then fetch, apply and
// hand each batch to the sequencer, which commits them in order while the
// next is fetched. Any error returned leaves the engine behind: the caller
// reloads from Redis.
func (g *Group) consume(ctx context.Context, oc *offsetCommitter, partition int, genID int32, committed int64, log *slog.Logger) error {
	snap, err := g.store.Load(ctx, partition)
	if err != nil {
		return err
	}
	eng, err := alerts.NewEngine(partition, snap)
	if err != nil {
		return err
	}
	eng.SetTiming(g.timing())
	eng.SetApproach(g.o.Approach)
	start := snap.Applied + 1
	if snap.Applied == dedup.NoVersion {
		start = committed // Kafka's committed offset, or FirstOffset
		if start < 0 {
			start = kafka.FirstOffset
		}
	}
	if start >= 0 {
		g.checkRetention(ctx, partition, start, log)
	}
	r, err := g.hub.open(ctx, partition, start)
	if err != nil {
		return fmt.Errorf("open the fetch at %d: %w", start, err)
	}
	defer g.hub.release(r)
	log.Info("partition started", "applied", snap.Applied, "from", start, "drones", len(snap.Drones))

	fctx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	seq := startSequencer(ctx, func(ctx context.Context, b applied) error {
		return g.commit(ctx, oc, partition, genID, b, log)
	}, stopFetch)
	defer seq.close()

	recs := make([]alerts.Record, 0, g.o.Batch)
	for {
		recs, err = fetchBatch(fctx, r, recs[:0], g.o.Batch, g.o.Linger, g.o.LingerIdle, seq.committing)
		if err != nil {
			if cerr := seq.failure(); cerr != nil {
				return cerr // the fetch was stopped because a commit failed
			}
			return err
		}
		began := time.Now()
		eng.SetAuthorizations(g.o.Authorizations.Load())
		out := eng.Apply(g.o.Zones.Load(), recs)
		if out == nil {
			continue
		}
		for _, b := range out.Bad {
			log.Warn("skipping a bad record", "offset", b.Offset, "err", b.Err)
		}
		if err := seq.submit(ctx, applied{out, began}); err != nil {
			return err // a commit failed, or the generation ended: the engine is ahead of Redis
		}
	}
}

// checkRetention reports records deleted before they were applied: when
// the partition's first retained offset is past start, the fetch moves to
// it (fetchhub.go reports only what is deleted once it is running),
// and the records in between — positions whose alarms were never decided
// — are gone. Nothing can bring them back; an operator must hear of it
// (an alerter down longer than the topic's retention, or Redis restored
// from a backup older than it). A failed check is logged and the partition
// starts anyway: the check must not stop the alarms that can still be
// decided.
func (g *Group) checkRetention(ctx context.Context, partition int, start int64, log *slog.Logger) {
	first, _, err := g.hub.offsets(ctx, partition)
	if err != nil {
		log.Warn("could not read the partition's first retained offset; records deleted before they were applied would go unreported", "err", err)
		return
	}
	if first > start {
		g.m.lost.Add(float64(first - start))
		log.Error("RECORDS LOST: Kafka deleted records of this partition before the alerter applied them (retention shorter than an outage, or Redis restored from an older backup); their alarms were never decided",
			"from", start, "first_retained", first, "records_lost", first-start)
	}
}

// commit makes one batch durable in Redis, then offers its offset to
// Kafka. The commit is not cut short by the end of the generation: the
// partition goroutine (and so the rejoin) waits for its outcome, so the
// next owner loads after it.
func (g *Group) commit(ctx context.Context, oc *offsetCommitter, partition int, genID int32, b applied, log *slog.Logger) error {
	out := b.out
	if g.o.BeforeCommit != nil {
		g.o.BeforeCommit(CommitPoint{Partition: partition, Generation: genID, Expected: out.Expected, Events: out.Events}) // before the timeout starts
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	res, err := g.store.Commit(cctx, partition, out.Expected, out.Batch)
	cancel()
	if err != nil {
		// Counted here, not where the partition loop stops: a refused
		// commit whose generation ended meanwhile counts too.
		if errors.Is(err, dedup.ErrFenced) {
			g.m.fenced.Inc()
		} else {
			g.m.commitErrs.Inc()
		}
		return err
	}
	g.m.observe(out, res, time.Since(b.began))
	label := strconv.Itoa(partition)
	g.m.drones.WithLabelValues(label).Set(float64(out.Drones))
	if out.Batch.Clock > 0 {
		g.m.clockLag.WithLabelValues(label).Set(time.Since(time.UnixMilli(out.Batch.Clock)).Seconds())
	}
	g.processed.Add(int64(out.Stats.Records + out.Stats.Skipped))
	if res.Suppressed > 0 {
		log.Warn("events suppressed by their unique key (state was behind the outbox)", "suppressed", res.Suppressed)
	}
	// Kafka's committed offset follows Redis, never leads it.
	oc.offer(partition, out.Batch.Applied+1)
	return nil
}

// fetcher is what fetchBatch reads from (a partition's feed).
type fetcher interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
}

// fetchBatch appends up to n records to recs: it waits for the first as
// long as ctx allows, then at most linger for the rest.
func fetchBatch(ctx context.Context, r fetcher, recs []alerts.Record, n int, linger, idle time.Duration, busy func() bool) ([]alerts.Record, error) {
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return recs, err
	}
	recs = append(recs, alerts.Record{Offset: m.Offset, Time: m.Time, Value: m.Value})
	if n == 1 {
		return recs, nil
	}
	lctx, cancel := context.WithTimeout(ctx, linger)
	defer cancel()
	// While records flow the batch grows up to linger; once a whole window
	// of idle passes without one (the records of one fetch come
	// microseconds apart) it goes, so a position that comes alone is
	// decided at once instead of waiting out linger — unless the previous
	// batch is still committing (busy): this one could not commit sooner,
	// so it goes on filling, and under a flood batches stay as large as
	// the commit's time lets them grow. One timer per window, not per
	// record: a batch ends idle to twice idle after its last record.
	wctx, wstop := lctx, context.CancelFunc(func() {})
	window := func() {
		if idle > 0 && idle < linger {
			wstop()
			wctx, wstop = context.WithTimeout(lctx, idle)
		}
	}
	window()
	defer func() { wstop() }()
	came := false // a record came in the current window
	for len(recs) < n {
		m, err := r.FetchMessage(wctx)
		if err != nil {
			if ctx.Err() != nil {
				return recs, ctx.Err()
			}
			if lctx.Err() == nil && wctx.Err() != nil && (came || (busy != nil && busy())) {
				came = false
				window()
				continue
			}
			if wctx.Err() != nil {
				return recs, nil
			}
			return recs, err
		}
		came = true
		recs = append(recs, alerts.Record{Offset: m.Offset, Time: m.Time, Value: m.Value})
	}
	return recs, nil
}
