// Package kafkaconn is how nofly's Kafka clients connect: plaintext by
// default, TLS (a CA file, an optional client certificate) and SASL (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512) when configured. Every command builds its
// kafka-go transports and dialers, and its producers' settings, from one
// Conn, so a consumer group, an admin request and the idempotent producer
// all reach a secured cluster the same way.
package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/nofly-dev/nofly/internal/envflag"
	"github.com/nofly-dev/nofly/internal/secretfile"
	"github.com/nofly-dev/nofly/internal/tlsconf"
)

// The SASL mechanisms Security accepts.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Security is the configuration. The zero value is plaintext without
// authentication. A command embeds it in its Config, so its fields are the
// command's fields (and flags).
type Security struct {
	KafkaTLS              bool   // TLS with the system's roots (a CA, cert or key file turns it on too)
	KafkaTLSCA            string // CA file to trust
	KafkaTLSCert          string // client certificate file
	KafkaTLSKey           string // its key file
	KafkaSASL             string // "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	KafkaSASLUser         string
	KafkaSASLPasswordFile string // the first line is the password
}

func (s Security) tlsFiles() tlsconf.Files {
	return tlsconf.Files{CA: s.KafkaTLSCA, Cert: s.KafkaTLSCert, Key: s.KafkaTLSKey}
}

// TLSOn reports whether connections use TLS.
func (s Security) TLSOn() bool { return s.KafkaTLS || s.tlsFiles().Any() }

