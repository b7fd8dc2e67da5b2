package ingestd

import (
	"context"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.yaml.in/yaml/v4"

	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestHostileIngestServeFlags: `ingest serve` with --public-url and
// --trusted-proxies, against the real Kafka: a foreign Host is refused with
// 421 on every route but the probes, a public URL's host and the
// listener's address are served, a cross-site write is refused, and a
// remote client forwarded by a trusted loopback proxy may not write
// without feed keys; bad values stop the command at start naming the flag.
func TestHostileIngestServeFlags(t *testing.T) {
	cfg, err := parseServe([]string{"--public-url", "http://ingest:8080", "--public-url", "https://ingest.example.com"},
		map[string]string{"NOFLY_TRUSTED_PROXIES": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://ingest:8080", "https://ingest.example.com"}; !reflect.DeepEqual(cfg.PublicURLs, want) {
		t.Fatalf("PublicURLs %v", cfg.PublicURLs)
	}
	for _, args := range [][]string{{"--public-url", "ingest:8080"}, {"--public-url", "http://ingest:8080/v1"}, {"--trusted-proxies", "10.0.0.300"}} {
		if _, err := parseServe(args, nil); err == nil || (!strings.Contains(err.Error(), "--public-url, NOFLY_INGEST_PUBLIC_URLS") && !strings.Contains(err.Error(), "--trusted-proxies, NOFLY_TRUSTED_PROXIES")) {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
	brokers := testenv.Kafka(t)
	cfg.Brokers = brokers
	cfg.Topic = testenv.UniqueName("ingest-hostile")
	cfg.Partitions = 1
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{cfg.Topic}})
	})
	svc := startService(t, cfg)
	do := func(method, path, host string, hdr ...string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"drone_id":"UAV-H1","seq":1,"ts":"` + time.Now().UTC().Format(time.RFC3339) + `","lat":51.47,"lon":-0.45}`)
		}
		req, err := http.NewRequest(method, svc.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if body != nil {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, p := range [][2]string{{"POST", "/v1/telemetry"}, {"GET", "/openapi.yaml"}, {"GET", "/metrics"}} {
		if code, b := do(p[0], p[1], "attacker.example:8080"); code != 421 || !strings.Contains(b, "misdirected_request") {
			t.Errorf("%s %s from a foreign Host: %d %s", p[0], p[1], code, b)
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := do("GET", p, "attacker.example:8080"); code != 200 {
			t.Errorf("probe %s: %d", p, code)
		}
	}
	if code, b := do("POST", "/v1/telemetry", "ingest:8080", "Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site"); code != 403 || !strings.Contains(b, "cross_site") {
		t.Errorf("cross-site write: %d %s", code, b)
	}
	if code, b := do("POST", "/v1/telemetry", "ingest:8080", "X-Forwarded-For", "203.0.113.9"); code != 403 {
		t.Errorf("a remote client through the trusted proxy: %d %s", code, b)
	}
	for _, host := range []string{"ingest:8080", "ingest.example.com", strings.TrimPrefix(svc.url, "http://"), "localhost"} {
		if code, b := do("POST", "/v1/telemetry", host); code != 202 {
			t.Errorf("Host %s: %d %s", host, code, b)
		}
	}
}

// TestHostileComposeServiceNames: in docker-compose.yml each service's
// public URLs name it as the other containers call it (service:port), so
// the Host check lets them in, and each is a valid --public-url.
func TestHostileComposeServiceNames(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for svc, want := range map[string]struct{ env, url string }{
		"ingest":  {"NOFLY_INGEST_PUBLIC_URLS", "http://ingest:8080"},
		"alerter": {"NOFLY_ALERTER_PUBLIC_URLS", "http://alerter:9102"},
	} {
		v := doc.Services[svc].Environment[want.env]
		if !slices.Contains(strings.Split(v, ","), want.url) {
			t.Errorf("docker-compose.yml: service %s: %s = %q, want it to hold %s", svc, want.env, v, want.url)
		}
		for _, u := range strings.Split(v, ",") {
			if _, err := httpguard.ParsePublicURL(u); err != nil {
				t.Errorf("docker-compose.yml: service %s: %v", svc, err)
			}
		}
	}
}
