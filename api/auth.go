package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/nofly-dev/nofly/ingest/feedkey"
)

// The token file, one token per line, fields separated by blanks, '#'
// starts a comment (the style of ingest/feedkey's key file):
//
//	# name     role       token hash
//	ops-desk   operator   sha256:<64 hex>
//	grafana    viewer     sha256:<64 hex>
//	zone-ci    admin      sha256:<64 hex>
//
//   - name: 1-64 of [A-Za-z0-9._-], unique in the file; logs, metrics and
//     an ack's "by" show it, never the token.
//   - role: viewer (read), operator (and acknowledge), admin (and change
//     zones).
//   - sha256:<hex>: the SHA-256 of the token as sent in "Authorization:
//     Bearer <token>"; unique in the file. The file never holds a token.
//
// Every error names the file and line. "alerter api-token --name N --role
// R" makes a token and its line.

// String is the role's name in the token file.
func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads viewer, operator or admin.
func ParseRole(s string) (Role, error) {
	switch s {
	case "viewer":
		return RoleViewer, nil
	case "operator":
		return RoleOperator, nil
	case "admin":
		return RoleAdmin, nil
	}
	return 0, fmt.Errorf("role %q is not viewer, operator or admin", elide(s))
}

// Token is one line of the token file.
type Token struct {
	Name string
	Role Role
	// Hash is the SHA-256 of the token.
	Hash [sha256.Size]byte
}

// Line is the token's line in the token file.
func (t Token) Line() string {
	return t.Name + " " + t.Role.String() + " sha256:" + hex.EncodeToString(t.Hash[:])
}

// Tokens are the tokens of a token file.
type Tokens struct {
	// Path is the file they were read from, for messages.
	Path   string
	Tokens []Token
}

