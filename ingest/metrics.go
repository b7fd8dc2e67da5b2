package ingest

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/producer"
)

type metrics struct {
	accepted       prometheus.Counter
	rejected       *prometheus.CounterVec
	requests       *prometheus.CounterVec
	produceSeconds *prometheus.HistogramVec
	fieldsDropped  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nofly_ingest_records_accepted_total",
			Help: "Records answered with 202: acknowledged by Kafka.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nofly_ingest_records_rejected_total",
			Help: "Records of requests not answered 202, by reason (invalid, ts_out_of_range, line_too_long, too_many_records, prefix_refused, rate_limited, kafka_unavailable, produce_failed, client_closed). Requests rejected before their records were read (body_too_large, unsupported_media_type, bad_encoding, and the auth failures of nofly_ingest_auth_failures_total) count in nofly_ingest_http_requests_total only.",
		}, []string{"reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nofly_ingest_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		produceSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nofly_ingest_produce_duration_seconds",
			Help:    "Time from Produce to the acknowledgement of every record of a request (result ok) or to its failure (result error).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
		fieldsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nofly_ingest_fields_dropped_total",
			Help: "Optional fields dropped from accepted records, their value being outside every convention (the 202 lists them), by JSON field.",
		}, []string{"field"}),
	}
	for _, f := range []string{"alt_m", "alt_ref", "agl_m", "speed_mps", "heading_deg", "h_accuracy_m", "v_accuracy_m",
		"operator", "operator.lat", "operator.lon", "operator.alt_m", "operator.type"} {
		m.fieldsDropped.WithLabelValues(f)
	}
	for _, r := range []string{reasonInvalid, reasonClock, reasonLineTooLong, reasonTooMany, reasonUnavailable, reasonProduce, reasonClientGone} {
		m.rejected.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.accepted, m.rejected, m.requests, m.produceSeconds, m.fieldsDropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// outcome is what a handler tells the logging middleware about a request.
type outcome struct {
	feed    string // who wrote (auth.go), "" for reads and refused writes
	records int
	reason  string
	message string
	cause   error
}

type outcomeKey struct{}

func setOutcome(r *http.Request, records int, reason, message string, cause error) {
	if o, ok := r.Context().Value(outcomeKey{}).(*outcome); ok {
		*o = outcome{feed: o.feed, records: records, reason: reason, message: message, cause: cause}
	}
}

// setFeed tells the logging middleware which feed sent the request.
func setFeed(r *http.Request, feed string) {
	if o, ok := r.Context().Value(outcomeKey{}).(*outcome); ok {
		o.feed = feed
	}
}

// observe counts every request by route and status and logs it: 5xx of the
// intake at Warn (with the producer's error), 4xx at Info, the rest (and
// /readyz's 503s, which a starting or draining service answers) at Debug.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		o := new(outcome)
		r = r.WithContext(context.WithValue(r.Context(), outcomeKey{}, o))
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		s.m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		if o.feed != "" {
			s.auth.feedRequests.WithLabelValues(o.feed, strconv.Itoa(status)).Inc()
			if status == http.StatusAccepted {
				s.auth.feedAccepted.WithLabelValues(o.feed).Add(float64(o.records))
			}
		}
		level := slog.LevelDebug
		switch {
		case route == "/readyz":
		case status >= 500:
			level = slog.LevelWarn
		case status >= 400:
			level = slog.LevelInfo
		}
		if !s.log.Enabled(r.Context(), level) {
			return
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000), slog.String("remote", r.RemoteAddr),
		}
		if o.feed != "" {
			attrs = append(attrs, slog.String("feed", o.feed))
		}
		if o.records > 0 {
			attrs = append(attrs, slog.Int("records", o.records))
		}
		if o.reason != "" {
			attrs = append(attrs, slog.String("reason", o.reason), slog.String("error", o.message))
		}
		if o.cause != nil {
			attrs = append(attrs, slog.String("cause", o.cause.Error()))
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// StatsCollector exports a producer's cumulative counters (producer.Stats)
// as Prometheus counters: records, batches, retries, broker-dropped
// duplicates, epoch bumps and failed records.
type StatsCollector struct {
	stats func() producer.Stats
	descs [7]*prometheus.Desc
}

// NewStatsCollector returns a collector reading stats at every scrape. stats
// may return the zero Stats while there is no producer yet.
func NewStatsCollector(stats func() producer.Stats) *StatsCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("nofly_producer_"+name, help, nil, nil)
	}
	return &StatsCollector{stats: stats, descs: [7]*prometheus.Desc{
		d("records_total", "Records acknowledged by the broker."),
		d("batches_total", "Batches acknowledged by the broker."),
		d("retries_total", "Produce attempts after a batch's first."),
		d("duplicates_total", "Retried batches the broker had already written and dropped (idempotence at work)."),
		d("epoch_bumps_total", "Epoch bumps or producer id re-initialisations after a sequence was lost."),
		d("failed_records_total", "Records reported to callers as not acknowledged."),
		d("requests_total", "Produce requests sent: one per leader each time the producer sends, holding every partition batch queued then (batches_total / requests_total is the partitions a request carries)."),
	}}
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for i, v := range []int64{st.Records, st.Batches, st.Retries, st.Duplicates, st.EpochBumps, st.Failed, st.Requests} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
}
