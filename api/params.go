package api

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/internal/httpguard"
)

// vet holds a routed /v1 request to its operation's description
// (described.go), one rule for every route:
//
//   - A path that is a concrete route's is answered as that route: 405
//     for a method it does not take, though a template (/v1/zones/{id})
//     would match it too.
//   - Path ids are percent-decoded whatever the client's escaping: chi
//     routes on the escaped path when it differs from Go's own escaping
//     (%c3%9c rather than %C3%9C, %2F), and its parameters are then the
//     escaped text; here they become the id, so "a/b" is /v1/zones/a%2Fb
//     and Ü is both %c3%9c and %C3%9C. Each is then held to its schema
//     (400 naming it): an alarm id is 32 lowercase hex digits, a drone id
//     1-64 of [A-Za-z0-9._:-], a zone id 1-256 characters without a
//     control character (geofence/doc.go).
//   - A query that does not parse, a described parameter given more than
//     once, or a string parameter outside its schema's length and pattern
//     is a 400 naming it (undescribed parameters are ignored, as before).
//   - A write's body is of a described media type (415 otherwise): with a
//     Content-Type it must be one of them (charset UTF-8 if any); without
//     one the body must be empty. A route that describes no body takes
//     application/json or nothing.
func (s *Server) vet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := chi.RouteContext(r.Context())
		var rr *routeRules
		if rc != nil {
			rr = s.rules[r.Method+" "+rc.RoutePattern()]
		}
		if rr == nil {
			next.ServeHTTP(w, r)
			return
		}
		// A concrete path wins over a template, as OpenAPI matches paths:
		// DELETE /v1/authorizations/history is the history's path, which
		// takes GET only (405), not a revocation of an id "history".
		if len(rc.URLParams.Keys) > 0 {
			if ms := allowed(r); len(ms) > 0 && !slices.Contains(ms, r.Method) {
				methodNotAllowed(w, r, ms)
				return
			}
		}
		for i, k := range rc.URLParams.Keys {
			v := rc.URLParams.Values[i]
			if r.URL.RawPath != "" {
				dv, err := url.PathUnescape(v)
				if err != nil {
					badParam(w, k, "not a percent-encoded path segment")
					return
				}
				v = dv
			}
			if p := rr.path[k]; p != nil {
				if msg := p.check(v); msg != "" {
					badParam(w, k, msg)
					return
				}
			}
			rc.URLParams.Values[i] = v
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "the query string does not parse: "+httpguard.Clip(err.Error(), 120),
				map[string]any{"field": "query"})
			return
		}
		names := make([]string, 0, len(q))
		for n := range q {
			names = append(names, n)
		}
		slices.Sort(names) // the same parameter is named whatever the order
		for _, n := range names {
			p := rr.query[n]
			if p == nil {
				continue
			}
			if len(q[n]) > 1 {
				badParam(w, n, "given more than once (every parameter takes one value)")
				return
			}
			if p.typ == "string" {
				if msg := p.check(q[n][0]); msg != "" {
					badParam(w, n, msg)
					return
				}
			}
		}
		if httpguard.IsWrite(r.Method) {
			types := rr.bodyTypes
			if len(types) == 0 {
				types = []string{"application/json"}
			}
			if msg := bodyType(r, types); msg != "" {
				writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", msg,
					map[string]any{"field": "Content-Type", "accepted": types})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// paramMessages say, for a client, what a parameter must be; a parameter
// without one gets its schema's pattern.
var paramMessages = map[string]string{
	"alarm_id":         "must be an alarm id: 32 lowercase hex digits",
	"authorization_id": "must be an authorization id: 16 lowercase hex digits",
	"drone_id":         "must be a drone id: 1-64 characters of [A-Za-z0-9._:-]",
	"drone":            "must be a drone id: 1-64 characters of [A-Za-z0-9._:-]",
	"id":               "must be a zone id: 1-256 characters, none a control character",
	"zone":             "must be a zone id: 1-256 characters, none a control character",
	"category":         "must be 1-256 characters, none a control character",
	"bbox":             bboxMessage,
	"after":            "not a cursor this API returned (base64url)",
	"cursor":           "not a cursor this API returned",
}

// check says why v does not fit the parameter's schema, or "".
func (p *paramRule) check(v string) string {
	n := utf8.RuneCountInString(v)
	ok := utf8.ValidString(v) && (p.minLen < 0 || n >= p.minLen) && (p.maxLen < 0 || n <= p.maxLen) &&
		(p.pattern == nil || p.pattern.MatchString(v))
	if ok {
		return ""
	}
	if m, found := paramMessages[p.name]; found {
		return m
	}
	var b strings.Builder
	b.WriteString("must be ")
	switch {
	case p.minLen >= 0 && p.maxLen >= 0:
		fmt.Fprintf(&b, "%d-%d characters", p.minLen, p.maxLen)
	case p.maxLen >= 0:
		fmt.Fprintf(&b, "at most %d characters", p.maxLen)
	case p.minLen >= 0:
		fmt.Fprintf(&b, "at least %d characters", p.minLen)
	default:
		b.WriteString("UTF-8 text")
	}
	if p.pattern != nil {
		b.WriteString(" matching " + strconv.Quote(p.patternS))
	}
	return b.String()
}

// bodyType says why a write's body is not of one of types, or "".
func bodyType(r *http.Request, types []string) string {
	cts := r.Header.Values("Content-Type")
	switch {
	case len(cts) > 1:
		return "more than one Content-Type"
	case len(cts) == 0:
		if bodyEmpty(r) {
			return ""
		}
		return "a body needs Content-Type: " + strings.Join(types, " or ")
	}
	mt, params, err := mime.ParseMediaType(cts[0])
	if err == nil && slices.Contains(types, mt) {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return ""
		}
	}
	return "Content-Type " + httpguard.Quote(cts[0], 100) + " is not taken here; send " + strings.Join(types, " or ") + " (UTF-8)"
}

// bodyEmpty reports whether r has no body, reading one byte of a body of
// unknown length (and putting it back).
func bodyEmpty(r *http.Request) bool {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return true
	case r.ContentLength > 0:
		return false
	}
	var one [1]byte
	n, err := io.ReadFull(r.Body, one[:])
	if n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
		return true
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(one[:n]), r.Body), r.Body}
	return false
}
