package alerterd

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/audit/auditkafka"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/envflag"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/redisconn"
	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/versionstore"
)

// Config is the alerter's configuration. Flags fill it, each with an
// environment variable as fallback (a flag on the command line wins);
// configFields names them, Validate names the bad field. README.md next to
// this file has the table.
type Config struct {
	Brokers            []string
	Topic              string
	Partitions         int // the topic is created with it if missing
	Group              string
	kafkaconn.Security // TLS and SASL to Kafka (--kafka-tls..., --kafka-sasl...)

	RedisAddr        string // host:port, or a Redis Cluster: h:p,h:p,... or redis-cluster://h:p (redisconn)
	redisconn.Access        // TLS and ACL user to Redis (--redis-tls..., --redis-user, --redis-password-file)
	RedisPrefix      string
	EventTTL         time.Duration
	// RedisMinReplicas > 0: a batch, an ack, a zone change or an outbox
	// entry to dispatch counts only once the Redis primary has that many
	// replicas with it (WAIT, RedisReplicaTimeout each): a failover cannot
	// take back what was acted on (docs/exactly-once.md).
	RedisMinReplicas    int
	RedisReplicaTimeout time.Duration

	Zones string // GeoJSON, ED-269 or ED-318 file, reloaded on SIGHUP
	// StrictZones makes unknown GeoJSON zone properties errors (else
	// warnings); ConservativeZones loads limits without a vertical
	// reference or unit, and times without an offset, read as alarming
	// most (else they are refused); AllowEmptyZones lets a file without
	// zones start or reload (else refused: no zone looks like no
	// violation). geofence/doc.go has the rules.
	StrictZones       bool
	ConservativeZones bool
	AllowEmptyZones   bool

	// The log's clock (alerts.Timing): an active alarm's drone silent this
	// long gets signal_lost; a drone without an alarm silent DroneTTL is
	// forgotten (engine and Redis).
	SignalLostAfter time.Duration
	DroneTTL        time.Duration
	// Approaching warnings (alerts.ApproachSettings): the horizon by zone
	// category ("restricted=30s,*=20s"; a zone's approach_before_s wins)
	// and the buffer in metres.
	ApproachBefore  string
	ApproachBufferM int

	Batch  int           // records per batch at most
	Linger time.Duration // how long a batch waits to fill after its first record
	// LingerIdle ends that wait once a window this long passes with no record.
	LingerIdle time.Duration

	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration

	// Dispatch of the outbox (alerts/outbox), one dispatcher per owned
	// partition, started and stopped with the partition's engine.
	EventsTopic        string        // partition p's events go to its partition p; empty = no Kafka output
	Webhooks           []WebhookURL  // NAME=URL, comma separated; --webhook is repeatable
	WebhookMaxAttempts int           // attempts before an event is dead-lettered
	WebhookTimeout     time.Duration // bound of one POST
	OutboxRetention    time.Duration // delivered entries older than this are trimmed; 0 keeps all

	// The audit trail (package audit, audit.go): its Kafka topic (empty:
	// kept in Redis only) and how long Redis keeps an entry.
	AuditTopic     string
	AuditRetention time.Duration
	// The Alertmanager output (alerts/outbox, docs/operations.md): every
	// active alarm an alert in each Alertmanager (an HA pair gets both),
	// its severity label from the zone category, posted again every
	// refresh; an ack a silence bounded by AlertmanagerSilenceMax.
	Alertmanagers          []string
	AlertmanagerSeverity   string // category=severity,...; * the rest
	AlertmanagerRefresh    time.Duration
	AlertmanagerSilenceMax time.Duration

	HTTPAddr         string // /metrics, /healthz, /readyz, /openapi.json and the API; empty = off
	httpserve.Limits        // its timeouts, header bound and connection cap (--http-...)

	// The HTTP API (api/) on HTTPAddr. APITokens is the token file; without
	// it the API is served only on a loopback HTTPAddr, unauthenticated, and
	// is off on any other. AlarmRetention is how long alarm history is kept.
	// The rates are requests per second (0: unlimited).
	APITokens      string
	APICORSOrigins []string
	// PublicURLs are the URLs clients reach HTTPAddr by (a proxy's, a DNS
	// name's, a compose service's): their hosts pass the Host check, their
	// origins the cross-site one. TrustedProxies are the proxies whose
	// X-Forwarded-For or Forwarded names the client (api/browser.go).
	PublicURLs     []string
	TrustedProxies []string
	// The dashboard's base map (dashboard/, api/basemap.go): an XYZ raster
	// template the browser fetches, or a local PMTiles archive the API
	// serves; the coastline without either. MapAttribution credits it.
	MapTiles       string
	MapPMTiles     string
	MapAttribution string
	// Single sign-on through an OpenID Connect provider (oidc.go).
	OIDCSettings

	APIRatePerToken int
	APIRatePerAddr  int
	AlarmRetention  time.Duration
	// ZoneHistoryMaxBytes bounds the zone history in Redis (the versions
	// kept for replay), whatever AlarmRetention keeps; APIZoneSetMaxBytes
	// is PUT /v1/zones's body limit (issue 29: a national set of 100,000
	// zones is 34 MB as GeoJSON, 83 MB as ED-269).
	ZoneHistoryMaxBytes int64
	APIZoneSetMaxBytes  int64
	// The caps of issue 26 (api/limits.go): open streams in total and per
	// token, and zone set and drone list requests running at once.
	APIMaxStreams         int
	APIMaxStreamsPerToken int
	APIMaxBulkRequests    int

	LogLevel string
}

