// Package redisconn opens nofly's Redis clients from configuration: one
// server or a Redis Cluster, chosen by the address, over TLS and with an
// ACL user when asked. Every command that talks to Redis opens its clients
// here, so the address forms and the security settings mean the same
// everywhere.
//
// Address forms (NOFLY_REDIS_ADDR, --redis):
//
//	host:port                        one server (*redis.Client)
//	host:port,host:port,...          a Redis Cluster, these nodes as seeds
//	redis-cluster://host:port[,...]  a Redis Cluster, even with one seed
package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/envflag"
	"github.com/nofly-dev/nofly/internal/secretfile"
	"github.com/nofly-dev/nofly/internal/tlsconf"
)

// ClusterScheme is the prefix that names a Redis Cluster explicitly.
const ClusterScheme = "redis-cluster://"

// Addr is a parsed address: the nodes, and whether they form a cluster.
type Addr struct {
	Nodes   []string
	Cluster bool
}

// ParseAddr parses one of the address forms of the package comment; the
// error says what is wrong with which part.
func ParseAddr(s string) (Addr, error) {
	var a Addr
	rest := s
	if strings.HasPrefix(s, ClusterScheme) {
		a.Cluster, rest = true, strings.TrimPrefix(s, ClusterScheme)
	} else if strings.Contains(s, "://") {
		return Addr{}, fmt.Errorf("%q: the only scheme is %s (one server is plain host:port)", s, ClusterScheme)
	}
	for _, n := range strings.Split(rest, ",") {
		n = strings.TrimSpace(n)
		if _, port, err := net.SplitHostPort(n); err != nil || port == "" {
			return Addr{}, fmt.Errorf("%q: %q is not host:port", s, n)
		}
		a.Nodes = append(a.Nodes, n)
	}
	if len(a.Nodes) > 1 {
		a.Cluster = true
	}
	return a, nil
}

// String is the address in the form ParseAddr reads.
func (a Addr) String() string {
	if a.Cluster && len(a.Nodes) == 1 {
		return ClusterScheme + a.Nodes[0]
	}
	return strings.Join(a.Nodes, ",")
}

// Access is how a client authenticates and encrypts. The zero value is
// plaintext without a user (the loopback default). A command embeds it in
// its Config, so its fields are the command's fields (and flags).
type Access struct {
	RedisUser         string // ACL user; "" = the default user
	RedisPasswordFile string // file whose first line is the password; "" = no AUTH
	RedisTLS          bool   // TLS with the system's roots (a CA, cert or key file turns it on too)
	RedisTLSCA        string
	RedisTLSCert      string
	RedisTLSKey       string
}

func (s Access) tlsFiles() tlsconf.Files {
	return tlsconf.Files{CA: s.RedisTLSCA, Cert: s.RedisTLSCert, Key: s.RedisTLSKey}
}

// TLSOn reports whether connections use TLS.
func (s Access) TLSOn() bool { return s.RedisTLS || s.tlsFiles().Any() }

