// Package httpserve is how nofly's HTTP servers — the alerter's API, ingest's
// intake, ingest mavlink's metrics — hold up against clients that would
// exhaust them (issue 26): every server gets header, read, write and idle
// timeouts and a header size bound (Limits, NewServer), and its listener a
// cap on open connections that answers the connection beyond it with a 503
// instead of leaving it to wait (Listen). A handler that answers for long
// on purpose says so: Stream for Server-Sent Events, Paced for a large
// answer written as it is read.
//
// The timeouts, as a client meets them:
//
//   - Headers: all of them within HTTPReadHeaderTimeout of the request's
//     first byte (a slowloris client is closed then), and at most
//     HTTPMaxHeaderBytes of them (net/http answers 431 beyond).
//   - Body: it must keep pace with HTTPMinBodyRate after a grace of
//     HTTPReadTimeout: after n bytes the next read may wait until
//     start + HTTPReadTimeout + n/HTTPMinBodyRate. A trickled body is
//     closed HTTPReadTimeout after the request started, whatever its size;
//     a legitimate client on a slow link uploads a 32 MiB zone set at the
//     default 64 KiB/s in under 9 minutes.
//   - Handler: once the body is read (a request without one: at once),
//     the handler has HTTPReadTimeout until its request's context ends and
//     HTTPWriteTimeout to write its answer. Stream answers are out of
//     both; Paced answers move both with what they wrote.
//   - Idle: a kept-alive connection waits HTTPIdleTimeout for its next
//     request.
package httpserve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/nofly-dev/nofly/internal/envflag"
)

// Limits are a server's bounds. A command embeds them in its Config, so
// their fields are the command's fields (and flags, Rows).
type Limits struct {
	HTTPReadHeaderTimeout time.Duration
	HTTPReadTimeout       time.Duration // the whole request, and the grace before HTTPMinBodyRate
	HTTPWriteTimeout      time.Duration // the answer, from the end of the request
	HTTPIdleTimeout       time.Duration
	HTTPMaxHeaderBytes    int
	HTTPMinBodyRate       int // bytes per second a body (and a Paced answer) must keep up after the grace
	HTTPMaxConns          int // open connections at most; more are answered 503 and closed
}

// DefaultLimits are the shared defaults; a command may change one (the
// alerter's header timeout is shorter).
func DefaultLimits() Limits {
	return Limits{
		HTTPReadHeaderTimeout: 10 * time.Second,
		HTTPReadTimeout:       30 * time.Second,
		HTTPWriteTimeout:      30 * time.Second,
		HTTPIdleTimeout:       2 * time.Minute,
		HTTPMaxHeaderBytes:    64 << 10,
		HTTPMinBodyRate:       64 << 10,
		HTTPMaxConns:          4096,
	}
}

