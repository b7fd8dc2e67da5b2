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

// Handler returns the API's router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	s.mountAlarms(r)
	s.mountEvents(r)
	s.mountZones(r)
	s.mountDrones(r)
	return r
}
