package api

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/testenv"
)

func hashHex(tok string) string { h := HashToken(tok); return hex.EncodeToString(h[:]) }

func TestParseTokens(t *testing.T) {
	h1, h2 := hashHex("one"), hashHex("two")
	tests := []struct {
		name, file string
		want       string // error substring; "" = parses
		tokens     int
	}{
		{"good", "\ufeff# comment\n\nops operator sha256:" + h1 + "  # trailing\nci admin sha256:" + strings.ToUpper(h2) + "\n", "", 2},
		{"bad name", "o/ps viewer sha256:" + h1 + "\n", `tokens.txt:1: token name "o/ps"`, 0},
		{"two fields", "\n\nops viewer\n", "tokens.txt:3: token \"ops\": want 3 fields", 0},
		{"bad role", "ops root sha256:" + h1 + "\n", `tokens.txt:1: token "ops": role "root" is not viewer, operator or admin`, 0},
		{"token, not hash", "ops viewer nofly_api_secretsecretsecret\n", `tokens.txt:1: token "ops": third field "nofly_…" is not sha256`, 0},
		{"short hash", "ops viewer sha256:abcd\n", "tokens.txt:1: token \"ops\": sha256: needs 64 hex digits, got 4", 0},
		{"name twice", "ops viewer sha256:" + h1 + "\nops admin sha256:" + h2 + "\n", `tokens.txt:2: token "ops" already defined on line 1`, 0},
		{"hash twice", "ops viewer sha256:" + h1 + "\nci admin sha256:" + h1 + "\n", `tokens.txt:2: token "ci" has the same hash as line 1`, 0},
		{"empty", "# nothing\n\n", "tokens.txt: no token defined", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := ParseTokens("tokens.txt", strings.NewReader(tt.file))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want one containing %q", err, tt.want)
				}
				if strings.Contains(err.Error(), "secretsecret") {
					t.Errorf("error quotes the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ts.Tokens) != tt.tokens {
				t.Fatalf("%d tokens, want %d", len(ts.Tokens), tt.tokens)
			}
			if tk := ts.Lookup("two"); tk == nil || tk.Name != "ci" || tk.Role != RoleAdmin {
				t.Errorf("Lookup(two) = %+v", tk)
			}
			if ts.Lookup("three") != nil || ts.Lookup("") != nil {
				t.Error("an unknown token was found")
			}
			if l := ts.Tokens[0].Line(); l != "ops operator sha256:"+h1 {
				t.Errorf("Line() = %q", l)
			}
		})
	}
}

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if a == b || !strings.HasPrefix(a, TokenPrefix) || len(a) != len(TokenPrefix)+43 {
		t.Errorf("tokens %q %q", a, b)
	}
}

// authEnv is the whole router over a test's own keys on the real Redis,
// with a viewer, an operator and an admin token.
type authEnv struct {
	h    http.Handler
	reg  *prometheus.Registry
	logs *bytes.Buffer
}

var testTokens = map[string]string{"viewer": "tok-viewer-0123456789", "operator": "tok-operator-0123456789", "admin": "tok-admin-0123456789"}

