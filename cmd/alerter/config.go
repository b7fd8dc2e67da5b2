package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/envflag"
)

// Config is the alerter's configuration. Flags fill it, each with an
// environment variable as fallback (a flag on the command line wins);
// Validate names the bad field. README.md next to this file has the table.
type Config struct {
	Brokers    []string // NOFLY_KAFKA_BROKERS
	Topic      string   // NOFLY_TELEMETRY_TOPIC
	Partitions int      // NOFLY_TELEMETRY_PARTITIONS: the topic is created with it if missing
	Group      string   // NOFLY_ALERTER_GROUP

	RedisAddr   string        // NOFLY_REDIS_ADDR
	RedisPrefix string        // NOFLY_REDIS_PREFIX
	EventTTL    time.Duration // NOFLY_EVENT_TTL

	Zones string // NOFLY_ZONES: GeoJSON, ED-269 or ED-318 file, reloaded on SIGHUP
	// StrictZones makes unknown GeoJSON zone properties errors (else
	// warnings); ConservativeZones loads limits without a vertical
	// reference or unit, and times without an offset, read as alarming
	// most (else they are refused); AllowEmptyZones lets a file without
	// zones start or reload (else refused: no zone looks like no
	// violation). geofence/doc.go has the rules.
	StrictZones       bool // NOFLY_STRICT_ZONES
	ConservativeZones bool // NOFLY_CONSERVATIVE_ZONES
	AllowEmptyZones   bool // NOFLY_ALLOW_EMPTY_ZONES

	Batch  int           // NOFLY_ALERTER_BATCH: records per batch at most
	Linger time.Duration // NOFLY_ALERTER_LINGER: how long a batch waits to fill after its first record

	SessionTimeout    time.Duration // NOFLY_ALERTER_SESSION_TIMEOUT
	HeartbeatInterval time.Duration // NOFLY_ALERTER_HEARTBEAT
	RebalanceTimeout  time.Duration // NOFLY_ALERTER_REBALANCE_TIMEOUT

	// Dispatch of the outbox (alerts/outbox), one dispatcher per owned
	// partition, started and stopped with the partition's engine.
	EventsTopic        string        // NOFLY_EVENTS_TOPIC: partition p's events go to its partition p; empty = no Kafka output
	Webhooks           []WebhookURL  // NOFLY_WEBHOOKS: NAME=URL, comma separated; --webhook is repeatable
	WebhookMaxAttempts int           // NOFLY_WEBHOOK_MAX_ATTEMPTS: attempts before an event is dead-lettered
	WebhookTimeout     time.Duration // NOFLY_WEBHOOK_TIMEOUT: bound of one POST
	OutboxRetention    time.Duration // NOFLY_OUTBOX_RETENTION: delivered entries older than this are trimmed; 0 keeps all

	HTTPAddr string // NOFLY_ALERTER_HTTP: /metrics and /healthz; empty = off
	LogLevel string // NOFLY_LOG_LEVEL
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
	return outbox.Config{Prefix: c.RedisPrefix, Topic: c.Topic, Webhooks: hooks, Retention: retention}
}

// dispatching reports whether the outbox has any output.
func (c Config) dispatching() bool { return c.EventsTopic != "" || len(c.Webhooks) > 0 }

