//go:build cluster

package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/sasl/plain"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// debugLogger logs everything, retries included, into buf: what a secret
// must never appear in.
func debugLogger(buf *lockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestSecure runs the idempotent producer and the transactional writer over
// a SASL_SSL listener (scripts/kafka.sh KAFKA_SECURE_DIR), and checks that
// what the broker refuses fails at once with the reason and no secret.
func TestSecure(t *testing.T) {
	sk := testenv.StartSecureKafka(t)
	password := sk.Password(t)
	var logs lockedBuffer
	t.Cleanup(func() {
		if strings.Contains(logs.String(), password) {
			t.Errorf("the password is in the producer's log")
		}
	})

	t.Run("works", func(t *testing.T) {
		for _, tc := range []struct {
			mechanism string
			withCert  bool
		}{
			{kafkaconn.Plain, false},
			{kafkaconn.Plain, true},
			{kafkaconn.ScramSHA512, false},
			{kafkaconn.ScramSHA512, true},
		} {
			t.Run(fmt.Sprintf("%s/cert=%v", tc.mechanism, tc.withCert), func(t *testing.T) {
				secureRoundTrip(t, sk, sk.Conn(t, tc.mechanism, tc.withCert), debugLogger(&logs))
			})
		}
	})

	t.Run("refused", func(t *testing.T) {
		topic := testenv.CreateTopic(t, sk.Brokers(), 1)
		wrong := sk.WrongPasswordFile(t)
		b, err := os.ReadFile(wrong)
		if err != nil {
			t.Fatal(err)
		}
		wrongPassword := strings.TrimSpace(string(b))
		other := testenv.OtherCerts(t)
		for _, tc := range []struct {
			name string
			sec  func() kafkaconn.Security
			want func(error) bool
			says string // the error must contain this (case-insensitive)
		}{
			{"PLAIN wrong password", func() kafkaconn.Security {
				s := sk.Security(kafkaconn.Plain, false)
				s.KafkaSASLPasswordFile = wrong
				return s
			}, isAuthFailed, "authentication failed"},
			{"SCRAM-SHA-512 wrong password", func() kafkaconn.Security {
				s := sk.Security(kafkaconn.ScramSHA512, true)
				s.KafkaSASLPasswordFile = wrong
				return s
			}, isAuthFailed, "authentication failed"},
			{"SCRAM-SHA-512 unknown user", func() kafkaconn.Security {
				s := sk.Security(kafkaconn.ScramSHA512, false)
				s.KafkaSASLUser = "nobody"
				return s
			}, isAuthFailed, "authentication failed"},
			{"untrusted server certificate", func() kafkaconn.Security {
				s := sk.Security(kafkaconn.ScramSHA512, false)
				s.KafkaTLSCA = other.CA
				return s
			}, refusedConnection, "certificate"},
			{"client certificate of another CA", func() kafkaconn.Security {
				s := sk.Security(kafkaconn.ScramSHA512, false)
				s.KafkaTLSCert, s.KafkaTLSKey = other.ClientCert, other.ClientKey
				return s
			}, refusedConnection, "tls"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				conn, err := tc.sec().Load()
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				cfg := Config{Brokers: sk.SecureBrokers(), Topic: topic, TLS: conn.TLS, SASL: conn.SASL, Logger: debugLogger(&logs)}
				checkAs := func(what string, err error, took time.Duration, want func(error) bool) {
					t.Helper()
					switch {
					case err == nil:
						t.Fatalf("%s succeeded", what)
					case !want(err):
						t.Errorf("%s: %v: not the refusal expected", what, err)
					case !strings.Contains(strings.ToLower(err.Error()), tc.says):
						t.Errorf("%s: %q does not say %q", what, err, tc.says)
					case errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, context.DeadlineExceeded):
						t.Errorf("%s: %v: reported as an outage, not as the refusal", what, err)
					}
					// A refusal is an answer: it comes in a round trip, not
					// after the retries of a broker that seems to be down.
					if took > 10*time.Second {
						t.Errorf("%s took %v", what, took)
					}
					for _, secret := range []string{password, wrongPassword} {
						if strings.Contains(err.Error(), secret) {
							t.Errorf("%s: the error holds a password: %v", what, err)
						}
					}
				}
				check := func(what string, err error, took time.Duration) { t.Helper(); checkAs(what, err, took, tc.want) }
				// The set-up contexts are long: a refusal must not wait them out.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()

				start := time.Now()
				p, err := New(ctx, cfg)
				if p != nil {
					p.Close(ctx)
				}
				check("New", err, time.Since(start))

				start = time.Now()
				w, err := NewTxnWriter(ctx, cfg, TxnOptions{TransactionalID: testenv.UniqueName("refused")})
				if w != nil {
					w.Close(ctx)
				}
				check("NewTxnWriter", err, time.Since(start))

				// What every command runs at start (kafkaconn.Check) must see
				// the same refusal as one retrying cannot fix.
				start = time.Now()
				err = conn.Check(ctx, sk.SecureBrokers())
				checkAs("kafkaconn.Check", err, time.Since(start), kafkaconn.Permanent)

				// The direct connection InitProducerId and the transaction
				// coordinator use, on its own: its SASL exchange and TLS set-up.
				cfg.setDefaults()
				start = time.Now()
				bc, err := dialBroker(ctx, cfg, sk.SecureBrokers()[0])
				if bc != nil {
					bc.close()
				}
				check("dialBroker", err, time.Since(start))
			})
		}
	})

	// Without SASL the listener answers nothing but the SASL handshake: the
	// direct connection must not pass as authenticated because ApiVersions
	// (which the broker answers before authentication) worked.
	t.Run("no SASL on a SASL listener", func(t *testing.T) {
		conn := sk.Conn(t, kafkaconn.Plain, false)
		cfg := Config{Brokers: sk.SecureBrokers(), Topic: "x", TLS: conn.TLS}
		cfg.setDefaults()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		bc, err := dialBroker(ctx, cfg, sk.SecureBrokers()[0])
		if err != nil {
			t.Fatalf("dialBroker: %v", err) // ApiVersions is allowed before SASL
		}
		defer bc.close()
		req := &initproducerid.Request{TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}
		if _, err := bc.roundTrip(ctx, req); err == nil {
			t.Fatal("an unauthenticated InitProducerId was answered")
		}
	})

	// A PLAIN mechanism built by hand with the right user and a wrong
	// password, through the direct connection only: the broker's refusal
	// comes back as kafka.SASLAuthenticationFailed with its message.
	t.Run("dialBroker refusal text", func(t *testing.T) {
		conn := sk.Conn(t, kafkaconn.Plain, false)
		cfg := Config{Brokers: sk.SecureBrokers(), Topic: "x", TLS: conn.TLS, SASL: plain.Mechanism{Username: sk.User, Password: "not-" + password}}
		cfg.setDefaults()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := dialBroker(ctx, cfg, sk.SecureBrokers()[0])
		if !errors.Is(err, kafka.SASLAuthenticationFailed) {
			t.Fatalf("dialBroker: %v, want SASL authentication failed", err)
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("the error holds the password: %v", err)
		}
		t.Logf("refused as: %v", err)
	})
}