// WebhookURL is one --webhook NAME=URL: every event is POSTed to URL at
// least once, with Idempotency-Key: <event_id>; NAME names its metrics and
// Redis keys.
type WebhookURL struct {
	Name, URL string
}

// dispatchConfig is the outbox dispatcher's configuration for cfg; metrics
// and logger are the caller's.
func (c Config) dispatchConfig() outbox.Config {
	hooks := make([]outbox.Webhook, len(c.Webhooks))
	for i, w := range c.Webhooks {
		hooks[i] = outbox.Webhook{Name: w.Name, URL: w.URL, Timeout: c.WebhookTimeout, MaxAttempts: c.WebhookMaxAttempts}
	}
	retention := c.OutboxRetention
	if retention == 0 {
		retention = -1 // outbox.Config: negative keeps every entry
	}
	return outbox.Config{Prefix: c.RedisPrefix, Topic: c.Topic, Webhooks: hooks, Retention: retention, Replicas: c.replicas(),
		Alertmanager: c.alertmanager()}
}

// alertmanager is the Alertmanager output's configuration (checked by
// Validate); the dashboard's deep links are under the first --public-url.
func (c Config) alertmanager() outbox.Alertmanager {
	sev, _ := outbox.ParseSeverity(c.AlertmanagerSeverity)
	a := outbox.Alertmanager{URLs: c.Alertmanagers, Severity: sev, Refresh: c.AlertmanagerRefresh, SilenceMax: c.AlertmanagerSilenceMax}
	if len(c.PublicURLs) > 0 {
		a.DashboardURL = c.PublicURLs[0]
	}
	return a
}

// replicas is how Redis writes wait for replicas (off unless
// --redis-min-replicas).
func (c Config) replicas() redisreplica.Wait {
	return redisreplica.Wait{Replicas: c.RedisMinReplicas, Timeout: c.RedisReplicaTimeout}
}

// dispatching reports whether the outbox has any output.
func (c Config) dispatching() bool {
	return c.EventsTopic != "" || len(c.Webhooks) > 0 || len(c.Alertmanagers) > 0
}

// DefaultConfig returns the defaults: local Kafka and Redis, 12 partitions,
// batches of 500 records or 20 ms.
func DefaultConfig() Config {
	return Config{
		Brokers:                []string{"127.0.0.1:9092"},
		Topic:                  "telemetry.positions",
		Partitions:             12,
		Group:                  "nofly-alerter",
		RedisAddr:              "127.0.0.1:6379",
		RedisPrefix:            dedup.DefaultPrefix,
		EventTTL:               dedup.DefaultEventTTL,
		SignalLostAfter:        alerts.DefaultSignalLostAfter,
		DroneTTL:               alerts.DefaultDroneTTL,
		ApproachBefore:         alerts.DefaultApproachBefore,
		ApproachBufferM:        alerts.DefaultApproachBufferM,
		RedisReplicaTimeout:    redisreplica.DefaultTimeout,
		Batch:                  500,
		Linger:                 20 * time.Millisecond,
		LingerIdle:             time.Millisecond,
		SessionTimeout:         10 * time.Second,
		HeartbeatInterval:      time.Second,
		RebalanceTimeout:       30 * time.Second,
		EventsTopic:            "alerts.events",
		WebhookMaxAttempts:     outbox.DefaultWebhookMaxAttempts,
		WebhookTimeout:         10 * time.Second,
		OutboxRetention:        outbox.DefaultRetention,
		AuditTopic:             auditkafka.DefaultTopic,
		AuditRetention:         audit.DefaultRetention,
		AlertmanagerSeverity:   outbox.DefaultAlertmanagerSeverity,
		AlertmanagerRefresh:    time.Minute,
		AlertmanagerSilenceMax: 24 * time.Hour,
		HTTPAddr:               ":9102",
		Limits:                 alerterLimits(),
		APIRatePerToken:        api.DefaultRatePerToken,
		APIRatePerAddr:         api.DefaultRatePerAddr,
		AlarmRetention:         dedup.DefaultAlarmRetention,
		ZoneHistoryMaxBytes:    versionstore.DefaultMaxBytes,
		APIZoneSetMaxBytes:     api.DefaultZoneSetBodyLimit,
		APIMaxStreams:          api.DefaultMaxStreams,
		APIMaxStreamsPerToken:  api.DefaultMaxStreamsPerToken,
		APIMaxBulkRequests:     api.DefaultMaxBulkRequests,
		LogLevel:               "info",
		OIDCSettings:           oidcDefaults(),
	}
}

