// Command ingest is nofly's telemetry intake.
//
//	ingest [serve] [flags]        HTTP intake: POST /v1/telemetry → Kafka (the default)
//	ingest send --file F [--rate N] [flags]
//	                              stream a recorded NDJSON track file through the producer
//	ingest loadtest [flags]       post synthetic batches to a running intake, report records/s and p99
//	ingest feed-key --name NAME [--prefixes P,..] [--rate N/s] [--append FILE]
//	                              make a feed's key: print it once, and its line for --feed-keys
//	ingest mavlink --fleet NAME [--listen udp://127.0.0.1:14550] [flags]
//	                              relay MAVLink GLOBAL_POSITION_INT from UDP to Kafka
//
// Every flag has an environment fallback; see README.md next to this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit code: 0, 1 for a
// failure, 2 for bad usage or configuration.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	sub := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		sub, args = args[0], args[1:]
	}
	var err error
	switch sub {
	case "serve":
		err = serveCmd(ctx, args, getenv, stderr)
	case "send":
		err = sendCmd(ctx, args, getenv, stdout, stderr)
	case "loadtest":
		err = loadtestCmd(ctx, args, getenv, stdout, stderr)
	case "feed-key":
		err = feedKeyCmd(args, getenv, stdout, stderr)
	case "mavlink":
		err = mavlinkCmd(ctx, args, getenv, stderr)
	case "help":
		fmt.Fprintln(stdout, "usage: ingest [serve|send|loadtest|mavlink|feed-key] [flags]; ingest <command> -h for its flags")
		return 0
	default:
		fmt.Fprintf(stderr, "ingest: unknown command %q; use serve, send, loadtest, mavlink or feed-key\n", sub)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrConfig):
		fmt.Fprintln(stderr, "ingest:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "ingest:", err)
		return 1
	}
}

// newLogger returns a JSON logger at level on w.
func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level) // validated
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
