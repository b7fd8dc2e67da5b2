package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
)

// PrometheusBinary returns the path of prometheus or promtool as
// scripts/prometheus.sh installs them (Debian's package, unpacked into
// the cache). A machine without them fails the test, never skips it,
// naming the command that installs them.
func PrometheusBinary(t testing.TB, name string) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(RepoRoot(), "scripts", "prometheus.sh"), "path", name).CombinedOutput()
	if err != nil {
		t.Fatalf("%s is not installed (%v): %s\ninstall it with `bash scripts/prometheus.sh install` (the README's test command does)",
			name, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out))
}

// PrometheusProc is a private Prometheus server one test owns.
type PrometheusProc struct {
	t    testing.TB
	port int
	dir  string
	conf string
}

// StartPrometheus writes config (a prometheus.yml) and files (name →
// content: rule files the configuration names, relative to it) into a
// directory of the test's, starts a Prometheus with them on a free port
// through scripts/prometheus.sh, and stops it when the test ends (logging
// the end of its log if the test failed). Prometheus must be installed
// (PrometheusBinary).
func StartPrometheus(t testing.TB, config string, files map[string]string) *PrometheusProc {
	t.Helper()
	PrometheusBinary(t, "prometheus")
	p := &PrometheusProc{t: t, port: FreePort(t), dir: t.TempDir()}
	cdir := t.TempDir()
	p.conf = filepath.Join(cdir, "prometheus.yml")
	if err := os.WriteFile(p.conf, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(cdir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = p.run(context.Background(), "stop")
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(p.dir, "prometheus.log"))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("prometheus on %s, end of its log:\n%s", p.URL(), b)
		}
	})
	if err := p.run(context.Background(), "start"); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	return p
}

func (p *PrometheusProc) run(ctx context.Context, verb string) error {
	return runScript(ctx, "prometheus.sh", verb, "PROMETHEUS_PORT="+strconv.Itoa(p.port), "PROMETHEUS_DIR="+p.dir,
		"PROMETHEUS_CONFIG="+p.conf)
}

// URL is the server's base URL.
func (p *PrometheusProc) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", p.port) }

// PromSample is one element of an instant vector.
type PromSample struct {
	Metric map[string]string
	Value  float64
}

// Query evaluates an instant query now.
func (p *PrometheusProc) Query(ctx context.Context, expr string) ([]PromSample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", expr, data.ResultType)
	}
	out := make([]PromSample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", expr, r.Value[1], err)
		}
		out = append(out, PromSample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// PromAlert is an alert of /api/v1/alerts: pending or firing.
type PromAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

// Alerts returns the server's pending and firing alerts.
func (p *PrometheusProc) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []PromAlert `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

// TargetsUp returns each scrape pool's targets' health ("up", "down",
// "unknown") by job.
func (p *PrometheusProc) TargetsUp(ctx context.Context) (map[string][]string, error) {
	var data struct {
		ActiveTargets []struct {
			ScrapePool string `json:"scrapePool"`
			Health     string `json:"health"`
			LastError  string `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.get(ctx, "/api/v1/targets", &data); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range data.ActiveTargets {
		h := a.Health
		if a.LastError != "" {
			h += " (" + a.LastError + ")"
		}
		out[a.ScrapePool] = append(out[a.ScrapePool], h)
	}
	return out, nil
}

func (p *PrometheusProc) get(ctx context.Context, path string, data any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+path, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, res.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, res.Status, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// NoflyRulesPath is the path of nofly's Prometheus rules.
func NoflyRulesPath() string {
	return filepath.Join(RepoRoot(), "deploy", "prometheus", "nofly-rules.yml")
}

// PromRule is an alerting rule of a Prometheus rule file.
type PromRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         *string           `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// NoflyRules reads nofly's rules (deploy/prometheus/nofly-rules.yml), every
// group's in order; the test fails on a file it cannot read.
func NoflyRules(t testing.TB) []PromRule {
	t.Helper()
	b, err := os.ReadFile(NoflyRulesPath())
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string     `yaml:"name"`
			Rules []PromRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", NoflyRulesPath(), err)
	}
	var out []PromRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// noflyMetric matches the metric names nofly exports in a PromQL
// expression (every one starts nofly_; label names never do).
var noflyMetric = regexp.MustCompile(`\bnofly_[a-z0-9_]+\b`)

// NoflyMetricNames returns the nofly_ metric names the rules' expressions
// use, sorted.
func NoflyMetricNames(rules []PromRule) []string {
	var out []string
	for _, r := range rules {
		for _, n := range noflyMetric.FindAllString(r.Expr, -1) {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}
