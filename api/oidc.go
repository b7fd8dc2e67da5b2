package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"

	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// Single sign-on (issue 33): people sign in to the dashboard through the
// organisation's OpenID Connect provider (authorization code flow with
// PKCE), and machines may send the provider's JWT access tokens as bearer
// tokens beside the token file's. Either way the caller's role comes from
// one claim (--oidc-role-claim) mapped by --oidc-roles, the highest mapped
// value winning, and its name (an ack's "by") from --oidc-name-claim.
//
// The session is server-side, in Redis under the alerter's prefix (several
// alerters share it); the browser holds only a random id in an HttpOnly
// cookie, and Redis only that id's SHA-256. A session ends when the ID
// token does (or the access token, if sooner). Every write made with the
// cookie carries X-CSRF-Token, the session's token that GET /v1/me gives.

// OIDCConfig configures single sign-on (NewOIDC).
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; discovery reads
	// <Issuer>/.well-known/openid-configuration.
	Issuer string
	// ClientID and ClientSecret are nofly's client at the provider (the
	// secret may be empty: a public client, PKCE only).
	ClientID     string
	ClientSecret string
	// RoleClaim names the claim whose values Roles maps (a string or a
	// list of strings; a dotted name reads into objects, e.g.
	// realm_access.roles).
	RoleClaim string
	Roles     map[string]Role
	// NameClaim is the caller's name; preferred_username, then email, then
	// sub when it is missing.
	NameClaim string
	// Audience is what an access token's aud must hold (the client id when
	// empty).
	Audience string
	// RedirectURL is <public URL>/auth/callback; empty: the request's own
	// origin, allowed only when that is a loopback one.
	RedirectURL string
	// HTTPClient reaches the provider (http.DefaultClient when nil).
	HTTPClient *http.Client
	// DiscoveryTimeout bounds the retries of discovery at start (30 s
	// when 0).
	DiscoveryTimeout time.Duration
	// Logger logs discovery retries (never a token).
	Logger *slog.Logger
	// Now is the clock of the token checks (time.Now when nil).
	Now func() time.Time
}

// OIDC is a discovered provider: the verifiers of its ID and access
// tokens and its endpoints.
type OIDC struct {
	cfg        OIDCConfig
	oauth      oauth2.Config
	idv        *oidc.IDTokenVerifier
	atv        *oidc.IDTokenVerifier
	endSession string
	host       string
}

// oidcAlgs are the signatures accepted: RS256 and ES256, never none or HMAC.
var oidcAlgs = []string{oidc.RS256, oidc.ES256}

// ParseOIDCRoles reads --oidc-roles: claim value=role, comma separated
// (nofly-admins=admin,nofly-operators=operator).
func ParseOIDCRoles(s string) (map[string]Role, error) {
	m := map[string]Role{}
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, r, ok := strings.Cut(p, "=")
		v, r = strings.TrimSpace(v), strings.TrimSpace(r)
		if !ok || v == "" || r == "" {
			return nil, fmt.Errorf("%q is not VALUE=ROLE", p)
		}
		role, err := ParseRole(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v, err)
		}
		if _, dup := m[v]; dup {
			return nil, fmt.Errorf("value %q is mapped twice", v)
		}
		m[v] = role
	}
	if len(m) == 0 {
		return nil, errors.New("no VALUE=ROLE pair: nobody could sign in")
	}
	return m, nil
}

