// Command alerter is nofly's alarm service.
//
//	alerter [serve] [flags]     consume telemetry.positions in a consumer group, raise and clear
//	                            alarms exactly once into the Redis outbox (the default)
//	alerter replay --zones Z --input F
//	                            run the same engine over a recorded NDJSON file with an
//	                            in-memory store and print the events as NDJSON
//	alerter redrive --webhook NAME=URL [--dry-run]
//	                            post a webhook's dead letters again (each partition's),
//	                            removing each one the endpoint accepts
//	alerter api-token --name N --role viewer|operator|admin [--append FILE]
//	                            make an API token: print it once and its --api-tokens line
//	alerter openapi             print the API's OpenAPI 3.1 document (/openapi.json)
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
	case "replay":
		err = replayCmd(ctx, args, getenv, stdout, stderr)
	case "redrive":
		err = redriveCmd(ctx, args, getenv, stdout, stderr)
	case "api-token":
		err = apiTokenCmd(args, getenv, stdout, stderr)
	case "openapi":
		err = openapiCmd(args, getenv, stdout, stderr)
	case "help":
		fmt.Fprintln(stdout, "usage: alerter [serve|replay|redrive|api-token|openapi] [flags]; alerter <command> -h for its flags")
		return 0
	default:
		fmt.Fprintf(stderr, "alerter: unknown command %q; use serve, replay, redrive, api-token or openapi\n", sub)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrConfig):
		fmt.Fprintln(stderr, "alerter:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "alerter:", err)
		return 1
	}
}

func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
