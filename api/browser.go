package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/internal/httpguard"
)

// What every answer of the alerter's listener goes through before its
// route (issue 26): the browser protections of package httpguard, the
// client behind a trusted proxy, the /v1 headers, and 500s without
// internals. The rules are in docs/design.md ("Security") and
// docs/operations.md ("Browsers and proxies").

// probeRoutes answer whatever the Host: a kubelet or load balancer probes
// by address or by a name of its own, and their answer holds no data (the
// status and a generic message).
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true}

// forwardedClient is who a trusted proxy said sent a request.
type forwardedClient struct {
	client    netip.Addr // invalid: the proxy's chain was broken
	forwarded bool
}

type forwardedKey struct{}

// forwarded is the outermost middleware: behind a trusted proxy
// (Options.Web.TrustedProxies) the client is the one the proxy forwarded,
// and the request goes on with it as RemoteAddr (as chi's RealIP does),
// so the log line, the per-address rate limit and every check see it.
// Without a trusted peer nothing changes: a forwarding header is any
// client's to write.
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
		r = r.WithContext(context.WithValue(r.Context(), forwardedKey{}, forwardedClient{client: client, forwarded: true}))
		r.RemoteAddr = net.JoinHostPort(host, "0")
		next.ServeHTTP(w, r)
	})
}

// guard is the outermost check after logging:
//
//   - Host (421 misdirected_request), on every route but the probes;
//   - a cross-site write (403 cross_site), on every route;
//   - on /v1: Cache-Control: no-store, a second Authorization header (400),
//     and, without a token file (the loopback mode), a client a trusted
//     proxy says is not on loopback (403 not_loopback);
//   - X-Content-Type-Options: nosniff on every answer;
//   - a 500's body replaced by a generic one with a request id, the
//     handler's message logged under that id.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		fw, _ := r.Context().Value(forwardedKey{}).(forwardedClient)
		if !probeRoutes[r.URL.Path] && !s.web.HostAllowed(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "misdirected_request",
				"Host "+httpguard.Quote(r.Host, 100)+" is not a name of this server; if clients reach it by that name, start the alerter with --public-url http://"+
					httpguard.Clip(r.Host, 100)+" (NOFLY_ALERTER_PUBLIC_URLS)",
				map[string]any{"field": "Host", "host": httpguard.Clip(r.Host, 100)})
			return
		}
		if err := s.web.CheckOrigin(r); err != nil {
			writeError(w, http.StatusForbidden, "cross_site", err.Error()+
				"; a browser page may write here only from this server's own origin, a --public-url's, or one --api-cors-origins allows",
				map[string]any{"field": "Origin"})
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			h.Set("Cache-Control", "no-store")
			if len(r.Header.Values("Authorization")) > 1 {
				writeError(w, http.StatusBadRequest, "bad_request", "Authorization: given more than once; send one Bearer token",
					map[string]any{"field": "Authorization"})
				return
			}
			if fw.forwarded && s.o.Tokens == nil && s.o.OIDC == nil && s.o.Off == "" && !fw.client.IsLoopback() {
				writeError(w, http.StatusForbidden, "not_loopback",
					"without --api-tokens the API serves loopback clients only, and the trusted proxy forwarded "+httpguard.Clip(r.RemoteAddr, 60),
					map[string]any{"client": httpguard.Clip(r.RemoteAddr, 60)})
				return
			}
		}
		hw := &hideInternal{ResponseWriter: w}
		next.ServeHTTP(hw, r)
		if hw.id != "" {
			route := ""
			if rc := chi.RouteContext(r.Context()); rc != nil {
				route = rc.RoutePattern()
			}
			s.log.LogAttrs(r.Context(), slog.LevelError, "api: internal error", slog.String("request_id", hw.id),
				slog.String("method", r.Method), slog.String("route", route), slog.String("error", hw.message()))
		}
	})
}

// hideInternal answers a 500 with a generic body naming a request id, and
// keeps what the handler wrote (its error chain: Redis addresses, keys) for
// the log only.
type hideInternal struct {
	http.ResponseWriter
	status int
	id     string
	detail []byte
}

// maxDetail bounds what of a hidden body is logged.
const maxDetail = 4 << 10

func (h *hideInternal) WriteHeader(code int) {
	if h.status != 0 {
		h.ResponseWriter.WriteHeader(code) // net/http says "superfluous"
		return
	}
	h.status = code
	if code != http.StatusInternalServerError {
		h.ResponseWriter.WriteHeader(code)
		return
	}
	h.id = newRequestID()
	hd := h.ResponseWriter.Header()
	hd.Del("Content-Length")
	hd.Del("ETag")
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Request-Id", h.id)
	b, _ := json.Marshal(errorBody{Error: "internal error; the server's log has the detail under request_id " + h.id,
		Code: "internal", Details: map[string]any{"request_id": h.id}})
	h.ResponseWriter.WriteHeader(code)
	_, _ = h.ResponseWriter.Write(append(b, '\n'))
}

func (h *hideInternal) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.WriteHeader(http.StatusOK)
	}
	if h.id == "" {
		return h.ResponseWriter.Write(b)
	}
	if room := maxDetail - len(h.detail); room > 0 {
		h.detail = append(h.detail, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// Flush passes on (streams flush through it); a hidden 500 has nothing to
// flush.
func (h *hideInternal) Flush() {
	if h.id != "" {
		return
	}
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (h *hideInternal) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// message is the hidden body's error, or the body itself.
func (h *hideInternal) message() string {
	var e errorBody
	if json.Unmarshal(h.detail, &e) == nil && e.Error != "" {
		return e.Error
	}
	return string(h.detail)
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
