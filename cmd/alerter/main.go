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
	"os"
	"os/signal"
	"syscall"

	"github.com/nofly-dev/nofly/internal/alerterd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(alerterd.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
