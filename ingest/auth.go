package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/nofly-dev/nofly/ingest/feedkey"
)

// Who may write. With Options.Feeds every request that is not a GET, HEAD or
// OPTIONS must carry "Authorization: Bearer <key>" of one of the feeds (401
// otherwise); the feed's prefixes (403) and rate (429) then apply to its
// records. Without Feeds only loopback clients may write (403 for others)
// unless Options.InsecureOpenIntake. Reads (/healthz, /readyz, /metrics,
// /openapi.yaml) are open in every mode.
//
// The check is a middleware on the whole router, not on each route, so a
// write route added later is covered without anyone remembering to.

// Caller names for the modes without keys, in logs and the feed label of
// the metrics. Parentheses keep them apart from every feed's name.
const (
	CallerLoopback = "(loopback)"
	CallerOpen     = "(open)"
)

// Reasons of nofly_ingest_auth_failures_total.
const (
	authNoKey       = "no_key"
	authBadKey      = "bad_key"
	authNotLoopback = "not_loopback"
	authPrefix      = "prefix"
	authRate        = "rate"
)

// Reasons of nofly_ingest_records_rejected_total for records a feed may not
// write.
const (
	reasonPrefix      = "prefix_refused"
	reasonRateLimited = "rate_limited"
)

type authMetrics struct {
	failures     *prometheus.CounterVec
	feedRequests *prometheus.CounterVec
	feedAccepted *prometheus.CounterVec
}

func newAuthMetrics(reg prometheus.Registerer, feeds *feedkey.Set) (*authMetrics, error) {
	m := &authMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nofly_ingest_auth_failures_total",
			Help: "Writes refused for who sent them, by reason: no_key (401, no Bearer key), bad_key (401, a key of no feed), not_loopback (403, no key file and the client is not on loopback), prefix (403, a drone id outside the feed's prefixes), rate (429, over the feed's rate).",
		}, []string{"reason"}),
		feedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nofly_ingest_feed_requests_total",
			Help: "Write requests that passed authentication, by feed ((loopback) or (open) without a key file) and status code.",
		}, []string{"feed", "code"}),
		feedAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nofly_ingest_feed_records_accepted_total",
			Help: "Records answered with 202, by feed ((loopback) or (open) without a key file).",
		}, []string{"feed"}),
	}
	for _, r := range []string{authNoKey, authBadKey, authNotLoopback, authPrefix, authRate} {
		m.failures.WithLabelValues(r)
	}
	if feeds != nil {
		for i := range feeds.Feeds {
			m.feedAccepted.WithLabelValues(feeds.Feeds[i].Name)
		}
	}
	for _, c := range []prometheus.Collector{m.failures, m.feedRequests, m.feedAccepted} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// caller is who sent a write request: a feed of the key file, or the
// loopback / open pseudo-feed (feed nil: no prefixes, no rate).
type caller struct {
	name    string
	feed    *feedkey.Feed
	limiter *rate.Limiter
}

type callerKey struct{}

func callerOf(r *http.Request) *caller {
	c, _ := r.Context().Value(callerKey{}).(*caller)
	return c
}

// intake is the feeds in use and their token buckets, swapped whole by
// SetFeeds: a request is checked against the old feeds or the new ones.
type intake struct {
	feeds    *feedkey.Set
	limiters map[string]*rate.Limiter // per rated feed
}

// newLimiters makes one token bucket per rated feed, keeping old's bucket
// of a feed whose rate and burst did not change (a reload does not give it
// a fresh burst).
func newLimiters(feeds *feedkey.Set, old *intake) map[string]*rate.Limiter {
	out := map[string]*rate.Limiter{}
	for i := range feeds.Feeds {
		f := &feeds.Feeds[i]
		if f.Rate == 0 {
			continue
		}
		if old != nil && old.limiters[f.Name] != nil {
			if o := old.feeds.ByName(f.Name); o != nil && o.SameRate(f) {
				out[f.Name] = old.limiters[f.Name]
				continue
			}
		}
		out[f.Name] = rate.NewLimiter(rate.Limit(f.PerSecond()), f.Burst)
	}
	return out
}

// SetFeeds puts feeds in use in place of the feeds of Options.Feeds (or of
// the last SetFeeds): the next write is checked against them. A request
// already past authentication finishes as its feed was. It refuses a
// server made without Feeds (the intake's mode, keys or loopback or open,
// is fixed at start) and nil.
func (s *Server) SetFeeds(feeds *feedkey.Set) (feedkey.Changes, error) {
	if feeds == nil || len(feeds.Feeds) == 0 {
		return feedkey.Changes{}, errors.New("ingest: SetFeeds needs a feed")
	}
	s.feedsMu.Lock()
	defer s.feedsMu.Unlock()
	old := s.intake.Load()
	if old == nil {
		return feedkey.Changes{}, errors.New("ingest: the intake was started without feed keys; its mode is fixed at start")
	}
	for i := range feeds.Feeds {
		s.auth.feedAccepted.WithLabelValues(feeds.Feeds[i].Name)
	}
	s.intake.Store(&intake{feeds: feeds, limiters: newLimiters(feeds, old)})
	return feedkey.Diff(old.feeds, feeds), nil
}

