package outbox

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are labelled by partition and output ("kafka", "webhook:<name>").
type metrics struct {
	delivered   *prometheus.CounterVec
	retries     *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	errors      *prometheus.CounterVec
	fenced      *prometheus.CounterVec
	lag         *prometheus.GaugeVec
	trimmed     *prometheus.CounterVec // by partition
	entries     *prometheus.GaugeVec   // by partition

	// The Alertmanager outputs', by alertmanager (AlertmanagerName).
	amPosts, amFailures, amDrops, amSilencesCreated, amSilencesExpired, amRefreshes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	labels := []string{"partition", "output"}
	m := &metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "delivered_total",
			Help: "Outbox entries delivered: acknowledged by Kafka, or answered 2xx by a webhook.",
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "retries_total",
			Help: "Attempts after the first: webhook POSTs retried, Kafka batches re-read from the topic's tail after an error.",
		}, labels),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "dead_letters_total",
			Help: "Entries written to the output's dead-letter stream (permanent 4xx, or attempts exhausted).",
		}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "errors_total",
			Help: "Failed operations of an output (produce, Redis, tail read) that it backs off from and retries.",
		}, labels),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "fenced_total",
			Help: "Kafka batches refused because a newer writer of the partition started (PRODUCER_FENCED): another dispatcher runs it.",
		}, labels),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "lag_entries",
			Help: "Outbox entries appended but not yet delivered (or dead-lettered) by the output.",
		}, labels),
		trimmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "trimmed_total",
			Help: "Entries trimmed from the partition's outbox stream: older than the retention and passed by every output.",
		}, []string{"partition"}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nofly", Subsystem: "outbox", Name: "stream_entries",
			Help: "Entries in the partition's outbox stream after the last trim (grows while an output is stuck).",
		}, []string{"partition"}),
		amPosts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "alertmanager", Name: "posts_total",
			Help: "POSTs of alerts an Alertmanager accepted, by kind: events (from the outbox) or refresh (the active alarms again).",
		}, []string{"alertmanager", "kind"}),
		amFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "alertmanager", Name: "failures_total",
			Help: "Requests to an Alertmanager that failed (no answer, 5xx, a refusal); retried with backoff unless refused.",
		}, []string{"alertmanager"}),
		amDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "alertmanager", Name: "drops_total",
			Help: "What an Alertmanager output gave up on, by reason: refused (a 4xx: alerts or silence requests), backlog (outbox entries skipped past the bound while the Alertmanager failed), undecodable (entries).",
		}, []string{"alertmanager", "reason"}),
		amSilencesCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "alertmanager", Name: "silences_created_total",
			Help: "Silences made in an Alertmanager for acked alarms.",
		}, []string{"alertmanager"}),
		amSilencesExpired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "alertmanager", Name: "silences_expired_total",
			Help: "Ack silences expired in an Alertmanager when their alarm cleared.",
		}, []string{"alertmanager"}),
		amRefreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nofly", Subsystem: "alertmanager", Name: "refreshes_total",
			Help: "Refreshes done: a partition's active alarms posted to an Alertmanager again.",
		}, []string{"alertmanager"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.delivered, err = register(reg, m.delivered)
	if err != nil {
		return nil, err
	}
	if m.retries, err = register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.deadLetters, err = register(reg, m.deadLetters); err != nil {
		return nil, err
	}
	if m.errors, err = register(reg, m.errors); err != nil {
		return nil, err
	}
	if m.fenced, err = register(reg, m.fenced); err != nil {
		return nil, err
	}
	if m.lag, err = register(reg, m.lag); err != nil {
		return nil, err
	}
	if m.trimmed, err = register(reg, m.trimmed); err != nil {
		return nil, err
	}
	if m.entries, err = register(reg, m.entries); err != nil {
		return nil, err
	}
	for _, c := range []**prometheus.CounterVec{&m.amPosts, &m.amFailures, &m.amDrops, &m.amSilencesCreated, &m.amSilencesExpired, &m.amRefreshes} {
		if *c, err = register(reg, *c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// the same name, so two dispatchers may share a registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, err
}

// outputMetrics are one output's children of the vectors.
type outputMetrics struct {
	delivered, retries, deadLetters, errors, fenced prometheus.Counter
	lag                                             prometheus.Gauge
}

func (m *metrics) output(partition, output string) outputMetrics {
	return outputMetrics{
		delivered:   m.delivered.WithLabelValues(partition, output),
		retries:     m.retries.WithLabelValues(partition, output),
		deadLetters: m.deadLetters.WithLabelValues(partition, output),
		errors:      m.errors.WithLabelValues(partition, output),
		fenced:      m.fenced.WithLabelValues(partition, output),
		lag:         m.lag.WithLabelValues(partition, output),
	}
}

// amOutputMetrics are one Alertmanager's children of the vectors.
type amOutputMetrics struct {
	failures, silencesCreated, silencesExpired, refreshes prometheus.Counter
	postsVec, dropsVec                                    *prometheus.CounterVec
	name                                                  string
}

func (m *metrics) alertmanager(name string) amOutputMetrics {
	return amOutputMetrics{
		failures:        m.amFailures.WithLabelValues(name),
		silencesCreated: m.amSilencesCreated.WithLabelValues(name),
		silencesExpired: m.amSilencesExpired.WithLabelValues(name),
		refreshes:       m.amRefreshes.WithLabelValues(name),
		postsVec:        m.amPosts, dropsVec: m.amDrops, name: name,
	}
}

func (m amOutputMetrics) posts(kind string) prometheus.Counter {
	return m.postsVec.WithLabelValues(m.name, kind)
}

func (m amOutputMetrics) drops(reason string) prometheus.Counter {
	return m.dropsVec.WithLabelValues(m.name, reason)
}
