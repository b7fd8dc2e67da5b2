package consume

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
)

// metrics are a Group's nofly_alerter_* metrics.
type metrics struct {
	records    prometheus.Counter
	applied    prometheus.Counter
	duplicates prometheus.Counter
	resets     prometheus.Counter
	incomplete prometheus.Counter
	invalid    prometheus.Counter
	skipped    prometheus.Counter
	raised     prometheus.Counter
	cleared    prometheus.Counter
	suppressed prometheus.Counter
	commits    prometheus.Counter
	fenced     prometheus.Counter
	commitErrs prometheus.Counter
	lost       prometheus.Counter
	assigned   prometheus.Gauge
	batchSecs  prometheus.Histogram
	ticks      prometheus.Counter
	sigLost    prometheus.Counter
	regained   prometheus.Counter
	forgotten  prometheus.Counter
	authorized prometheus.Counter
	unauthz    prometheus.Counter
	approach   prometheus.Counter
	apEnded    prometheus.Counter
	drones     *prometheus.GaugeVec
	clockLag   *prometheus.GaugeVec
}

// newMetrics returns the metrics, registered on reg unless reg is nil.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nofly", Subsystem: "alerter", Name: name, Help: help})
	}
	m := &metrics{
		records:    c("records_total", "Kafka records processed (above the applied offset)."),
		applied:    c("positions_applied_total", "Positions that went through the state machine."),
		duplicates: c("positions_duplicate_total", "Positions skipped as duplicate or stale: not after the drone's last applied one (by ts, then seq)."),
		resets: c("seq_resets_total", "Positions applied although their seq was not above the drone's last one (a later ts): a feed that restarted its counter, "+
			"or the records after a wild seq. Each starts a new run of the drone's alarm ids."),
		incomplete: c("positions_fields_dropped_total", "Positions applied that ingest had dropped an optional field from (out of its physical range or "+
			"outside every convention): a dropped height is unknown, which alarms. GET /v1/drones names the fields."),
		invalid:    c("records_invalid_total", "Records that did not decode (skipped)."),
		skipped:    c("records_already_applied_total", "Records fetched at or below the applied offset (skipped)."),
		raised:     c("events_raised_total", "Raised events committed (events_suppressed_total counts those whose unique key already existed)."),
		cleared:    c("events_cleared_total", "Cleared events committed (see events_suppressed_total)."),
		suppressed: c("events_suppressed_total", "Events not appended because their unique key existed."),
		commits:    c("commits_total", "Batches committed to Redis."),
		fenced:     c("commits_fenced_total", "Commits refused because the partition's version changed (another owner)."),
		commitErrs: c("commit_errors_total", "Commits that failed with an error of unknown outcome (reloaded)."),
		lost: c("records_lost_to_retention_total", "Records Kafka deleted (retention, or a restore of older Redis state) before the alerter applied them: "+
			"between a partition's applied offset and its first retained offset when the partition started, or deleted under a running partition before it was fetched. Their alarms were never decided; alert on any."),
		ticks:      c("ticks_total", "Clock ticks of the telemetry topic applied (records of time alone, written by ingest to every partition)."),
		sigLost:    c("signal_lost_total", "signal_lost events decided: an active alarm's drone not heard for --signal-lost-after of the log's clock."),
		regained:   c("signal_regained_total", "signal_regained events decided: the first position of a drone whose alarm had lost its signal."),
		forgotten:  c("drones_forgotten_total", "Drones removed from the engine and from Redis: no active alarm, silent for --drone-ttl of the log's clock."),
		authorized: c("events_authorized_total", "authorized events decided: an authorisation now covers an active alarm (it stops paging)."),
		unauthz: c("events_unauthorized_total", "unauthorized events decided: the authorisation covering an active alarm ended (expired or revoked) "+
			"with the drone inside; the alarm pages from then on."),
		approach: c("events_approaching_total", "approaching events decided: a drone predicted to enter a zone within its horizon, or closing on it within "+
			"--approach-buffer (one per approach episode)."),
		apEnded: c("events_approach_ended_total", "approach_ended events decided: an approach episode that ended without an entry (turned away, signal lost, zone removed)."),
		drones: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nofly", Subsystem: "alerter", Name: "drones",
			Help: "Drones the engine of each partition this alerter runs holds (after its last batch)."}, []string{"partition"}),
		clockLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nofly", Subsystem: "alerter", Name: "clock_behind_seconds",
			Help: "How far each partition's log clock is behind this alerter's wall clock after its last batch: the age of the newest record " +
				"or tick applied. Ticks come every second, so more than a few seconds means ingest's ticks stopped or the alerter lags."}, []string{"partition"}),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "nofly", Subsystem: "alerter", Name: "assigned_partitions",
			Help: "Partitions this alerter processes now."}),
		batchSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nofly", Subsystem: "alerter", Name: "batch_seconds",
			Help: "Time to apply and commit one batch.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.ticks, m.sigLost, m.regained, m.forgotten, m.authorized, m.unauthz, m.approach, m.apEnded, m.drones, m.clockLag, m.records, m.applied, m.duplicates, m.resets, m.incomplete, m.invalid, m.skipped, m.raised, m.cleared,
		m.suppressed, m.commits, m.fenced, m.commitErrs, m.lost, m.assigned, m.batchSecs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("consume: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(out *alerts.Outcome, res dedup.Result, took time.Duration) {
	s := out.Stats
	m.records.Add(float64(s.Records))
	m.applied.Add(float64(s.Applied))
	m.duplicates.Add(float64(s.Duplicates))
	m.resets.Add(float64(s.SeqResets))
	m.incomplete.Add(float64(s.Dropped))
	m.invalid.Add(float64(s.Invalid))
	m.skipped.Add(float64(s.Skipped))
	m.suppressed.Add(float64(res.Suppressed))
	m.raised.Add(float64(s.Raised))
	m.cleared.Add(float64(s.Cleared))
	m.ticks.Add(float64(s.Ticks))
	m.sigLost.Add(float64(s.SignalLost))
	m.regained.Add(float64(s.SignalRegained))
	m.forgotten.Add(float64(s.Forgotten))
	m.authorized.Add(float64(s.Authorized))
	m.unauthz.Add(float64(s.Unauthorized))
	m.approach.Add(float64(s.Approaching))
	m.apEnded.Add(float64(s.ApproachEnded))
	m.commits.Inc()
	m.batchSecs.Observe(took.Seconds())
}