// authenticate identifies the caller of every write and refuses those who
// may not write at all.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		c := s.identify(w, r)
		if c == nil {
			return
		}
		setFeed(r, c.name)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// identify returns the caller, or answers the request and returns nil.
func (s *Server) identify(w http.ResponseWriter, r *http.Request) *caller {
	switch {
	case s.opt.Feeds != nil:
		in := s.intake.Load()
		key, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="nofly-ingest"`)
			s.refuse(w, r, http.StatusUnauthorized, authNoKey,
				"this intake needs a feed key: send Authorization: Bearer <key>")
			return nil
		}
		f := in.feeds.Lookup(key)
		if f == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="nofly-ingest", error="invalid_token"`)
			s.refuse(w, r, http.StatusUnauthorized, authBadKey, "the Bearer key is not the key of any feed")
			return nil
		}
		return &caller{name: f.Name, feed: f, limiter: in.limiters[f.Name]}
	case s.opt.InsecureOpenIntake:
		return &caller{name: CallerOpen}
	case isLoopback(r.RemoteAddr):
		return &caller{name: CallerLoopback}
	default:
		s.refuse(w, r, http.StatusForbidden, authNotLoopback, fmt.Sprintf(
			"telemetry from %s refused: without feed keys (--feed-keys) only loopback clients may write", hostOf(r.RemoteAddr)))
		return nil
	}
}

// refuse answers a write refused before its body was read.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, reason, message string) {
	s.auth.failures.WithLabelValues(reason).Inc()
	setOutcome(r, 0, reason, message, nil)
	writeJSON(w, status, errorBody{Error: message})
}

// bearer returns the key of an "Authorization: Bearer <key>" header. The
// scheme is case-insensitive (RFC 9110 11.1).
func bearer(h string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(h), " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return "", false
	}
	return key, true
}

// isLoopback: the connection's peer address (never a forwarding header,
// which any client can write) is in 127.0.0.0/8 or ::1.
func isLoopback(remoteAddr string) bool {
	a, err := netip.ParseAddr(hostOf(remoteAddr))
	return err == nil && a.Unmap().IsLoopback()
}

func hostOf(remoteAddr string) string {
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return h
	}
	return remoteAddr
}

// admit applies the caller's drone-id prefixes and rate to a decoded
// request, all or nothing: one record outside the prefixes refuses the whole
// request (403 naming each such record's line and drone_id); a request over
// the rate is refused whole (429, Retry-After: when its records will have
// been earned) and costs the feed nothing. Every route that produces records
// calls it between decoding and producing.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, b batch) *rejection {
	c := callerOf(r)
	n := len(b.positions)
	if c == nil { // a write the middleware did not see: fail closed
		return &rejection{status: http.StatusForbidden, reason: "unauthenticated", records: n, message: "unauthenticated write"}
	}
	if c.feed == nil {
		return nil
	}
	var errs []LineError
	bad := 0
	for i := range b.positions {
		if id := b.positions[i].DroneID; !c.feed.Allows(id) {
			bad++
			if len(errs) < maxListedErrors {
				errs = append(errs, LineError{Line: b.lines[i], Field: "drone_id", Error: fmt.Sprintf(
					"feed %q may not write drone %q (its prefixes: %s)", c.name, id, strings.Join(c.feed.Prefixes, ", "))})
			}
		}
	}
	if bad > 0 {
		s.auth.failures.WithLabelValues(authPrefix).Inc()
		return &rejection{status: http.StatusForbidden, reason: reasonPrefix, records: n, errs: errs,
			message: fmt.Sprintf("%d of %d records name drones feed %q may not write; nothing was accepted", bad, n, c.name)}
	}
	if c.limiter == nil {
		return nil
	}
	if n > c.feed.Burst {
		return &rejection{status: http.StatusRequestEntityTooLarge, reason: reasonTooMany, records: n, message: fmt.Sprintf(
			"%d records in one request, more than feed %q may send at once (burst %d at %s); split it", n, c.name, c.feed.Burst, c.feed.RateString())}
	}
	now := time.Now()
	res := c.limiter.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		s.auth.failures.WithLabelValues(authRate).Inc()
		secs := max(1, int(math.Ceil(d.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		return &rejection{status: http.StatusTooManyRequests, reason: reasonRateLimited, records: n, message: fmt.Sprintf(
			"feed %q is over its rate of %s records (burst %d); retry the request in %ds", c.name, c.feed.RateString(), c.feed.Burst, secs)}
	}
	return nil
}
