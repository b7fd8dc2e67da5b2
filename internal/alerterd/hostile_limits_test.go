package alerterd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/httpserve/hostiletest"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// The hostile-client suite of issue 26 against the alerter: each test is
// one attack the issue found, on the alerter's real HTTP server, and
// asserts the numbers that show it no longer works.

// serveHere runs `alerter serve` in this process as cfg and returns its
// HTTP address once it is up; it stops with the test.
func (p *pipeline) serveHere(cfg Config) string {
	t := p.t
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() { done <- serve(ctx, cfg, log, func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("alerter did not stop within 60s")
		}
	})
	select {
	case a := <-addr:
		return a
	case err := <-done:
		t.Fatalf("alerter: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("alerter not up within 60s")
	}
	return ""
}

// TestHostileMadeUpMethodsDoNotGrowMetrics: 5,000 requests with made-up
// methods leave the number of request series where it was, with the API
// on (loopback, unauthenticated) and off (no token file on a public
// address), over the alerter's real server and registry.
func TestHostileMadeUpMethodsDoNotGrowMetrics(t *testing.T) {
	for _, tt := range []struct{ name, http string }{{"api on", "127.0.0.1:0"}, {"api off", "0.0.0.0:0"}} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.HTTPAddr = tt.http
			cfg.RedisAddr = testenv.Redis(t)
			cfg.RedisPrefix = testenv.RedisPrefix(t, "alerter-methods")
			auth, err := cfg.loadAPIAuth()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			reg := prometheus.NewRegistry()
			ok := func(context.Context) error { return nil }
			h, err := newAPI(ctx, cfg, auth, 2, reg, ok, ok, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			na, err := serveHTTP(ctx, cfg.HTTPAddr, h, cfg.Limits, reg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(na.String())
			base := "http://127.0.0.1:" + port
			metrics := base + "/metrics"
			paths := []string{"/v1/alarms", "/v1/zones/history", "/no/such/route", "/healthz"}
			// A few first: the "other" series of each route and status; and
			// a scrape, whose own series the next scrape shows.
			for _, p := range paths {
				hostiletest.MadeUpMethods(t, base+p, 5)
			}
			hostiletest.Series(t, metrics, "nofly_api_request")
			before := hostiletest.Series(t, metrics, "nofly_api_request")
			for _, p := range paths {
				hostiletest.MadeUpMethods(t, base+p, 1250)
			}
			after := hostiletest.Series(t, metrics, "nofly_api_request")
			t.Logf("request series: %d before 5,000 made-up methods, %d after", before, after)
			if before == 0 || after != before {
				t.Fatalf("request series %d before, %d after 5,000 made-up methods: want the same, not 0", before, after)
			}
		})
	}
}

// hostileConfig is the pipeline's configuration with the server's
// timeouts short enough to watch them act, and without the rate limits,
// which would answer most of an attack from one address 429 before its
// body is read: an attacker has many addresses.
func hostileConfig(p *pipeline) Config {
	cfg := p.config()
	cfg.APIRatePerAddr, cfg.APIRatePerToken = 0, 0
	cfg.HTTPReadHeaderTimeout = time.Second
	cfg.HTTPReadTimeout = 2 * time.Second
	return cfg
}

// TestHostileSlowBodiesAreClosed: 500 zone set bodies that never finish
// and 100 headers that never end are all closed within the read (header)
// timeout and a little, while the alerter keeps serving /healthz and
// commits the whole scenario.
func TestHostileSlowBodiesAreClosed(t *testing.T) {
	p := newPipeline(t, testenv.Kafka(t), testenv.Redis(t), 4)
	cfg := hostileConfig(p)
	addr := p.serveHere(cfg)
	bodies := hostiletest.SlowBodies(t, addr, "PUT", "/v1/zones", 1<<20, "Content-Type: application/json")
	headers := hostiletest.Slowloris(t, addr, 100)
	produced := make(chan error, 1)
	go func() { produced <- p.produceErr(scenario.Generate(scenario.DefaultConfig()).Records) }()
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/healthz during the attack: %d", res.StatusCode)
	}
	lastBody, answers := bodies.Closed(t, cfg.HTTPReadTimeout+hostiletest.Slack)
	lastHeader, _ := headers.Closed(t, cfg.HTTPReadHeaderTimeout+hostiletest.Slack)
	t.Logf("500 slow bodies closed within %v (read timeout %v), answers %v; 100 slow headers within %v (header timeout %v)",
		lastBody, cfg.HTTPReadTimeout, answers, lastHeader, cfg.HTTPReadHeaderTimeout)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
}

