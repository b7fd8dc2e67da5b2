package producer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// TestClassifyLikeJavaProducer is the error table of doc.go.
func TestClassifyLikeJavaProducer(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want outcome
	}{
		{nil, outcomeOK},
		{kafka.Error(46), outcomeDuplicate}, // DUPLICATE_SEQUENCE_NUMBER
		{kafka.Error(45), outcomeSequence},  // OUT_OF_ORDER_SEQUENCE_NUMBER
		{kafka.Error(59), outcomeSequence},  // UNKNOWN_PRODUCER_ID
		{kafka.Error(47), outcomeFenced},    // INVALID_PRODUCER_EPOCH
		{kafka.Error(90), outcomeFenced},    // PRODUCER_FENCED
		{kafka.NotLeaderForPartition, outcomeRetryMeta},
		{kafka.LeaderNotAvailable, outcomeRetryMeta},
		{kafka.UnknownTopicOrPartition, outcomeRetryMeta},
		{kafka.NotEnoughReplicas, outcomeRetry},
		{kafka.NotEnoughReplicasAfterAppend, outcomeRetry},
		{kafka.RequestTimedOut, outcomeRetry},
		{kafka.MessageSizeTooLarge, outcomeRejected},
		{kafka.TopicAuthorizationFailed, outcomeRejected},
		{kafka.InvalidRecord, outcomeRejected},
		{fmt.Errorf("wrapped: %w", kafka.Error(46)), outcomeDuplicate},
		{fmt.Errorf("kafka.(*Client).RawProduce: %w", io.EOF), outcomeRetry},
		{io.ErrUnexpectedEOF, outcomeRetry},
		{syscall.ECONNREFUSED, outcomeRetry},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, outcomeRetry},
		{context.DeadlineExceeded, outcomeRetry},
		{protocol.NewErrNoTopic("t"), outcomeRetryMeta},
		{protocol.NewErrNoLeader("t", 0), outcomeRetryMeta},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestProduceErrorUnwrapsEveryCause(t *testing.T) {
	cause := fmt.Errorf("%w: delivery timeout: %w", ErrBrokerUnavailable, io.EOF)
	aborted := fmt.Errorf("%w: %w", ErrAborted, cause)
	err := error(newProduceError(map[int]error{4: aborted, 1: cause, 2: cause}))
	var pe *ProduceError
	if !errors.As(err, &pe) {
		t.Fatal("not a *ProduceError")
	}
	if got := fmt.Sprint(pe.Indexes()); got != "[1 2 4]" {
		t.Errorf("indexes %s", got)
	}
	for _, target := range []error{ErrBrokerUnavailable, ErrAborted, io.EOF} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(err, %v) = false", target)
		}
	}
	if errors.Is(err, ErrRejected) {
		t.Error("errors.Is(err, ErrRejected) = true")
	}
	if !Retriable(err) || Retriable(fmt.Errorf("%w: x", ErrRejected)) {
		t.Error("Retriable misclassifies")
	}
	if !strings.Contains(err.Error(), "3 record(s) not acknowledged (first index 1)") {
		t.Errorf("message %q", err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	ok := Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "t"}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Brokers", func(c *Config) { c.Brokers = nil }},
		{"Brokers[0]", func(c *Config) { c.Brokers = []string{"no-port"} }},
		{"Topic", func(c *Config) { c.Topic = "" }},
		{"BatchMaxRecords", func(c *Config) { c.BatchMaxRecords = -1 }},
		{"BatchMaxBytes", func(c *Config) { c.BatchMaxBytes = -1 }},
		{"RetryBackoffMax", func(c *Config) { c.RetryBackoff, c.RetryBackoffMax = 200, 100 }},
		{"DeliveryTimeout", func(c *Config) { c.DeliveryTimeout = -1 }},
		{"Compression", func(c *Config) { c.Compression = 9 }},
	} {
		c := ok
		tc.edit(&c)
		c.setDefaults()
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), ": "+tc.field+":") {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
	c := ok
	c.setDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.BatchMaxRecords <= 0 || c.DeliveryTimeout <= 0 || c.Dial == nil || c.Logger == nil {
		t.Fatalf("defaults not set: %+v", c)
	}
}

// TestProduceRejectsInvalidRecordsWithoutSending needs no broker: nothing is
// enqueued when a record is invalid.
func TestProduceRejectsInvalidRecordsWithoutSending(t *testing.T) {
	p := &Producer{cfg: Config{BatchMaxBytes: 100}, parts: make([]*partState, 3), part: newPartitioner(3)}
	err := p.Produce(context.Background(), []Record{
		NewRecord([]byte("k"), []byte("ok")),
		{Value: []byte("x"), Partition: 3},
		NewRecord([]byte("k"), make([]byte, 200)),
		{Value: []byte("x"), Partition: -2},
	})
	var pe *ProduceError
	if !errors.As(err, &pe) || fmt.Sprint(pe.Indexes()) != "[1 2 3]" || !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("got %v", err)
	}
}

// TestRefusedConnection: set-up gives up at once on what no retry fixes
// (credentials, certificates) and keeps retrying network trouble.
func TestRefusedConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"sasl refused, with the broker's text", fmt.Errorf("sasl PLAIN: %w: Invalid username or password", kafka.SASLAuthenticationFailed), true},
		{"mechanism not enabled", kafka.UnsupportedSASLMechanism, true},
		{"no SASL exchange", kafka.IllegalSASLState, true},
		{"unknown CA", fmt.Errorf("tls handshake: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true},
		{"hostname mismatch", x509.HostnameError{Host: "10.0.0.1"}, true},
		{"TLS to a plaintext port", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		{"server refused our certificate (QUIC's form)", tls.AlertError(42), true},
		{"server refused our certificate", fmt.Errorf("kafka.(*Client).Metadata: %w", &net.OpError{Op: "remote error", Err: errors.New("tls: unknown certificate")}), true},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), false},
		{"EOF", io.EOF, false},
		{"leader moved", kafka.NotLeaderForPartition, false},
		{"authorization", kafka.TopicAuthorizationFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusedConnection(tc.err); got != tc.want {
				t.Errorf("refusedConnection(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
