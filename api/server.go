package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// Role is what an API token may do; each role may do what the roles below
// it may.
type Role int

// Roles, lowest first.
const (
	RoleViewer   Role = iota + 1 // read alarms, events, zones, drones
	RoleOperator                 // and acknowledge alarms
	RoleAdmin                    // and change zones
)

// Caller is who made a request: the name of its token and the token's role.
type Caller struct {
	Name string
	Role Role
	// Via is how the caller signed in: "token" (the token file), "oidc" (a
	// session or the provider's JWT), "" (anonymous, no token file).
	Via  string
	csrf string // the session's CSRF token (GET /v1/me), "" without a session
}

type callerKey struct{}

// CallerFrom returns the request's caller, set by the authentication
// middleware.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// Options configure the API. Redis, Topic and Partitions are required.
type Options struct {
	// Redis is the alerter's state (docs/redis-layout.md).
	Redis redis.UniversalClient
	// Prefix and Topic name the keys (redislayout.Of); Partitions is the
	// telemetry topic's partition count.
	Prefix     string
	Topic      string
	Partitions int
	// Replicas, when on, makes acks and zone changes wait until the
	// primary has that many replicas holding them (--redis-min-replicas);
	// 503 otherwise.
	Replicas redisreplica.Wait
	// AlarmRetention is how long alarm history is kept (--alarm-retention).
	AlarmRetention time.Duration
	// SignalLostAfter is the alerter's --signal-lost-after: a drone not
	// heard this long on its partition's log clock is stale.
	SignalLostAfter time.Duration
	// Ready reports whether the instance can serve (Kafka and Redis
	// reachable, group joined): /readyz.
	Ready func(ctx context.Context) error
	// Logger and Registerer: one log line per request, and the API's
	// metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// ZoneValidator checks zone changes as the alerter loads zones
	// (--strict-zones, --conservative-zones, --allow-empty-zones).
	ZoneValidator zonestore.Validator
	// ZoneHistoryMaxBytes bounds the zone history a change trims to
	// (--zone-history-max-bytes; 0: versionstore.DefaultMaxBytes).
	ZoneHistoryMaxBytes int64

	// Tokens are the API tokens (--api-tokens); nil: no authentication,
	// every request is the caller "anonymous" with role admin, which
	// cmd/alerter allows only on a loopback listener.
	Tokens *Tokens
	// TokenStore, when set, is where requests find Tokens (which is then
	// its first set): a reload swaps the set in use (api/tokenstore.go).
	// Without it a store is made of Tokens, which then never changes.
	TokenStore *TokenStore
	// OIDC, when set, signs people in through the provider (/auth/...,
	// session cookies) and accepts its JWT access tokens as bearer tokens
	// (api/oidc.go); with it a request is never anonymous. AuditAuth, when
	// set, is told of each sign-in and sign-out.
	OIDC      *OIDC
	AuditAuth func(ctx context.Context, e AuthEvent)
	// Off, when not empty, turns the /v1 routes off (503 saying Off) while
	// /healthz, /readyz, /metrics and /openapi.json stay on.
	Off string
	// Healthy answers /healthz (nil: always ok); Gatherer is what /metrics
	// serves (nil: nothing).
	Healthy  func(ctx context.Context) error
	Gatherer prometheus.Gatherer
	// CORSOrigins may call the API from a browser ("*": any); empty: no
	// CORS headers.
	CORSOrigins []string
	// Web is the listener, public URLs and trusted proxies the Host,
	// Origin and client-address rules go by (api/browser.go); its
	// CORSOrigins are the ones above.
	Web httpguard.Config
	// RatePerToken and RatePerAddr are the requests per second one token
	// and one client address may make (429 beyond); 0 or less: unlimited.
	RatePerToken int
	RatePerAddr  int
	// BodyLimit caps a request body (0: DefaultBodyLimit); BodyLimits
	// sets it per route, keyed "METHOD /pattern" (PUT /v1/zones gets
	// DefaultZoneSetBodyLimit unless it is set: --api-zone-set-max-bytes).
	BodyLimit  int64
	BodyLimits map[string]int64
	// MaxStreams and MaxStreamsPerToken cap the open event and positions
	// streams of the instance and of one token (0: DefaultMaxStreams,
	// DefaultMaxStreamsPerToken); MaxBulkRequests is how many zone set and
	// drone list requests run at once (0: DefaultMaxBulkRequests). api/limits.go.
	MaxStreams         int
	MaxStreamsPerToken int
	MaxBulkRequests    int

	// Dashboard, when set, is served at / and at each of DashboardFiles
	// (top-level file names, folders ending in "/"), open like /healthz:
	// the page holds no data, its API calls carry the token.
	Dashboard      http.Handler
	DashboardFiles []string

	// Audit is the audit trail (package audit); nil: one on Redis kept
	// audit.DefaultRetention.
	Audit *audit.Log

	// Basemap is what the dashboard draws under the zones
	// (GET /v1/map/basemap, /v1/map/basemap.pmtiles; api/basemap.go).
	Basemap Basemap
}

