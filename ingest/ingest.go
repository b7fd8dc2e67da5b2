// Package ingest is the telemetry HTTP intake: POST /v1/telemetry takes
// NDJSON or JSON position records, validates every one with package
// telemetry, produces them to Kafka (key = drone_id, value = canonical JSON,
// time = the receive time) and answers 202 only once the producer says every
// record of the request is acknowledged (acks=all). It also serves /healthz,
// /readyz and /metrics. cmd/ingest wires it to the idempotent producer.
//
// Clocks: the Kafka record time is ingest's clock when the request arrived,
// never ts, so the broker cannot refuse a record for its time (it refuses
// one more than log.message.timestamp.after.max.ms, 1h by default, ahead)
// and retention never deletes a re-sent old record early. ts is checked
// against that receive time: more than Options.MaxClockSkewAhead ahead (10m
// by default) is a 400 naming ts and the skew, and more than
// Options.MaxRecordAge behind (no bound by default: recorded tracks and
// store-and-forward feeds are legitimate) is one too. A record's ts is never
// the cause of a 5xx.
//
// Optional fields follow telemetry.DecodeWarn: one outside every convention
// is dropped, the record kept, and the 202 lists it under "warnings".
//
// Who may write (auth.go): with Options.Feeds every write needs a feed's
// Bearer key (401), and the feed's drone-id prefixes (403) and rate (429)
// apply; without, only loopback clients may write (403), unless
// Options.InsecureOpenIntake. Bodies may be gzip (body.go); MaxBodyBytes
// bounds them decompressed.
//
// Invariants this file relies on, and callers may rely on:
//
//   - A request is all or nothing on the way in: one invalid record, or a
//     limit exceeded, rejects the request and nothing of it is produced.
//   - 202 means durable: it is written only after Produce returned nil for
//     every record of the request. Any produce failure answers 503 (retriable,
//     with Retry-After) or 500; some of the records may then be in the log,
//     and a retry of the whole request may write them again: the alerter
//     drops a record that is not after its drone's last (by ts, then seq),
//     so that is safe.
//   - Records of one request keep their order within a drone (the producer
//     keeps order per partition and a drone maps to one partition). Across
//     concurrent requests there is no order: a feed sends a drone's next
//     request after the previous one got its 202.
package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nofly-dev/nofly/ingest/feedkey"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/producer"
)

// Producer is what the handler needs of the Kafka producer: Produce returns
// nil only when every record is acknowledged. *producer.Producer is one.
type Producer interface {
	Produce(ctx context.Context, recs []producer.Record) error
}

// Limits bound one request. The zero value of a field means its default.
type Limits struct {
	// MaxBodyBytes bounds the request body; larger bodies get 413.
	// Default 8 MiB.
	MaxBodyBytes int64
	// MaxRecords bounds the records of one request; more get 413.
	// Default 10,000.
	MaxRecords int
	// MaxLineBytes bounds one NDJSON line (one JSON array element); a longer
	// one is a 400 naming the line. Default 16 KiB (a record is ~200 bytes).
	MaxLineBytes int
}

// MaxPreGrow is the most a request's buffer is grown before its body
// arrives.
const MaxPreGrow = 64 << 10

// Default limits.
const (
	DefaultMaxBodyBytes   = 8 << 20
	DefaultMaxRecords     = 10_000
	DefaultMaxLineBytes   = 16 << 10
	DefaultProduceTimeout = 10 * time.Second
	DefaultRetryAfter     = 5 * time.Second
	// DefaultMaxClockSkewAhead: ahead of the broker's 1h refusal, loose for
	// a GNSS-synchronised drone.
	DefaultMaxClockSkewAhead = 10 * time.Minute
)

func (l *Limits) setDefaults() {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxRecords == 0 {
		l.MaxRecords = DefaultMaxRecords
	}
	if l.MaxLineBytes == 0 {
		l.MaxLineBytes = DefaultMaxLineBytes
	}
}

