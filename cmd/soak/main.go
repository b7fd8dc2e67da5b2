// Command soak is issue 29's national-scale soak against the real
// services (internal/soak): a fleet of drones at a rate per drone through
// cmd/ingest → Kafka → cmd/alerter, a generated national zone set
// (internal/zonegen) loaded through PUT /v1/zones before the traffic,
// dashboards open in headless chromium (an airport view, a country view,
// one panning) and a client of /v1/events/stream:
//
//	go run ./cmd/soak                                    (50,000 drones at 1 Hz for 10 minutes, 100,000 zones, 3 dashboards)
//	go run ./cmd/soak --drones 2000 --duration 60s --zones 10000
//	go run ./cmd/soak --ceiling --ceiling-start 5000 --profile 30s --profile-dir /tmp/soak
//
// Every --sample it reports consumer lag, alarm latency from ingest's 202
// to the SSE client, Redis used_memory, the alerter's RSS, every process's
// CPU per 1,000 positions and each page's frame time p95 and JS heap, as
// Markdown (--md, default stdout) and JSON (--json); progress on stderr.
// --ceiling searches the most drones the machine carries with the lag
// under --lag-target. Run it from the repository root.
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

	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/soak"
)

func main() {
	c := soak.Defaults()
	var mdPath, jsonPath string
	flag.StringVar(&c.Brokers, "brokers", envOr("NOFLY_KAFKA_BROKERS", c.Brokers), "Kafka brokers (env NOFLY_KAFKA_BROKERS)")
	flag.StringVar(&c.Redis, "redis", envOr("NOFLY_REDIS_ADDR", c.Redis), "Redis address (env NOFLY_REDIS_ADDR)")
	flag.StringVar(&c.KafkaPIDFile, "kafka-pid-file", benchcompare.DefaultKafkaPIDFile(), "the broker's pid file, for its CPU (empty: not measured)")
	flag.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the run's telemetry and events topics")
	flag.IntVar(&c.Drones, "drones", c.Drones, "drones (with --ceiling: the most the search tries)")
	flag.Float64Var(&c.Hz, "hz", c.Hz, "positions per second of each drone")
	flag.DurationVar(&c.Duration, "duration", c.Duration, "how long the traffic runs (not with --ceiling)")
	flag.IntVar(&c.Clients, "clients", c.Clients, "concurrent HTTP clients, each posting its drones' positions of a tick in one request")
	flag.IntVar(&c.Zones, "zones", c.Zones, "zones of the generated set, PUT before the traffic")
	flag.StringVar(&c.ZoneFormat, "zone-format", c.ZoneFormat, "generator of internal/zonegen: faa-grid or ed269")
	flag.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the zone set and the fleet")
	flag.Float64Var(&c.TogglerShare, "toggler-share", c.TogglerShare, "share of the drones that hop in and out of a zone to make alarms")
	flag.IntVar(&c.ToggleEvery, "toggle-every", c.ToggleEvery, "fixes a toggler stays inside, then outside")
	flag.Float64Var(&c.SpeedMPS, "speed", c.SpeedMPS, "mean speed of the other drones, m/s")
	flag.Float64Var(&c.AltAGLM, "alt-agl", c.AltAGLM, "height of the other drones above the ground, m")
	flag.IntVar(&c.Dashboards, "dashboards", c.Dashboards, "dashboards in headless chromium (0-3: airport, country, panning)")
	flag.DurationVar(&c.PanEvery, "pan-every", c.PanEvery, "how often the panning dashboard moves")
	flag.DurationVar(&c.Sample, "sample", c.Sample, "sample interval")
	flag.DurationVar(&c.LagTarget, "lag-target", c.LagTarget, "the consumer lag a rate must stay under")
	flag.BoolVar(&c.Ceiling, "ceiling", false, "search the most drones carried with the lag under --lag-target")
	flag.IntVar(&c.CeilingStart, "ceiling-start", c.CeilingStart, "drones of the search's first step")
	flag.DurationVar(&c.CeilingStep, "ceiling-step", c.CeilingStep, "length of each step of the search")
	flag.DurationVar(&c.Profile, "profile", 0, "perf-profile the alerter and ingest this long at the end (at the ceiling with --ceiling)")
	flag.StringVar(&c.ProfileDir, "profile-dir", "", "where the perf.data files go")
	flag.StringVar(&c.BinDir, "bin", "", "directory of prebuilt ingest and alerter binaries (default: go build them)")
	flag.StringVar(&c.LogDir, "log-dir", "", "keep ingest's and the alerter's logs here (default: removed)")
	flag.StringVar(&mdPath, "md", "", "write the Markdown report to this file (default: stdout)")
	flag.StringVar(&jsonPath, "json", "", "write the JSON report to this file")
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "soak: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c.Command = "go run ./cmd/soak " + strings.Join(os.Args[1:], " ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, mdPath, jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c soak.Config, mdPath, jsonPath string) error {
	if c.ProfileDir != "" {
		if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
			return err
		}
	}
	rep, err := soak.Run(ctx, c)
	if err != nil {
		return err
	}
	return benchcompare.WriteReports(rep, mdPath, jsonPath)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
