//go:build cluster

package testenv

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redisconn"
	"github.com/nofly-dev/nofly/internal/tlsconf"
)

// TestSecureRedisServer: what scripts/redis.sh REDIS_SECURE_DIR starts is
// what the secured tests assume: TLS only, the default user off, the ACL
// user's password in a 0600 file, and a client certificate optional but
// verified when given.
func TestSecureRedisServer(t *testing.T) {
	sr := StartSecureRedis(t)
	other := OtherCerts(t)
	password := sr.Password(t)
	for _, f := range []string{sr.PasswordFile, sr.ClientKey, sr.Dir + "/server.key", sr.Dir + "/ca.key"} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	tlsTo := func(f tlsconf.Files) *redis.Options {
		tc, err := f.Load()
		if err != nil {
			t.Fatal(err)
		}
		return &redis.Options{Addr: sr.Addr(), TLSConfig: tc, MaxRetries: -1, DialTimeout: 3 * time.Second}
	}
	for _, tc := range []struct {
		name    string
		opts    *redis.Options
		wantErr string // "" = PING answers; else alternatives split by "|"
	}{
		{"user, no client certificate", withAuth(tlsTo(tlsconf.Files{CA: sr.CA}), sr.User, password), ""},
		{"user, client certificate", withAuth(tlsTo(tlsconf.Files{CA: sr.CA, Cert: sr.ClientCert, Key: sr.ClientKey}), sr.User, password), ""},
		{"plaintext", &redis.Options{Addr: sr.Addr(), Username: sr.User, Password: password, MaxRetries: -1, DialTimeout: 3 * time.Second}, "EOF"},
		{"default user", tlsTo(tlsconf.Files{CA: sr.CA}), "NOAUTH"},
		{"wrong password", withAuth(tlsTo(tlsconf.Files{CA: sr.CA}), sr.User, "not-"+password), "WRONGPASS"},
		// In TLS 1.3 the client's handshake ends before the server has
		// checked the client's certificate: the refusal reaches the first
		// command as the server's alert or, when the server's close
		// overtakes the PING, as a reset. TestSecureRedisRefusesForeignClientCert
		// reads the alert itself.
		{"client certificate of another CA", withAuth(tlsTo(tlsconf.Files{CA: sr.CA, Cert: other.ClientCert, Key: other.ClientKey}), sr.User, password), "certificate|connection reset"},
		{"server certificate untrusted", withAuth(tlsTo(tlsconf.Files{CA: other.CA}), sr.User, password), "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(tc.opts)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := c.Ping(ctx).Err()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("PING: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatal("PING answered")
			case tc.wantErr != "" && !containsAny(err.Error(), strings.Split(tc.wantErr, "|")):
				t.Fatalf("PING: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}

	// redisconn, as the commands use it: a refused password says so, names
	// the user and the file, and holds no password.
	wrong := sr.WrongPasswordFile(t)
	acc := sr.Security(false)
	acc.RedisPasswordFile = wrong
	c, err := redisconn.Open(sr.Addr(), acc, redisconn.Tuning{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = redisconn.Check(ctx, c, acc)
	if err == nil {
		t.Fatal("redisconn.Check passed with a wrong password")
	}
	for _, w := range []string{"refused", "user " + sr.User, wrong} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("redisconn.Check: %v: does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("redisconn.Check's error holds the password")
	}
}

// TestSecureRedisRefusesForeignClientCert: a client certificate of another
// CA is refused by the server itself, with a TLS alert naming the
// certificate, read here without a command racing the server's close.
func TestSecureRedisRefusesForeignClientCert(t *testing.T) {
	sr := StartSecureRedis(t)
	other := OtherCerts(t)
	tc, err := tlsconf.Files{CA: sr.CA, Cert: other.ClientCert, Key: other.ClientKey}.Load()
	if err != nil {
		t.Fatal(err)
	}
	tc.ServerName = "127.0.0.1"
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", sr.Addr(), tc)
	if err != nil {
		// TLS 1.2 ends the handshake itself with the alert.
		if !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("handshake: %v, want the server's certificate alert", err)
		}
		return
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Read(make([]byte, 64))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("read after the handshake: %v, want the server's certificate alert", err)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func withAuth(o *redis.Options, user, password string) *redis.Options {
	o.Username, o.Password = user, password
	return o
}
