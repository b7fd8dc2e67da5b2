package producer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// Config configures a Producer. The zero value of every field but Brokers and
// Topic gets a safe default (acks=all and idempotence are not options: they
// are what this package is for).
type Config struct {
	// Brokers are bootstrap addresses, host:port. Required.
	Brokers []string
	// Topic is the one topic this producer writes. Required; it must exist.
	Topic string
	// ClientID is sent to the broker in every request header. Default "nofly-producer".
	ClientID string

	// Dial opens every connection the producer makes, to bootstrap and to
	// advertised broker addresses alike (it becomes kafka-go's Transport.Dial).
	// Tests route all traffic through a proxy with it. Default: net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// TLS, when set, wraps every connection. An empty ServerName is taken
	// from the address dialled, as kafka-go's Transport does.
	TLS *tls.Config
	// SASL, when set, authenticates every connection (PLAIN or SCRAM, from
	// kafka-go's sasl packages) after the TLS handshake.
	SASL sasl.Mechanism

	// BatchMaxRecords caps the records of one batch (one request per
	// partition). Default 1000.
	BatchMaxRecords int
	// BatchMaxBytes caps the uncompressed record bytes of one batch and so
	// the size of one record. Keep it under the topic's max.message.bytes
	// (1 MiB by default). Default 1,000,000.
	BatchMaxBytes int
	// Linger is how long a partition waits for more records before it sends
	// a batch that is not full, when nothing is in flight; it applies only
	// with AlwaysLinger. Default 5ms (the Java client's default since Kafka
	// 4.0). Negative means 0.
	Linger time.Duration
	// AlwaysLinger makes a partition wait Linger for more records even
	// though the caller of Produce is waiting for their acknowledgement.
	// By default it does not, like franz-go's ProduceSync: once a call's
	// records are queued, the partitions they went to send what is queued
	// at once, records of other calls included. Batches still grow with
	// load, since what arrives while a partition's one batch is in flight
	// forms its next batch. AlwaysLinger trades up to Linger of latency per
	// call for fewer, larger batches when calls are sparse (less broker CPU
	// per record).
	AlwaysLinger bool
	// Compression is one of the codecs kafka-go carries: kafka.Gzip,
	// kafka.Snappy, kafka.Lz4, kafka.Zstd. Default none.
	Compression kafka.Compression

	// RetryBackoff is the first pause before a retry; it doubles up to
	// RetryBackoffMax, with jitter. Defaults 100ms and 1s (the Java client's).
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// RequestTimeout bounds one produce round trip. Default 30s.
	RequestTimeout time.Duration
	// DeliveryTimeout bounds the time from Produce to the acknowledgement of
	// a record, retries included; a record not acknowledged by then fails
	// with ErrBrokerUnavailable. Default 2m (the Java client's).
	DeliveryTimeout time.Duration
	// MetadataTTL is the upper bound of the age of cached metadata. Default 6s.
	MetadataTTL time.Duration

	// Logger receives retries, epoch bumps and failures. Default slog.Default().
	Logger *slog.Logger

	// perPartitionRequests sends each partition's batch in a Produce
	// request of its own (kafka-go's RawProduce), as before request.go:
	// for the side-by-side benchmark.
	perPartitionRequests bool

	// batchAcked, when set, is told the record count of every acknowledged
	// batch (benchmarks report batch sizes with it; export_test.go).
	batchAcked func(records int)
}

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "nofly-producer"
	}
	if c.BatchMaxRecords == 0 {
		c.BatchMaxRecords = 1000
	}
	if c.BatchMaxBytes == 0 {
		c.BatchMaxBytes = 1_000_000
	}
	if c.Linger == 0 {
		c.Linger = 5 * time.Millisecond
	} else if c.Linger < 0 {
		c.Linger = 0
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.RetryBackoffMax == 0 {
		c.RetryBackoffMax = time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 2 * time.Minute
	}
	if c.MetadataTTL == 0 {
		c.MetadataTTL = 6 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second}
		c.Dial = d.DialContext
	}
}

// Validate reports the first bad field by name. It is called by New after
// defaults are applied, and may be called earlier (flags, environment).
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fieldError("Brokers", "at least one broker address is required")
	case c.Topic == "":
		return fieldError("Topic", "required")
	case c.BatchMaxRecords < 0:
		return fieldError("BatchMaxRecords", "must not be negative")
	case c.BatchMaxBytes < 0:
		return fieldError("BatchMaxBytes", "must not be negative")
	case c.RetryBackoff < 0:
		return fieldError("RetryBackoff", "must not be negative")
	case c.RetryBackoffMax < 0 || (c.RetryBackoffMax > 0 && c.RetryBackoffMax < c.RetryBackoff):
		return fieldError("RetryBackoffMax", "must be at least RetryBackoff")
	case c.RequestTimeout < 0:
		return fieldError("RequestTimeout", "must not be negative")
	case c.DeliveryTimeout < 0:
		return fieldError("DeliveryTimeout", "must not be negative")
	case c.MetadataTTL < 0:
		return fieldError("MetadataTTL", "must not be negative")
	case c.Compression < kafka.Compression(0) || (c.Compression != 0 && c.Compression.Codec() == nil):
		return fieldError("Compression", fmt.Sprintf("unknown codec %d", c.Compression))
	}
	for i, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fieldError(fmt.Sprintf("Brokers[%d]", i), err.Error())
		}
	}
	return nil
}

// ErrInvalidConfig is wrapped by every Validate error.
var ErrInvalidConfig = errors.New("producer: invalid config")

func fieldError(field, msg string) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, msg)
}