// FieldError is a bad setting: Field names the Limits field (a command
// turns it into its flag and variable), Msg says what is wrong.
type FieldError struct{ Field, Msg string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate reports the first bad field.
func (l Limits) Validate() error {
	bad := func(f, msg string) error { return &FieldError{Field: f, Msg: msg} }
	switch {
	case l.HTTPReadHeaderTimeout < 100*time.Millisecond:
		return bad("HTTPReadHeaderTimeout", "must be at least 100ms")
	case l.HTTPReadTimeout < l.HTTPReadHeaderTimeout:
		return bad("HTTPReadTimeout", fmt.Sprintf("must be at least the header timeout (%v): it counts from the same first byte", l.HTTPReadHeaderTimeout))
	case l.HTTPWriteTimeout < time.Second:
		return bad("HTTPWriteTimeout", "must be at least 1s")
	case l.HTTPIdleTimeout < time.Second:
		return bad("HTTPIdleTimeout", "must be at least 1s")
	case l.HTTPMaxHeaderBytes < 4<<10:
		return bad("HTTPMaxHeaderBytes", "must be at least 4096")
	case l.HTTPMinBodyRate < 1<<10:
		return bad("HTTPMinBodyRate", "must be at least 1024 (bytes per second)")
	case l.HTTPMaxConns < 1:
		return bad("HTTPMaxConns", "must be at least 1")
	}
	return nil
}

// Rows are the Limits' rows of a command's configuration table; envPrefix
// starts each variable (NOFLY_ALERTER gives NOFLY_ALERTER_HTTP_READ_TIMEOUT).
func Rows[C any](envPrefix string) envflag.Fields[C] {
	return envflag.Fields[C]{
		{Name: "HTTPReadHeaderTimeout", Flag: "http-read-header-timeout", Env: envPrefix + "_HTTP_READ_HEADER_TIMEOUT",
			Usage: "a request's headers must all arrive within this of its first byte (slow headers are closed)"},
		{Name: "HTTPReadTimeout", Flag: "http-read-timeout", Env: envPrefix + "_HTTP_READ_TIMEOUT",
			Usage: "a request must be read within this, plus its body's size at --http-min-body-rate; a handler's context ends this long after its request was read"},
		{Name: "HTTPWriteTimeout", Flag: "http-write-timeout", Env: envPrefix + "_HTTP_WRITE_TIMEOUT",
			Usage: "an answer must be written within this of the end of its request (streams and long answers are paced instead)"},
		{Name: "HTTPIdleTimeout", Flag: "http-idle-timeout", Env: envPrefix + "_HTTP_IDLE_TIMEOUT",
			Usage: "how long a kept-alive connection waits for its next request"},
		{Name: "HTTPMaxHeaderBytes", Flag: "http-max-header-bytes", Env: envPrefix + "_HTTP_MAX_HEADER_BYTES",
			Usage: "largest request header block in bytes (431 beyond)"},
		{Name: "HTTPMinBodyRate", Flag: "http-min-body-rate", Env: envPrefix + "_HTTP_MIN_BODY_RATE",
			Usage: "bytes per second a request body must keep up after --http-read-timeout, and a client read a large answer at; a slower one is closed"},
		{Name: "HTTPMaxConns", Flag: "http-max-conns", Env: envPrefix + "_HTTP_MAX_CONNS",
			Usage: "open HTTP connections at most; one more is answered 503 too_many_connections and closed (lowered at start to leave file descriptors for Kafka and Redis)"},
	}
}

// NewServer returns the http.Server of h under l: its timeouts, header
// bound, and h wrapped so that request bodies are paced (package doc) and
// Stream and Paced find the limits. Its errors (a TLS handshake, a broken
// header) are logged at warn.
func NewServer(h http.Handler, l Limits, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           l.Handler(h),
		ReadHeaderTimeout: l.HTTPReadHeaderTimeout,
		ReadTimeout:       l.HTTPReadTimeout,
		WriteTimeout:      l.HTTPWriteTimeout,
		IdleTimeout:       l.HTTPIdleTimeout,
		MaxHeaderBytes:    l.HTTPMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

type limitsKey struct{}

// request is what the wrapper knows of a request: when its handler
// started, under which limits, and its connection's controller.
type request struct {
	l     Limits
	rc    *http.ResponseController
	start time.Time
}

// Handler wraps h so that its requests' bodies are paced and its answers
// can be (NewServer does it; a test serving h itself may too).
func (l Limits) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rq := &request{l: l, rc: http.NewResponseController(w), start: time.Now()}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &pacedBody{body: r.Body, rq: rq}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), limitsKey{}, rq)))
	})
}

// rate is n bytes at rate bytes per second, as a duration.
func rate(n int64, perSecond int) time.Duration {
	return time.Duration(float64(n) / float64(perSecond) * float64(time.Second))
}

// pacedBody moves the connection's deadlines as the body arrives: the next
// read may wait until start + HTTPReadTimeout + n/HTTPMinBodyRate, and an
// answer written then gets HTTPWriteTimeout after that. Once the body is
// read, the handler has HTTPReadTimeout (its context) and HTTPWriteTimeout
// (its answer) from then.
type pacedBody struct {
	body io.ReadCloser
	rq   *request
	n    int64
	done bool
}