// Server is the HTTP alert API.
type Server struct {
	o       Options
	log     *slog.Logger
	metrics *httpMetrics
	openapi []byte
	web     *httpguard.Guard       // api/browser.go
	rules   map[string]*routeRules // api/described.go
}

// New returns the API for o.
func New(o Options) (*Server, error) {
	if o.Redis == nil || o.Topic == "" || o.Partitions <= 0 {
		return nil, errors.New("api: Options need Redis, Topic and Partitions")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BodyLimit <= 0 {
		o.BodyLimit = DefaultBodyLimit
	}
	limits := map[string]int64{"PUT /v1/zones": DefaultZoneSetBodyLimit}
	maps.Copy(limits, o.BodyLimits) // the caller's map is left alone
	o.BodyLimits = limits
	doc, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	if o.TokenStore == nil && o.Tokens != nil {
		o.TokenStore = NewTokenStore(o.Tokens)
	}
	o.Web.CORSOrigins = o.CORSOrigins
	web, err := httpguard.New(o.Web)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	rules, err := describedRules(doc)
	if err != nil {
		return nil, err
	}
	return &Server{o: o, log: o.Logger, metrics: newHTTPMetrics(o.Registerer), openapi: doc, web: web, rules: rules}, nil
}

// require lets a request through when its caller (CallerFrom, set by the
// authentication middleware) has at least role: 401 without a caller, 403
// with a lower role, both as the JSON error body.
func (s *Server) require(role Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, ok := CallerFrom(r.Context())
			if !ok {
				if s.o.Tokens != nil {
					unauthorized(w, "missing_token", "this route needs Authorization: Bearer <token>")
					return
				}
				// No token file: every caller is anonymous admin (cmd/alerter
				// serves that only on a loopback listener).
				c = anonymous
				r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
			}
			if c.Role < role {
				s.auditDenied(r)
				writeError(w, http.StatusForbidden, "forbidden",
					"token "+c.Name+" has role "+c.Role.String()+"; this route needs "+role.String(),
					map[string]any{"role": c.Role.String(), "required_role": role.String()})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// allowed is the methods r's path is routed for (a 405's Allow): only
// those of the most specific pattern that matches it, as OpenAPI matches
// paths, so /v1/zones/history (GET) does not borrow PUT and DELETE from
// /v1/zones/{id}.
func allowed(r *http.Request) []string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || rc.Routes == nil {
		return nil
	}
	var ms []string
	best := -1 // the fewest path parameters among the matching patterns
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		p := rc.Routes.Find(chi.NewRouteContext(), m, r.URL.Path)
		if p == "" {
			continue
		}
		switch n := strings.Count(p, "{"); {
		case best < 0 || n < best:
			best, ms = n, []string{m}
		case n == best:
			ms = append(ms, m)
		}
	}
	return ms
}

// methodNotAllowed answers 405 with the methods the path takes.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, ms []string) {
	w.Header().Set("Allow", strings.Join(ms, ", "))
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", httpguard.Clip(r.Method, 20)+" is not allowed on "+httpguard.Quote(r.URL.Path, 200), nil)
}

// Handler returns the router of everything served on the alerter's HTTP
// listener: /healthz, /readyz, /metrics and /openapi.json, open and on in
// every mode, and the /v1 API behind (in this order) the per-address rate
// limit, authentication, the per-token rate limit, the method's least role,
// the body limit, the described rules of ids, parameters and media types
// (vet), and the stream and bulk caps (limits.go). Every answer is logged
// and counted (observe), and checked for its Host and a cross-site write
// first (guard).
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.forwarded, s.observe, s.recoverer, s.guard, s.cors)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route "+httpguard.Quote(r.URL.Path, 200), nil)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) { methodNotAllowed(w, r, allowed(r)) })
	s.mountOps(r)
	s.mountDashboard(r)
	s.mountAuth(r)
	r.Group(func(r chi.Router) {
		lim := s.newLimits()
		r.Use(s.apiOff, s.limitAddr(), s.authenticate, s.limitToken(), s.methodFloor, s.limitBody, s.vet, lim.limitStreams, lim.limitBulk, lim.paceAnswers)
		s.mountAlarms(r)
		ev := s.mountEvents(r)
		s.mountMap(r, ev)
		s.mountZones(r)
		s.mountAuthorizations(r)
		s.mountDrones(r)
		s.mountBasemap(r)
		s.mountAudit(r)
	})
	return r
}
