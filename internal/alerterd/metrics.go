package alerterd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/httpserve"
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
// /openapi.json and the API) on addr until ctx ends, under l: the
// timeouts, header bound and connection cap of internal/httpserve (the
// event streams take themselves out of the read and write timeouts, and
// a connection over the cap is answered 503 in the API's error shape).
func serveHTTP(ctx context.Context, addr string, h http.Handler, l httpserve.Limits, reg prometheus.Registerer, log *slog.Logger) (net.Addr, error) {
	refusal := func(n int) []byte {
		b, _ := json.Marshal(map[string]any{"error": fmt.Sprintf("this alerter has %d connections open, the most it takes (--http-max-conns); retry later", n),
			"code": "too_many_connections", "details": map[string]any{"max_conns": n}})
		return b
	}
	ln, err := l.Listen(addr, refusal, httpserve.NewMetrics(reg), log)
	if err != nil {
		return nil, err
	}
	srv := httpserve.NewServer(h, l, log)
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
