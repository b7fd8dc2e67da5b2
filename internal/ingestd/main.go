// Package ingestd is the ingest command: its flags, subcommands and the
// wiring of the packages it runs. cmd/ingest only calls Main, so the
// one-process demo (cmd/demo) runs the same code as the service.
package ingestd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Main runs the ingest command line (args without the program name) and
// returns its exit code; cmd/ingest and the one-process demo call it.
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