func newAuthEnv(t *testing.T, mod func(*Options)) *authEnv {
	t.Helper()
	var lines string
	for name, tok := range testTokens {
		lines += name + "-tok " + name + " sha256:" + hashHex(tok) + "\n"
	}
	ts, err := ParseTokens("test", strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	e := &authEnv{reg: prometheus.NewRegistry(), logs: &bytes.Buffer{}}
	o := Options{Redis: testenv.RedisClient(t), Prefix: testenv.RedisPrefix(t, "api-auth"), Topic: "pos", Partitions: 2,
		Tokens: ts, Registerer: e.reg, Gatherer: e.reg, Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.h = s.Handler()
	return e
}

type authAnswer struct {
	code int
	hdr  http.Header
	body errorBody
	raw  string
}

func (e *authEnv) do(t *testing.T, method, path, token, body string, hdr ...string) authAnswer {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = testHost // httptest's example.com is no name of this server (421)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	a := authAnswer{code: rec.Code, hdr: rec.Header(), raw: rec.Body.String()}
	if rec.Code >= 400 && method != http.MethodHead {
		if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil || a.body.Code == "" || a.body.Details == nil {
			t.Errorf("%s %s: %d authAnswer is not the error body: %q (%v)", method, path, rec.Code, rec.Body.String(), err)
		}
	}
	return a
}

func TestAuth(t *testing.T) {
	e := newAuthEnv(t, nil)
	tests := []struct {
		name, method, path, token, body string
		hdr                             []string
		code                            int
		errCode                         string
	}{
		{name: "no header", method: "GET", path: "/v1/alarms", code: 401, errCode: "missing_token"},
		{name: "not bearer", method: "GET", path: "/v1/alarms", hdr: []string{"Authorization", "Basic dXNlcjpwYXNz"}, code: 401, errCode: "invalid_token"},
		{name: "unknown token", method: "GET", path: "/v1/alarms", token: "nope", code: 401, errCode: "invalid_token"},
		{name: "viewer reads alarms", method: "GET", path: "/v1/alarms", token: testTokens["viewer"], code: 200},
		{name: "viewer reads zones", method: "GET", path: "/v1/zones", token: testTokens["viewer"], code: 200},
		{name: "viewer may not ack", method: "POST", path: "/v1/alarms/" + unknownAlarm + "/ack", token: testTokens["viewer"], code: 403, errCode: "forbidden"},
		{name: "operator may ack", method: "POST", path: "/v1/alarms/" + unknownAlarm + "/ack", token: testTokens["operator"], code: 404, errCode: "not_found"},
		{name: "viewer on admin route", method: "PUT", path: "/v1/zones/Z1", token: testTokens["viewer"], body: "{}", code: 403, errCode: "forbidden"},
		{name: "operator on admin route", method: "DELETE", path: "/v1/zones/Z1", token: testTokens["operator"], code: 403, errCode: "forbidden"},
		{name: "admin passes to the route", method: "DELETE", path: "/v1/zones/Z1", token: testTokens["admin"], code: 404, errCode: "not_found"},
		{name: "healthz open", method: "GET", path: "/healthz", code: 200},
		{name: "readyz open", method: "GET", path: "/readyz", code: 200},
		{name: "metrics open", method: "GET", path: "/metrics", code: 200},
		{name: "openapi open", method: "GET", path: "/openapi.json", code: 200},
		{name: "unknown route", method: "GET", path: "/v2/nothing", code: 404, errCode: "not_found"},
		{name: "wrong method", method: "PATCH", path: "/v1/alarms", token: testTokens["admin"], code: 405, errCode: "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.do(t, tt.method, tt.path, tt.token, tt.body, tt.hdr...)
			if a.code != tt.code || a.body.Code != tt.errCode {
				t.Fatalf("%d %q, want %d %q: %s", a.code, a.body.Code, tt.code, tt.errCode, a.raw)
			}
			switch a.code {
			case 401:
				if w := a.hdr.Get("WWW-Authenticate"); !strings.HasPrefix(w, `Bearer realm="nofly-api"`) {
					t.Errorf("WWW-Authenticate %q", w)
				}
			case 403:
				if a.body.Details["required_role"] == nil || a.body.Details["role"] == nil {
					t.Errorf("403 details %v", a.body.Details)
				}
			case 405:
				if a.hdr.Get("Allow") != "GET" {
					t.Errorf("Allow %q", a.hdr.Get("Allow"))
				}
			}
		})
	}
}

// TestAllow: a 405's Allow lists the methods of the most specific route
// that matches the path, as OpenAPI matches paths: /v1/zones/history is
// GET only, though /v1/zones/{id} would match it for PUT and DELETE.
func TestAllow(t *testing.T) {
	e := newAuthEnv(t, nil)
	tests := []struct{ method, path, allow string }{
		{"OPTIONS", "/v1/zones/history", "GET"},
		{"PATCH", "/v1/zones/history", "GET"},
		{"OPTIONS", "/v1/zones/Z1", "GET, PUT, DELETE"},
		{"POST", "/v1/zones", "GET, PUT"},
		{"GET", "/v1/alarms/" + unknownAlarm + "/ack", "POST"},
		{"OPTIONS", "/v1/alarms", "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			a := e.do(t, tt.method, tt.path, testTokens["admin"], "")
			if a.code != 405 || a.body.Code != "method_not_allowed" {
				t.Fatalf("%d %q, want 405: %s", a.code, a.body.Code, a.raw)
			}
			if got := a.hdr.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
}

// TestUnauthenticated: without tokens every request is anonymous admin.
func TestUnauthenticated(t *testing.T) {
	e := newAuthEnv(t, func(o *Options) { o.Tokens = nil })
	if a := e.do(t, "GET", "/v1/alarms", "", ""); a.code != 200 {
		t.Fatalf("%d %s", a.code, a.raw)
	}
	if a := e.do(t, "DELETE", "/v1/zones/Z1", "", ""); a.code != 404 {
		t.Fatalf("an admin route: %d %s", a.code, a.raw)
	}
	if !strings.Contains(e.logs.String(), `"token":"anonymous"`) {
		t.Errorf("the log does not name the anonymous caller: %s", e.logs)
	}
}

// TestAPIOff: with Options.Off the /v1 routes authAnswer 503 saying why, and
// health, metrics and the description stay on.
func TestAPIOff(t *testing.T) {
	e := newAuthEnv(t, func(o *Options) { o.Tokens, o.Off = nil, "no token file on a public listener" })
	a := e.do(t, "GET", "/v1/alarms", "", "")
	if a.code != 503 || a.body.Code != "api_off" || !strings.Contains(a.body.Error, "no token file") {
		t.Fatalf("%d %s", a.code, a.raw)
	}
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/openapi.json"} {
		if a := e.do(t, "GET", p, "", ""); a.code != 200 {
			t.Errorf("%s: %d", p, a.code)
		}
	}
}

// TestRequestLogAndMetrics: one log line per request with the route
// pattern and the token's name, never the token; the request counted by
// route pattern, method and status.
func TestRequestLogAndMetrics(t *testing.T) {
	e := newAuthEnv(t, nil)
	for range 3 {
		e.do(t, "GET", "/v1/alarms/"+unknownAlarm, testTokens["viewer"], "")
	}
	e.do(t, "GET", "/v1/alarms", "bad-token-value", "")
	logs := e.logs.String()
	for tok := range strings.SplitSeq("tok-viewer-0123456789 bad-token-value", " ") {
		if strings.Contains(logs, tok) {
			t.Errorf("the log holds the token %q: %s", tok, logs)
		}
	}
	var n int
	for l := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] != "http request" {
			continue
		}
		n++
		if m["route"] == "/v1/alarms/{alarm_id}" && (m["token"] != "viewer-tok" || m["method"] != "GET" || m["status"] != 404.0 || m["duration"] == nil) {
			t.Errorf("log line %s", l)
		}
	}
	if n != 4 {
		t.Errorf("%d request lines, want 4: %s", n, logs)
	}
	if v := requestCount(t, e.reg, "nofly_api_requests_total", "/v1/alarms/{alarm_id}", "GET", "404"); v != 3 {
		t.Errorf("nofly_api_requests_total{route=/v1/alarms/{alarm_id},GET,404} = %v, want 3", v)
	}
	if v := requestCount(t, e.reg, "nofly_api_requests_total", "/v1/alarms", "GET", "401"); v != 1 {
		t.Errorf("401 count %v, want 1", v)
	}
	if v := requestCount(t, e.reg, "nofly_api_request_duration_seconds", "/v1/alarms/{alarm_id}", "GET", "404"); v != 3 {
		t.Errorf("duration observations %v, want 3", v)
	}
}

// requestCount is the value of the counter (or the histogram's count)
// name{route, method, status} in reg, 0 when absent.
func requestCount(t *testing.T, reg *prometheus.Registry, name, route, method, status string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["route"] == route && l["method"] == method && l["status"] == status {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// unknownAlarm is an alarm id (32 lowercase hex digits) of no alarm.
const unknownAlarm = "0123456789abcdef0123456789abcdef"