func isAuthFailed(err error) bool { return errors.Is(err, kafka.SASLAuthenticationFailed) }

// secureRoundTrip produces with the idempotent producer and the
// transactional writer over conn, and reads both back with kafka-go over
// the same connection settings.
func secureRoundTrip(t *testing.T, sk *testenv.SecureKafka, conn kafkaconn.Conn, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	brokers := sk.SecureBrokers()
	// Created over the secured listener too, through kafkaconn's transport.
	topic := testenv.UniqueName("secure")
	if err := ensureTopicOver(ctx, brokers, conn, topic, 2); err != nil {
		t.Fatalf("create topic over SASL_SSL: %v", err)
	}
	if err := conn.Check(ctx, brokers); err != nil {
		t.Fatalf("kafkaconn.Check: %v", err)
	}
	cfg := Config{Brokers: brokers, Topic: topic, TLS: conn.TLS, SASL: conn.SASL, Logger: log}

	p, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	const n = 50
	var want []string
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Partition: 1, Value: []byte(fmt.Sprintf("idem-%03d", i))}
		want = append(want, string(recs[i].Value))
	}
	if err := p.Produce(ctx, recs); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if st := p.Stats(); st.Records != n || st.ProducerID < 0 {
		t.Errorf("stats %+v", st)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// MaxWait short: Close waits out a fetch in flight (10 s by default).
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 1, Dialer: conn.Dialer("secure-test"),
		MaxWait: 250 * time.Millisecond})
	defer r.Close()
	var got []string
	for len(got) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read back after %d of %d: %v", len(got), n, err)
		}
		got = append(got, string(m.Value))
	}
	if !slices.Equal(got, want) {
		t.Errorf("idempotent producer: read back %v, want %v", got, want)
	}

	w, err := NewTxnWriter(ctx, cfg, TxnOptions{Partition: 0, TransactionalID: testenv.UniqueName("secure-txn")})
	if err != nil {
		t.Fatalf("NewTxnWriter: %v", err)
	}
	defer w.Close(context.Background())
	var wantTxn []string
	for b := range 3 {
		batch := make([]Record, 10)
		for i := range batch {
			batch[i] = Record{Value: []byte(fmt.Sprintf("txn-%d-%02d", b, i))}
			wantTxn = append(wantTxn, string(batch[i].Value))
		}
		if err := w.Produce(ctx, batch); err != nil {
			t.Fatalf("TxnWriter.Produce %d: %v", b, err)
		}
	}
	tr := conn.Transport("secure-test")
	defer tr.CloseIdleConnections()
	cr := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	crecs, err := cr.ReadAll(ctx, 0)
	if err != nil {
		t.Fatalf("read committed: %v", err)
	}
	var gotTxn []string
	for _, rec := range crecs {
		gotTxn = append(gotTxn, string(rec.Value))
	}
	if !slices.Equal(gotTxn, wantTxn) {
		t.Errorf("transactional writer: read committed %v, want %v", gotTxn, wantTxn)
	}
}

func ensureTopicOver(ctx context.Context, brokers []string, conn kafkaconn.Conn, topic string, partitions int) error {
	tr := conn.Transport("secure-test-admin")
	// kafka-go caches metadata for 6 s by default: the new topic's leaders
	// would be seen that much later.
	tr.MetadataTTL = 100 * time.Millisecond
	defer tr.CloseIdleConnections()
	_, err := kafkatopic.Ensure(ctx, brokers, kafkatopic.Spec{Name: topic, Partitions: partitions, Replication: 1, Transport: tr})
	return err
}