// NewOIDC discovers the provider, retrying with backoff until
// DiscoveryTimeout, so an alerter started beside its provider waits for
// it; the error then names the issuer.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || len(cfg.Roles) == 0 {
		return nil, errors.New("oidc: Issuer, ClientID and Roles are required")
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "groups"
	}
	if cfg.NameClaim == "" {
		cfg.NameClaim = "preferred_username"
	}
	if cfg.Audience == "" {
		cfg.Audience = cfg.ClientID
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.DiscoveryTimeout <= 0 {
		cfg.DiscoveryTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The provider keeps this context for its key set's fetches: it must
	// outlive start-up's deadline.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), cfg.HTTPClient)
	deadline := time.Now().Add(cfg.DiscoveryTimeout)
	var p *oidc.Provider
	for backoff := 250 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
		var err error
		dctx, cancel := context.WithTimeout(pctx, 10*time.Second)
		p, err = oidc.NewProvider(dctx, cfg.Issuer)
		cancel()
		if err == nil {
			break
		}
		if time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("oidc: discovery of issuer %s (%s/.well-known/openid-configuration) failed for %v: %w",
				cfg.Issuer, strings.TrimSuffix(cfg.Issuer, "/"), cfg.DiscoveryTimeout, err)
		}
		cfg.Logger.Warn("oidc: issuer not reachable yet; retrying", "issuer", cfg.Issuer, "retry_in", backoff, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("oidc: discovery of issuer %s: %w", cfg.Issuer, ctx.Err())
		case <-time.After(backoff):
		}
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	_ = p.Claims(&meta) // optional: no RP-initiated logout without it
	u, _ := url.Parse(cfg.Issuer)
	o := &OIDC{
		cfg: cfg,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: p.Endpoint(),
			Scopes: []string{oidc.ScopeOpenID, "profile", "email", "groups"}},
		idv:        p.Verifier(&oidc.Config{ClientID: cfg.ClientID, SupportedSigningAlgs: oidcAlgs, Now: cfg.Now}),
		atv:        p.Verifier(&oidc.Config{ClientID: cfg.Audience, SupportedSigningAlgs: oidcAlgs, Now: cfg.Now}),
		endSession: meta.EndSession,
		host:       u.Hostname(),
	}
	return o, nil
}

// Issuer is the configured issuer URL.
func (o *OIDC) Issuer() string { return o.cfg.Issuer }

// errNoRole: the person's role claim maps to no role.
var errNoRole = errors.New("no role")

// maxNameLen bounds a caller's name as it reaches logs, acks and zone
// versions.
const maxNameLen = 128

// callerOf maps a verified token's claims to a caller: the name from the
// name claim (then preferred_username, email, sub), the highest role any
// of the role claim's values maps to. No mapped value is errNoRole.
func (o *OIDC) callerOf(claims map[string]any) (Caller, error) {
	name := ""
	for _, k := range []string{o.cfg.NameClaim, "preferred_username", "email", "sub"} {
		if s, ok := claims[k].(string); ok && strings.TrimSpace(s) != "" {
			name = cleanName(s)
			break
		}
	}
	if name == "" {
		return Caller{}, errors.New("the token names nobody (no " + o.cfg.NameClaim + ", preferred_username, email or sub)")
	}
	best := Role(0)
	for _, v := range claimValues(claims, o.cfg.RoleClaim) {
		if r, ok := o.cfg.Roles[v]; ok && r > best {
			best = r
		}
	}
	if best == 0 {
		return Caller{Name: name}, errNoRole
	}
	return Caller{Name: name, Role: best, Via: "oidc"}, nil
}

// claimValues is the strings of claim name (a dotted name reads into
// objects): a string is one value, a list its strings.
func claimValues(claims map[string]any, name string) []string {
	var v any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// cleanName drops control characters and bounds the length, so a name
// cannot forge log lines or grow a zone version.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if r := []rune(s); len(r) > maxNameLen {
		s = string(r[:maxNameLen])
	}
	return s
}

// looksLikeJWT reports whether a bearer token is a compact JWS (three
// base64url parts, a JSON header): those go to the provider's verifier,
// everything else to the token file. nofly's own tokens have no dot.
func looksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && strings.HasPrefix(tok, "eyJ")
}

// verifyAccessToken checks a JWT access token (issuer, audience, expiry,
// signature by the provider's keys, RS256/ES256) and maps its caller.
func (o *OIDC) verifyAccessToken(ctx context.Context, tok string) (Caller, time.Time, error) {
	t, err := o.atv.Verify(ctx, tok)
	if err != nil {
		return Caller{}, time.Time{}, err
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return Caller{}, time.Time{}, err
	}
	c, err := o.callerOf(claims)
	return c, t.Expiry, err
}

// Cookie names. The login cookie holds only the state value (the rest is
// in Redis); the session cookie only the session id.
const (
	loginCookie   = "nofly_login"
	sessionCookie = "nofly_session"
	// CSRFHeader carries the session's CSRF token on every write made with
	// the session cookie.
	CSRFHeader = "X-CSRF-Token"
	// loginTTL bounds the time from /auth/login to /auth/callback.
	loginTTL = 10 * time.Minute
	// maxCSRFHeader bounds X-CSRF-Token (ours are 43 characters).
	maxCSRFHeader = 100
	// maxAuthHeader bounds the Authorization header (a JWT with many
	// groups is a few KB).
	maxAuthHeader = 8 << 10
)

