package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/nofly-dev/nofly/internal/testenv"
)

var oidcTestRoles = map[string]Role{"nofly-admins": RoleAdmin, "nofly-operators": RoleOperator, "nofly-viewers": RoleViewer}

// oidcEnv is the whole router with single sign-on against a testenv.FakeOIDC (and
// the token file of authEnv), on the real Redis.
type oidcEnv struct {
	*authEnv
	op     *testenv.FakeOIDC
	oidc   *OIDC
	events []AuthEvent
	// nowOverride, when set, is the API's clock (Options.Now).
	nowOverride time.Time
	prefix      string
}

func newOIDCEnv(t *testing.T, mod func(*OIDCConfig)) *oidcEnv {
	t.Helper()
	op := testenv.StartFakeOIDC(t)
	cfg := OIDCConfig{Issuer: op.URL, ClientID: "nofly", ClientSecret: "client-secret-0123456789",
		RoleClaim: "groups", Roles: oidcTestRoles, RedirectURL: "http://" + testHost + "/auth/callback"}
	if mod != nil {
		mod(&cfg)
	}
	o, err := NewOIDC(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &oidcEnv{op: op, oidc: o}
	e.authEnv = newAuthEnv(t, func(opt *Options) {
		opt.OIDC = o
		e.prefix = opt.Prefix
		opt.Now = func() time.Time {
			if !e.nowOverride.IsZero() {
				return e.nowOverride
			}
			return time.Now()
		}
		opt.AuditAuth = func(_ context.Context, ev AuthEvent) { e.events = append(e.events, ev) }
	})
	return e
}

// req runs one request through the router, from a loopback client unless
// remote says otherwise.
func (e *oidcEnv) req(t testing.TB, method, target string, cookies []*http.Cookie, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Host = testHost
	r.RemoteAddr = "127.0.0.1:40000"
	for _, c := range cookies {
		r.AddCookie(c)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "RemoteAddr" {
			r.RemoteAddr = hdr[i+1]
			continue
		}
		r.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	return rec
}

func cookieOf(rec *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signIn runs /auth/login → the provider → /auth/callback and returns the
// callback's answer and the login cookie it went with.
func (e *oidcEnv) signIn(t testing.TB, hdr ...string) (*httptest.ResponseRecorder, string) {
	t.Helper()
	login := e.req(t, "GET", "/auth/login", nil, hdr...)
	if login.Code != http.StatusFound {
		t.Fatalf("/auth/login: %d %s", login.Code, login.Body)
	}
	lc := cookieOf(login, loginCookie)
	if lc == nil {
		t.Fatal("/auth/login set no login cookie")
	}
	loc := login.Header().Get("Location")
	if !strings.HasPrefix(loc, e.op.URL+"/authorize?") {
		t.Fatalf("/auth/login redirects to %q", loc)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, _ := url.Parse(res.Header.Get("Location"))
	cb := e.req(t, "GET", "/auth/callback?"+back.RawQuery, []*http.Cookie{lc}, hdr...)
	return cb, back.RawQuery
}

func (e *oidcEnv) me(t *testing.T, cookies []*http.Cookie) (int, map[string]any) {
	t.Helper()
	rec := e.req(t, "GET", "/v1/me", cookies)
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return rec.Code, m
}

// TestOIDCSignIn: login → provider → callback makes a session whose
// cookie is HttpOnly and SameSite=Lax, not Secure on loopback over http;
// /v1/me names the person, the role and via oidc with a CSRF token; the
// PKCE verifier reached the token endpoint and matched the S256 challenge.
func TestOIDCSignIn(t *testing.T) {
	e := newOIDCEnv(t, nil)
	cb, _ := e.signIn(t)
	if cb.Code != http.StatusSeeOther || cb.Header().Get("Location") != "/" {
		t.Fatalf("callback: %d %q %s", cb.Code, cb.Header().Get("Location"), cb.Body)
	}
	sc := cookieOf(cb, sessionCookie)
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteLaxMode || sc.Secure || sc.Path != "/" {
		t.Fatalf("session cookie %+v", sc)
	}
	if sc.MaxAge <= 0 || sc.MaxAge > 3600 {
		t.Errorf("session cookie MaxAge %d, want the token's hour at most", sc.MaxAge)
	}
	if seen := e.op.Seen(); seen.ChallengeMethod != "S256" || seen.Verifier == "" || seen.Challenge == "" || seen.Secret != "client-secret-0123456789" {
		t.Errorf("PKCE and secret at the provider: %+v", seen)
	}
	code, me := e.me(t, []*http.Cookie{sc})
	if code != 200 || me["name"] != "alice" || me["role"] != "operator" || me["via"] != "oidc" || me["csrf_token"] == nil {
		t.Fatalf("/v1/me: %d %v", code, me)
	}
	if len(e.events) != 1 || e.events[0].Action != "sign_in" || e.events[0].Name != "alice" {
		t.Errorf("audit events %+v", e.events)
	}
	if bytes.Contains(e.logs.Bytes(), []byte(sc.Value)) || bytes.Contains(e.logs.Bytes(), []byte("client-secret-0123456789")) {
		t.Error("the log holds the session id or the client secret")
	}
}

// TestOIDCSecureCookie: beyond loopback (or with an https public URL) the
// cookies are Secure.
func TestOIDCSecureCookie(t *testing.T) {
	e := newOIDCEnv(t, nil)
	cb, _ := e.signIn(t, "RemoteAddr", "192.0.2.7:5000")
	if sc := cookieOf(cb, sessionCookie); sc == nil || !sc.Secure || !sc.HttpOnly {
		t.Fatalf("session cookie beyond loopback %+v (%d %s)", sc, cb.Code, cb.Body)
	}
	e2 := newOIDCEnv(t, func(c *OIDCConfig) { c.RedirectURL = "https://nofly.example/auth/callback" })
	login := e2.req(t, "GET", "/auth/login", nil)
	if lc := cookieOf(login, loginCookie); lc == nil || !lc.Secure || lc.SameSite != http.SameSiteLaxMode {
		t.Fatalf("login cookie with an https public URL %+v", lc)
	}
}

// TestOIDCStateRefused: a callback whose state is not the browser's
// cookie's, or used twice, or whose ID token's nonce is another's, makes
// no session.
func TestOIDCStateRefused(t *testing.T) {
	e := newOIDCEnv(t, nil)
	login := e.req(t, "GET", "/auth/login", nil)
	lc := cookieOf(login, loginCookie)
	tests := []struct {
		name    string
		query   string
		cookies []*http.Cookie
		code    int
		errCode string
	}{
		{"no cookie", "code=x&state=" + url.QueryEscape(lc.Value), nil, 403, "bad_state"},
		{"another state", "code=x&state=other", []*http.Cookie{lc}, 403, "bad_state"},
		{"provider error", "error=access_denied", nil, 401, "sign_in_refused"},
		{"no state", "code=x", nil, 400, "bad_request"},
		{"no code", "state=" + url.QueryEscape(lc.Value), []*http.Cookie{lc}, 401, "sign_in_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.req(t, "GET", "/auth/callback?"+tt.query, tt.cookies)
			var b errorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &b)
			if rec.Code != tt.code || b.Code != tt.errCode || cookieOf(rec, sessionCookie) != nil {
				t.Fatalf("%d %q, want %d %q: %s", rec.Code, b.Code, tt.code, tt.errCode, rec.Body)
			}
		})
	}
	t.Run("used twice", func(t *testing.T) {
		cb, q := e.signIn(t)
		if cb.Code != http.StatusSeeOther {
			t.Fatalf("first: %d %s", cb.Code, cb.Body)
		}
		st, _ := url.ParseQuery(q)
		again := e.req(t, "GET", "/auth/callback?"+q, []*http.Cookie{{Name: loginCookie, Value: st.Get("state")}})
		if again.Code != 403 || cookieOf(again, sessionCookie) != nil {
			t.Fatalf("second: %d %s", again.Code, again.Body)
		}
	})
	t.Run("nonce mismatch", func(t *testing.T) {
		e.op.SetNonce("someone-else's")
		defer e.op.SetNonce("")
		cb, _ := e.signIn(t)
		if cb.Code != 401 || !strings.Contains(cb.Body.String(), "nonce") || cookieOf(cb, sessionCookie) != nil {
			t.Fatalf("%d %s", cb.Code, cb.Body)
		}
	})
}

// TestOIDCRoles: the highest mapped value wins; none mapped is 403 naming
// the claim and the values, at sign-in and for a JWT.
func TestOIDCRoles(t *testing.T) {
	e := newOIDCEnv(t, nil)
	tests := []struct {
		name   string
		groups any
		role   string // "" = refused
	}{
		{"viewer", []string{"nofly-viewers"}, "viewer"},
		{"highest wins", []string{"nofly-viewers", "staff", "nofly-admins", "nofly-operators"}, "admin"},
		{"one string", "nofly-operators", "operator"},
		{"none mapped", []string{"staff"}, ""},
		{"no claim", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := map[string]any{"preferred_username": "bob"}
			if tt.groups != nil {
				c["groups"] = tt.groups
			}
			e.op.SetClaims(c)
			cb, _ := e.signIn(t)
			jwt := e.op.Sign(t, e.op.Claims("nofly"))
			a := e.do(t, "GET", "/v1/me", jwt, "")
			if tt.role == "" {
				if cb.Code != 403 || !strings.Contains(cb.Body.String(), "nofly-operators") || cookieOf(cb, sessionCookie) != nil {
					t.Fatalf("sign-in: %d %s", cb.Code, cb.Body)
				}
				if a.code != 403 || a.body.Code != "no_role" {
					t.Fatalf("jwt: %d %s", a.code, a.raw)
				}
				if n := len(e.events); n == 0 || e.events[n-1].Action != "sign_in" || e.events[n-1].Outcome != "denied" || e.events[n-1].Status != 403 || e.events[n-1].Name != "bob" {
					t.Fatalf("the refused sign-in's audit event: %+v", e.events)
				}
				return
			}
			_, me := e.me(t, []*http.Cookie{cookieOf(cb, sessionCookie)})
			if me["role"] != tt.role || me["name"] != "bob" {
				t.Fatalf("session /v1/me %v", me)
			}
			var jm map[string]any
			_ = json.Unmarshal([]byte(a.raw), &jm)
			if a.code != 200 || jm["role"] != tt.role || jm["via"] != "oidc" || jm["csrf_token"] != nil {
				t.Fatalf("jwt /v1/me: %d %s", a.code, a.raw)
			}
		})
	}
}

// TestOIDCJWT: an access token is checked for issuer, audience, expiry,
// signature and algorithm; a refused one is 401 and never logged.
func TestOIDCJWT(t *testing.T) {
	e := newOIDCEnv(t, nil)
	e.op.SetClaims(map[string]any{"preferred_username": "ci-bot", "groups": []string{"nofly-admins"}})
	good := e.op.Claims("nofly")
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for a, b := range good {
			c[a] = b
		}
		c[k] = v
		return c
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	valid := e.op.Sign(t, good)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+e.op.URL+`","aud":"nofly","sub":"u-1","exp":9999999999,"preferred_username":"mallory","groups":["nofly-admins"]}`)) + "." + parts[2]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	hs := testenv.SignJWT(t, []byte("a-shared-secret-of-32-bytes-long!"), jose.HS256, good)
	tests := []struct {
		name, token string
		code        int
		want        string
	}{
		{"valid", valid, 200, ""},
		{"expired", e.op.Sign(t, with("exp", time.Now().Add(-time.Minute).Unix())), 401, "expired"},
		{"wrong audience", e.op.Sign(t, with("aud", "grafana")), 401, "audience"},
		{"wrong issuer", e.op.Sign(t, with("iss", "https://evil.example")), 401, "issue"},
		{"other key", testenv.SignJWT(t, other, jose.RS256, good), 401, "signature"},
		{"tampered", tampered, 401, ""},
		{"alg none", none, 401, ""},
		{"HS256", hs, 401, ""},
		{"too long", "eyJ" + strings.Repeat("a", maxAuthHeader) + ".a.b", 401, "longer than"},
		{"token file still works", testTokens["operator"], 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.do(t, "GET", "/v1/me", tt.token, "")
			if a.code != tt.code || !strings.Contains(a.raw, tt.want) {
				t.Fatalf("%d %s, want %d with %q", a.code, a.raw, tt.code, tt.want)
			}
			if tt.code == 401 && a.body.Code != "invalid_token" {
				t.Errorf("code %q", a.body.Code)
			}
			if bytes.Contains(e.logs.Bytes(), []byte(tt.token)) {
				t.Error("the log holds the token")
			}
		})
	}
	a := e.do(t, "GET", "/v1/me", valid, "")
	var m map[string]any
	_ = json.Unmarshal([]byte(a.raw), &m)
	if m["name"] != "ci-bot" || m["role"] != "admin" {
		t.Errorf("/v1/me %v", m)
	}
	// A JWT-carrying write needs no CSRF token: it is no cookie.
	if a := e.do(t, "DELETE", "/v1/zones/Z1", valid, ""); a.code != 404 {
		t.Errorf("DELETE with a JWT: %d %s", a.code, a.raw)
	}
}

