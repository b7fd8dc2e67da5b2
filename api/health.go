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
// 503 with the error body naming what failed.
func probe(check func(context.Context) error, code string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
			defer cancel()
			if err := check(ctx); err != nil {
				writeError(w, http.StatusServiceUnavailable, code, err.Error(), nil)
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
	r.Get("/healthz", probe(s.o.Healthy, "unhealthy"))
	r.Get("/readyz", probe(s.o.Ready, "not_ready"))
	g := s.o.Gatherer
	if g == nil {
		g = prometheus.NewRegistry()
	}
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	r.Get("/openapi.json", s.serveOpenAPI)
}