// Options configure a Server. Producer is required.
type Options struct {
	Producer Producer
	Limits   Limits
	// ProduceTimeout bounds the wait for Kafka's acknowledgement of one
	// request; past it the answer is 503. Default 10s.
	ProduceTimeout time.Duration
	// RetryAfter is the Retry-After of a 503 (whole seconds, at least 1).
	// Default 5s.
	RetryAfter time.Duration
	// Ready reports whether Kafka is reachable, for /readyz. Nil: always.
	Ready func(ctx context.Context) error
	// Registry receives the metrics and is what /metrics serves. Default: a
	// new registry.
	Registry *prometheus.Registry
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of receive times. Default time.Now.
	Now func() time.Time
	// MaxClockSkewAhead bounds how far a ts may be ahead of the receive
	// time; beyond it the request is a 400 naming ts. Default 10m; negative:
	// no bound.
	MaxClockSkewAhead time.Duration
	// MaxRecordAge bounds how far a ts may be behind the receive time;
	// beyond it the request is a 400 naming ts. 0: no bound.
	MaxRecordAge time.Duration
	// Feeds, when set, are who may write: every write must carry
	// "Authorization: Bearer <key>" of one of them (auth.go). Nil: only
	// loopback clients may write, unless InsecureOpenIntake.
	Feeds *feedkey.Set
	// InsecureOpenIntake, without Feeds, lets every client write.
	InsecureOpenIntake bool
	// Web is the listener, public URLs and trusted proxies of the Host,
	// Origin and client-address rules (browser.go).
	Web httpguard.Config
}

// Server is the intake's HTTP handler. Use Handler to mount it.
type Server struct {
	opt      Options
	log      *slog.Logger
	m        *metrics
	auth     *authMetrics
	intake   atomic.Pointer[intake] // the feeds in use (nil without Feeds): SetFeeds swaps it
	feedsMu  sync.Mutex             // serialises SetFeeds
	router   chi.Router
	web      *httpguard.Guard
	draining atomic.Bool
	bufs     sync.Pool
}

// NewServer returns a Server for opt.
func NewServer(opt Options) (*Server, error) {
	if opt.Producer == nil {
		return nil, errors.New("ingest: Options.Producer is required")
	}
	opt.Limits.setDefaults()
	switch {
	case opt.Limits.MaxBodyBytes < 0:
		return nil, errors.New("ingest: Limits.MaxBodyBytes must not be negative")
	case opt.Limits.MaxRecords < 0:
		return nil, errors.New("ingest: Limits.MaxRecords must not be negative")
	case opt.Limits.MaxLineBytes < 0:
		return nil, errors.New("ingest: Limits.MaxLineBytes must not be negative")
	}
	if opt.ProduceTimeout <= 0 {
		opt.ProduceTimeout = DefaultProduceTimeout
	}
	if opt.RetryAfter <= 0 {
		opt.RetryAfter = DefaultRetryAfter
	}
	if opt.Registry == nil {
		opt.Registry = prometheus.NewRegistry()
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.MaxClockSkewAhead == 0 {
		opt.MaxClockSkewAhead = DefaultMaxClockSkewAhead
	}
	if opt.MaxRecordAge < 0 {
		return nil, errors.New("ingest: Options.MaxRecordAge must not be negative")
	}
	if opt.Feeds != nil && opt.InsecureOpenIntake {
		return nil, errors.New("ingest: Options.Feeds and InsecureOpenIntake exclude each other")
	}
	m, err := newMetrics(opt.Registry)
	if err != nil {
		return nil, err
	}
	am, err := newAuthMetrics(opt.Registry, opt.Feeds)
	if err != nil {
		return nil, err
	}
	web, err := httpguard.New(opt.Web)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	s := &Server{opt: opt, log: opt.Logger, m: m, auth: am, web: web}
	if opt.Feeds != nil {
		s.intake.Store(&intake{feeds: opt.Feeds, limiters: newLimiters(opt.Feeds, nil)})
	}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, s.forwarded, s.observe, s.guard, s.authenticate)
	r.Post("/v1/telemetry", s.postTelemetry)
	r.With(withDecoders(ridDecoders)).Post(RouteRID, s.postTelemetry)
	r.With(withDecoders(odidDecoders)).Post(RouteODID, s.postTelemetry)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(opt.Registry, promhttp.HandlerOpts{Registry: opt.Registry}))
	s.router = r
	return s, nil
}