// alerterLimits are the alerter's server bounds: httpserve's, with the
// header timeout it always had (5 s). A PUT /v1/zones of 32 MiB keeps pace
// at the default --http-min-body-rate (64 KiB/s, 512 kbit/s) and takes up
// to 30 s + 512 s.
func alerterLimits() httpserve.Limits {
	l := httpserve.DefaultLimits()
	l.HTTPReadHeaderTimeout = 5 * time.Second
	return l
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = envflag.ErrConfig

func badField(field, msg string) error { return configFields.Error(field, msg) }

// Validate reports the first bad field.
func (c Config) Validate() error {
	if msg := envflag.CheckBrokers(c.Brokers); msg != "" {
		return badField("Brokers", msg)
	}
	if _, err := redisconn.ParseAddr(c.RedisAddr); err != nil {
		return badField("RedisAddr", err.Error())
	}
	if err := c.Security.Validate(); err != nil {
		var fe *kafkaconn.FieldError
		if errors.As(err, &fe) {
			return badField(fe.Field, fe.Msg)
		}
		return err
	}
	if err := c.Access.Validate(); err != nil {
		var fe *redisconn.FieldError
		if errors.As(err, &fe) {
			return badField(fe.Field, fe.Msg)
		}
		return err
	}
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			return badField("HTTPAddr", fmt.Sprintf("%q is not host:port (empty turns it off)", c.HTTPAddr))
		}
	}
	if err := c.Limits.Validate(); err != nil {
		var fe *httpserve.FieldError
		if errors.As(err, &fe) {
			return badField(fe.Field, fe.Msg)
		}
		return err
	}
	switch {
	case !validTopic(c.Topic):
		return badField("Topic", fmt.Sprintf("%q is not a Kafka topic name", c.Topic))
	case c.Partitions < 1:
		return badField("Partitions", "must be at least 1")
	case c.Group == "":
		return badField("Group", "required")
	case c.RedisPrefix == "" || strings.ContainsAny(c.RedisPrefix, "{}"):
		return badField("RedisPrefix", "required, without { or }")
	case c.EventTTL < time.Minute:
		return badField("EventTTL", "must be at least 1m (it must outlive any replay window)")
	case c.SignalLostAfter < time.Second:
		return badField("SignalLostAfter", "must be at least 1s (ingest ticks once a second)")
	case c.DroneTTL < 15*time.Minute || c.DroneTTL < c.SignalLostAfter:
		return badField("DroneTTL", "must be at least 15m (above ingest's 10-minute bound on a ts ahead) and at least --signal-lost-after")
	case c.ApproachBufferM < 0 || c.ApproachBufferM > 10_000:
		return badField("ApproachBufferM", "must be 0 to 10000 metres")
	}
	if _, err := alerts.ParseApproachBefore(c.ApproachBefore); err != nil {
		return badField("ApproachBefore", err.Error())
	}
	switch {
	case c.RedisMinReplicas < 0:
		return badField("RedisMinReplicas", "must be 0 (off) or the number of replicas each write must reach")
	case c.RedisReplicaTimeout < 10*time.Millisecond || c.RedisReplicaTimeout > 2*time.Second:
		return badField("RedisReplicaTimeout", "must be between 10ms and 2s (below the Redis clients' read timeouts)")
	case c.Zones == "":
		return badField("Zones", "a zone file is required")
	case c.Batch < 1:
		return badField("Batch", "must be at least 1")
	case c.Linger < 0:
		return badField("Linger", "must not be negative")
	case c.LingerIdle < 0:
		return badField("LingerIdle", "must not be negative")
	case c.HeartbeatInterval <= 0:
		return badField("HeartbeatInterval", "must be positive")
	case c.SessionTimeout < 3*c.HeartbeatInterval:
		return badField("SessionTimeout", fmt.Sprintf("must be at least 3 heartbeats (%v)", 3*c.HeartbeatInterval))
	case c.RebalanceTimeout < time.Second:
		return badField("RebalanceTimeout", "must be at least 1s")
	case c.EventsTopic != "" && !validTopic(c.EventsTopic):
		return badField("EventsTopic", fmt.Sprintf("%q is not a Kafka topic name (empty turns the Kafka output off)", c.EventsTopic))
	case c.EventsTopic != "" && c.EventsTopic == c.Topic:
		return badField("EventsTopic", "must not be the telemetry topic")
	case c.WebhookMaxAttempts < 1:
		return badField("WebhookMaxAttempts", "must be at least 1")
	case c.WebhookTimeout <= 0:
		return badField("WebhookTimeout", "must be positive")
	case c.OutboxRetention < 0:
		return badField("OutboxRetention", "must not be negative (0 keeps every entry)")
	case c.AuditTopic != "" && !validTopic(c.AuditTopic):
		return badField("AuditTopic", fmt.Sprintf("%q is not a Kafka topic name (empty keeps the audit trail in Redis only)", c.AuditTopic))
	case c.AuditRetention < time.Hour:
		return badField("AuditRetention", "must be at least 1h")
	case c.AlertmanagerRefresh < time.Second || c.AlertmanagerRefresh >= 5*time.Minute:
		return badField("AlertmanagerRefresh", "must be from 1s to under 5m (a firing alert is sent ending 4 refreshes ahead; keep it well under the Alertmanager's resolve_timeout, 5m by default)")
	case c.AlertmanagerSilenceMax < time.Minute:
		return badField("AlertmanagerSilenceMax", "must be at least 1m")
	case c.APIRatePerToken < 0:
		return badField("APIRatePerToken", "must not be negative (0: unlimited)")
	case c.APIRatePerAddr < 0:
		return badField("APIRatePerAddr", "must not be negative (0: unlimited)")
	case c.AlarmRetention < time.Minute:
		return badField("AlarmRetention", "must be at least 1m")
	case c.ZoneHistoryMaxBytes < 1<<20:
		return badField("ZoneHistoryMaxBytes", "must be at least 1048576 (1 MiB)")
	case c.APIZoneSetMaxBytes < 1<<20 || c.APIZoneSetMaxBytes > 1<<30:
		return badField("APIZoneSetMaxBytes", "must be from 1048576 (1 MiB) to 1073741824 (1 GiB)")
	case c.APIMaxStreams < 1:
		return badField("APIMaxStreams", "must be at least 1")
	case c.APIMaxStreamsPerToken < 1 || c.APIMaxStreamsPerToken > c.APIMaxStreams:
		return badField("APIMaxStreamsPerToken", fmt.Sprintf("must be from 1 to --api-max-streams (%d)", c.APIMaxStreams))
	case c.APIMaxBulkRequests < 1:
		return badField("APIMaxBulkRequests", "must be at least 1")
	}
	for _, u := range c.PublicURLs {
		if _, err := httpguard.ParsePublicURL(u); err != nil {
			return badField("PublicURLs", err.Error()+" (http or https, a host, an optional port, nothing after but /)")
		}
	}
	if _, err := httpguard.ParseProxies(c.TrustedProxies); err != nil {
		return badField("TrustedProxies", err.Error())
	}
	for _, o := range c.APICORSOrigins {
		if o != "*" && !validOrigin(o) {
			return badField("APICORSOrigins", fmt.Sprintf("%q is not an origin (scheme://host[:port], or *)", o))
		}
	}
	if _, err := outbox.ParseSeverity(c.AlertmanagerSeverity); err != nil {
		return badField("AlertmanagerSeverity", err.Error())
	}
	for i, u := range c.Alertmanagers {
		if err := outbox.ValidateAlertmanagerURL(u); err != nil {
			return badField("Alertmanagers", err.Error())
		}
		for _, o := range c.Alertmanagers[:i] {
			if outbox.AlertmanagerName(o) == outbox.AlertmanagerName(u) {
				return badField("Alertmanagers", fmt.Sprintf("%s is given twice", u))
			}
		}
	}
	for i, w := range c.Webhooks {
		if err := (outbox.Config{Topic: c.Topic, Webhooks: []outbox.Webhook{{Name: w.Name, URL: w.URL}}}).Validate(); err != nil {
			return badField("Webhooks", fmt.Sprintf("%s=%s: %s", w.Name, w.URL, strings.TrimPrefix(err.Error(), outbox.ErrInvalidConfig.Error()+": ")))
		}
		for _, o := range c.Webhooks[:i] {
			if o.Name == w.Name {
				return badField("Webhooks", fmt.Sprintf("name %q is used twice", w.Name))
			}
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return badField("LogLevel", err.Error())
	}
	if err := c.checkOIDC(); err != nil {
		return err
	}
	return c.checkBasemap()
}