// authKeysOf are the sign-in keys under prefix (docs/redis-layout.md,
// "Sign-in sessions").
func authKeysOf(prefix string) redislayout.SignIn { return redislayout.SignInOf(prefix) }

// session is a signed-in person, as stored (JSON) under authKeys.Session.
type session struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	CSRF    string `json:"csrf"`
	Expires int64  `json:"exp"` // unix ms: the token's expiry
	Subject string `json:"sub"`
}

// pendingLogin is a sign-in between /auth/login and /auth/callback.
type pendingLogin struct {
	Verifier string `json:"verifier"`
	Nonce    string `json:"nonce"`
	Redirect string `json:"redirect_uri"`
}

func random32() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// isLoopbackHost reports whether host (a Host header, port optional) is
// localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redirectURL is where the provider sends the browser back: the
// configured one, or this request's origin when both it and the client
// are loopback ones ("" otherwise).
func (o *OIDC) redirectURL(r *http.Request) string {
	if o.cfg.RedirectURL != "" {
		return o.cfg.RedirectURL
	}
	if !isLoopbackHost(r.Host) || !isLoopbackHost(clientAddr(r)) {
		return ""
	}
	return "http://" + r.Host + "/auth/callback"
}

// secure reports whether cookies get Secure: the public URL is https, or
// the client is not on loopback (a browser then must reach us over TLS).
func (o *OIDC) secure(r *http.Request) bool {
	return strings.HasPrefix(o.cfg.RedirectURL, "https:") || !isLoopbackHost(clientAddr(r))
}

// mountAuth serves /auth/config, /auth/login, /auth/callback and
// /auth/logout; without OIDC the last three answer 404 oidc_off.
func (s *Server) mountAuth(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(s.limitAddr())
		r.Get("/auth/config", s.authConfig)
		r.Get("/auth/login", s.oidcOnly(s.authLogin))
		r.Get("/auth/callback", s.oidcOnly(s.authCallback))
		r.Post("/auth/logout", s.oidcOnly(s.authLogout))
	})
}

func (s *Server) oidcOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if s.o.OIDC == nil {
			writeError(w, http.StatusNotFound, "oidc_off", "single sign-on is not configured on this alerter (--oidc-issuer)", nil)
			return
		}
		h(w, r)
	}
}

// authConfig is GET /auth/config: whether the dashboard may offer
// "Sign in with <provider>", open like the page itself.
func (s *Server) authConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.o.OIDC == nil {
		writeJSON(w, http.StatusOK, map[string]any{"oidc": false, "tokens": s.o.Tokens != nil})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"oidc": true, "tokens": s.o.Tokens != nil,
		"issuer": s.o.OIDC.cfg.Issuer, "provider": s.o.OIDC.host, "login": "auth/login"})
}