// Router returns the routes, for mounting more (cmd/ingest adds the OpenAPI
// document) and for walking them.
func (s *Server) Router() chi.Router { return s.router }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Drain makes /readyz answer 503 so a load balancer stops sending traffic;
// call it when shutdown begins. Requests still arriving are served.
func (s *Server) Drain() { s.draining.Store(true) }

// Limits returns the limits in force, defaults applied.
func (s *Server) Limits() Limits { return s.opt.Limits }

type errorBody struct {
	Error  string      `json:"error,omitempty"`
	Errors []LineError `json:"errors,omitempty"`
	// Code names the refusals of browser.go and the 500 (produce_failed);
	// RequestID is the 500's, under which the log has the detail.
	Code      string `json:"code,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request, rej *rejection) {
	s.m.rejected.WithLabelValues(rej.reason).Add(float64(rej.records))
	if rej.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.opt.RetryAfter.Seconds()))))
	}
	body := errorBody{Error: rej.message, Errors: rej.errs}
	if rej.status == http.StatusInternalServerError {
		// The cause (Kafka's error, a broker's address) is logged under
		// the request id, never answered.
		body.Code, body.RequestID = rej.reason, newRequestID()
		body.Error += "; the intake's log has the detail under request_id " + body.RequestID
		s.log.Error("ingest: request failed", "request_id", body.RequestID, "reason", rej.reason, "records", rej.records,
			"cause", fmt.Sprint(rej.cause))
	}
	setOutcome(r, rej.records, rej.reason, rej.message, rej.cause)
	writeJSON(w, rej.status, body)
}

// mediaTypes maps the accepted Content-Types to their decoders.
var mediaTypes = map[string]func([]byte, decodeOpts) (batch, *rejection){
	"application/x-ndjson": decodeNDJSON,
	"application/ndjson":   decodeNDJSON,
	"application/json":     decodeJSON,
}

func (s *Server) postTelemetry(w http.ResponseWriter, r *http.Request) {
	lim := s.opt.Limits
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	decode := decodersOf(r)[mt]
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		decode = nil
	}
	coding, ok := contentCoding(r.Header.Get("Content-Encoding"))
	if !ok {
		w.Header().Set("Accept-Encoding", "gzip")
		s.reject(w, r, &rejection{status: http.StatusUnsupportedMediaType, reason: reasonMediaType,
			message: fmt.Sprintf("Content-Encoding %s is not supported; send gzip or no encoding", httpguard.Quote(coding, 100))})
		return
	}
	if err != nil || decode == nil {
		s.reject(w, r, &rejection{status: http.StatusUnsupportedMediaType, reason: reasonMediaType,
			message: fmt.Sprintf("Content-Type %s is not supported; use application/x-ndjson or application/json (UTF-8)", httpguard.Quote(r.Header.Get("Content-Type"), 100))})
		return
	}
	if r.ContentLength > lim.MaxBodyBytes {
		s.reject(w, r, &rejection{status: http.StatusRequestEntityTooLarge, reason: reasonBodyTooBig,
			message: fmt.Sprintf("body is %d bytes, more than the limit of %d", r.ContentLength, lim.MaxBodyBytes)})
		return
	}

	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 {
			s.bufs.Put(buf)
		}
	}()
	if r.ContentLength > 0 {
		// Room for what the client says it sends, up to MaxPreGrow: past
		// it the buffer grows with what arrives, so a body that is
		// declared large and never sent holds no more (issue 26: 500 such
		// bodies declaring 8 MiB each would have held 4 GiB).
		buf.Grow(int(min(r.ContentLength, MaxPreGrow)) + bytes.MinRead)
	}
	if rej := readBody(w, r, buf, coding, lim.MaxBodyBytes); rej != nil {
		s.reject(w, r, rej)
		return
	}

	received := s.opt.Now()
	b, rej := decode(buf.Bytes(), s.decodeOpts(received))
	if rej != nil {
		s.reject(w, r, rej)
		return
	}
	if rej := s.admit(w, r, b); rej != nil {
		s.reject(w, r, rej)
		return
	}
	recs := records(b, received)

	ctx, cancel := context.WithTimeout(r.Context(), s.opt.ProduceTimeout)
	start := time.Now()
	err = s.opt.Producer.Produce(ctx, recs)
	cancel()
	s.m.produceSeconds.WithLabelValues(produceResult(err)).Observe(time.Since(start).Seconds())
	if err != nil {
		s.reject(w, r, s.produceRejection(r, err, b))
		return
	}
	s.m.accepted.Add(float64(len(recs)))
	s.countDropped(&b)
	setOutcome(r, len(recs), "", "", nil)
	writeJSON(w, http.StatusAccepted, b.accepted())
}

// records encodes the batch for the producer: key = drone_id, value = the
// canonical JSON, time = received (never ts: see the package doc), partition
// by murmur2 of the key. Keys and values share one buffer (the producer
// copies them).
func records(b batch, received time.Time) []producer.Record {
	recs := make([]producer.Record, len(b.positions))
	buf := make([]byte, 0, len(b.positions)*256)
	for i := range b.positions {
		p := &b.positions[i]
		k := len(buf)
		buf = append(buf, p.DroneID...)
		v := len(buf)
		buf = p.AppendJSON(buf)
		// Full slice expressions: a later append that moves buf leaves these
		// pointing at the old array, which still holds their bytes.
		recs[i] = producer.Record{Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)], Time: received, Partition: producer.AnyPartition}
	}
	return recs
}

// StatusClientClosedRequest is the status logged and counted for a request
// whose client went away before Kafka acknowledged it (nginx's 499).
const StatusClientClosedRequest = 499

// produceRejection turns a Produce error into the answer. A record the
// producer calls invalid (larger than a batch may be) is the client's fault:
// 400 naming its line. Anything retriable, or the producer closing during a
// shutdown, is 503 with Retry-After. The rest (the broker refused the batch)
// is 500.
func (s *Server) produceRejection(r *http.Request, err error, b batch) *rejection {
	n := len(b.positions)
	if r.Context().Err() != nil {
		// The client went away: nobody reads this answer. 499, as nginx
		// logs it, keeps these out of the 503s that mean Kafka trouble.
		return &rejection{status: StatusClientClosedRequest, reason: reasonClientGone, records: n, cause: err,
			message: "client closed the request before Kafka acknowledged it"}
	}
	var pe *producer.ProduceError
	if errors.As(err, &pe) && errors.Is(err, producer.ErrInvalidRecord) {
		rej := &rejection{status: http.StatusBadRequest, reason: reasonInvalid, records: n}
		for _, re := range pe.Records {
			if errors.Is(re.Err, producer.ErrInvalidRecord) && re.Index < n && len(rej.errs) < maxListedErrors {
				rej.errs = append(rej.errs, LineError{Line: b.lines[re.Index], Error: re.Err.Error()})
			}
		}
		rej.message = fmt.Sprintf("%d of %d records cannot be produced; nothing was accepted", len(rej.errs), n)
		return rej
	}
	if producer.Retriable(err) || errors.Is(err, producer.ErrClosed) || errors.Is(err, context.Canceled) {
		return &rejection{status: http.StatusServiceUnavailable, reason: reasonUnavailable, records: n, cause: err,
			message: "Kafka did not acknowledge the records in time; retry the request later (records may have been written: a re-sent record is a duplicate to the alerter, so a retry is safe)"}
	}
	return &rejection{status: http.StatusInternalServerError, reason: reasonProduce, records: n, cause: err,
		message: "Kafka refused the records (some may be in the log: (drone_id, seq) makes a retry safe)"}
}

func produceResult(err error) string {
	if err == nil {
		return "ok"
	}
	return "error"
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	if s.opt.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := s.opt.Ready(ctx); err != nil {
			// Open to anyone: what failed (a broker's address) is logged,
			// not answered.
			s.log.Info("ingest: not ready", "error", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "error": "Kafka is not ready (the intake's log says why)"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