// validOrigin reports whether s is a browser origin: scheme://host[:port]
// with nothing after.
func validOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil
}

func validTopic(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 249 &&
		strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == ""
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// configFields is the alerter's configuration table, in the order of
// Config: flags, their environment fallback, usage, errors, README's tables
// (TestReadmeTable) and Environ all come from it. A new field is one row here
// (TestConfigFieldsCoverConfig holds it to Config) and its rule in Validate.
var configFields = slices.Concat(envflag.Fields[Config]{
	{Name: "Brokers", Flag: "brokers", Env: "NOFLY_KAFKA_BROKERS", Usage: "Kafka bootstrap brokers, comma separated host:port"},
	{Name: "Topic", Flag: "topic", Env: "NOFLY_TELEMETRY_TOPIC", Usage: "telemetry topic"},
	{Name: "Partitions", Flag: "partitions", Env: "NOFLY_TELEMETRY_PARTITIONS", Usage: "partition count the topic is created with when missing"},
	{Name: "Group", Flag: "group", Env: "NOFLY_ALERTER_GROUP", Usage: "consumer group id"},
}, kafkaconn.Rows[Config](), envflag.Fields[Config]{
	{Name: "RedisAddr", Flag: "redis", Env: "NOFLY_REDIS_ADDR", Usage: "Redis host:port; a Redis Cluster as host:port,host:port,... or redis-cluster://host:port"},
}, redisconn.Rows[Config](), envflag.Fields[Config]{
	{Name: "RedisPrefix", Flag: "redis-prefix", Env: "NOFLY_REDIS_PREFIX", Usage: "first part of every Redis key's hash tag"},
	{Name: "EventTTL", Flag: "event-ttl", Env: "NOFLY_EVENT_TTL", Usage: "lifetime of an event's unique key in Redis"},
	{Name: "RedisMinReplicas", Flag: "redis-min-replicas", Env: "NOFLY_REDIS_MIN_REPLICAS", Usage: "with Redis replicas: a batch, ack, zone change or event to dispatch counts only once this many replicas of its primary have it (WAIT); 0 = off (a failover may then lose acknowledged batches)"},
	{Name: "RedisReplicaTimeout", Flag: "redis-replica-timeout", Env: "NOFLY_REDIS_REPLICA_TIMEOUT", Usage: "how long one WAIT for --redis-min-replicas waits before the write is retried"},
	{Name: "Zones", Flag: "zones", Env: "NOFLY_ZONES", Usage: "zone file (GeoJSON, ED-269, ED-318), reloaded on SIGHUP"},
	{Name: "StrictZones", Flag: "strict-zones", Env: "NOFLY_STRICT_ZONES", Usage: "unknown GeoJSON zone properties are errors, not warnings"},
	{Name: "ConservativeZones", Flag: "conservative-zones", Env: "NOFLY_CONSERVATIVE_ZONES", Usage: "load zone limits without a vertical reference or unit, and times without a UTC offset, read as alarming most (with a warning) instead of refusing the file"},
	{Name: "AllowEmptyZones", Flag: "allow-empty-zones", Env: "NOFLY_ALLOW_EMPTY_ZONES", Usage: "start (and reload) with a zone file that leaves no zone, which raises no alarm"},
	{Name: "SignalLostAfter", Flag: "signal-lost-after", Env: "NOFLY_SIGNAL_LOST_AFTER", Usage: "an active alarm whose drone was not heard this long on the log's clock gets one signal_lost event (the alarm stays active; the next position emits signal_regained)"},
	{Name: "ApproachBefore", Flag: "approach-before", Env: "NOFLY_APPROACH_BEFORE", Usage: "approaching warnings: warn when a drone is predicted to enter a zone within this time, by zone category (category=duration, comma-separated; * for every other category; 0s turns one off, off all); a zone's approach_before_s property overrides it"},
	{Name: "ApproachBufferM", Flag: "approach-buffer", Env: "NOFLY_APPROACH_BUFFER", Usage: "approaching warnings: warn a drone closing on a zone within this many metres of its edge, whatever its predicted time"},
	{Name: "DroneTTL", Flag: "drone-ttl", Env: "NOFLY_DRONE_TTL", Usage: "a drone without an active alarm not heard this long on the log's clock is forgotten (engine and Redis; a drone that raised is kept --event-ttl after the raise)"},
	{Name: "Batch", Flag: "batch", Env: "NOFLY_ALERTER_BATCH", Usage: "records per batch at most (one Redis round trip per batch)"},
	{Name: "Linger", Flag: "linger", Env: "NOFLY_ALERTER_LINGER", Usage: "how long a batch waits to fill after its first record"},
	{Name: "LingerIdle", Flag: "linger-idle", Env: "NOFLY_ALERTER_LINGER_IDLE", Usage: "a batch goes before --linger once a window this long passes with no record (the flow paused): a lone position is decided at once, a flood still fills batches; 0 or --linger and over: always wait --linger"},
	{Name: "SessionTimeout", Flag: "session-timeout", Env: "NOFLY_ALERTER_SESSION_TIMEOUT", Usage: "consumer group session timeout"},
	{Name: "HeartbeatInterval", Flag: "heartbeat", Env: "NOFLY_ALERTER_HEARTBEAT", Usage: "consumer group heartbeat interval"},
	{Name: "RebalanceTimeout", Flag: "rebalance-timeout", Env: "NOFLY_ALERTER_REBALANCE_TIMEOUT", Usage: "consumer group rebalance timeout"},
	{Name: "EventsTopic", Flag: "events-topic", Env: "NOFLY_EVENTS_TOPIC", Usage: "Kafka topic the outbox is dispatched to (partition p to partition p, created with the telemetry topic's partition count); empty turns the Kafka output off"},
	{Name: "Webhooks", Flag: "webhook", Env: "NOFLY_WEBHOOKS", Usage: "NAME=URL of a webhook that receives every event (at least once, Idempotency-Key: event_id); repeatable, or comma separated", Value: func(p any) flag.Value { return (*webhookFlag)(p.(*[]WebhookURL)) }},
	{Name: "WebhookMaxAttempts", Flag: "webhook-max-attempts", Env: "NOFLY_WEBHOOK_MAX_ATTEMPTS", Usage: "attempts per event and webhook before the event is dead-lettered"},
	{Name: "WebhookTimeout", Flag: "webhook-timeout", Env: "NOFLY_WEBHOOK_TIMEOUT", Usage: "bound of one webhook POST"},
	{Name: "OutboxRetention", Flag: "outbox-retention", Env: "NOFLY_OUTBOX_RETENTION", Usage: "how long an outbox entry is kept once every output has passed it (audits, webhooks added later); 0 keeps every entry"},
	{Name: "AuditTopic", Flag: "audit-topic", Env: "NOFLY_AUDIT_TOPIC", Usage: "Kafka topic the audit trail is sent to, exactly once for read_committed readers, by the instance owning telemetry partition 0 (one partition, created if missing); empty: the trail stays in Redis only"},
	{Name: "AuditRetention", Flag: "audit-retention", Env: "NOFLY_AUDIT_RETENTION", Usage: "how long Redis keeps an audit entry (GET /v1/audit); older entries are trimmed as new ones are written"},
	{Name: "Alertmanagers", Flag: "alertmanager", Env: "NOFLY_ALERTMANAGER", Usage: "URL of an Alertmanager (http[s]://host:port[/route-prefix]) every active alarm is posted to as a DroneInZone alert, an ack becoming a silence of it; at least once, driven from the outbox; repeatable (an HA pair gets both), or comma separated", Value: func(p any) flag.Value { return (*envflag.Repeatable)(p.(*[]string)) }},
	{Name: "AlertmanagerSeverity", Flag: "alertmanager-severity", Env: "NOFLY_ALERTMANAGER_SEVERITY", Usage: "the Alertmanager alerts' severity label by zone category (category=severity, comma separated; * for every other category)"},
	{Name: "AlertmanagerRefresh", Flag: "alertmanager-refresh", Env: "NOFLY_ALERTMANAGER_REFRESH", Usage: "how often the active alarms of the partitions this instance owns are posted to the Alertmanagers again (and at start); a firing alert ends 4 refreshes ahead unless refreshed: keep it well under the Alertmanager's resolve_timeout"},
	{Name: "AlertmanagerSilenceMax", Flag: "alertmanager-silence-max", Env: "NOFLY_ALERTMANAGER_SILENCE_MAX", Usage: "longest an ack's Alertmanager silence lasts (it is expired when the alarm clears)"},
	{Name: "HTTPAddr", Flag: "http", Env: "NOFLY_ALERTER_HTTP", Usage: "address of /metrics, /healthz, /readyz, /openapi.json and the API; empty turns it off"},
}, httpserve.Rows[Config]("NOFLY_ALERTER"), envflag.Fields[Config]{
	{Name: "APITokens", Flag: "api-tokens", Env: "NOFLY_API_TOKENS", Usage: "file of API tokens (name, role, SHA-256; see alerter api-token): every /v1 request then needs Authorization: Bearer <token>; without it the API is served only on a loopback --http, unauthenticated, and is off on any other; read again on SIGHUP"},
	{Name: "APICORSOrigins", Flag: "api-cors-origins", Env: "NOFLY_API_CORS_ORIGINS", Usage: "origins a browser may call the API from, comma separated (* for any); empty: no CORS"},
	{Name: "PublicURLs", Flag: "public-url", Env: "NOFLY_ALERTER_PUBLIC_URLS", Usage: "a URL clients reach --http by (http[s]://host[:port]); its host is accepted as Host and its origin as a write's Origin (the listener's addresses, localhost and the hostname always are); repeatable, or comma separated", Value: func(p any) flag.Value { return (*envflag.Repeatable)(p.(*[]string)) }},
	{Name: "TrustedProxies", Flag: "trusted-proxies", Env: "NOFLY_TRUSTED_PROXIES", Usage: "proxies (CIDRs or addresses, comma separated) whose X-Forwarded-For (or Forwarded) names the client for rate limits, logs and the loopback check; empty: the connection's peer is the client"},
	{Name: "MapTiles", Flag: "map-tiles", Env: "NOFLY_MAP_TILES", Usage: "the dashboard's base map from a tile server: an XYZ raster template, http(s)://host/.../{z}/{x}/{y}.png; the page's Content-Security-Policy admits that origin for images and no other; needs --map-attribution"},
	{Name: "MapPMTiles", Flag: "map-pmtiles", Env: "NOFLY_MAP_PMTILES", Usage: "the dashboard's base map from a local PMTiles v3 archive of vector tiles (Protomaps basemap layers), served by the alerter at /v1/map/basemap.pmtiles: no request leaves it; neither flag: the coastline"},
	{Name: "MapAttribution", Flag: "map-attribution", Env: "NOFLY_MAP_ATTRIBUTION", Usage: "the base map's credit in the map's corner, plain text (at most 300 characters); default with --map-pmtiles: the archive's own, else © OpenStreetMap contributors"},
}, oidcRows[Config](), envflag.Fields[Config]{
	{Name: "APIRatePerToken", Flag: "api-rate-per-token", Env: "NOFLY_API_RATE_PER_TOKEN", Usage: "API requests per second one token may make (429 with Retry-After beyond); 0: unlimited"},
	{Name: "APIRatePerAddr", Flag: "api-rate-per-addr", Env: "NOFLY_API_RATE_PER_ADDR", Usage: "API requests per second one client address may make, before authentication; 0: unlimited"},
	{Name: "AlarmRetention", Flag: "alarm-retention", Env: "NOFLY_ALARM_RETENTION", Usage: "how long alarm and zone history stays queryable through the API"},
	{Name: "ZoneHistoryMaxBytes", Flag: "zone-history-max-bytes", Env: "NOFLY_ZONE_HISTORY_MAX_BYTES", Usage: "bytes of zone set versions kept in Redis for replay at most: past it the oldest versions go, whatever --alarm-retention and the last-32 rule keep (never the current one)"},
	{Name: "APIZoneSetMaxBytes", Flag: "api-zone-set-max-bytes", Env: "NOFLY_API_ZONE_SET_MAX_BYTES", Usage: "largest PUT /v1/zones body (413 beyond); a set takes about 12 times its size in heap while it is validated, one at a time per instance"},
	{Name: "APIMaxStreams", Flag: "api-max-streams", Env: "NOFLY_API_MAX_STREAMS", Usage: "open event and positions streams of this instance at most (503 with Retry-After beyond)"},
	{Name: "APIMaxStreamsPerToken", Flag: "api-max-streams-per-token", Env: "NOFLY_API_MAX_STREAMS_PER_TOKEN", Usage: "open event and positions streams of one token at most (429 with Retry-After beyond)"},
	{Name: "APIMaxBulkRequests", Flag: "api-max-bulk-requests", Env: "NOFLY_API_MAX_BULK_REQUESTS", Usage: "zone set, zone history, drone list, authorisation change and authorisation history requests served at once; more wait up to 10s, then 503"},
	{Name: "LogLevel", Flag: "log-level", Env: "NOFLY_LOG_LEVEL", Usage: "debug, info, warn or error"},
})

// Environ returns what starts `alerter serve` as a subprocess with exactly
// c: the NOFLY_* variables of its non-empty fields, and --flag= for its
// empty ones, which no variable can set (envflag.Fields.Environ).
func (c Config) Environ() (env, flags []string) { return configFields.Environ(c) }

// webhookFlag is --webhook NAME=URL: repeatable, and a comma-separated
// list in one value (NOFLY_WEBHOOKS) adds each.
type webhookFlag []WebhookURL

func (w *webhookFlag) String() string {
	var parts []string
	for _, h := range *w {
		parts = append(parts, h.Name+"="+h.URL)
	}
	return strings.Join(parts, ",")
}

func (w *webhookFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		name, url, ok := strings.Cut(p, "=")
		if !ok || name == "" || url == "" {
			return fmt.Errorf("%q is not NAME=URL", p)
		}
		*w = append(*w, WebhookURL{Name: strings.TrimSpace(name), URL: strings.TrimSpace(url)})
	}
	return nil
}