// authLogin is GET /auth/login: a fresh state, nonce and PKCE verifier
// kept in Redis for loginTTL under the state's hash, the state also in a
// cookie (so the callback is this browser's), and a redirect to the
// provider.
func (s *Server) authLogin(w http.ResponseWriter, r *http.Request) {
	o := s.o.OIDC
	redirect := o.redirectURL(r)
	if redirect == "" {
		writeError(w, http.StatusForbidden, "needs_public_url",
			"sign-in from "+httpguard.Clip(r.Host, 100)+" needs the alerter's --public-url (the provider's redirect URL is <public-url>/auth/callback)", nil)
		return
	}
	state, nonce, verifier := random32(), random32(), oauth2.GenerateVerifier()
	b, _ := json.Marshal(pendingLogin{Verifier: verifier, Nonce: nonce, Redirect: redirect})
	if err := s.o.Redis.Set(r.Context(), authKeysOf(s.o.Prefix).Login(hashID(state)), b, loginTTL).Err(); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "could not start the sign-in: Redis: "+err.Error(), nil)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: state, Path: "/auth/", MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, Secure: o.secure(r), SameSite: http.SameSiteLaxMode})
	cfg := o.oauth
	cfg.RedirectURL = redirect
	http.Redirect(w, r, cfg.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

// authCallback is GET /auth/callback: the state must be the browser's
// cookie's and pending (used once), the code is exchanged with the PKCE
// verifier, the ID token verified (issuer, audience, expiry, signature,
// nonce), the role mapped; then a session until the token's expiry.
func (s *Server) authCallback(w http.ResponseWriter, r *http.Request) {
	o, ctx, q := s.o.OIDC, r.Context(), r.URL.Query()
	if e := q.Get("error"); e != "" {
		writeError(w, http.StatusUnauthorized, "sign_in_refused", "the provider refused the sign-in: "+httpguard.Clip(e, 100)+
			" "+httpguard.Clip(q.Get("error_description"), 200), nil)
		return
	}
	state, code := q.Get("state"), q.Get("code")
	if state == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "the callback needs the state the sign-in sent", map[string]any{"field": "state"})
		return
	}
	// A state that is not this browser's pending sign-in is refused (403):
	// a callback forged into another's browser must not sign it in.
	ck, err := r.Cookie(loginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		writeError(w, http.StatusForbidden, "bad_state", "the state is not this browser's sign-in (no or another "+loginCookie+" cookie): start again at /auth/login", map[string]any{"field": "state"})
		return
	}
	if code == "" {
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the provider sent no code", map[string]any{"field": "code"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/auth/", MaxAge: -1, HttpOnly: true, Secure: o.secure(r), SameSite: http.SameSiteLaxMode})
	raw, err := s.o.Redis.GetDel(ctx, authKeysOf(s.o.Prefix).Login(hashID(state))).Bytes()
	if errors.Is(err, redis.Nil) {
		writeError(w, http.StatusForbidden, "bad_state", "the sign-in expired or was already used: start again at /auth/login", map[string]any{"field": "state"})
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "sign-in: Redis: "+err.Error(), nil)
		return
	}
	var pl pendingLogin
	if err := json.Unmarshal(raw, &pl); err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "sign-in: pending login: "+err.Error(), nil)
		return
	}
	cfg := o.oauth
	cfg.RedirectURL = pl.Redirect
	tok, err := cfg.Exchange(oidc.ClientContext(ctx, o.cfg.HTTPClient), code, oauth2.VerifierOption(pl.Verifier))
	if err != nil {
		s.log.Warn("oidc: code exchange failed", "issuer", o.cfg.Issuer, "error", exchangeError(err))
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the provider did not exchange the code: "+exchangeError(err), nil)
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the provider answered no id_token", nil)
		return
	}
	idt, err := o.idv.Verify(ctx, rawID)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the ID token was refused: "+err.Error(), nil)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(pl.Nonce)) != 1 {
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the ID token's nonce is not this sign-in's", nil)
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the ID token's claims: "+err.Error(), nil)
		return
	}
	c, err := o.callerOf(claims)
	if err != nil {
		s.log.Warn("oidc: sign-in refused", "name", c.Name, "reason", err.Error())
		c.Via = "oidc"
		s.auditAuthOutcome(r, "sign_in", c, "denied", http.StatusForbidden)
		writeError(w, http.StatusForbidden, "no_role", noRoleMsg(o, c.Name, err), map[string]any{"claim": o.cfg.RoleClaim})
		return
	}
	exp := idt.Expiry
	if !tok.Expiry.IsZero() && tok.Expiry.Before(exp) {
		exp = tok.Expiry
	}
	now := s.o.Now()
	if !exp.After(now) {
		writeError(w, http.StatusUnauthorized, "sign_in_failed", "the provider's token has already expired", nil)
		return
	}
	id := random32()
	b, _ := json.Marshal(session{Name: c.Name, Role: c.Role.String(), CSRF: random32(), Expires: exp.UnixMilli(), Subject: idt.Subject})
	if err := s.o.Redis.Set(ctx, authKeysOf(s.o.Prefix).Session(hashID(id)), b, exp.Sub(now)).Err(); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "could not keep the session: Redis: "+err.Error(), nil)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", Expires: exp, MaxAge: int(exp.Sub(now) / time.Second),
		HttpOnly: true, Secure: o.secure(r), SameSite: http.SameSiteLaxMode})
	s.log.Info("oidc: signed in", "name", c.Name, "role", c.Role.String(), "remote", clientAddr(r), "until", exp.UTC().Format(time.RFC3339))
	s.auditAuth(r, "sign_in", c)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// auditAuth hands a sign-in or sign-out to Options.AuditAuth (the audit
