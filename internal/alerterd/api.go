package alerterd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/dashboard"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/redisconn"
)

// apiAuth is how the API authenticates, from --api-tokens and --http: the
// tokens, or none on a loopback listener, or the API off (with why).
type apiAuth struct {
	tokens *api.Tokens
	store  *api.TokenStore // the tokens in use, swapped by a reload
	off    string
	oidc   string // --oidc-issuer, when single sign-on is on
}

// loadAPIAuth reads --api-tokens (a bad file is a configuration error
// naming the file and line) or, without it, decides by the listener.
func (c Config) loadAPIAuth() (apiAuth, error) {
	if c.APITokens != "" {
		ts, err := api.LoadTokens(c.APITokens)
		if err != nil {
			return apiAuth{}, badField("APITokens", err.Error())
		}
		return apiAuth{tokens: ts, store: api.NewTokenStore(ts)}, nil
	}
	if loopbackAddr(c.HTTPAddr) || c.OIDCIssuer != "" { // single sign-on: never anonymous (api.Options.OIDC)
		return apiAuth{oidc: c.OIDCIssuer}, nil
	}
	return apiAuth{off: fmt.Sprintf("no --api-tokens (NOFLY_API_TOKENS) and --http %s is not a loopback address; "+
		"make a token with alerter api-token and give the file, or listen on 127.0.0.1", c.HTTPAddr)}, nil
}

// loopbackAddr reports whether addr's host is a loopback address or
// localhost (an empty host listens on every interface: not loopback).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// log says at start who may use the API.
func (a apiAuth) log(log *slog.Logger, addr string) {
	switch {
	case a.off != "":
		log.Warn("api: OFF: "+a.off+" (/metrics, /healthz and /readyz stay on)", "api", "off")
	case a.tokens == nil && a.oidc != "":
		log.Info("api: single sign-on only (no --api-tokens): every /v1 request needs a session or the provider's access token", "api", "oidc", "issuer", a.oidc)
	case a.tokens == nil:
		log.Warn("api: UNAUTHENTICATED: no --api-tokens; served only because "+addr+" is a loopback address, every request as anonymous with role admin",
			"api", "unauthenticated", "addr", addr)
	default:
		names := make([]string, len(a.tokens.Tokens))
		for i, t := range a.tokens.Tokens {
			names[i] = t.Name + ":" + t.Role.String()
		}
		log.Info(fmt.Sprintf("api: tokens from %s: %d", a.tokens.Path, len(names)), "api", "tokens", "api_tokens", a.tokens.Path, "tokens", names)
	}
}

// newAPI is the HTTP router of a serving alerter: the API over its own
// Redis client (the event stream holds connections in XREAD BLOCK), and
// /metrics, /healthz and /readyz. The client is closed when ctx ends.
func newAPI(ctx context.Context, cfg Config, auth apiAuth, partitions int, reg *prometheus.Registry,
	healthy, ready func(context.Context) error, log *slog.Logger) (http.Handler, error) {
	basemap, err := cfg.loadBasemap()
	if err != nil {
		return nil, err
	}
	sso, err := cfg.openOIDC(ctx, log)
	if err != nil {
		return nil, err
	}
	rdb, err := cfg.openRedis(ctx, redisconn.Tuning{Name: "nofly-api:" + cfg.Group, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = rdb.Close() })
	alog := cfg.auditLog(rdb, partitions)
	s, err := api.New(api.Options{
		Redis: rdb, Prefix: cfg.RedisPrefix, Topic: cfg.Topic, Partitions: partitions,
		AlarmRetention: cfg.AlarmRetention, SignalLostAfter: cfg.SignalLostAfter, Replicas: cfg.replicas(), Ready: ready, Healthy: healthy,
		Logger: log, Registerer: reg, Gatherer: reg,
		ZoneValidator: cfg.zoneValidator(), ZoneHistoryMaxBytes: cfg.ZoneHistoryMaxBytes,
		BodyLimits: map[string]int64{"PUT /v1/zones": cfg.APIZoneSetMaxBytes},
		Tokens:     auth.tokens, TokenStore: auth.store, Off: auth.off, OIDC: sso,
		Audit: alog, AuditAuth: auditAuth(alog, log),
		CORSOrigins:  cfg.APICORSOrigins,
		Web:          httpguard.Config{Listen: cfg.HTTPAddr, PublicURLs: cfg.PublicURLs, TrustedProxies: cfg.TrustedProxies},
		RatePerToken: cfg.APIRatePerToken, RatePerAddr: cfg.APIRatePerAddr,
		MaxStreams: cfg.APIMaxStreams, MaxStreamsPerToken: cfg.APIMaxStreamsPerToken, MaxBulkRequests: cfg.APIMaxBulkRequests,
		Dashboard: dashboard.HandlerFor(cfg.tileOrigin()), DashboardFiles: dashboard.Files(), Basemap: basemap,
	})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return s.Handler(), nil
}

// kafkaReachable dials the brokers until one answers.
func kafkaReachable(ctx context.Context, brokers []string) error {
	var d net.Dialer
	var errs []error
	for _, b := range brokers {
		c, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			_ = c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no Kafka broker reachable: %w", errors.Join(errs...))
}

// apiTokenCmd makes an API token: it prints the token once, on stdout, and
// the line for the --api-tokens file, which holds only its hash. With
// --append it adds the line to the file (after checking the file with it
// still parses) and prints only the token.
func apiTokenCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("alerter api-token")
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the token's name, 1-64 of [A-Za-z0-9._-] (logs, metrics and an ack's \"by\" show it)")
	roleS := fs.String("role", "viewer", "viewer (read), operator (and acknowledge) or admin (and change zones)")
	appendTo := fs.String("append", "", "add the line to this token file (created 0600 if missing) and print only the token")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("%w: --name is required", ErrConfig)
	}
	if err := api.CheckTokenName(*name); err != nil {
		return fmt.Errorf("%w: --name: %s", ErrConfig, err)
	}
	role, err := api.ParseRole(*roleS)
	if err != nil {
		return fmt.Errorf("%w: --role: %s", ErrConfig, err)
	}
	tok, err := api.NewToken()
	if err != nil {
		return err
	}
	line := api.Token{Name: *name, Role: role, Hash: api.HashToken(tok)}.Line()
	if *appendTo == "" {
		fmt.Fprintf(stdout, "# token %s (%s), shown only this once (the file keeps its hash): send it as \"Authorization: Bearer <token>\"\n%s\n", *name, role, tok)
		fmt.Fprintf(stdout, "# the line for the --api-tokens file:\n%s\n", line)
		return nil
	}
	if err := appendTokenLine(*appendTo, line); err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "token %s (%s) added to %s; alerter serve reads it at start and on SIGHUP\n", *name, role, *appendTo)
	return nil
}

// appendTokenLine adds line to the token file at path if the file, with
// it, still parses (a name or token already there is refused, naming the
// line).
func appendTokenLine(path, line string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("api tokens: %w", err)
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		line = "\n" + line
	}
	line += "\n"
	if _, err := api.ParseTokens(path, bytes.NewReader(append(old, line...))); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("api tokens: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("api tokens %s: %w", path, err)
	}
	return f.Close()
}

// openapiCmd prints the API's OpenAPI document (what /openapi.json serves).
// It takes no flags, but parses them as every subcommand does: -h prints
// its (empty) usage instead of the document, and an argument is refused.
func openapiCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("alerter openapi")
	fs.SetOutput(stderr)
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	doc, err := api.OpenAPI()
	if err != nil {
		return err
	}
	_, err = stdout.Write(doc)
	return err
}
