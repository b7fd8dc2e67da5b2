package api

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/httpserve"
)

// What no client may exhaust (issue 26): the request metrics' label
// values come from fixed sets; open streams are capped per token and in
// total; requests whose cost grows with the zone set or the fleet run a
// few at a time. The servers' timeouts and connection cap are
// internal/httpserve's.

// methods are the methods a request metric names; every other method is
// "other", so made-up methods cannot grow the series without bound.
var methods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

// methodLabel is the method's label value: itself when it is one of
// methods, else "other".
func methodLabel(m string) string {
	if methods[m] {
		return m
	}
	return "other"
}

// Defaults of Options.MaxStreams, MaxStreamsPerToken and MaxBulkRequests.
const (
	DefaultMaxStreams         = 512
	DefaultMaxStreamsPerToken = 32
	DefaultMaxBulkRequests    = 4
)

// bulkWait is how long a bulk request waits for a slot before its 503.
const bulkWait = 10 * time.Second

// streamRetryAfter is the Retry-After of a refused stream (seconds).
const streamRetryAfter = 5

// streamRoutes are the Server-Sent Events routes: long-lived, counted
// against the stream caps, and out of the server's read and write
// timeouts (they set a write deadline per flush: no write for 30 s,
// dropped).
var streamRoutes = map[string]bool{"GET /v1/events/stream": true, "GET /v1/map/positions": true}

// bulkRoutes are the routes whose memory or work grows with the zone set
// (each reads or writes a whole set, up to 32 MiB, or the history of
// them) or with the fleet (GET /v1/drones reads every drone's state for
// each page): at most Options.MaxBulkRequests of them run at once.
var bulkRoutes = map[string]bool{
	"GET /v1/zones": true, "PUT /v1/zones": true, "GET /v1/zones/history": true,
	"GET /v1/zones/{id}": true, "PUT /v1/zones/{id}": true, "DELETE /v1/zones/{id}": true,
	"GET /v1/map/zones": true, "GET /v1/drones": true,
	// A change reads and writes the whole authorisation set (up to
	// authstore.MaxEntryBytes), the history up to 1024 of them.
	"POST /v1/authorizations": true, "DELETE /v1/authorizations/{authorization_id}": true,
	"GET /v1/authorizations/history": true,
}

// largeAnswers are the routes whose answer can be large (a whole zone set,
// up to 10,000 events, 1,000 alarms, drones or authorisations, the zone
// and authorisation histories): their
// writes are paced (httpserve.Paced) rather than cut by the write
// timeout, so a client on a slow link gets them as long as it keeps
// reading at --http-min-body-rate.
func largeAnswer(route string) bool {
	return bulkRoutes[route] || route == "GET /v1/events" || route == "GET /v1/alarms" || route == "GET /v1/authorizations" ||
		route == "GET "+basemapPath
}

// routeOf is "METHOD /pattern" of a routed request.
func routeOf(r *http.Request) (string, string) {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return "", ""
	}
	p := rc.RoutePattern()
	return r.Method + " " + p, p
}

// limits are one Handler's stream counts and bulk slots.
type limits struct {
	s                  *Server
	maxStreams, perTok int

	mu      sync.Mutex
	streams int
	byToken map[string]int
	open    *prometheus.GaugeVec // streams by route

	bulk     chan struct{}
	bulkWait time.Duration
	bulkNow  *prometheus.GaugeVec // running, waiting
}

