// Command benchcompare runs the whole nofly pipeline and a running Tile38
// server side by side on the same 48 zones and the same stream, alternating,
// and prints positions/s, the CPU per position of every process and each
// side's events against `alerter replay` (internal/benchcompare), as a
// Markdown table on stdout and, with --json, as JSON (benchcompare.Report,
// what cmd/benchcharts draws BENCHMARKS.md's chart from):
//
//	bash scripts/services.sh start
//	bash scripts/tile38.sh start        # builds a pinned Tile38 from a source directory you provide
//	go run ./cmd/benchcompare --tile38 127.0.0.1:9851 [--rounds 3 --clients 8 --batch 500] [--json benchmarks/benchcompare-960.json]
//
// Run it from the repository root (it builds cmd/ingest and cmd/alerter).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nofly-dev/nofly/internal/benchcompare"
)

func main() {
	c := benchcompare.Config{}
	flag.StringVar(&c.Tile38, "tile38", "", "host:port of a running Tile38 server (empty: nofly only)")
	flag.StringVar(&c.Brokers, "brokers", envOr("NOFLY_KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka brokers (env NOFLY_KAFKA_BROKERS)")
	flag.StringVar(&c.Redis, "redis", envOr("NOFLY_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env NOFLY_REDIS_ADDR)")
	flag.StringVar(&c.KafkaPIDFile, "kafka-pid-file", benchcompare.DefaultKafkaPIDFile(), "the broker's pid file, for its CPU (empty: not measured)")
	flag.IntVar(&c.Partitions, "partitions", 12, "partitions of the round's telemetry and events topics")
	flag.IntVar(&c.Drones, "drones", 320, "scenario drones (internal/scenario; 320 x 500 positions = 167,890 records)")
	flag.IntVar(&c.Positions, "positions", 500, "positions per drone")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the scenario and the zones")
	flag.IntVar(&c.Clients, "clients", 8, "concurrent clients of each side")
	flag.IntVar(&c.Batch, "batch", 500, "records per request (nofly) or per pipeline (Tile38)")
	flag.IntVar(&c.Rounds, "rounds", 3, "rounds; each runs both sides, the order swapped every round")
	flag.StringVar(&c.BinDir, "bin", "", "directory of prebuilt ingest and alerter binaries (default: go build them)")
	flag.StringVar(&c.LogDir, "log-dir", "", "keep ingest's and the alerter's logs of every round here (default: removed)")
	jsonPath := flag.String("json", "", "also write the figures as JSON to this file")
	flag.Parse()
	if c.Clients < 1 || c.Batch < 1 || c.Rounds < 1 || c.Drones < 1 || c.Positions < 1 || c.Partitions < 1 {
		fmt.Fprintln(os.Stderr, "benchcompare: --clients, --batch, --rounds, --drones, --positions and --partitions must be at least 1")
		os.Exit(2)
	}
	c.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	command := "go run ./cmd/benchcompare " + strings.Join(os.Args[1:], " ")
	if err := run(ctx, c, command, *jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "benchcompare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c benchcompare.Config, command, jsonPath string) error {
	loadStart := benchcompare.LoadAvg()
	rows, err := benchcompare.Run(ctx, c, os.Stdout)
	if err != nil {
		return err
	}
	if jsonPath == "" {
		return nil
	}
	var b bytes.Buffer
	if err := benchcompare.NewReport(c, command, loadStart, benchcompare.LoadAvg(), rows).WriteJSON(&b); err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
