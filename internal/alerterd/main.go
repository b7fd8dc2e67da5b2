// Package alerterd is the alerter command: its flags, subcommands and the
// wiring of the packages it runs. cmd/alerter only calls Main, so the
// one-process demo (cmd/demo) runs the same code as the service.
package alerterd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Main runs the alerter command line (args without the program name) and
// returns its exit code; cmd/alerter and the one-process demo call it.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return run(ctx, args, getenv, stdout, stderr)
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
