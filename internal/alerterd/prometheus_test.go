package alerterd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// Test copies of NoflyAlerterLagging's bound and for (the shipped 30 s for
// a minute would hold the test 90 s): the lag the test waits for is past
// any a healthy alerter shows here (a fraction of a second: ticks every
// 200 ms, batches every 10 ms), and ingest measures it every 5 s.
const (
	lagRuleShipped = "expr: max by (group) (nofly_ingest_consumer_lag_seconds) > 30\n        for: 1m\n"
	lagRuleTest    = "expr: max by (group) (nofly_ingest_consumer_lag_seconds) > 5\n        for: 2s\n"
)

// TestPrometheusLagRule: a real Prometheus (Debian's, scripts/prometheus.sh)
// scrapes a running ingest and alerter every second with nofly's rules
// (deploy/prometheus/nofly-rules.yml; the lag rule's bound and for
// shortened, above). Every nofly metric the rules name is among what it
// scraped — the rules watch metrics nofly exports — and no alert fires
// while the pipeline is healthy. Then the alerter is stopped (SIGSTOP: a
// stalled alerter, whose /metrics goes dark with it) while telemetry keeps
// flowing through ingest, and NoflyAlerterLagging fires for its group
// within 45 s: ingest measures the group's lag, not the alerter.
func TestPrometheusLagRule(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	rules, err := os.ReadFile(testenv.NoflyRulesPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(rules), lagRuleShipped) != 1 {
		t.Fatalf("NoflyAlerterLagging no longer reads %q in %s: update this test's copy", lagRuleShipped, testenv.NoflyRulesPath())
	}
	testRules := strings.Replace(string(rules), lagRuleShipped, lagRuleTest, 1)
	names := testenv.NoflyMetricNames(testenv.NoflyRules(t))

	p := newPipeline(t, brokers, raddr, 4).withEvents()
	in := p.startIngest("ingest", 200*time.Millisecond)
	a := p.startProc("alerter", p.config())
	a.up(90 * time.Second)
	_ = a.healthz() // a request to the API: nofly_api_requests_total has a series before the first scrape

	// Telemetry all along: one drone, a position every 200 ms.
	ctx, stopFeed := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stopFeed(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 1; ctx.Err() == nil; seq++ {
			l := fmt.Sprintf(`{"drone_id":"PROM-1","seq":%d,"ts":%q,"lat":51.6,"lon":-0.7,"alt_m":80}`, seq, time.Now().UTC().Format(time.RFC3339Nano))
			if res, err := http.Post(in.url+"/v1/telemetry", "application/x-ndjson", strings.NewReader(l)); err == nil {
				res.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:
  - nofly-rules.yml
scrape_configs:
  - job_name: nofly-ingest
    static_configs: [{targets: [%q]}]
  - job_name: nofly-alerter
    static_configs: [{targets: [%q]}]
`, strings.TrimPrefix(in.url, "http://"), a.http)
	prom := testenv.StartPrometheus(t, config, map[string]string{"nofly-rules.yml": testRules})
	start := time.Now()
	q := func(expr string) ([]testenv.PromSample, error) { return prom.Query(context.Background(), expr) }

	// Both targets up, and the group's lag measured by ingest (every 5 s).
	lagExpr := fmt.Sprintf(`max(nofly_ingest_consumer_lag_seconds{group=%q})`, p.group)
	testenv.CheckFor(t, 30*time.Second, func() error {
		up, err := prom.TargetsUp(context.Background())
		if err != nil {
			return err
		}
		for _, job := range []string{"nofly-ingest", "nofly-alerter"} {
			if len(up[job]) != 1 || up[job][0] != "up" {
				return fmt.Errorf("targets: %v", up)
			}
		}
		if s, err := q(lagExpr); err != nil || len(s) != 1 {
			return fmt.Errorf("no lag of group %s yet (%v, %v)", p.group, s, err)
		}
		return nil
	})
	t.Logf("both targets up and the lag measured after %v", time.Since(start).Round(time.Millisecond))

	// Every nofly metric the rules use, scraped from the two processes
	// (some have series only after the first batch or scrape: waited for).
	testenv.CheckFor(t, 20*time.Second, func() error {
		var missing []string
		for _, n := range names {
			s, err := q(fmt.Sprintf(`count({__name__=%q})`, n))
			if err != nil {
				return err
			}
			if len(s) == 0 {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("metrics the rules use that neither ingest nor the alerter exports: %v", missing)
		}
		return nil
	})
	t.Logf("all %d nofly metrics of the rules scraped: %v", len(names), names)
	// The probes' gauges read up (probe.go, internal/ingestd/lag.go).
	for _, n := range []string{"nofly_alerter_redis_up", "nofly_alerter_kafka_up", "nofly_ingest_kafka_up"} {
		if s, err := q(n); err != nil || len(s) != 1 || s[0].Value != 1 {
			t.Errorf("%s: %v, %v; want one series at 1", n, s, err)
		}
	}

	// Healthy: over 3 s (three evaluations), nothing fires, the lag rule
	// is not even pending, and the lag is under the test bound.
	healthy := time.Now().Add(3 * time.Second)
	for time.Now().Before(healthy) {
		as, err := prom.Alerts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, al := range as {
			if al.State == "firing" || al.Labels["alertname"] == "NoflyAlerterLagging" {
				t.Fatalf("healthy pipeline, yet %s is %s: %v", al.Labels["alertname"], al.State, al)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if s, err := q(lagExpr); err != nil || len(s) != 1 || s[0].Value >= 5 {
		t.Fatalf("healthy lag: %v, %v; want under 5 s", s, err)
	}

	// Stop the alerter; telemetry and ticks go on.
	a.signal(syscall.SIGSTOP)
	a.waitStopped(10 * time.Second)
	stopped := time.Now()
	var fired testenv.PromAlert
	testenv.CheckFor(t, 45*time.Second, func() error {
		as, err := prom.Alerts(context.Background())
		if err != nil {
			return err
		}
		for _, al := range as {
			if al.Labels["alertname"] == "NoflyAlerterLagging" && al.Labels["group"] == p.group && al.State == "firing" {
				fired = al
				return nil
			}
		}
		s, _ := q(lagExpr)
		return fmt.Errorf("NoflyAlerterLagging not firing (lag %v; alerts %v)", s, as)
	})
	if fired.Labels["severity"] != "critical" {
		t.Errorf("NoflyAlerterLagging's severity %q, want critical", fired.Labels["severity"])
	}
	t.Logf("NoflyAlerterLagging firing %v after the alerter stopped (%v after Prometheus started)",
		time.Since(stopped).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
