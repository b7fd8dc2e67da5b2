package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/geofence/zonestore"
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
	// AlarmRetention is how long alarm history is kept (--alarm-retention).
	AlarmRetention time.Duration
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

	// Tokens are the API tokens (--api-tokens); nil: no authentication,
	// every request is the caller "anonymous" with role admin, which
	// cmd/alerter allows only on a loopback listener.
	Tokens *Tokens
}

// Server is the HTTP alert API.
type Server struct {
	o   Options
	log *slog.Logger
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
	return &Server{o: o, log: o.Logger}, nil
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
				writeError(w, http.StatusForbidden, "forbidden",
					"token "+c.Name+" has role "+c.Role.String()+"; this route needs "+role.String(),
					map[string]any{"role": c.Role.String(), "required_role": role.String()})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Handler returns the API's router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	s.mountAlarms(r)
	s.mountEvents(r)
	s.mountZones(r)
	s.mountDrones(r)
	return r
}
