package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probeTimeout bounds a /healthz or /readyz check.
const probeTimeout = 3 * time.Second

// probe answers 200 {"status":"ok"} when check passes (or is nil), else
// 503 with the error body: a generic message and the stable code, since
// the probes are open and what failed names internal addresses (a
// broker's, Redis's); the detail is logged.
func (s *Server) probe(check func(context.Context) error, code, what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
			defer cancel()
			if err := check(ctx); err != nil {
				s.log.Warn("api: "+r.URL.Path+": "+what, "error", err)
				writeError(w, http.StatusServiceUnavailable, code, what+" (the alerter's log says why)", nil)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// mountOps adds the routes that stay open and on whatever the API's mode:
// /healthz (Options.Healthy), /readyz (Options.Ready), /metrics
// (Options.Gatherer) and /openapi.json.
func (s *Server) mountOps(r chi.Router) {
	r.Get("/healthz", s.probe(s.o.Healthy, "unhealthy", "not healthy"))
	r.Get("/readyz", s.probe(s.o.Ready, "not_ready", "not ready"))
	g := s.o.Gatherer
	if g == nil {
		g = prometheus.NewRegistry()
	}
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	r.Get("/openapi.json", s.serveOpenAPI)
}
