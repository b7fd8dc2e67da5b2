package alerterd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9102": true, "127.0.0.2:1": true, "[::1]:9102": true, "localhost:9102": true,
		":9102": false, "0.0.0.0:9102": false, "[::]:9102": false, "192.0.2.1:9102": false, "example.org:80": false, "nonsense": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestAPIAuthModes: with a token file every /v1 request needs a token;
// without one the API is unauthenticated on a loopback listener and off on
// any other, where /metrics, /healthz and /readyz still answer.
func TestAPIAuthModes(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"api-token", "--name", "ops", "--role", "operator", "--append", tokens}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("api-token: exit %d: %s", code, errb.String())
	}
	tok := strings.TrimSpace(out.String())
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("# ok\nops root sha256:00\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, http, tokens string
		token              string
		wantErr            string
		alarms             int // GET /v1/alarms
		logs               string
	}{
		{name: "tokens, none sent", http: "0.0.0.0:9102", tokens: tokens, alarms: 401, logs: "api: tokens from"},
		{name: "tokens, sent", http: "0.0.0.0:9102", tokens: tokens, token: tok, alarms: 200},
		{name: "loopback without tokens", http: "127.0.0.1:9102", alarms: 200, logs: "api: UNAUTHENTICATED"},
		{name: "public without tokens", http: ":9102", alarms: 503, logs: "api: OFF: no --api-tokens"},
		{name: "bad token file", http: "127.0.0.1:9102", tokens: bad, wantErr: bad + ":2: token \"ops\": role \"root\""},
		{name: "missing token file", http: "127.0.0.1:9102", tokens: filepath.Join(dir, "nope"), wantErr: "APITokens (--api-tokens, NOFLY_API_TOKENS)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.HTTPAddr, cfg.APITokens = tt.http, tt.tokens
			cfg.RedisAddr = testenv.RedisAddr()
			cfg.RedisPrefix = testenv.RedisPrefix(t, "alerter-api")
			auth, err := cfg.loadAPIAuth()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfig) {
					t.Fatalf("error %v, want a config error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			auth.log(log, cfg.HTTPAddr)
			if !strings.Contains(logs.String(), tt.logs) {
				t.Errorf("start log %q does not say %q", logs.String(), tt.logs)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := newMetrics()
			h, err := newAPI(ctx, cfg, auth, 2, m.reg, nil, nil, log)
			if err != nil {
				t.Fatal(err)
			}
			get := func(path, token string) int {
				req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec.Code
			}
			if c := get("/v1/alarms", tt.token); c != tt.alarms {
				t.Errorf("GET /v1/alarms: %d, want %d", c, tt.alarms)
			}
			for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
				if c := get(p, ""); c != 200 {
					t.Errorf("GET %s: %d", p, c)
				}
			}
			if strings.Contains(logs.String(), tok) {
				t.Errorf("the log holds the token")
			}
		})
	}
}

func TestAPITokenCmd(t *testing.T) {
	env := func(string) string { return "" }
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"api-token", "--name", "grafana"}, env, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], api.TokenPrefix) || !strings.HasPrefix(lines[3], "grafana viewer sha256:") {
		t.Fatalf("output %q", out.String())
	}
	ts, err := api.ParseTokens("out", strings.NewReader(lines[3]))
	if err != nil || ts.Lookup(lines[1]) == nil {
		t.Fatalf("the printed line does not hold the printed token: %v", err)
	}
	if strings.Contains(lines[3], lines[1][len(api.TokenPrefix):]) {
		t.Error("the file line holds the token")
	}
	file := filepath.Join(t.TempDir(), "tokens")
	for i, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--name", "ci", "--role", "admin", "--append", file}, 0, "token ci (admin) added to " + file},
		{[]string{"--name", "ci", "--role", "viewer", "--append", file}, 2, file + ":2: token \"ci\" already defined on line 1"},
		{[]string{"--name", "x", "--role", "root"}, 2, `--role: role "root" is not viewer, operator or admin`},
		{[]string{"--role", "admin"}, 2, "--name is required"},
		{[]string{"--name", "a b"}, 2, "--name: token name"},
	} {
		out.Reset()
		errb.Reset()
		code := run(context.Background(), append([]string{"api-token"}, c.args...), env, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("case %d %v: exit %d %q, want %d %q", i, c.args, code, errb.String(), c.code, c.msg)
		}
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("token file %v %v", st, err)
	}
}

func TestOpenAPICmd(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"openapi"}, func(string) string { return "" }, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.OpenAPI != "3.1.0" || doc.Paths["/v1/alarms"] == nil || doc.Paths["/metrics"] == nil {
		t.Fatalf("%v %s %d paths", err, doc.OpenAPI, len(doc.Paths))
	}
}

// TestOpenAPICmdFlags: openapi parses its (empty) flag set like every
// subcommand, so -h prints a usage listing no flag instead of the document
// (docs/configuration.md is generated from every subcommand's -h) and an
// argument is refused.
func TestOpenAPICmdFlags(t *testing.T) {
	cases := []struct {
		args      []string
		code      int
		stderrHas string
	}{
		{[]string{"openapi", "-h"}, 0, "Usage of alerter openapi:\n"},
		{[]string{"openapi", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"openapi", "--zones", "z.geojson"}, 1, "flag provided but not defined: -zones"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, func(string) string { return "" }, &out, &errb)
		if code != c.code || out.Len() != 0 || !strings.Contains(errb.String(), c.stderrHas) {
			t.Errorf("%v: exit %d, stdout %.40q, stderr %q; want exit %d, no stdout, stderr with %q",
				c.args, code, out.String(), errb.String(), c.code, c.stderrHas)
		}
	}
	var out, errb bytes.Buffer
	run(context.Background(), []string{"openapi", "-h"}, func(string) string { return "" }, &out, &errb)
	if got := errb.String(); got != "Usage of alerter openapi:\n" {
		t.Errorf("openapi -h printed %q, want only the usage line (no flags)", got)
	}
}