// TestOIDCCSRF: a write with the session cookie needs X-CSRF-Token equal
// to the session's.
func TestOIDCCSRF(t *testing.T) {
	e := newOIDCEnv(t, nil)
	e.op.SetClaims(map[string]any{"preferred_username": "alice", "groups": []string{"nofly-admins"}})
	cb, _ := e.signIn(t)
	sc := cookieOf(cb, sessionCookie)
	_, me := e.me(t, []*http.Cookie{sc})
	csrf, _ := me["csrf_token"].(string)
	tests := []struct {
		name    string
		hdr     []string
		code    int
		errCode string
	}{
		{"missing", nil, 403, "csrf"},
		{"wrong", []string{CSRFHeader, "nope"}, 403, "csrf"},
		{"right", []string{CSRFHeader, csrf}, 404, "not_found"}, // through to the route: no zone Z1
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.req(t, "DELETE", "/v1/zones/Z1", []*http.Cookie{sc}, tt.hdr...)
			var b errorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &b)
			if rec.Code != tt.code || b.Code != tt.errCode {
				t.Fatalf("%d %s, want %d %q", rec.Code, rec.Body, tt.code, tt.errCode)
			}
			if tt.code == 403 && (b.Details["field"] != CSRFHeader || !strings.Contains(b.Error, CSRFHeader)) {
				t.Errorf("403 does not name the header: %s", rec.Body)
			}
		})
	}
	if bytes.Contains(e.logs.Bytes(), []byte(csrf)) {
		t.Error("the log holds the CSRF token")
	}
}