// trail), when set.
func (s *Server) auditAuth(r *http.Request, action string, c Caller) {
	s.auditAuthOutcome(r, action, c, "", 0)
}

// auditAuthOutcome is auditAuth with an outcome other than ok: a sign-in
// refused for want of a role is an entry too (denied, 403), as a refused
// request is.
func (s *Server) auditAuthOutcome(r *http.Request, action string, c Caller, outcome string, status int) {
	if s.o.AuditAuth != nil {
		role := ""
		if outcome == "" {
			role = c.Role.String()
		}
		// The client as the audit trail names it everywhere: the forwarded
		// one from a --trusted-proxies peer, else the peer.
		s.o.AuditAuth(r.Context(), AuthEvent{Action: action, Name: c.Name, Role: role, Via: c.Via, Remote: s.auditEntry(r, action, "", 0).Client,
			Outcome: outcome, Status: status})
	}
}

// AuthEvent is a sign-in or sign-out, for the audit trail.
type AuthEvent struct {
	Action string // sign_in, sign_out
	Name   string
	Role   string
	Via    string // oidc
	Remote string
	// Outcome is "" (ok) or "denied" (a sign-in refused: no role mapped),
	// with the answer's Status.
	Outcome string
	Status  int
}

func noRoleMsg(o *OIDC, name string, err error) string {
	if !errors.Is(err, errNoRole) {
		return err.Error()
	}
	vals := make([]string, 0, len(o.cfg.Roles))
	for v := range o.cfg.Roles {
		vals = append(vals, v)
	}
	sort.Strings(vals)
	return fmt.Sprintf("%s has no role here: the token's %q claim holds none of %s (--oidc-roles); ask an administrator for one of those groups",
		name, o.cfg.RoleClaim, strings.Join(vals, ", "))
}

// exchangeError is the token endpoint's error without its body beyond
// the error code (a body could echo what was sent).
func exchangeError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "HTTP " + re.Response.Status
		if re.ErrorCode != "" {
			msg += ": " + httpguard.Clip(re.ErrorCode, 60)
		}
		return msg
	}
	return httpguard.Clip(err.Error(), 200)
}

// authLogout is POST /auth/logout: the session is deleted and its cookie
// cleared; the answer's logout_url, when the provider has an
// end_session_endpoint, ends the provider's session too (RP-initiated
// logout). With a live session it needs X-CSRF-Token.
func (s *Server) authLogout(w http.ResponseWriter, r *http.Request) {
	o := s.o.OIDC
	if len(r.Header.Get(CSRFHeader)) > maxCSRFHeader {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s is longer than %d characters", CSRFHeader, maxCSRFHeader), map[string]any{"field": CSRFHeader})
		return
	}
	if msg := bodyType(r, []string{"application/json"}); msg != "" { // as every write (params.go)
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", msg,
			map[string]any{"field": "Content-Type", "accepted": []string{"application/json"}})
		return
	}
	var out = map[string]any{"logout_url": nil}
	if o.endSession != "" {
		u, err := url.Parse(o.endSession)
		if err == nil {
			q := u.Query()
			q.Set("client_id", o.cfg.ClientID)
			if red := o.redirectURL(r); red != "" {
				q.Set("post_logout_redirect_uri", strings.TrimSuffix(red, "auth/callback"))
			}
			u.RawQuery = q.Encode()
			out["logout_url"] = u.String()
		}
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		writeJSON(w, http.StatusOK, out)
		return
	}
	key := authKeysOf(s.o.Prefix).Session(hashID(ck.Value))
	sess, err := s.loadSession(r.Context(), ck.Value)
	if err != nil && !errors.Is(err, redis.Nil) {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "sign-out: Redis: "+err.Error(), nil)
		return
	}
	if sess != nil {
		if msg := csrfProblem(r, sess.CSRF); msg != "" {
			writeError(w, http.StatusForbidden, "csrf", msg, map[string]any{"field": CSRFHeader})
			return
		}
		if err := s.o.Redis.Del(r.Context(), key).Err(); err != nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "sign-out: Redis: "+err.Error(), nil)
			return
		}
		role, _ := ParseRole(sess.Role)
		s.log.Info("oidc: signed out", "name", sess.Name, "remote", clientAddr(r))
		s.auditAuth(r, "sign_out", Caller{Name: sess.Name, Role: role, Via: "oidc"})
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: o.secure(r), SameSite: http.SameSiteLaxMode})
	writeJSON(w, http.StatusOK, out)
}

