package ingestd

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/internal/envflag"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
)

// Config is the configuration of every subcommand: Kafka, the topic, the
// HTTP intake and logging. Flags fill it, each with an environment variable
// as fallback (a flag given on the command line wins); configFields names
// them, Validate names the bad field.
type Config struct {
	Brokers            []string
	Topic              string
	Partitions         int
	Replication        int // -1 = the broker's default.replication.factor
	kafkaconn.Security     // TLS and SASL to Kafka (--kafka-tls..., --kafka-sasl...)

	Addr             string
	MaxBodyBytes     int64
	MaxRecords       int
	MaxLineBytes     int
	ProduceTimeout   time.Duration
	RetryAfter       time.Duration
	ShutdownTimeout  time.Duration
	httpserve.Limits // the server's timeouts, header bound and connection cap (--http-...)

	MaxClockSkewAhead time.Duration // 0 = no bound
	MaxRecordAge      time.Duration // 0 = no bound

	// TickInterval is how often ingest writes a clock tick to every
	// partition (ticker.go): the alerter's clock when no telemetry flows.
	TickInterval time.Duration

	// LagGroups are the consumer groups whose lag on the topic ingest
	// measures (lag.go): the alerters' group by default.
	LagGroups []string

	FeedKeys           string // the feed key file; "" = none
	InsecureOpenIntake bool

	// PublicURLs are the URLs feeds reach Addr by (their hosts pass the
	// Host check, their origins the cross-site one); TrustedProxies the
	// proxies whose X-Forwarded-For names the client (ingest/browser.go).
	PublicURLs     []string
	TrustedProxies []string

	LogLevel string // debug, info, warn, error
}

