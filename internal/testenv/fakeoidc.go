package testenv

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// FakeOIDC is an in-process OpenID provider for single sign-on tests:
// discovery, JWKS, an authorize endpoint that signs in at once whoever
// Claims says (no login page: the real one is the Dex test's), a token
// endpoint that checks the PKCE verifier against the S256 challenge and
// the client secret when one is set, and an end_session endpoint that
// sends the browser back.
type FakeOIDC struct {
	URL string
	Key *rsa.PrivateKey

	srv *httptest.Server
	mu  sync.Mutex
	// Claims are added to the next tokens (name, groups); TTL is their
	// lifetime; Secret, when set, must be the client's.
	claims map[string]any
	ttl    time.Duration
	secret string
	codes  map[string]fakeCode
	// What the last requests carried.
	last          FakeOIDCSeen
	nonceOverride string
}

// FakeOIDCSeen is what the fake provider's endpoints last received.
type FakeOIDCSeen struct {
	Challenge, ChallengeMethod, Verifier, Secret string
	LoggedOut                                    int
}

type fakeCode struct{ challenge, nonce, clientID string }

// StartFakeOIDC starts a fake provider on loopback, closed when t ends.
func StartFakeOIDC(t testing.TB) *FakeOIDC {
	t.Helper()
	op, err := NewFakeOIDC()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	return op
}

// Close stops the provider.
func (op *FakeOIDC) Close() { op.srv.Close() }

// NewFakeOIDC starts a fake provider on loopback (Close stops it); the
// schemathesis run's scripts/fakeoidc uses it outside a test.
func NewFakeOIDC() (*FakeOIDC, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	op := &FakeOIDC{Key: key, codes: map[string]fakeCode{}, ttl: time.Hour,
		claims: map[string]any{"preferred_username": "alice", "groups": []string{"nofly-operators"}}}
	mux := http.NewServeMux()
	op.srv = httptest.NewServer(mux)
	op.URL = op.srv.URL
	write := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss := op.URL
		write(w, 200, map[string]any{"issuer": iss, "authorization_endpoint": iss + "/authorize", "token_endpoint": iss + "/token",
			"jwks_uri": iss + "/keys", "end_session_endpoint": iss + "/logout", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		write(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var b [16]byte
		_, _ = rand.Read(b[:])
		code := base64.RawURLEncoding.EncodeToString(b[:])
		op.mu.Lock()
		op.codes[code] = fakeCode{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), clientID: q.Get("client_id")}
		op.last.Challenge, op.last.ChallengeMethod = q.Get("code_challenge"), q.Get("code_challenge_method")
		op.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		op.mu.Lock()
		defer op.mu.Unlock()
		c, ok := op.codes[r.PostForm.Get("code")]
		delete(op.codes, r.PostForm.Get("code"))
		op.last.Verifier = r.PostForm.Get("code_verifier")
		_, op.last.Secret, _ = r.BasicAuth()
		if op.last.Secret == "" {
			op.last.Secret = r.PostForm.Get("client_secret")
		}
		sum := sha256.Sum256([]byte(op.last.Verifier))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || (op.secret != "" && op.last.Secret != op.secret) {
			write(w, 400, map[string]any{"error": "invalid_grant"})
			return
		}
		claims := op.claimsFor(c.clientID)
		claims["nonce"] = c.nonce
		if op.nonceOverride != "" {
			claims["nonce"] = op.nonceOverride
		}
		at, err1 := signJWT(op.Key, jose.RS256, op.claimsFor(c.clientID))
		id, err2 := signJWT(op.Key, jose.RS256, claims)
		if err1 != nil || err2 != nil {
			write(w, 500, map[string]any{"error": "server_error"})
			return
		}
		write(w, 200, map[string]any{"access_token": at, "token_type": "Bearer",
			"expires_in": int(op.ttl / time.Second), "id_token": id})
	})
	mux.HandleFunc("/logout", func(w http.ResponseWriter, r *http.Request) {
		op.mu.Lock()
		op.last.LoggedOut++
		op.mu.Unlock()
		if u := r.URL.Query().Get("post_logout_redirect_uri"); u != "" {
			http.Redirect(w, r, u, http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("signed out"))
	})
	return op, nil
}

// SetClaims sets the next tokens' own claims (the standard ones are added).
func (op *FakeOIDC) SetClaims(c map[string]any) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.claims = c
}

// SetTTL sets the next tokens' lifetime.
func (op *FakeOIDC) SetTTL(d time.Duration) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.ttl = d
}

// SetSecret makes the token endpoint require the client secret s.
func (op *FakeOIDC) SetSecret(s string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.secret = s
}

// SetNonce makes the next ID tokens carry nonce instead of the request's
// ("" restores it).
func (op *FakeOIDC) SetNonce(nonce string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.nonceOverride = nonce
}

// Seen is what the endpoints last received.
func (op *FakeOIDC) Seen() FakeOIDCSeen {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.last
}

// Claims are a token's claims for audience aud: iss, aud, sub, iat, exp
// and the set claims.
func (op *FakeOIDC) Claims(aud string) map[string]any {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.claimsFor(aud)
}

func (op *FakeOIDC) claimsFor(aud string) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": op.URL, "aud": aud, "sub": "u-1", "iat": now.Unix(), "exp": now.Add(op.ttl).Unix()}
	for k, v := range op.claims {
		c[k] = v
	}
	return c
}

// Sign makes a compact RS256 JWS of claims with the provider's key.
func (op *FakeOIDC) Sign(t testing.TB, claims map[string]any) string {
	return SignJWT(t, op.Key, jose.RS256, claims)
}

// SignJWT makes a compact JWS of claims signed with key by alg, kid k1.
func SignJWT(t testing.TB, key any, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	out, err := signJWT(key, alg, claims)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func signJWT(key any, alg jose.SignatureAlgorithm, claims map[string]any) (string, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
