// Command bench is the end-to-end benchmark: a fleet of simulated drones
// → cmd/ingest (HTTP POST /v1/telemetry) → Kafka → cmd/alerter →
// alerts.events, against the real Kafka and Redis of scripts/services.sh,
// at a set rate or flat out (internal/benchcompare.RunE2E):
//
//	make bench-e2e                                  (go run ./cmd/bench)
//	go run ./cmd/bench --rate 5000 --duration 60s
//	go run ./cmd/bench --rate 0 --duration 60s      (flat out)
//
// It builds and starts ingest and the alerter on topics, a consumer group
// and a Redis prefix of the run's own (deleted afterwards), and reports
// positions/s accepted and processed, the latency from a record's 202 to
// its alarm event in alerts.events (read as read_committed), Redis round
// trips and each process's CPU per 1,000 positions and the consumer lag,
// as Markdown (--md, default stdout) and JSON (--json). Run it from the
// repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nofly-dev/nofly/internal/benchcompare"
)

func main() {
	c := benchcompare.E2EConfig{}
	var mdPath, jsonPath string
	flag.StringVar(&c.Brokers, "brokers", envOr("NOFLY_KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka brokers (env NOFLY_KAFKA_BROKERS)")
	flag.StringVar(&c.Redis, "redis", envOr("NOFLY_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env NOFLY_REDIS_ADDR)")
	flag.StringVar(&c.KafkaPIDFile, "kafka-pid-file", benchcompare.DefaultKafkaPIDFile(), "the broker's pid file, for its CPU (empty: not measured)")
	flag.IntVar(&c.Partitions, "partitions", 12, "partitions of the run's telemetry and events topics")
	flag.Float64Var(&c.Rate, "rate", 5000, "positions per second; 0: flat out (each client posts as soon as it has its 202)")
	flag.DurationVar(&c.Duration, "duration", 60*time.Second, "how long the traffic runs (0: no bound; with --positions, whichever comes first)")
	flag.IntVar(&c.Positions, "positions", 0, "positions to send at most (0: no bound)")
	flag.IntVar(&c.Drones, "drones", 1000, "drones; each sends one position a tick (ticks at rate/drones per second)")
	flag.Float64Var(&c.TogglerShare, "toggler-share", 0.1, "share of the drones that hop in and out of one zone (EDDF-ATZ) to make alarm transitions; the rest fly internal/fleet's missions")
	flag.IntVar(&c.ToggleEvery, "toggle-every", 10, "fixes a toggler stays inside, then outside")
	flag.IntVar(&c.Clients, "clients", 10, "concurrent HTTP clients, each posting its drones' positions, one request a tick")
	flag.Float64Var(&c.DupRate, "dup-rate", 0, "share of the fleet's positions sent twice, as a retrying feed would")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the fleet")
	flag.StringVar(&c.Zones, "zones", "testdata/zones/airports.geojson", "zone set the alerter loads (the togglers cross its EDDF-ATZ)")
	flag.StringVar(&c.BinDir, "bin", "", "directory of prebuilt ingest and alerter binaries (default: go build them)")
	flag.StringVar(&c.LogDir, "log-dir", "", "keep ingest's and the alerter's logs here (default: removed)")
	flag.DurationVar(&c.Progress, "progress", 5*time.Second, "interval of the progress line on stderr (0: none)")
	flag.StringVar(&mdPath, "md", "", "write the Markdown report to this file (default: stdout)")
	flag.StringVar(&jsonPath, "json", "", "write the JSON report to this file")
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c.Command = "go run ./cmd/bench " + strings.Join(os.Args[1:], " ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, mdPath, jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c benchcompare.E2EConfig, mdPath, jsonPath string) error {
	res, err := benchcompare.RunE2E(ctx, c)
	if err != nil {
		return err
	}
	return benchcompare.WriteReports(res, mdPath, jsonPath)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