// DefaultConfig returns the defaults: a local single-node broker, 12
// partitions, :8080.
func DefaultConfig() Config {
	return Config{
		Brokers:         []string{"127.0.0.1:9092"},
		Topic:           "telemetry.positions",
		Partitions:      12,
		Replication:     -1,
		Addr:            ":8080",
		MaxBodyBytes:    ingest.DefaultMaxBodyBytes,
		MaxRecords:      ingest.DefaultMaxRecords,
		MaxLineBytes:    ingest.DefaultMaxLineBytes,
		ProduceTimeout:  ingest.DefaultProduceTimeout,
		RetryAfter:      ingest.DefaultRetryAfter,
		ShutdownTimeout: 30 * time.Second,
		Limits:          httpserve.DefaultLimits(),
		LogLevel:        "info",

		MaxClockSkewAhead: ingest.DefaultMaxClockSkewAhead,
		TickInterval:      DefaultTickInterval,
		LagGroups:         []string{"nofly-alerter"},
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = envflag.ErrConfig

func badField(field, msg string) error { return configFields.Error(field, msg) }

// Validate reports the first bad field.
func (c Config) Validate() error {
	if msg := envflag.CheckBrokers(c.Brokers); msg != "" {
		return badField("Brokers", msg)
	}
	if err := c.Security.Validate(); err != nil {
		var fe *kafkaconn.FieldError
		if errors.As(err, &fe) {
			return badField(fe.Field, fe.Msg)
		}
		return err
	}
	switch {
	case c.Topic == "" || len(c.Topic) > 249 || strings.Trim(c.Topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		return badField("Topic", fmt.Sprintf("%q is not a Kafka topic name (1-249 of [a-zA-Z0-9._-])", c.Topic))
	case c.Partitions < 1:
		return badField("Partitions", "must be at least 1")
	case c.Replication == 0 || c.Replication < -1:
		return badField("Replication", "must be at least 1, or -1 for the broker's default")
	case c.Addr == "":
		return badField("Addr", "required")
	case c.FeedKeys != "" && c.InsecureOpenIntake:
		return badField("InsecureOpenIntake", "cannot be set with --feed-keys: with keys every write needs one")
	case c.MaxBodyBytes < 1:
		return badField("MaxBodyBytes", "must be at least 1")
	case c.MaxRecords < 1:
		return badField("MaxRecords", "must be at least 1")
	case c.MaxLineBytes < 64:
		return badField("MaxLineBytes", "must be at least 64 (a record is ~200 bytes)")
	case c.ProduceTimeout <= 0:
		return badField("ProduceTimeout", "must be positive")
	case c.RetryAfter < time.Second:
		return badField("RetryAfter", "must be at least 1s (Retry-After is in whole seconds)")
	case len(c.LagGroups) > 32:
		return badField("LagGroups", "at most 32 groups")
	case c.TickInterval < 100*time.Millisecond || c.TickInterval > time.Second:
		return badField("TickInterval", "must be between 100ms and 1s: the alerter's clock moves only with records, and a partition without telemetry has only the ticks")
	case c.MaxClockSkewAhead < 0:
		return badField("MaxClockSkewAhead", "must not be negative (0 = no bound)")
	case c.MaxRecordAge < 0:
		return badField("MaxRecordAge", "must not be negative (0 = no bound)")
	case c.ShutdownTimeout < c.ProduceTimeout:
		return badField("ShutdownTimeout", fmt.Sprintf("must be at least ProduceTimeout (%v), so in-flight requests can finish", c.ProduceTimeout))
	}
	for _, u := range c.PublicURLs {
		if _, err := httpguard.ParsePublicURL(u); err != nil {
			return badField("PublicURLs", err.Error()+" (http or https, a host, an optional port, nothing after but /)")
		}
	}
	if _, err := httpguard.ParseProxies(c.TrustedProxies); err != nil {
		return badField("TrustedProxies", err.Error())
	}
	if err := c.Limits.Validate(); err != nil {
		var fe *httpserve.FieldError
		if errors.As(err, &fe) {
			return badField(fe.Field, fe.Msg)
		}
		return err
	}
	// A request's 202 waits for Kafka after its body: the answer must be
	// allowed that long, and the handler's context too.
	if c.HTTPWriteTimeout <= c.ProduceTimeout {
		return badField("HTTPWriteTimeout", fmt.Sprintf("must be more than ProduceTimeout (%v): a 202 waits for Kafka's acknowledgement", c.ProduceTimeout))
	}
	if c.HTTPReadTimeout <= c.ProduceTimeout {
		return badField("HTTPReadTimeout", fmt.Sprintf("must be more than ProduceTimeout (%v): a request's context ends this long after its body was read", c.ProduceTimeout))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return badField("LogLevel", err.Error())
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// configFields is ingest's configuration table, in the order of Config:
// flags, their environment fallback, usage, errors, README's tables
// (TestReadmeTable) and Environ all come from it. A new field is one row here
// (TestConfigFieldsCoverConfig holds it to Config), its name in kafkaFlags
// or serveFlags, and its rule in Validate.
var configFields = slices.Concat(envflag.Fields[Config]{
	{Name: "Brokers", Flag: "brokers", Env: "NOFLY_KAFKA_BROKERS", Usage: "Kafka bootstrap brokers, comma separated host:port"},
	{Name: "Topic", Flag: "topic", Env: "NOFLY_TELEMETRY_TOPIC", Usage: "telemetry topic"},
	{Name: "Partitions", Flag: "partitions", Env: "NOFLY_TELEMETRY_PARTITIONS", Usage: "partition count the topic is created with, and must have"},
	{Name: "Replication", Flag: "replication", Env: "NOFLY_TELEMETRY_REPLICATION", Usage: "replication factor the topic is created with; -1 = broker default"},
}, kafkaconn.Rows[Config](), envflag.Fields[Config]{
	{Name: "Addr", Flag: "addr", Env: "NOFLY_INGEST_ADDR", Usage: "HTTP listen address"},
	{Name: "MaxBodyBytes", Flag: "max-body-bytes", Env: "NOFLY_INGEST_MAX_BODY_BYTES", Usage: "largest request body in bytes (413 beyond)"},
	{Name: "MaxRecords", Flag: "max-records", Env: "NOFLY_INGEST_MAX_RECORDS", Usage: "most records in one request (413 beyond)"},
	{Name: "MaxLineBytes", Flag: "max-line-bytes", Env: "NOFLY_INGEST_MAX_LINE_BYTES", Usage: "longest NDJSON line / JSON array element in bytes (400 naming the line beyond)"},
	{Name: "ProduceTimeout", Flag: "produce-timeout", Env: "NOFLY_INGEST_PRODUCE_TIMEOUT", Usage: "longest wait for Kafka's acknowledgement of a request (503 beyond)"},
	{Name: "RetryAfter", Flag: "retry-after", Env: "NOFLY_INGEST_RETRY_AFTER", Usage: "Retry-After of a 503"},
	{Name: "ShutdownTimeout", Flag: "shutdown-timeout", Env: "NOFLY_INGEST_SHUTDOWN_TIMEOUT", Usage: "how long a SIGTERM waits for in-flight requests and queued records"},
}, httpserve.Rows[Config]("NOFLY_INGEST"), envflag.Fields[Config]{
	{Name: "MaxClockSkewAhead", Flag: "max-clock-skew-ahead", Env: "NOFLY_INGEST_MAX_CLOCK_SKEW_AHEAD", Usage: "largest lead of a record's ts over the receive time (400 naming ts beyond); 0 = no bound"},
	{Name: "MaxRecordAge", Flag: "max-record-age", Env: "NOFLY_INGEST_MAX_RECORD_AGE", Usage: "largest lag of a record's ts behind the receive time (400 naming ts beyond); 0 = no bound"},
	{Name: "LagGroups", Flag: "lag-groups", Env: "NOFLY_INGEST_LAG_GROUPS", Usage: "consumer groups whose lag on the telemetry topic ingest measures every 5 s (nofly_ingest_consumer_lag_seconds; the alerters' --group; comma-separated, at most 32)"},
	{Name: "TickInterval", Flag: "tick-interval", Env: "NOFLY_INGEST_TICK_INTERVAL", Usage: "how often a clock tick is written to every partition of the telemetry topic (the alerter's clock for signal lost, zone windows and forgetting when no telemetry flows)"},
	{Name: "FeedKeys", Flag: "feed-keys", Env: "NOFLY_INGEST_FEED_KEYS", Usage: "file of feed keys (SHA-256 hashes; see ingest feed-key): every write then needs Authorization: Bearer <key>; without it only loopback clients may write; read again on SIGHUP"},
	{Name: "InsecureOpenIntake", Flag: "insecure-open-intake", Env: "NOFLY_INGEST_INSECURE_OPEN_INTAKE", Usage: "without --feed-keys, let every client write, not only loopback ones (insecure)"},
	{Name: "PublicURLs", Flag: "public-url", Env: "NOFLY_INGEST_PUBLIC_URLS", Usage: "a URL feeds reach --addr by (http[s]://host[:port]); its host is accepted as Host and its origin as a write's Origin (the listener's addresses, localhost and the hostname always are); repeatable, or comma separated", Value: func(p any) flag.Value { return (*envflag.Repeatable)(p.(*[]string)) }},
	{Name: "TrustedProxies", Flag: "trusted-proxies", Env: "NOFLY_TRUSTED_PROXIES", Usage: "proxies (CIDRs or addresses, comma separated) whose X-Forwarded-For (or Forwarded) names the client for logs and the loopback check; empty: the connection's peer is the client"},
	{Name: "LogLevel", Flag: "log-level", Env: "NOFLY_LOG_LEVEL", Usage: "log level: debug, info, warn, error"},
})

// Environ returns what starts `ingest serve` as a subprocess with exactly
// c: the NOFLY_* variables of its non-empty fields, and --flag= for its
// empty ones, which no variable can set (envflag.Fields.Environ).
func (c Config) Environ() (env, flags []string) { return configFields.Environ(c) }

// flagSet registers Config fields as flags with environment fallbacks.
type flagSet struct{ *envflag.FlagSet }

func newFlagSet(name string) *flagSet { return &flagSet{envflag.New(name)} }

// kafkaFlags registers the fields every subcommand shares.
func (f *flagSet) kafkaFlags(c *Config) {
	configFields.RegisterOnly(f.FlagSet, c, "Brokers", "Topic", "Partitions", "Replication",
		"KafkaTLS", "KafkaTLSCA", "KafkaTLSCert", "KafkaTLSKey", "KafkaSASL", "KafkaSASLUser", "KafkaSASLPasswordFile", "LogLevel")
}

// serveFlags registers the fields of the HTTP intake.
func (f *flagSet) serveFlags(c *Config) {
	configFields.RegisterOnly(f.FlagSet, c, "Addr", "MaxBodyBytes", "MaxRecords", "MaxLineBytes", "ProduceTimeout", "RetryAfter",
		"ShutdownTimeout", "FeedKeys", "InsecureOpenIntake", "MaxClockSkewAhead", "MaxRecordAge", "PublicURLs", "TrustedProxies", "TickInterval", "LagGroups",
		"HTTPReadHeaderTimeout", "HTTPReadTimeout", "HTTPWriteTimeout", "HTTPIdleTimeout", "HTTPMaxHeaderBytes", "HTTPMinBodyRate", "HTTPMaxConns")
}
