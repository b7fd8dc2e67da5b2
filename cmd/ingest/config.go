package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/ingest"
	"github.com/nofly-dev/nofly/internal/envflag"
)

// Config is the configuration of every subcommand: Kafka, the topic, the
// HTTP intake and logging. Flags fill it, each with an environment variable
// as fallback (a flag given on the command line wins); Validate names the
// bad field.
type Config struct {
	Brokers     []string // NOFLY_KAFKA_BROKERS
	Topic       string   // NOFLY_TELEMETRY_TOPIC
	Partitions  int      // NOFLY_TELEMETRY_PARTITIONS
	Replication int      // NOFLY_TELEMETRY_REPLICATION, -1 = the broker's default.replication.factor

	Addr            string        // NOFLY_INGEST_ADDR
	MaxBodyBytes    int64         // NOFLY_INGEST_MAX_BODY_BYTES
	MaxRecords      int           // NOFLY_INGEST_MAX_RECORDS
	MaxLineBytes    int           // NOFLY_INGEST_MAX_LINE_BYTES
	ProduceTimeout  time.Duration // NOFLY_INGEST_PRODUCE_TIMEOUT
	RetryAfter      time.Duration // NOFLY_INGEST_RETRY_AFTER
	ShutdownTimeout time.Duration // NOFLY_INGEST_SHUTDOWN_TIMEOUT

	MaxClockSkewAhead time.Duration // NOFLY_INGEST_MAX_CLOCK_SKEW_AHEAD, 0 = no bound
	MaxRecordAge      time.Duration // NOFLY_INGEST_MAX_RECORD_AGE, 0 = no bound

	FeedKeys           string // NOFLY_INGEST_FEED_KEYS: the feed key file; "" = none
	InsecureOpenIntake bool   // NOFLY_INGEST_INSECURE_OPEN_INTAKE

	LogLevel string // NOFLY_LOG_LEVEL: debug, info, warn, error
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
		LogLevel:        "info",

		MaxClockSkewAhead: ingest.DefaultMaxClockSkewAhead,
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
	case c.MaxClockSkewAhead < 0:
		return badField("MaxClockSkewAhead", "must not be negative (0 = no bound)")
	case c.MaxRecordAge < 0:
		return badField("MaxRecordAge", "must not be negative (0 = no bound)")
	case c.ShutdownTimeout < c.ProduceTimeout:
		return badField("ShutdownTimeout", fmt.Sprintf("must be at least ProduceTimeout (%v), so in-flight requests can finish", c.ProduceTimeout))
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

// fieldFlags names the flag and environment variable of each field, for
// messages and for README's table (TestReadmeTable keeps them in step).
var fieldFlags = map[string]struct{ flag, env string }{
	"Brokers":         {"brokers", "NOFLY_KAFKA_BROKERS"},
	"Topic":           {"topic", "NOFLY_TELEMETRY_TOPIC"},
	"Partitions":      {"partitions", "NOFLY_TELEMETRY_PARTITIONS"},
	"Replication":     {"replication", "NOFLY_TELEMETRY_REPLICATION"},
	"Addr":            {"addr", "NOFLY_INGEST_ADDR"},
	"MaxBodyBytes":    {"max-body-bytes", "NOFLY_INGEST_MAX_BODY_BYTES"},
	"MaxRecords":      {"max-records", "NOFLY_INGEST_MAX_RECORDS"},
	"MaxLineBytes":    {"max-line-bytes", "NOFLY_INGEST_MAX_LINE_BYTES"},
	"ProduceTimeout":  {"produce-timeout", "NOFLY_INGEST_PRODUCE_TIMEOUT"},
	"RetryAfter":      {"retry-after", "NOFLY_INGEST_RETRY_AFTER"},
	"ShutdownTimeout": {"shutdown-timeout", "NOFLY_INGEST_SHUTDOWN_TIMEOUT"},
	"LogLevel":        {"log-level", "NOFLY_LOG_LEVEL"},

	"FeedKeys":           {"feed-keys", "NOFLY_INGEST_FEED_KEYS"},
	"InsecureOpenIntake": {"insecure-open-intake", "NOFLY_INGEST_INSECURE_OPEN_INTAKE"},

	"MaxClockSkewAhead": {"max-clock-skew-ahead", "NOFLY_INGEST_MAX_CLOCK_SKEW_AHEAD"},
	"MaxRecordAge":      {"max-record-age", "NOFLY_INGEST_MAX_RECORD_AGE"},
}

// flagSet registers Config fields as flags with environment fallbacks.
type flagSet struct{ *envflag.FlagSet }

func newFlagSet(name string) *flagSet { return &flagSet{envflag.New(name)} }

// field registers the flag of a Config field (see fieldFlags).
func (f *flagSet) field(field string, register func(name, usage string), usage string) {
	ff := fieldFlags[field]
	f.Fallback(ff.flag, ff.env)
	register(ff.flag, usage+" (env "+ff.env+")")
}

// kafkaFlags registers the fields every subcommand shares.
func (f *flagSet) kafkaFlags(c *Config) {
	f.field("Brokers", func(n, u string) { f.Var((*envflag.List)(&c.Brokers), n, u) }, "Kafka bootstrap brokers, comma separated host:port")
	f.field("Topic", func(n, u string) { f.StringVar(&c.Topic, n, c.Topic, u) }, "telemetry topic")
	f.field("Partitions", func(n, u string) { f.IntVar(&c.Partitions, n, c.Partitions, u) }, "partition count the topic is created with, and must have")
	f.field("Replication", func(n, u string) { f.IntVar(&c.Replication, n, c.Replication, u) }, "replication factor the topic is created with; -1 = broker default")
	f.field("LogLevel", func(n, u string) { f.StringVar(&c.LogLevel, n, c.LogLevel, u) }, "log level: debug, info, warn, error")
}

// serveFlags registers the fields of the HTTP intake.
func (f *flagSet) serveFlags(c *Config) {
	f.field("Addr", func(n, u string) { f.StringVar(&c.Addr, n, c.Addr, u) }, "HTTP listen address")
	f.field("MaxBodyBytes", func(n, u string) { f.Int64Var(&c.MaxBodyBytes, n, c.MaxBodyBytes, u) }, "largest request body in bytes (413 beyond)")
	f.field("MaxRecords", func(n, u string) { f.IntVar(&c.MaxRecords, n, c.MaxRecords, u) }, "most records in one request (413 beyond)")
	f.field("MaxLineBytes", func(n, u string) { f.IntVar(&c.MaxLineBytes, n, c.MaxLineBytes, u) }, "longest NDJSON line / JSON array element in bytes (400 naming the line beyond)")
	f.field("ProduceTimeout", func(n, u string) { f.DurationVar(&c.ProduceTimeout, n, c.ProduceTimeout, u) }, "longest wait for Kafka's acknowledgement of a request (503 beyond)")
	f.field("RetryAfter", func(n, u string) { f.DurationVar(&c.RetryAfter, n, c.RetryAfter, u) }, "Retry-After of a 503")
	f.field("ShutdownTimeout", func(n, u string) { f.DurationVar(&c.ShutdownTimeout, n, c.ShutdownTimeout, u) }, "how long a SIGTERM waits for in-flight requests and queued records")
	f.field("FeedKeys", func(n, u string) { f.StringVar(&c.FeedKeys, n, c.FeedKeys, u) }, "file of feed keys (SHA-256 hashes; see ingest feed-key): every write then needs Authorization: Bearer <key>; without it only loopback clients may write")
	f.field("InsecureOpenIntake", func(n, u string) { f.BoolVar(&c.InsecureOpenIntake, n, c.InsecureOpenIntake, u) }, "without --feed-keys, let every client write, not only loopback ones (insecure)")
	f.field("MaxClockSkewAhead", func(n, u string) { f.DurationVar(&c.MaxClockSkewAhead, n, c.MaxClockSkewAhead, u) }, "largest lead of a record's ts over the receive time (400 naming ts beyond); 0 = no bound")
	f.field("MaxRecordAge", func(n, u string) { f.DurationVar(&c.MaxRecordAge, n, c.MaxRecordAge, u) }, "largest lag of a record's ts behind the receive time (400 naming ts beyond); 0 = no bound")
}
