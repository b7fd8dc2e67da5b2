package alerterd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/kafkaconn"
)

// probeInterval is how often a serving alerter checks that Redis and
// Kafka answer (nofly_alerter_redis_up, nofly_alerter_kafka_up); each
// check is bounded by probeTimeout.
const (
	probeInterval = 5 * time.Second
	probeTimeout  = 3 * time.Second
)

// A stalled alerter shows in its commit errors and its consumer lag
// (ingest measures that: internal/ingestd/lag.go), but neither says why.
// The up gauges do: a rule on them names the service that is away
// (deploy/prometheus/nofly-rules.yml), so the page reads "Redis
// unreachable from alerter X" instead of "alarms late". They are set by
// checks of their own, not by the pipeline's errors: a partition's
// backoff or an idle alerter (no partitions) would otherwise hide an
// outage, or show one long after it ended.

// probe is one dependency's check and the gauge it sets.
type probe struct {
	name  string // "redis", "kafka": the log's word for it
	gauge prometheus.Gauge
	check func(context.Context) error
	down  bool // the last check failed (logged once per outage)
}

// newProbes returns the alerter's probes of rc and of the brokers (a
// metadata request for topic over kc's TLS and SASL), their gauges
// registered on reg, and a close for the Kafka client's connections.
func newProbes(reg prometheus.Registerer, rc redis.UniversalClient, kc kafkaconn.Conn, brokers []string, topic string) ([]*probe, func()) {
	tr := kc.Transport("nofly-alerter-probe")
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: probeTimeout}
	ps := []*probe{
		newProbe(reg, "redis", "nofly_alerter_redis_up",
			"1 when Redis answered the alerter's last PING (every 5 s), 0 when it did not.",
			func(ctx context.Context) error { return rc.Ping(ctx).Err() }),
		newProbe(reg, "kafka", "nofly_alerter_kafka_up",
			"1 when Kafka answered the alerter's last metadata request for the telemetry topic (every 5 s), 0 when it did not.",
			func(ctx context.Context) error {
				md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
				if err != nil {
					return err
				}
				for _, t := range md.Topics {
					if t.Error != nil {
						return fmt.Errorf("topic %s: %w", t.Name, t.Error)
					}
				}
				return nil
			}),
	}
	return ps, tr.CloseIdleConnections
}

func newProbe(reg prometheus.Registerer, name, metric, help string, check func(context.Context) error) *probe {
	p := &probe{name: name, check: check, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: metric, Help: help})}
	reg.MustRegister(p.gauge)
	return p
}

// runProbes checks every interval until ctx ends, the first time at once.
func runProbes(ctx context.Context, every time.Duration, ps []*probe, log *slog.Logger) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		for _, p := range ps {
			p.run(ctx, log)
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// run checks once and sets the gauge; an outage is logged when it begins
// and when it ends.
func (p *probe) run(ctx context.Context, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	err := p.check(cctx)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: not an outage
	}
	switch {
	case err != nil:
		p.gauge.Set(0)
		if !p.down {
			log.Warn(p.name+" does not answer the alerter's probe", "error", err)
		}
		p.down = true
	default:
		p.gauge.Set(1)
		if p.down {
			log.Info(p.name + " answers the alerter's probe again")
		}
		p.down = false
	}
}
