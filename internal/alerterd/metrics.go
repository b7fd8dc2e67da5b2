package alerterd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics is the alerter's registry (its own, so that several alerters can
// live in one test process): the runtime's nofly_alerter_* metrics
// (alerts/consume), the outbox dispatcher's, the zone reloads, and the Go
// and process collectors.
type metrics struct {
	reg     *prometheus.Registry
	reloads *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nofly", Subsystem: "alerter", Name: "zone_reloads_total",
			Help: "Zone file reloads by result."}, []string{"result"}),
	}
	m.reg.MustRegister(m.reloads, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// serveHTTP serves h (api.Server's router: /metrics, /healthz, /readyz,
// /openapi.json and the API) on addr until ctx ends. No write timeout: the
// event stream is one long answer.
func serveHTTP(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	return ln.Addr(), nil
}
