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
	"os"
	"os/signal"
	"syscall"

	"github.com/nofly-dev/nofly/internal/ingestd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(ingestd.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