// TestOIDCLogout: logout needs the CSRF token, ends the session (the
// cookie no longer works) and points at the provider's end_session.
func TestOIDCLogout(t *testing.T) {
	e := newOIDCEnv(t, nil)
	cb, _ := e.signIn(t)
	sc := cookieOf(cb, sessionCookie)
	_, me := e.me(t, []*http.Cookie{sc})
	if rec := e.req(t, "POST", "/auth/logout", []*http.Cookie{sc}, CSRFHeader, strings.Repeat("x", 101)); rec.Code != 400 {
		t.Fatalf("logout with a 101-character CSRF token: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/auth/logout", []*http.Cookie{sc}, "Content-Type", "text/plain"); rec.Code != 415 {
		t.Fatalf("logout with a text/plain body type: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req(t, "POST", "/auth/logout", []*http.Cookie{sc}); rec.Code != 403 {
		t.Fatalf("logout without CSRF: %d %s", rec.Code, rec.Body)
	}
	rec := e.req(t, "POST", "/auth/logout", []*http.Cookie{sc}, CSRFHeader, me["csrf_token"].(string))
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	lu, _ := out["logout_url"].(string)
	if rec.Code != 200 || !strings.HasPrefix(lu, e.op.URL+"/logout?") || !strings.Contains(lu, "client_id=nofly") {
		t.Fatalf("logout: %d %s", rec.Code, rec.Body)
	}
	if c := cookieOf(rec, sessionCookie); c == nil || c.MaxAge >= 0 {
		t.Errorf("logout left the cookie: %+v", c)
	}
	if code, m := e.me(t, []*http.Cookie{sc}); code != 401 || m["code"] != "sign_in" {
		t.Fatalf("after logout: %d %v", code, m)
	}
	if n := len(e.events); n != 2 || e.events[1].Action != "sign_out" {
		t.Errorf("audit events %+v", e.events)
	}
}

// TestOIDCSessionEndsWithToken: the session lasts as long as the
// provider's token, no longer.
func TestOIDCSessionEndsWithToken(t *testing.T) {
	now := time.Now()
	e := newOIDCEnv(t, nil)
	e.op.SetTTL(2 * time.Minute)
	cb, _ := e.signIn(t)
	sc := cookieOf(cb, sessionCookie)
	if sc.MaxAge > 120 {
		t.Errorf("cookie MaxAge %d beyond the token's 120 s", sc.MaxAge)
	}
	ttl := testenv.RedisClient(t).PTTL(context.Background(), authKeysOf(e.prefix).Session(hashID(sc.Value))).Val()
	if ttl <= 0 || ttl > 2*time.Minute {
		t.Errorf("the session's Redis TTL %v, want the token's 2m at most", ttl)
	}
	if code, _ := e.me(t, []*http.Cookie{sc}); code != 200 {
		t.Fatalf("fresh session: %d", code)
	}
	// The server's clock past the token's expiry: the session is over
	// though Redis may hold it a moment longer.
	e.nowOverride = now.Add(3 * time.Minute)
	if code, m := e.me(t, []*http.Cookie{sc}); code != 401 || m["code"] != "sign_in" {
		t.Fatalf("after expiry: %d %v", code, m)
	}
}

// TestOIDCNoCredentials: with single sign-on and no token file a request
// without a session or JWT is 401 pointing at the sign-in, never anonymous.
func TestOIDCNoCredentials(t *testing.T) {
	op := testenv.StartFakeOIDC(t)
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: op.URL, ClientID: "nofly", Roles: oidcTestRoles})
	if err != nil {
		t.Fatal(err)
	}
	e := newAuthEnv(t, func(opt *Options) { opt.Tokens = nil; opt.OIDC = o })
	for _, tok := range []string{"", "nofly_api_whatever"} {
		a := e.do(t, "GET", "/v1/alarms", tok, "")
		if a.code != 401 {
			t.Fatalf("token %q: %d %s", tok, a.code, a.raw)
		}
	}
	a := e.do(t, "GET", "/v1/me", "", "")
	if a.body.Code != "sign_in" || a.body.Details["login"] != "/auth/login" {
		t.Errorf("401 %s", a.raw)
	}
	// Without --public-url only a loopback origin may sign in.
	r := httptest.NewRequest("GET", "/auth/login", nil)
	r.Host, r.RemoteAddr = testHost, "192.0.2.1:1"
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "--public-url") {
		t.Errorf("login beyond loopback without a public URL: %d %s", rec.Code, rec.Body)
	}
}

