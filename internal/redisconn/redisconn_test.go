package redisconn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in      string
		nodes   []string
		cluster bool
		wantErr string
	}{
		{"127.0.0.1:6379", []string{"127.0.0.1:6379"}, false, ""},
		{"a:1,b:2,c:3", []string{"a:1", "b:2", "c:3"}, true, ""},
		{"a:1, b:2", []string{"a:1", "b:2"}, true, ""},
		{"redis-cluster://a:1", []string{"a:1"}, true, ""},
		{"redis-cluster://a:1,b:2", []string{"a:1", "b:2"}, true, ""},
		{"", nil, false, "is not host:port"},
		{"a", nil, false, `"a" is not host:port`},
		{"a:1,,b:2", nil, false, `"" is not host:port`},
		{"redis://a:1", nil, false, "the only scheme"},
		{"redis-cluster://", nil, false, "is not host:port"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAddr(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(a.Nodes, ",") != strings.Join(tc.nodes, ",") || a.Cluster != tc.cluster {
				t.Errorf("got %+v, want nodes %v cluster %v", a, tc.nodes, tc.cluster)
			}
			if b, err := ParseAddr(a.String()); err != nil || b.String() != a.String() || b.Cluster != a.Cluster {
				t.Errorf("String %q does not parse back: %+v, %v", a.String(), b, err)
			}
		})
	}
}

func TestOpenPicksTheClient(t *testing.T) {
	dir := t.TempDir()
	pwf := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwf, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open("127.0.0.1:1", Access{RedisUser: "nofly", RedisPasswordFile: pwf}, Tuning{Name: "x", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.Username != "nofly" || o.Password != "s3cret" || o.MaxRetries != 0 || o.ClientName != "x" {
		t.Errorf("options: user %q password %q retries %d name %q", o.Username, o.Password, o.MaxRetries, o.ClientName)
	}
	cc, err := Open("redis-cluster://127.0.0.1:1", Access{RedisTLS: true}, Tuning{})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if co := cc.(*redis.ClusterClient).Options(); co.TLSConfig == nil || len(co.Addrs) != 1 {
		t.Errorf("cluster options: tls %v, addrs %v", co.TLSConfig, co.Addrs)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\nsecond line"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		addr    string
		s       Access
		wantErr string
	}{
		{"bad address", "nohost", Access{}, "redis address"},
		{"user without password", "a:1", Access{RedisUser: "u"}, "needs a password file"},
		{"missing password file", "a:1", Access{RedisPasswordFile: filepath.Join(dir, "nope")}, "nope"},
		{"empty first line", "a:1", Access{RedisPasswordFile: empty}, "first line is empty"},
		{"missing CA", "a:1", Access{RedisTLSCA: filepath.Join(dir, "ca.pem")}, "ca.pem"},
		{"cert without key", "a:1", Access{RedisTLSCert: empty}, "go together"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.addr, tc.s, Tuning{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDescribeNeverHoldsThePassword(t *testing.T) {
	dir := t.TempDir()
	pwf := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwf, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Access{RedisUser: "nofly", RedisPasswordFile: pwf, RedisTLSCA: "ca.pem"}
	d := s.Describe()
	if strings.Contains(d, "hunter2") || !strings.Contains(d, "tls") || !strings.Contains(d, pwf) {
		t.Errorf("Describe() = %q", d)
	}
}
