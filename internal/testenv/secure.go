package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/redisconn"
	"github.com/nofly-dev/nofly/internal/tlsconf"
)

// SecretFiles are the certificates and the password file scripts/certs.sh
// and the secured modes of scripts/kafka.sh and redis.sh write into one
// directory, and the user the password belongs to.
type SecretFiles struct {
	Dir          string
	CA           string // CA that signed the server's and the client's certificates
	ClientCert   string // a client certificate the server verifies when given
	ClientKey    string
	User         string
	PasswordFile string // mode 0600, the password on its first line
}

func secretFiles(dir, user, password string) SecretFiles {
	return SecretFiles{
		Dir: dir, CA: filepath.Join(dir, "ca.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client.key"),
		User: user, PasswordFile: filepath.Join(dir, password),
	}
}

// Password reads the password file: for tests that must look for it where
// it must not be (logs, errors).
func (f SecretFiles) Password(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(f.PasswordFile)
	if err != nil {
		t.Fatalf("read password file: %v", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	if pw == "" {
		t.Fatalf("password file %s: first line empty", f.PasswordFile)
	}
	return pw
}

// WrongPasswordFile writes a password the server does not know to a new
// 0600 file and returns its path.
func (f SecretFiles) WrongPasswordFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wrong.password")
	if err := os.WriteFile(p, []byte(UniqueName("wrong")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// SecureKafka is a private broker with a SASL_SSL listener (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512; a client certificate optional but verified)
// beside its PLAINTEXT one, which the embedded KafkaProc's Brokers name.
type SecureKafka struct {
	*KafkaProc
	SecretFiles
	securePort int
}

// StartSecureKafka starts a private broker through scripts/kafka.sh with
// KAFKA_SECURE_DIR (certificates from scripts/certs.sh) and stops it when
// the test ends.
func StartSecureKafka(t testing.TB) *SecureKafka {
	t.Helper()
	dir := t.TempDir()
	s := &SecureKafka{SecretFiles: secretFiles(filepath.Join(dir, "secrets"), "nofly", "kafka.password"), securePort: FreePort(t)}
	k := &KafkaProc{t: t, port: FreePort(t), ctlPort: FreePort(t), dir: filepath.Join(dir, "broker")}
	k.env = []string{"KAFKA_SECURE_DIR=" + s.Dir, "KAFKA_SECURE_PORT=" + strconv.Itoa(s.securePort), "KAFKA_SASL_USER=" + s.User}
	s.KafkaProc = startKafka(t, k)
	return s
}

// SecureBrokers is the SASL_SSL listener's address.
func (s *SecureKafka) SecureBrokers() []string {
	return []string{fmt.Sprintf("127.0.0.1:%d", s.securePort)}
}

// Security is the client side for mechanism (kafkaconn.Plain,
// ScramSHA256, ScramSHA512) with the CA, and the client certificate when
// withCert.
func (s *SecureKafka) Security(mechanism string, withCert bool) kafkaconn.Security {
	sec := kafkaconn.Security{
		KafkaTLS: true, KafkaTLSCA: s.CA,
		KafkaSASL: mechanism, KafkaSASLUser: s.User, KafkaSASLPasswordFile: s.PasswordFile,
	}
	if withCert {
		sec.KafkaTLSCert, sec.KafkaTLSKey = s.ClientCert, s.ClientKey
	}
	return sec
}

// Conn is Security loaded; the test fails if it does not load.
func (s *SecureKafka) Conn(t testing.TB, mechanism string, withCert bool) kafkaconn.Conn {
	t.Helper()
	c, err := s.Security(mechanism, withCert).Load()
	if err != nil {
		t.Fatalf("load kafka security: %v", err)
	}
	return c
}

// SecureRedis is a private Redis server that speaks TLS only (a client
// certificate optional but verified), with the default user off and one
// ACL user with every permission.
type SecureRedis struct {
	*RedisProc
	SecretFiles
}

// StartSecureRedis starts it through scripts/redis.sh with
// REDIS_SECURE_DIR, and stops it when the test ends.
func StartSecureRedis(t testing.TB) *SecureRedis {
	t.Helper()
	dir := t.TempDir()
	s := &SecureRedis{SecretFiles: secretFiles(filepath.Join(dir, "secrets"), "nofly", "redis.password")}
	r := &RedisProc{port: FreePort(t), dir: filepath.Join(dir, "server")}
	r.env = []string{"REDIS_SECURE_DIR=" + s.Dir, "REDIS_USER=" + s.User}
	s.RedisProc = startRedis(t, r)
	return s
}

// Security is the client side: TLS with the CA (and the client
// certificate when withCert), the ACL user and its password file.
func (s *SecureRedis) Security(withCert bool) redisconn.Access {
	sec := redisconn.Access{RedisTLS: true, RedisTLSCA: s.CA, RedisUser: s.User, RedisPasswordFile: s.PasswordFile}
	if withCert {
		sec.RedisTLSCert, sec.RedisTLSKey = s.ClientCert, s.ClientKey
	}
	return sec
}

// Client returns a client of the server as the ACL user over TLS, closed
// with the test.
func (s *SecureRedis) Client(t testing.TB) *redis.Client {
	t.Helper()
	tc, err := tlsconf.Files{CA: s.CA}.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: s.User, Password: s.Password(t), TLSConfig: tc})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("secured redis %s: %v", s.Addr(), err)
	}
	return c
}

// OtherCerts makes, with scripts/certs.sh, a second CA and the certificates
// it signed, which no server here trusts or presents: for checks that an
// untrusted server or client certificate is refused.
func OtherCerts(t testing.TB) SecretFiles {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "other")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(RepoRoot(), "scripts", "certs.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/certs.sh: %v\n%s", err, out)
	}
	return secretFiles(dir, "", "")
}