// TestOIDCOff: without single sign-on /auth/config says so and the sign-in
// routes are 404 oidc_off.
func TestOIDCOff(t *testing.T) {
	e := newAuthEnv(t, nil)
	if a := e.do(t, "GET", "/auth/config", "", ""); a.code != 200 || !strings.Contains(a.raw, `"oidc":false`) {
		t.Errorf("/auth/config: %d %s", a.code, a.raw)
	}
	for _, p := range []string{"GET /auth/login", "GET /auth/callback", "POST /auth/logout"} {
		m, path, _ := strings.Cut(p, " ")
		if a := e.do(t, m, path, "", ""); a.code != 404 || a.body.Code != "oidc_off" {
			t.Errorf("%s: %d %s", p, a.code, a.raw)
		}
	}
	if a := e.do(t, "GET", "/v1/me", testTokens["viewer"], ""); !strings.Contains(a.raw, `"via":"token"`) {
		t.Errorf("/v1/me with a token: %s", a.raw)
	}
}

// TestOIDCDiscoveryFails: an unreachable issuer fails NewOIDC after its
// bounded retries, naming the issuer.
func TestOIDCDiscoveryFails(t *testing.T) {
	start := time.Now()
	var logs bytes.Buffer
	_, err := NewOIDC(context.Background(), OIDCConfig{Issuer: "http://127.0.0.1:1/realms/x", ClientID: "nofly", Roles: oidcTestRoles,
		DiscoveryTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1/realms/x") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("no retry logged: %s", logs.String())
	}
}

func TestParseOIDCRoles(t *testing.T) {
	tests := []struct {
		in, err string
		n       int
	}{
		{"nofly-admins=admin, nofly-operators=operator,nofly-viewers=viewer", "", 3},
		{"a=root", `role "root"`, 0},
		{"a", "not VALUE=ROLE", 0},
		{"a=admin,a=viewer", "mapped twice", 0},
		{"", "no VALUE=ROLE", 0},
	}
	for _, tt := range tests {
		m, err := ParseOIDCRoles(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || len(m) != tt.n {
			t.Errorf("%q: %v %v", tt.in, m, err)
		}
	}
}

// BenchmarkOIDCAuth is the cost of authenticating GET /v1/me by a JWT
// (signature check against the cached JWKS) and by a session cookie (one
// Redis GET), through the whole router.
func BenchmarkOIDCAuth(b *testing.B) {
	op := testenv.StartFakeOIDC(b)
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: op.URL, ClientID: "nofly", Roles: oidcTestRoles})
	if err != nil {
		b.Fatal(err)
	}
	prefix := testenv.RedisPrefix(b, "api-oidc-bench")
	rdb := testenv.RedisClient(b)
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 1, OIDC: o})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	jwt := op.Sign(b, op.Claims("nofly"))
	id := random32()
	sess, _ := json.Marshal(session{Name: "alice", Role: "operator", CSRF: random32(), Expires: time.Now().Add(time.Hour).UnixMilli()})
	if err := rdb.Set(context.Background(), authKeysOf(prefix).Session(hashID(id)), sess, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, set func(*http.Request)) {
		for b.Loop() {
			r := httptest.NewRequest("GET", "/v1/me", nil)
			r.Host, r.RemoteAddr = testHost, "127.0.0.1:1"
			set(r)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != 200 {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}
	b.Run("jwt", func(b *testing.B) { run(b, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+jwt) }) })
	b.Run("session", func(b *testing.B) {
		run(b, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: id}) })
	})
}