func (b *pacedBody) Read(p []byte) (int, error) {
	l := b.rq.l
	if !b.done {
		dl := b.rq.start.Add(l.HTTPReadTimeout + rate(b.n, l.HTTPMinBodyRate))
		// Setting a deadline already past does not extend it (net/http):
		// a body that fell behind stays closed.
		_ = b.rq.rc.SetReadDeadline(dl)
		_ = b.rq.rc.SetWriteDeadline(dl.Add(l.HTTPWriteTimeout))
	}
	n, err := b.body.Read(p)
	b.n += int64(n)
	if err != nil && !b.done {
		b.done = true
		now := time.Now()
		if err == io.EOF {
			_ = b.rq.rc.SetReadDeadline(now.Add(l.HTTPReadTimeout))
		}
		// After a failed read the read deadline stays as it is (passed,
		// for a body that fell behind): net/http's discard of the rest
		// then fails at once instead of waiting for a trickle, and the
		// handler's error answer goes out.
		_ = b.rq.rc.SetWriteDeadline(now.Add(l.HTTPWriteTimeout))
	}
	return n, err
}

func (b *pacedBody) Close() error { return b.body.Close() }

func from(r *http.Request) *request {
	rq, _ := r.Context().Value(limitsKey{}).(*request)
	return rq
}

// Stream takes a Server-Sent Events answer out of the read and write
// timeouts: its request's context no longer ends HTTPReadTimeout after the
// request (only when the client goes or the server shuts down), and its
// writes are bounded by the deadline the stream sets before each flush
// (api: no write for 30 s, dropped). Call it before the first write.
func Stream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if rq := from(r); rq != nil {
		rc = rq.rc
	}
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// PacedWriter is the http.ResponseWriter of an answer that may take
// longer than HTTPWriteTimeout to a client that keeps reading: before each
// Write the deadlines move with what was written — the write deadline to
// start + HTTPWriteTimeout + written/HTTPMinBodyRate, the read deadline
// (which ends the request's context) to start + HTTPReadTimeout +
// written/HTTPMinBodyRate — so a client that reads slower than that is
// dropped (its Write fails, the context ends), one that keeps up is not
// cut, and a handler that stops writing still ends as any other.
type PacedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	l       Limits
	start   time.Time
	written int64
}

// Paced returns w as a PacedWriter (w itself when it is one). Outside
// NewServer (a test's server) the DefaultLimits apply.
func Paced(w http.ResponseWriter, r *http.Request) *PacedWriter {
	if pw, ok := w.(*PacedWriter); ok {
		return pw
	}
	pw := &PacedWriter{ResponseWriter: w, rc: http.NewResponseController(w), l: DefaultLimits(), start: time.Now()}
	if rq := from(r); rq != nil {
		pw.rc, pw.l = rq.rc, rq.l
	}
	return pw
}

// Unwrap is the wrapped writer, for http.ResponseController.
func (pw *PacedWriter) Unwrap() http.ResponseWriter { return pw.ResponseWriter }

func (pw *PacedWriter) deadlines() {
	pace := rate(pw.written, pw.l.HTTPMinBodyRate)
	_ = pw.rc.SetWriteDeadline(pw.start.Add(pw.l.HTTPWriteTimeout + pace))
	_ = pw.rc.SetReadDeadline(pw.start.Add(pw.l.HTTPReadTimeout + pace))
}

// Write writes b under the moved deadlines.
func (pw *PacedWriter) Write(b []byte) (int, error) {
	pw.deadlines()
	n, err := pw.ResponseWriter.Write(b)
	pw.written += int64(n)
	return n, err
}

// WriteString writes s under the moved deadlines, without a copy when the
// wrapped writer can.
func (pw *PacedWriter) WriteString(s string) (int, error) {
	pw.deadlines()
	n, err := io.WriteString(pw.ResponseWriter, s)
	pw.written += int64(n)
	return n, err
}

// Written is how many bytes were written.
func (pw *PacedWriter) Written() int64 { return pw.written }

// Restart starts the answer's clock now, before its first write: the
// time a handler worked before it (validating and storing a 100,000-zone
// set takes 10-20 s, its body as long as the link needs) is not taken from
// the answer's HTTPWriteTimeout.
func (pw *PacedWriter) Restart() {
	if pw.written == 0 {
		pw.start = time.Now()
		pw.deadlines()
	}
}