// loadSession reads the session of cookie value id (redis.Nil: none, or
// expired).
func (s *Server) loadSession(ctx context.Context, id string) (*session, error) {
	if len(id) > 100 {
		return nil, redis.Nil
	}
	b, err := s.o.Redis.Get(ctx, authKeysOf(s.o.Prefix).Session(hashID(id))).Bytes()
	if err != nil {
		return nil, err
	}
	var sess session
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if s.o.Now().UnixMilli() >= sess.Expires {
		return nil, redis.Nil
	}
	return &sess, nil
}

// csrfProblem says why a write's X-CSRF-Token is not the session's, or "".
func csrfProblem(r *http.Request, want string) string {
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		return "a write made with the session cookie needs the " + CSRFHeader + " header (the csrf_token of GET /v1/me)"
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return "the " + CSRFHeader + " header is not this session's csrf_token (GET /v1/me gives it)"
	}
	return ""
}

// isWrite reports whether method changes something (CSRF applies).
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// oidcCaller authenticates a request when single sign-on is on: a JWT
// bearer token against the provider, a session cookie against Redis (and
// its CSRF token on a write). done: an answer was written. ok: c is the
// caller until then (the token's or the session's expiry: a stream opened
// with it ends there). Neither: the request goes on to the token file.
func (s *Server) oidcCaller(w http.ResponseWriter, r *http.Request) (c Caller, until time.Time, ok, done bool) {
	o := s.o.OIDC
	if h := r.Header.Get("Authorization"); h != "" {
		if len(h) > maxAuthHeader {
			unauthorized(w, "invalid_token", fmt.Sprintf("the Authorization header is longer than %d bytes", maxAuthHeader))
			return c, until, false, true
		}
		scheme, tok, _ := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || !looksLikeJWT(tok) {
			if s.o.Tokens == nil {
				unauthorized(w, "invalid_token", "unknown token (this alerter takes the provider's JWT access tokens; it has no token file)")
				return c, until, false, true
			}
			return c, until, false, false
		}
		c, until, err := o.verifyAccessToken(r.Context(), tok)
		if errors.Is(err, errNoRole) {
			writeError(w, http.StatusForbidden, "no_role", noRoleMsg(o, c.Name, err), map[string]any{"claim": o.cfg.RoleClaim})
			return c, until, false, true
		}
		if err != nil {
			unauthorized(w, "invalid_token", "the JWT was refused: "+httpguard.Clip(err.Error(), 200))
			return c, until, false, true
		}
		return c, until, true, false
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		if s.o.Tokens != nil {
			return c, until, false, false
		}
		s.signInNeeded(w, "this route needs a sign-in (/auth/login) or Authorization: Bearer <the provider's access token>")
		return c, until, false, true
	}
	sess, err := s.loadSession(r.Context(), ck.Value)
	if errors.Is(err, redis.Nil) {
		s.signInNeeded(w, "the session has ended (signed out, or the provider's token expired): sign in again")
		return c, until, false, true
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "sessions: Redis: "+err.Error(), nil)
		return c, until, false, true
	}
	if isWrite(r.Method) {
		if msg := csrfProblem(r, sess.CSRF); msg != "" {
			writeError(w, http.StatusForbidden, "csrf", msg, map[string]any{"field": CSRFHeader})
			return c, until, false, true
		}
	}
	role, err := ParseRole(sess.Role)
	if err != nil {
		s.signInNeeded(w, "the session's role is unknown: sign in again")
		return c, until, false, true
	}
	return Caller{Name: sess.Name, Role: role, Via: "oidc", csrf: sess.CSRF}, time.UnixMilli(sess.Expires), true, false
}

// signInNeeded answers 401 pointing at the sign-in.
func (s *Server) signInNeeded(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", realm)
	writeError(w, http.StatusUnauthorized, "sign_in", msg, map[string]any{"login": "/auth/login"})
}
