package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		s     Security
		field string // "" = valid
	}{
		{"plaintext", Security{}, ""},
		{"tls", Security{KafkaTLS: true}, ""},
		{"plain", Security{KafkaSASL: "PLAIN", KafkaSASLUser: "u", KafkaSASLPasswordFile: "f"}, ""},
		{"scram lower case", Security{KafkaSASL: "scram-sha-512", KafkaSASLUser: "u", KafkaSASLPasswordFile: "f"}, ""},
		{"unknown mechanism", Security{KafkaSASL: "GSSAPI", KafkaSASLUser: "u", KafkaSASLPasswordFile: "f"}, "KafkaSASL"},
		{"user without mechanism", Security{KafkaSASLUser: "u"}, "KafkaSASL"},
		{"no user", Security{KafkaSASL: "PLAIN", KafkaSASLPasswordFile: "f"}, "KafkaSASLUser"},
		{"no password file", Security{KafkaSASL: "SCRAM-SHA-256", KafkaSASLUser: "u"}, "KafkaSASLPasswordFile"},
		{"cert without key", Security{KafkaTLSCert: "c"}, "KafkaTLSCert"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("Validate = %v, want a FieldError on %s", err, tc.field)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	pwf := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwf, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		s         Security
		mechanism string // "" = no SASL
		tls       bool
		wantErr   string
	}{
		{"plaintext", Security{}, "", false, ""},
		{"tls on its own", Security{KafkaTLS: true}, "", true, ""},
		{"plain over tls", Security{KafkaTLS: true, KafkaSASL: "PLAIN", KafkaSASLUser: "u", KafkaSASLPasswordFile: pwf}, "PLAIN", true, ""},
		{"scram-sha-512", Security{KafkaSASL: "SCRAM-SHA-512", KafkaSASLUser: "u", KafkaSASLPasswordFile: pwf}, "SCRAM-SHA-512", false, ""},
		{"scram-sha-256", Security{KafkaSASL: "SCRAM-SHA-256", KafkaSASLUser: "u", KafkaSASLPasswordFile: pwf}, "SCRAM-SHA-256", false, ""},
		{"a CA file turns tls on", Security{KafkaTLSCA: filepath.Join(dir, "ca.pem")}, "", true, "ca.pem"},
		{"missing password file", Security{KafkaSASL: "PLAIN", KafkaSASLUser: "u", KafkaSASLPasswordFile: filepath.Join(dir, "nope")}, "", false, "nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.s.Load()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load = %v, want an error naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.TLS != nil) != tc.tls {
				t.Errorf("TLS set %v, want %v", c.TLS != nil, tc.tls)
			}
			got := ""
			if c.SASL != nil {
				got = c.SASL.Name()
			}
			if got != tc.mechanism {
				t.Errorf("mechanism %q, want %q", got, tc.mechanism)
			}
			if tr, d := c.Transport("x"), c.Dialer("x"); tr.SASL != c.SASL || d.SASLMechanism != c.SASL || tr.TLS != c.TLS || d.TLS != c.TLS {
				t.Error("the transport and dialer do not carry the loaded settings")
			}
			if strings.Contains(tc.s.Describe(), "hunter2") {
				t.Errorf("Describe() = %q holds the password", tc.s.Describe())
			}
		})
	}
}

// TestCheckTLSAgainstPlaintext: TLS to a listener that answers in
// plaintext is a permanent error (ErrTLS), not a retry.
func TestCheckTLSAgainstPlaintext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Not a TLS server hello: what a PLAINTEXT listener's reply looks like.
			_, _ = c.Write([]byte("\x00\x00\x00\x10plaintext-reply!"))
			c.Close()
		}
	}()
	c, err := Security{KafkaTLS: true}.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Check(ctx, []string{l.Addr().String()})
	if !errors.Is(err, ErrTLS) || !Permanent(err) {
		t.Fatalf("Check = %v, want ErrTLS", err)
	}
}

// TestTLSFailure: a server's alert reaches a TCP client as a *net.OpError
// "remote error", and is configuration like a bad server certificate.
func TestTLSFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"client certificate refused", fmt.Errorf("kafka.(*Client).Metadata: %w", &net.OpError{Op: "remote error", Err: errors.New("tls: unknown certificate")}), true},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, true},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"EOF", io.EOF, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tlsFailure(tc.err); got != tc.want {
				t.Errorf("tlsFailure(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