// flagSet registers Config fields as flags with environment fallbacks.
type flagSet struct{ *envflag.FlagSet }

func newFlagSet(name string) *flagSet { return &flagSet{envflag.New(name)} }

// field registers the row of configFields named field with usage. It and
// usages serve replay.go and redrive.go, until they call
// configFields.RegisterOnly and Field(name).Register themselves.
func (f *flagSet) field(c *Config, field, usage string) {
	configFields.Field(field).Register(f.FlagSet, c, usage)
}

// usages is the Usage of each row of configFields.
var usages = func() map[string]string {
	m := make(map[string]string, len(configFields))
	for _, f := range configFields {
		m[f.Name] = f.Usage
	}
	return m
}()

// parseConfig builds the serve configuration from args and the environment.
func parseConfig(args []string, getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	fs := newFlagSet("alerter")
	configFields.Register(fs.FlagSet, &c)
	if err := fs.Parse(args, getenv); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// zoneSource is where the zones come from and how they are read.
type zoneSource struct {
	path       string
	loader     geofence.Loader
	allowEmpty bool
}

func (c Config) zoneSource() zoneSource {
	return zoneSource{path: c.Zones, loader: geofence.Loader{Strict: c.StrictZones, Conservative: c.ConservativeZones}, allowEmpty: c.AllowEmptyZones}
}

// errNoZones: the zone file leaves no zone and --allow-empty-zones is off.
var errNoZones = errors.New("no zone loaded: nothing would raise an alarm (--allow-empty-zones, NOFLY_ALLOW_EMPTY_ZONES, if that is meant)")

// load reads the zone file and builds its index; the report says what
// was loaded, dropped and warned of.
func (s zoneSource) load() (*geofence.Index, geofence.LoadReport, error) {
	set, err := s.loader.LoadFile(s.path)
	if err != nil {
		if !s.loader.Conservative && strings.Contains(err.Error(), "load conservatively") {
			return nil, geofence.LoadReport{}, fmt.Errorf("load zones (--conservative-zones loads what is missing read as alarming most): %w", err)
		}
		return nil, geofence.LoadReport{}, fmt.Errorf("load zones: %w", err)
	}
	if len(set.Zones) == 0 && !s.allowEmpty {
		return nil, set.Report, fmt.Errorf("load zones: %s: %w", set.Report.Summary(), errNoZones)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		return nil, set.Report, fmt.Errorf("index zones %s: %w", s.path, err)
	}
	return ix, set.Report, nil
}

// logZoneReport logs a load's summary and each of its warnings.
func logZoneReport(log *slog.Logger, msg string, r geofence.LoadReport, version string) {
	for _, w := range r.Warnings {
		log.Warn("zone file warning", "file", w.File, "feature", w.Feature, "id", w.ID, "field", w.Field, "msg", w.Msg)
	}
	if r.Truncated > 0 {
		log.Warn("zone file warnings left out", "file", r.File, "count", r.Truncated)
	}
	attrs := []any{"file", r.File, "format", r.Format, "version", version, "zones", r.Zones,
		"dropped", len(r.Dropped), "warnings", len(r.Warnings) + r.Truncated, "summary", r.Summary()}
	for reason, n := range r.DroppedBy() {
		attrs = append(attrs, "dropped_"+reason, n)
	}
	if r.Zones == 0 {
		log.Warn(msg+" (none: nothing raises an alarm)", attrs...)
		return
	}
	log.Info(msg, attrs...)
}