// TestOIDCStreamEndsWithToken: an event stream opened with a JWT ends when
// the token expires, not when the client leaves.
func TestOIDCStreamEndsWithToken(t *testing.T) {
	e := newOIDCEnv(t, nil)
	claims := e.op.Claims("nofly")
	claims["exp"] = time.Now().Add(2 * time.Second).Unix()
	jwt := e.op.Sign(t, claims)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/v1/events/stream", nil)
	req.Host = testHost
	req.Header.Set("Authorization", "Bearer "+jwt)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("stream: %s", res.Status)
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, res.Body); close(done) }()
	select {
	case <-done:
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("the stream ended after %v, the token after 2 s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its token by 8 s")
	}
}

// TestOIDCChangeByPerson: a zone change made with a session is by the
// person's name, as the zone history records it.
func TestOIDCChangeByPerson(t *testing.T) {
	e := newOIDCEnv(t, nil)
	e.op.SetClaims(map[string]any{"preferred_username": "adam", "groups": []string{"nofly-admins"}})
	cb, _ := e.signIn(t)
	sc := cookieOf(cb, sessionCookie)
	_, me := e.me(t, []*http.Cookie{sc})
	r := httptest.NewRequest("PUT", "/v1/zones/Z9", strings.NewReader(feature("Z9", 7.2)))
	r.Host, r.RemoteAddr = testHost, "127.0.0.1:40000"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(CSRFHeader, me["csrf_token"].(string))
	r.AddCookie(sc)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	if rec.Code/100 != 2 {
		t.Fatalf("PUT /v1/zones/Z9 with the session: %d %s", rec.Code, rec.Body)
	}
	hist := e.req(t, "GET", "/v1/zones/history", []*http.Cookie{sc})
	if hist.Code != 200 || !strings.Contains(hist.Body.String(), `"by":"adam"`) {
		t.Fatalf("history: %d %.400s", hist.Code, hist.Body)
	}
}