// TestHostileConnectionCap: an alerter whose file descriptor limit is 1024
// lowers its connection cap to 1024 - 512 (and says so); with the cap's
// connections held open, one more is answered 503 too_many_connections in
// the API's error shape and closed at once, and the alerter still reaches
// Kafka and Redis: it commits the whole scenario meanwhile. Once the held
// connections go, it serves again.
func TestHostileConnectionCap(t *testing.T) {
	p := newPipeline(t, testenv.Kafka(t), testenv.Redis(t), 4)
	cfg := p.config()
	cfg.HTTPReadHeaderTimeout, cfg.HTTPReadTimeout = time.Minute, time.Minute // held connections stay held
	const nofile = 1024
	pr := p.startLimited("capped", cfg, nofile)
	testenv.CheckFor(t, 60*time.Second, func() error {
		res, err := http.Get("http://" + pr.http + "/healthz")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("/healthz %d", res.StatusCode)
		}
		return nil
	})
	ls := pr.logLines("http: --http-max-conns lowered")
	if len(ls) != 1 || ls[0]["max_conns"] != float64(nofile-httpserve.FDReserve) {
		t.Fatalf("log lines %v, want one saying max_conns %d", ls, nofile-httpserve.FDReserve)
	}
	capped := nofile - httpserve.FDReserve
	held := hostiletest.Hold(t, pr.http, capped)
	testenv.CheckFor(t, 30*time.Second, func() error {
		if v, err := pr.metric("nofly_http_connections"); err == nil {
			return fmt.Errorf("the metrics still answer: %v connections open", v) // the scrape itself needs a slot
		}
		res, body := hostiletest.Refused(t, pr.http, "/healthz")
		var e struct {
			Error, Code string
			Details     map[string]any
		}
		if res.StatusCode != 503 || json.Unmarshal(body, &e) != nil || e.Code != "too_many_connections" || e.Details == nil ||
			res.Header.Get("Retry-After") == "" || !res.Close {
			return fmt.Errorf("over the cap: %d %v %s", res.StatusCode, res.Header, body)
		}
		return nil
	})
	sc := scenario.Generate(scenario.DefaultConfig())
	p.produce(sc.Records)
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	// What the alerter holds besides the held connections: its own (Kafka,
	// Redis, files), which FDReserve leaves room for.
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pr.cmd.Process.Pid)); err == nil {
		t.Logf("alerter descriptors with %d HTTP connections held and the scenario committed: %d (%d of its own; limit %d, reserve %d)",
			capped, len(fds), len(fds)-capped, nofile, httpserve.FDReserve)
	}
	held.Close()
	testenv.CheckFor(t, 30*time.Second, func() error {
		refused, err := pr.metric("nofly_http_connections_refused_total")
		if err != nil {
			return err
		}
		if refused < 1 {
			return fmt.Errorf("refused_total %v", refused)
		}
		return nil
	})
}

// startLimited starts `alerter serve` as startProc does, under a file
// descriptor limit of nofile (soft and hard: Go raises the soft one to the
// hard one at start).
func (p *pipeline) startLimited(name string, cfg Config, nofile int) *proc {
	t := p.t
	cfg.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.LogLevel = "info"
	vars, flags := cfg.Environ()
	logPath := filepath.Join(t.TempDir(), name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-c", `ulimit -n ` + strconv.Itoa(nofile) + ` && exec "$0" "$@"`, alerterBinary(t), "serve"}, flags...)
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), vars...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr := &proc{t: t, name: name, cmd: cmd, http: cfg.HTTPAddr, done: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); lf.Close(); close(pr.done) }()
	t.Cleanup(func() { pr.kill() })
	return pr
}