// Lookup returns the token whose hash is token's, or nil. It compares the
// hash with every token's in constant time, all of them whatever matched
// (as feedkey.Set.Lookup), so the time taken tells nothing of which token,
// if any, came close.
func (ts *Tokens) Lookup(token string) *Token {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts.Tokens {
		eq := subtle.ConstantTimeCompare(h[:], ts.Tokens[i].Hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &ts.Tokens[found]
}

// TokenPrefix starts every token NewToken makes, so a secret scanner (or
// the reader of a leaked config) can tell an API token from a feed key.
const TokenPrefix = "nofly_api_"

// NewToken returns a fresh random token: TokenPrefix and 32 random bytes in
// unpadded base64url (256 bits).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("api: random token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashToken is the SHA-256 of token, as the token file stores it.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// CheckTokenName says why name cannot be a token's name, or nil.
func CheckTokenName(name string) error {
	if err := feedkey.CheckName(name); err != nil {
		return fmt.Errorf("token name %q must be 1-64 characters of [A-Za-z0-9._-]", elide(name))
	}
	return nil
}

// ErrTokenFile is wrapped by every error of a token file's content.
var ErrTokenFile = errors.New("api token file")

// LoadTokens reads and parses the token file at path.
func LoadTokens(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	return ParseTokens(path, bytes.NewReader(b))
}

// ParseTokens reads a token file from r; path names it in errors. A file
// without a token is an error: it would refuse every request while
// looking configured.
func ParseTokens(path string, r io.Reader) (*Tokens, error) {
	ts := &Tokens{Path: path}
	names := map[string]int{}
	hashes := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		t, err := parseTokenLine(fields)
		if err != nil {
			return nil, fmt.Errorf("%w %s:%d: %s", ErrTokenFile, path, n, err)
		}
		if prev, dup := names[t.Name]; dup {
			return nil, fmt.Errorf("%w %s:%d: token %q already defined on line %d", ErrTokenFile, path, n, t.Name, prev)
		}
		if prev, dup := hashes[t.Hash]; dup {
			return nil, fmt.Errorf("%w %s:%d: token %q has the same hash as line %d; every name needs its own token", ErrTokenFile, path, n, t.Name, prev)
		}
		names[t.Name], hashes[t.Hash] = n, n
		ts.Tokens = append(ts.Tokens, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api tokens %s: %w", path, err)
	}
	if len(ts.Tokens) == 0 {
		return nil, fmt.Errorf("%w %s: no token defined (one per line: NAME viewer|operator|admin sha256:<hex>; alerter api-token makes one)", ErrTokenFile, path)
	}
	return ts, nil
}

func parseTokenLine(fields []string) (Token, error) {
	var t Token
	if err := CheckTokenName(fields[0]); err != nil {
		return t, err
	}
	t.Name = fields[0]
	if len(fields) != 3 {
		return t, fmt.Errorf("token %q: want 3 fields (NAME ROLE sha256:<hex>), got %d", t.Name, len(fields))
	}
	role, err := ParseRole(fields[1])
	if err != nil {
		return t, fmt.Errorf("token %q: %s", t.Name, err)
	}
	t.Role = role
	hx, ok := strings.CutPrefix(fields[2], "sha256:")
	if !ok {
		return t, fmt.Errorf("token %q: third field %q is not sha256:<64 hex digits> (the file holds the token's hash, never the token)", t.Name, elide(fields[2]))
	}
	b, err := hex.DecodeString(hx)
	if err != nil || len(b) != sha256.Size {
		return t, fmt.Errorf("token %q: sha256: needs 64 hex digits, got %d characters", t.Name, len(hx))
	}
	copy(t.Hash[:], b)
	return t, nil
}

// elide shortens what a message quotes, in case a token was pasted where
// its hash belongs.
func elide(s string) string {
	if len(s) > 12 {
		return s[:6] + "…"
	}
	return s
}

// anonymous is the caller of every request when there is no token file.
var anonymous = Caller{Name: "anonymous", Role: RoleAdmin}

// realm is the WWW-Authenticate realm of the 401s.
const realm = `Bearer realm="nofly-api"`

// unauthorized writes a 401 with WWW-Authenticate (RFC 6750).
func unauthorized(w http.ResponseWriter, code, msg string) {
	h := realm
	if code == "invalid_token" {
		h += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", h)
	writeError(w, http.StatusUnauthorized, code, msg, nil)
}

// authenticate sets the request's caller from its bearer token: 401 when
// the token is missing or unknown. Without a token file every request is
// anonymous admin.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := anonymous
		if s.o.OIDC != nil { // a JWT or a session cookie; else the token file
			oc, until, ok, done := s.oidcCaller(w, r)
			if done {
				return
			}
			if ok { // a stream opened with it ends when the token or session does
				ctx, cancel := context.WithDeadline(r.Context(), until)
				defer cancel()
				s.serveAs(w, r.WithContext(ctx), next, oc)
				return
			}
		}
		if s.o.Tokens != nil {
			h := r.Header.Get("Authorization")
			if h == "" {
				unauthorized(w, "missing_token", "this route needs Authorization: Bearer <token>")
				return
			}
			scheme, tok, _ := strings.Cut(h, " ")
			tok = strings.TrimSpace(tok)
			if !strings.EqualFold(scheme, "Bearer") || tok == "" {
				unauthorized(w, "invalid_token", "Authorization must be Bearer <token>")
				return
			}
			t := s.o.TokenStore.Lookup(tok) // the set in use: reloads swap it
			if t == nil {
				unauthorized(w, "invalid_token", "unknown token")
				return
			}
			c = Caller{Name: t.Name, Role: t.Role, Via: "token"}
			r = r.WithContext(withToken(r.Context(), t)) // for untilRevoked
		}
		s.serveAs(w, r, next, c)
	})
}

// serveAs serves r as caller c.
func (s *Server) serveAs(w http.ResponseWriter, r *http.Request, next http.Handler, c Caller) {
	if ri := reqInfoFrom(r.Context()); ri != nil {
		ri.caller = c.Name
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
}

// methodRole is the least role a request's method needs, the floor under
// every /v1 route whatever its own require says: reading needs viewer,
// POST (acknowledging) operator, every other change (zones) admin.
func methodRole(method string) Role {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return RoleViewer
	case http.MethodPost:
		return RoleOperator
	}
	return RoleAdmin
}