// DefaultConfig returns the defaults: local Kafka and Redis, 12 partitions,
// batches of 500 records or 20 ms.
func DefaultConfig() Config {
	return Config{
		Brokers:            []string{"127.0.0.1:9092"},
		Topic:              "telemetry.positions",
		Partitions:         12,
		Group:              "nofly-alerter",
		RedisAddr:          "127.0.0.1:6379",
		RedisPrefix:        dedup.DefaultPrefix,
		EventTTL:           dedup.DefaultEventTTL,
		Batch:              500,
		Linger:             20 * time.Millisecond,
		SessionTimeout:     10 * time.Second,
		HeartbeatInterval:  time.Second,
		RebalanceTimeout:   30 * time.Second,
		EventsTopic:        "alerts.events",
		WebhookMaxAttempts: outbox.DefaultWebhookMaxAttempts,
		WebhookTimeout:     10 * time.Second,
		OutboxRetention:    outbox.DefaultRetention,
		HTTPAddr:           ":9102",
		LogLevel:           "info",
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = envflag.ErrConfig

func badField(field, msg string) error {
	f := fieldFlags[field]
	return envflag.FieldError(field, f.flag, f.env, msg)
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	if msg := envflag.CheckBrokers(c.Brokers); msg != "" {
		return badField("Brokers", msg)
	}
	if _, _, err := net.SplitHostPort(c.RedisAddr); err != nil {
		return badField("RedisAddr", fmt.Sprintf("%q is not host:port", c.RedisAddr))
	}
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			return badField("HTTPAddr", fmt.Sprintf("%q is not host:port (empty turns it off)", c.HTTPAddr))
		}
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
	case c.Zones == "":
		return badField("Zones", "a zone file is required")
	case c.Batch < 1:
		return badField("Batch", "must be at least 1")
	case c.Linger < 0:
		return badField("Linger", "must not be negative")
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
	return nil
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

// fieldFlags names the flag and environment variable of each field.
var fieldFlags = map[string]struct{ flag, env string }{
	"Brokers":            {"brokers", "NOFLY_KAFKA_BROKERS"},
	"Topic":              {"topic", "NOFLY_TELEMETRY_TOPIC"},
	"Partitions":         {"partitions", "NOFLY_TELEMETRY_PARTITIONS"},
	"Group":              {"group", "NOFLY_ALERTER_GROUP"},
	"RedisAddr":          {"redis", "NOFLY_REDIS_ADDR"},
	"RedisPrefix":        {"redis-prefix", "NOFLY_REDIS_PREFIX"},
	"EventTTL":           {"event-ttl", "NOFLY_EVENT_TTL"},
	"Zones":              {"zones", "NOFLY_ZONES"},
	"StrictZones":        {"strict-zones", "NOFLY_STRICT_ZONES"},
	"ConservativeZones":  {"conservative-zones", "NOFLY_CONSERVATIVE_ZONES"},
	"AllowEmptyZones":    {"allow-empty-zones", "NOFLY_ALLOW_EMPTY_ZONES"},
	"Batch":              {"batch", "NOFLY_ALERTER_BATCH"},
	"Linger":             {"linger", "NOFLY_ALERTER_LINGER"},
	"SessionTimeout":     {"session-timeout", "NOFLY_ALERTER_SESSION_TIMEOUT"},
	"HeartbeatInterval":  {"heartbeat", "NOFLY_ALERTER_HEARTBEAT"},
	"RebalanceTimeout":   {"rebalance-timeout", "NOFLY_ALERTER_REBALANCE_TIMEOUT"},
	"EventsTopic":        {"events-topic", "NOFLY_EVENTS_TOPIC"},
	"Webhooks":           {"webhook", "NOFLY_WEBHOOKS"},
	"WebhookMaxAttempts": {"webhook-max-attempts", "NOFLY_WEBHOOK_MAX_ATTEMPTS"},
	"WebhookTimeout":     {"webhook-timeout", "NOFLY_WEBHOOK_TIMEOUT"},
	"OutboxRetention":    {"outbox-retention", "NOFLY_OUTBOX_RETENTION"},
	"HTTPAddr":           {"http", "NOFLY_ALERTER_HTTP"},
	"LogLevel":           {"log-level", "NOFLY_LOG_LEVEL"},
}

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

func (f *flagSet) field(c *Config, field, usage string) {
	ff := fieldFlags[field]
	f.Fallback(ff.flag, ff.env)
	usage += " (env " + ff.env + ")"
	switch field {
	case "Brokers":
		f.Var((*envflag.List)(&c.Brokers), ff.flag, usage)
	case "Topic":
		f.StringVar(&c.Topic, ff.flag, c.Topic, usage)
	case "Partitions":
		f.IntVar(&c.Partitions, ff.flag, c.Partitions, usage)
	case "Group":
		f.StringVar(&c.Group, ff.flag, c.Group, usage)
	case "RedisAddr":
		f.StringVar(&c.RedisAddr, ff.flag, c.RedisAddr, usage)
	case "RedisPrefix":
		f.StringVar(&c.RedisPrefix, ff.flag, c.RedisPrefix, usage)
	case "EventTTL":
		f.DurationVar(&c.EventTTL, ff.flag, c.EventTTL, usage)
	case "Zones":
		f.StringVar(&c.Zones, ff.flag, c.Zones, usage)
	case "StrictZones":
		f.BoolVar(&c.StrictZones, ff.flag, c.StrictZones, usage)
	case "ConservativeZones":
		f.BoolVar(&c.ConservativeZones, ff.flag, c.ConservativeZones, usage)
	case "AllowEmptyZones":
		f.BoolVar(&c.AllowEmptyZones, ff.flag, c.AllowEmptyZones, usage)
	case "Batch":
		f.IntVar(&c.Batch, ff.flag, c.Batch, usage)
	case "Linger":
		f.DurationVar(&c.Linger, ff.flag, c.Linger, usage)
	case "SessionTimeout":
		f.DurationVar(&c.SessionTimeout, ff.flag, c.SessionTimeout, usage)
	case "HeartbeatInterval":
		f.DurationVar(&c.HeartbeatInterval, ff.flag, c.HeartbeatInterval, usage)
	case "RebalanceTimeout":
		f.DurationVar(&c.RebalanceTimeout, ff.flag, c.RebalanceTimeout, usage)
	case "EventsTopic":
		f.StringVar(&c.EventsTopic, ff.flag, c.EventsTopic, usage)
	case "Webhooks":
		f.Var((*webhookFlag)(&c.Webhooks), ff.flag, usage)
	case "WebhookMaxAttempts":
		f.IntVar(&c.WebhookMaxAttempts, ff.flag, c.WebhookMaxAttempts, usage)
	case "WebhookTimeout":
		f.DurationVar(&c.WebhookTimeout, ff.flag, c.WebhookTimeout, usage)
	case "OutboxRetention":
		f.DurationVar(&c.OutboxRetention, ff.flag, c.OutboxRetention, usage)
	case "HTTPAddr":
		f.StringVar(&c.HTTPAddr, ff.flag, c.HTTPAddr, usage)
	case "LogLevel":
		f.StringVar(&c.LogLevel, ff.flag, c.LogLevel, usage)
	default:
		panic("no flag for field " + field)
	}
}

// parseConfig builds the serve configuration from args and the environment.
func parseConfig(args []string, getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	fs := newFlagSet("alerter")
	for _, field := range []string{"Brokers", "Topic", "Partitions", "Group", "RedisAddr", "RedisPrefix", "EventTTL",
		"Zones", "StrictZones", "ConservativeZones", "AllowEmptyZones", "Batch", "Linger", "SessionTimeout", "HeartbeatInterval", "RebalanceTimeout",
		"EventsTopic", "Webhooks", "WebhookMaxAttempts", "WebhookTimeout", "OutboxRetention", "HTTPAddr", "LogLevel"} {
		fs.field(&c, field, usages[field])
	}
	if err := fs.Parse(args, getenv); err != nil {
		return c, err
	}
	return c, c.Validate()
}

var usages = map[string]string{
	"Brokers":            "Kafka bootstrap brokers, comma separated host:port",
	"Topic":              "telemetry topic",
	"Partitions":         "partition count the topic is created with when missing",
	"Group":              "consumer group id",
	"RedisAddr":          "Redis host:port",
	"RedisPrefix":        "first part of every Redis key's hash tag",
	"EventTTL":           "lifetime of an event's unique key in Redis",
	"Zones":              "zone file (GeoJSON, ED-269, ED-318), reloaded on SIGHUP",
	"StrictZones":        "unknown GeoJSON zone properties are errors, not warnings",
	"ConservativeZones":  "load zone limits without a vertical reference or unit, and times without a UTC offset, read as alarming most (with a warning) instead of refusing the file",
	"AllowEmptyZones":    "start (and reload) with a zone file that leaves no zone, which raises no alarm",
	"Batch":              "records per batch at most (one Redis round trip per batch)",
	"Linger":             "how long a batch waits to fill after its first record",
	"SessionTimeout":     "consumer group session timeout",
	"HeartbeatInterval":  "consumer group heartbeat interval",
	"RebalanceTimeout":   "consumer group rebalance timeout",
	"EventsTopic":        "Kafka topic the outbox is dispatched to (partition p to partition p, created with the telemetry topic's partition count); empty turns the Kafka output off",
	"Webhooks":           "NAME=URL of a webhook that receives every event (at least once, Idempotency-Key: event_id); repeatable, or comma separated",
	"WebhookMaxAttempts": "attempts per event and webhook before the event is dead-lettered",
	"WebhookTimeout":     "bound of one webhook POST",
	"OutboxRetention":    "how long an outbox entry is kept once every output has passed it (audits, webhooks added later); 0 keeps every entry",
	"HTTPAddr":           "address of /metrics and /healthz; empty turns it off",
	"LogLevel":           "debug, info, warn or error",
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