// FieldError is a bad setting: Field names the Access field (a command
// turns it into its flag and variable), Msg says what is wrong.
type FieldError struct{ Field, Msg string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks what can be checked without reading files; the error is
// a *FieldError.
func (s Access) Validate() error {
	if s.RedisUser != "" && s.RedisPasswordFile == "" {
		return &FieldError{"RedisPasswordFile", "an ACL user needs a password file"}
	}
	if (s.RedisTLSCert == "") != (s.RedisTLSKey == "") {
		return &FieldError{"RedisTLSCert", "the TLS client certificate and key go together: give both or neither"}
	}
	return nil
}

// Describe says how connections are made, for a start-up log line: never
// the password, only where it comes from.
func (s Access) Describe() string {
	var parts []string
	if s.TLSOn() {
		parts = append(parts, "tls")
	} else {
		parts = append(parts, "plaintext")
	}
	switch {
	case s.RedisUser != "":
		parts = append(parts, "user "+s.RedisUser+" (password from "+s.RedisPasswordFile+")")
	case s.RedisPasswordFile != "":
		parts = append(parts, "default user (password from "+s.RedisPasswordFile+")")
	}
	return strings.Join(parts, ", ")
}

// Tuning is what differs between a command's clients.
type Tuning struct {
	Name         string // CLIENT SETNAME, shown by CLIENT LIST
	MaxRetries   int    // go-redis's meaning: -1 = none, 0 = its default 3
	PoolSize     int    // per node; 0 = go-redis's default
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
}

// Open returns a client of addr: a *redis.Client for one server, a
// *redis.ClusterClient for a cluster. It reads the password and TLS files
// (errors name them) but does not connect; Check does.
func Open(addr string, s Access, t Tuning) (redis.UniversalClient, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("redis address: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	var pw string
	if s.RedisPasswordFile != "" {
		if pw, err = secretfile.Read(s.RedisPasswordFile); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	var tc *tls.Config
	if s.TLSOn() {
		if tc, err = s.tlsFiles().Load(); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	if a.Cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: a.Nodes, ClientName: t.Name, Username: s.RedisUser, Password: pw, TLSConfig: tc,
			MaxRetries: t.MaxRetries, PoolSize: t.PoolSize,
			DialTimeout: t.DialTimeout, ReadTimeout: t.ReadTimeout, WriteTimeout: t.WriteTimeout,
		}), nil
	}
	return redis.NewClient(&redis.Options{
		Addr: a.Nodes[0], ClientName: t.Name, Username: s.RedisUser, Password: pw, TLSConfig: tc,
		MaxRetries: t.MaxRetries, PoolSize: t.PoolSize,
		DialTimeout: t.DialTimeout, ReadTimeout: t.ReadTimeout, WriteTimeout: t.WriteTimeout,
	}), nil
}

// ErrAuth: the server refused the user or password.
var ErrAuth = errors.New("redis refused the credentials")

// Check pings the server (every primary of a cluster) and turns a refused
// AUTH into an error that says so, naming the user and the password file
// but never the password.
func Check(ctx context.Context, c redis.UniversalClient, s Access) error {
	ping := func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, ping)
	} else {
		err = c.Ping(ctx).Err()
	}
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "NOPERM") {
		user := s.RedisUser
		if user == "" {
			user = "default"
		}
		from := "no password file"
		if s.RedisPasswordFile != "" {
			from = "password from " + s.RedisPasswordFile
		}
		return fmt.Errorf("%w: user %s (%s): %v", ErrAuth, user, from, err)
	}
	return err
}

// Rows are the configuration rows of Access's fields for a command whose
// Config embeds Access: the same flags and variables on every command.
func Rows[C any]() envflag.Fields[C] {
	return envflag.Fields[C]{
		{Name: "RedisUser", Flag: "redis-user", Env: "NOFLY_REDIS_USER", Usage: "Redis ACL user (with --redis-password-file); empty: the default user"},
		{Name: "RedisPasswordFile", Flag: "redis-password-file", Env: "NOFLY_REDIS_PASSWORD_FILE", Usage: "file whose first line is the Redis password (never a flag: it would show in process listings); empty: no AUTH"},
		{Name: "RedisTLS", Flag: "redis-tls", Env: "NOFLY_REDIS_TLS", Usage: "connect to Redis over TLS (the system's CA roots unless --redis-tls-ca; any TLS file turns TLS on)"},
		{Name: "RedisTLSCA", Flag: "redis-tls-ca", Env: "NOFLY_REDIS_TLS_CA", Usage: "PEM file of the CA certificates that sign the Redis servers' certificates"},
		{Name: "RedisTLSCert", Flag: "redis-tls-cert", Env: "NOFLY_REDIS_TLS_CERT", Usage: "PEM client certificate for a server with tls-auth-clients (with --redis-tls-key)"},
		{Name: "RedisTLSKey", Flag: "redis-tls-key", Env: "NOFLY_REDIS_TLS_KEY", Usage: "PEM private key of --redis-tls-cert"},
	}
}
