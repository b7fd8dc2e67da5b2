package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-chi/httprate"
	"github.com/prometheus/client_golang/prometheus"
)

// reqInfo is what the request-log middleware learns from the inner
// handlers: the caller's token name.
type reqInfo struct {
	caller string
}

type reqInfoKey struct{}

func reqInfoFrom(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(reqInfoKey{}).(*reqInfo)
	return ri
}

// httpMetrics are the API's request counts and latencies by route pattern
// (never the path: ids would make a series each), method and status.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nofly_api_requests_total",
			Help: "HTTP requests by route pattern, method and status."}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nofly_api_request_duration_seconds",
			Help:    "HTTP request durations by route pattern, method and status (a stream's is its whole length).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60}}, []string{"route", "method", "status"}),
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	return m
}

// register registers c on reg (nil: not registered), or returns the
// collector already registered under its name (a second Server on one
// registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
		panic(fmt.Sprintf("api: register metrics: %v", err))
	}
	return c
}

// quietRoutes are logged at debug: probes and scrapes come every few
// seconds and say nothing an operator looks for.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// observe is the outermost middleware: one log line per request (method,
// route pattern, status, duration, the token's name, never the token) and
// the request metrics. It runs before routing and reads the pattern after.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri)))
		d := time.Since(start)
		route := ""
		if rc := chi.RouteContext(r.Context()); rc != nil {
			route = rc.RoutePattern()
		}
		if route == "" {
			route = "unmatched" // a 404: the path would make a series per probe
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK // a handler that wrote nothing
		}
		code := strconv.Itoa(status)
		method := methodLabel(r.Method) // a fixed set: made-up methods are "other"
		s.metrics.requests.WithLabelValues(route, method, code).Inc()
		s.metrics.duration.WithLabelValues(route, method, code).Observe(d.Seconds())
		level := slog.LevelInfo
		if quietRoutes[route] && status < 500 {
			level = slog.LevelDebug
		}
		s.log.LogAttrs(r.Context(), level, "http request", slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.Duration("duration", d), slog.Int("bytes", ww.BytesWritten()),
			slog.String("token", ri.caller), slog.String("remote", clientAddr(r)))
	})
}

// recoverer turns a handler's panic into a 500 with the error body (when
// nothing was written yet) and a log line with the stack.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel itself, as net/http panics it
				panic(v)
			}
			s.log.Error("api: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if ww, ok := w.(middleware.WrapResponseWriter); !ok || ww.Status() == 0 {
				writeError(w, http.StatusInternalServerError, "internal", "internal error", nil)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// clientAddr is the client's address as the connection has it (no
// forwarding header is trusted: a client could set it).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Default body limits (Options.BodyLimit, Options.BodyLimits).
const (
	DefaultBodyLimit = 1 << 20
	// DefaultZoneSetBodyLimit is PUT /v1/zones's: a whole zone set, up to
	// a national one (issue 29: 100,000 zones are 34 MB as GeoJSON
	// facility-map cells, 83 MB as ED-269 circles and polygons).
	DefaultZoneSetBodyLimit = 128 << 20
)

// tooLarge is a 413's message: the limit in bytes and MiB, and for a zone
// set the flag that sets it.
func tooLarge(route string, limit int64) string {
	msg := fmt.Sprintf("the body is larger than %d bytes (%.4g MiB)", limit, float64(limit)/(1<<20))
	if route == "PUT /v1/zones" {
		msg = fmt.Sprintf("the zone set is larger than PUT /v1/zones's limit of %d bytes (%.4g MiB, the alerter's --api-zone-set-max-bytes)", limit, float64(limit)/(1<<20))
	}
	return msg
}

// limitBody caps the request body at the route's limit: a read past it
// fails with *http.MaxBytesError, which answers 413 (handlers that read
// the body check it; a handler with a lower limit of its own keeps it).
// It runs after routing, so the limit is looked up by route pattern.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, route := s.o.BodyLimit, ""
		if rc := chi.RouteContext(r.Context()); rc != nil {
			route = r.Method + " " + rc.RoutePattern()
			if n, ok := s.o.BodyLimits[route]; ok {
				limit = n
			}
		}
		if r.ContentLength > limit {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", tooLarge(route, limit),
				map[string]any{"field": "body", "limit": limit})
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}

// Rate defaults (Options.RatePerToken, Options.RatePerAddr): requests per
// second, in a sliding window of one second.
const (
	DefaultRatePerToken = 50
	DefaultRatePerAddr  = 100
)

// rateLimiter is httprate's sliding-window limiter keyed by key, answering
// 429 with Retry-After and the error body naming the limit; rate <= 0 lets
// everything through.
func rateLimiter(rate int, what string, key httprate.KeyFunc) func(http.Handler) http.Handler {
	if rate <= 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	return httprate.Limit(rate, time.Second, httprate.WithKeyFuncs(key),
		httprate.WithLimitHandler(func(w http.ResponseWriter, r *http.Request) {
			if w.Header().Get("Retry-After") == "" {
				w.Header().Set("Retry-After", "1")
			}
			writeError(w, http.StatusTooManyRequests, "rate_limited",
				fmt.Sprintf("more than %d requests per second %s; retry after %s s", rate, what, w.Header().Get("Retry-After")),
				map[string]any{"limit": what, "rate_per_second": rate})
		}))
}

// limitAddr limits requests per client address, before authentication, so
// guessing tokens is limited too.
func (s *Server) limitAddr() func(http.Handler) http.Handler {
	return rateLimiter(s.o.RatePerAddr, "per client address", func(r *http.Request) (string, error) {
		return httprate.CanonicalizeIP(clientAddr(r)), nil
	})
}

// limitToken limits requests per token (after authentication).
func (s *Server) limitToken() func(http.Handler) http.Handler {
	return rateLimiter(s.o.RatePerToken, "per token", func(r *http.Request) (string, error) {
		c, _ := CallerFrom(r.Context())
		return c.Name, nil
	})
}

// methodFloor holds every /v1 route to the least role its method needs
// (methodRole), whatever role check the route adds: a route that forgets
// its check is still not open to a viewer's change.
func (s *Server) methodFloor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.require(methodRole(r.Method))(next).ServeHTTP(w, r)
	})
}

// apiOff answers every /v1 route 503 naming why the API is off
// (Options.Off), while health and metrics stay on.
func (s *Server) apiOff(next http.Handler) http.Handler {
	if s.o.Off == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "api_off", "the API is off: "+s.o.Off, nil)
	})
}

// cors answers cross-origin requests from Options.CORSOrigins (none: no
// CORS header at all, so browsers keep other origins out): the origin is
// echoed, preflights get the methods and headers the API uses.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.o.CORSOrigins) == 0 {
		return next
	}
	any := slices.Contains(s.o.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if !any && !slices.Contains(s.o.CORSOrigins, origin) {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "ETag, Retry-After, WWW-Authenticate")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			h.Set("Access-Control-Allow-Headers", strings.Join([]string{"Authorization", "Content-Type", "If-Match", "Last-Event-ID"}, ", "))
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