func (s *Server) newLimits() *limits {
	l := &limits{s: s, maxStreams: s.o.MaxStreams, perTok: s.o.MaxStreamsPerToken, byToken: map[string]int{}}
	if l.maxStreams <= 0 {
		l.maxStreams = DefaultMaxStreams
	}
	if l.perTok <= 0 {
		l.perTok = DefaultMaxStreamsPerToken
	}
	n := s.o.MaxBulkRequests
	if n <= 0 {
		n = DefaultMaxBulkRequests
	}
	l.bulk, l.bulkWait = make(chan struct{}, n), bulkWait
	l.open = register(s.o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nofly_api_streams",
		Help: "Open Server-Sent Events streams by route (capped by --api-max-streams and --api-max-streams-per-token)."}, []string{"route"}))
	l.bulkNow = register(s.o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nofly_api_bulk_requests",
		Help: "Requests of the zone set, drone list and authorisation change routes running and waiting for one of --api-max-bulk-requests slots."}, []string{"state"}))
	for r := range streamRoutes {
		l.open.WithLabelValues(r[len("GET "):])
	}
	return l
}

// acquireStream counts a stream of caller, or says which cap refuses it.
func (l *limits) acquireStream(caller string) (release func(), refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byToken[caller] >= l.perTok:
		return nil, "per token"
	case l.streams >= l.maxStreams:
		return nil, "in total"
	}
	l.streams++
	l.byToken[caller]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.streams--
		if l.byToken[caller]--; l.byToken[caller] == 0 {
			delete(l.byToken, caller)
		}
	}, ""
}

// limitStreams caps the stream routes: 429 when the caller's token has
// MaxStreamsPerToken open (anonymous, without a token file, is one
// token), 503 when the instance has MaxStreams; both with Retry-After.
// A stream let through is taken out of the server's read and write
// timeouts (httpserve.Stream). It runs after authentication.
func (l *limits) limitStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, pattern := routeOf(r)
		if !streamRoutes[route] {
			next.ServeHTTP(w, r)
			return
		}
		c, _ := CallerFrom(r.Context())
		release, refused := l.acquireStream(c.Name)
		if release == nil {
			status, max := http.StatusTooManyRequests, l.perTok
			if refused == "in total" {
				status, max = http.StatusServiceUnavailable, l.maxStreams
			}
			w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
			writeError(w, status, "too_many_streams",
				fmt.Sprintf("%d streams open %s, the most allowed (events and positions streams count together); retry after %d s", max, refused, streamRetryAfter),
				map[string]any{"limit": refused, "max_streams": max})
			return
		}
		defer release()
		g := l.open.WithLabelValues(pattern)
		g.Inc()
		defer g.Dec()
		// A stream is authenticated once: it ends when its token is
		// revoked by a reload of the token file (tokenstore.go).
		r, stop := l.s.untilRevoked(r)
		defer stop()
		httpserve.Stream(w, r)
		next.ServeHTTP(w, r)
	})
}

// paceAnswers paces the writes of the routes whose answer can be large.
func (l *limits) paceAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route, _ := routeOf(r); largeAnswer(route) {
			w = httpserve.Paced(w, r)
		}
		next.ServeHTTP(w, r)
	})
}

// limitBulk runs at most MaxBulkRequests requests of bulkRoutes at once;
// one that finds no slot within bulkWait is answered 503 busy with
// Retry-After. The memory such requests hold is then bounded by the slots,
// not by how many clients ask at once.
func (l *limits) limitBulk(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route, _ := routeOf(r); !bulkRoutes[route] {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case l.bulk <- struct{}{}:
		default:
			waiting := l.bulkNow.WithLabelValues("waiting")
			waiting.Inc()
			t := time.NewTimer(l.bulkWait)
			select {
			case l.bulk <- struct{}{}:
				t.Stop()
				waiting.Dec()
			case <-t.C:
				waiting.Dec()
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, "busy",
					fmt.Sprintf("%d bulk requests (zone sets, authorisation changes, histories, drone lists) are running, the most at once (--api-max-bulk-requests); none finished within %v: retry", cap(l.bulk), l.bulkWait),
					map[string]any{"max_bulk_requests": cap(l.bulk)})
				return
			case <-r.Context().Done():
				t.Stop()
				waiting.Dec()
				return
			}
		}
		running := l.bulkNow.WithLabelValues("running")
		running.Inc()
		defer func() {
			running.Dec()
			<-l.bulk
		}()
		next.ServeHTTP(w, r)
	})
}