// FieldError is a bad setting: Field names the Security field (a command
// turns it into its flag and variable), Msg says what is wrong.
type FieldError struct{ Field, Msg string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks what can be checked without reading files; the error is
// a *FieldError.
func (s Security) Validate() error {
	switch strings.ToUpper(s.KafkaSASL) {
	case "":
		if s.KafkaSASLUser != "" || s.KafkaSASLPasswordFile != "" {
			return &FieldError{"KafkaSASL", "a SASL user or password file is given, but no mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"}
		}
	case Plain, ScramSHA256, ScramSHA512:
		if s.KafkaSASLUser == "" {
			return &FieldError{"KafkaSASLUser", "SASL " + s.KafkaSASL + " needs a user"}
		}
		if s.KafkaSASLPasswordFile == "" {
			return &FieldError{"KafkaSASLPasswordFile", "SASL " + s.KafkaSASL + " needs a password file"}
		}
	default:
		return &FieldError{"KafkaSASL", fmt.Sprintf("%q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.KafkaSASL)}
	}
	if (s.KafkaTLSCert == "") != (s.KafkaTLSKey == "") {
		return &FieldError{"KafkaTLSCert", "the TLS client certificate and key go together: give both or neither"}
	}
	return nil
}

// Describe says how connections are made, for a start-up log line: never
// the password, only the file it comes from.
func (s Security) Describe() string {
	var parts []string
	if s.TLSOn() {
		parts = append(parts, "tls")
	} else {
		parts = append(parts, "plaintext")
	}
	if s.KafkaSASL != "" {
		parts = append(parts, "sasl "+strings.ToUpper(s.KafkaSASL)+" user "+s.KafkaSASLUser+" (password from "+s.KafkaSASLPasswordFile+")")
	}
	return strings.Join(parts, ", ")
}

// Conn is a loaded Security: the TLS configuration and the SASL mechanism
// (nil when off). The zero value is plaintext.
type Conn struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
	desc Security
}

// Load reads the files Security names; an error names the file or setting.
func (s Security) Load() (Conn, error) {
	if err := s.Validate(); err != nil {
		return Conn{}, fmt.Errorf("kafka: %w", err)
	}
	c := Conn{desc: s}
	if s.TLSOn() {
		tc, err := s.tlsFiles().Load()
		if err != nil {
			return Conn{}, fmt.Errorf("kafka: %w", err)
		}
		c.TLS = tc
	}
	if s.KafkaSASL == "" {
		return c, nil
	}
	pw, err := secretfile.Read(s.KafkaSASLPasswordFile)
	if err != nil {
		return Conn{}, fmt.Errorf("kafka: SASL %w", err)
	}
	switch strings.ToUpper(s.KafkaSASL) {
	case Plain:
		c.SASL = plain.Mechanism{Username: s.KafkaSASLUser, Password: pw}
	case ScramSHA256, ScramSHA512:
		algo := scram.SHA512
		if strings.ToUpper(s.KafkaSASL) == ScramSHA256 {
			algo = scram.SHA256
		}
		m, err := scram.Mechanism(algo, s.KafkaSASLUser, pw)
		if err != nil {
			return Conn{}, fmt.Errorf("kafka: SASL %s: %w", s.KafkaSASL, err)
		}
		c.SASL = m
	}
	return c, nil
}

// Transport returns a kafka-go transport over this connection setting.
func (c Conn) Transport(clientID string) *kafka.Transport {
	return &kafka.Transport{ClientID: clientID, TLS: c.TLS, SASL: c.SASL}
}

// Dialer returns a kafka-go dialer (consumer groups, readers) over this
// connection setting, with kafka-go's default timeout.
func (c Conn) Dialer(clientID string) *kafka.Dialer {
	return &kafka.Dialer{ClientID: clientID, Timeout: 10 * time.Second, DualStack: true, TLS: c.TLS, SASLMechanism: c.SASL}
}

// ErrAuth: the brokers refused the SASL user or password.
var ErrAuth = errors.New("kafka refused the SASL credentials")

// ErrTLS: the TLS handshake failed (an untrusted or mismatched certificate,
// or TLS against a plaintext listener). Like ErrAuth it is configuration:
// retrying cannot fix it.
var ErrTLS = errors.New("kafka TLS handshake failed")

// Permanent reports whether err is one retrying cannot fix: refused
// credentials or a failed TLS handshake.
func Permanent(err error) bool { return errors.Is(err, ErrAuth) || errors.Is(err, ErrTLS) }

// tlsFailure reports whether err comes from a TLS handshake.
func tlsFailure(err error) bool {
	var (
		rh  tls.RecordHeaderError
		cv  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		alt tls.AlertError
	)
	if errors.As(err, &rh) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) ||
		errors.As(err, &ci) || errors.As(err, &alt) {
		return true
	}
	// The server's alert (it refused our client certificate) is, over TCP,
	// a *net.OpError of Op "remote error" (tls.AlertError is QUIC's only).
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// Check asks the brokers for metadata, so a wrong password, an untrusted
// certificate or a plaintext client on a TLS listener fails at start with
// an error that says which, instead of as retries later.
func (c Conn) Check(ctx context.Context, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tr := c.Transport("nofly-check")
	defer tr.CloseIdleConnections()
	kc := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 15 * time.Second}
	_, err := kc.Metadata(ctx, &kafka.MetadataRequest{})
	if err == nil {
		return nil
	}
	if errors.Is(err, kafka.SASLAuthenticationFailed) || errors.Is(err, kafka.IllegalSASLState) {
		return fmt.Errorf("%w: user %s (password from %s): %v", ErrAuth, c.desc.KafkaSASLUser, c.desc.KafkaSASLPasswordFile, err)
	}
	if tlsFailure(err) {
		return fmt.Errorf("%w with %v (%s): %v", ErrTLS, brokers, c.desc.Describe(), err)
	}
	if errors.Is(err, kafka.UnsupportedSASLMechanism) {
		return fmt.Errorf("kafka: the brokers do not enable SASL %s: %w", c.desc.KafkaSASL, err)
	}
	return fmt.Errorf("kafka %v (%s): %w", brokers, c.desc.Describe(), err)
}

// Rows are the configuration rows of Security's fields for a command whose
// Config embeds Security: the same flags and variables on every command.
func Rows[C any]() envflag.Fields[C] {
	return envflag.Fields[C]{
		{Name: "KafkaTLS", Flag: "kafka-tls", Env: "NOFLY_KAFKA_TLS", Usage: "connect to Kafka over TLS (the system's CA roots unless --kafka-tls-ca; any TLS file turns TLS on)"},
		{Name: "KafkaTLSCA", Flag: "kafka-tls-ca", Env: "NOFLY_KAFKA_TLS_CA", Usage: "PEM file of the CA certificates that sign the brokers' certificates"},
		{Name: "KafkaTLSCert", Flag: "kafka-tls-cert", Env: "NOFLY_KAFKA_TLS_CERT", Usage: "PEM client certificate for brokers that ask for one (with --kafka-tls-key)"},
		{Name: "KafkaTLSKey", Flag: "kafka-tls-key", Env: "NOFLY_KAFKA_TLS_KEY", Usage: "PEM private key of --kafka-tls-cert"},
		{Name: "KafkaSASL", Flag: "kafka-sasl", Env: "NOFLY_KAFKA_SASL", Usage: "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL"},
		{Name: "KafkaSASLUser", Flag: "kafka-sasl-user", Env: "NOFLY_KAFKA_SASL_USER", Usage: "SASL user name"},
		{Name: "KafkaSASLPasswordFile", Flag: "kafka-sasl-password-file", Env: "NOFLY_KAFKA_SASL_PASSWORD_FILE", Usage: "file whose first line is the SASL password (never a flag: it would show in process listings)"},
	}
}
