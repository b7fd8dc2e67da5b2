package ingest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"strings"

	"github.com/nofly-dev/nofly/internal/httpguard"
)

// What every request to the intake goes through before its route (issue
// 26), with the alert API's rules (package httpguard; docs/operations.md,
// "Browsers and proxies"):
//
//   - behind a trusted proxy (Options.Web.TrustedProxies) the client is the
//     one the proxy forwarded: the log line and the loopback check of the
//     mode without feed keys see it (forwarded);
//   - the Host must name the listener (421 otherwise), on every route but
//     /healthz and /readyz, which a kubelet or load balancer probes by
//     address and which hold no data;
//   - a write from another origin (an Origin that is not the intake's own
//     nor a public URL's, or Sec-Fetch-Site cross-site or same-site) is
//     refused with 403: the intake has no CORS, so no page but its own may
//     post telemetry, even to a loopback intake without feed keys;
//   - a write with two Authorization headers is a 400;
//   - /v1 answers are Cache-Control: no-store, every answer nosniff.

// probeRoutes answer whatever the Host.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true}

// Codes of the refusals added here (errorBody.Code).
const (
	codeMisdirected = "misdirected_request"
	codeCrossSite   = "cross_site"
	codeBadRequest  = "bad_request"
)

type forwardedKey struct{}

// forwarded replaces RemoteAddr with the forwarded client when the peer is
// a trusted proxy.
func (s *Server) forwarded(next http.Handler) http.Handler {
	if !s.web.Proxies() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, fw := s.web.Client(r)
		if !fw {
			next.ServeHTTP(w, r)
			return
		}
		host := "unknown"
		if client.IsValid() {
			host = client.String()
		}
		r = r.WithContext(context.WithValue(r.Context(), forwardedKey{}, client))
		r.RemoteAddr = net.JoinHostPort(host, "0")
		next.ServeHTTP(w, r)
	})
}

// guard applies the Host, cross-site and header rules above.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			h.Set("Cache-Control", "no-store")
		}
		if !probeRoutes[r.URL.Path] && !s.web.HostAllowed(r.Host) {
			s.refuseRequest(w, r, http.StatusMisdirectedRequest, codeMisdirected, "misdirected",
				"Host "+httpguard.Quote(r.Host, 100)+" is not a name of this intake; if feeds reach it by that name, start it with --public-url http://"+
					httpguard.Clip(r.Host, 100)+" (NOFLY_INGEST_PUBLIC_URLS)")
			return
		}
		if err := s.web.CheckOrigin(r); err != nil {
			s.refuseRequest(w, r, http.StatusForbidden, codeCrossSite, "cross_site",
				err.Error()+"; the intake takes no write a browser sends from another page")
			return
		}
		if httpguard.IsWrite(r.Method) && len(r.Header.Values("Authorization")) > 1 {
			s.refuseRequest(w, r, http.StatusBadRequest, codeBadRequest, "authorization_twice",
				"Authorization: given more than once; send one Bearer key")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseRequest answers a request refused before any route looked at it,
// logged with reason.
func (s *Server) refuseRequest(w http.ResponseWriter, r *http.Request, status int, code, reason, msg string) {
	setOutcome(r, 0, reason, msg, nil)
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
