package main

import (
	"context"
	"testing"
	"time"
)

// TestDemoEmbedded runs the README's first command as a fresh machine with
// only Go runs it: the embedded stack, ingest and the alerter in this
// process, a short flight, then the demo's own checks (live = replay,
// alerts.events exactly once), any of which fails the run.
func TestDemoEmbedded(t *testing.T) {
	t.Setenv("NOFLY_KAFKA_BROKERS", "")
	t.Setenv("NOFLY_REDIS_ADDR", "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := config{drones: 40, duration: 8 * time.Second, stepsPerS: 60, dupRate: 0.05,
		zones: "../../testdata/zones/airports.geojson", partitions: 6, seed: 7, strayShare: 0.3}
	if err := run(ctx, c); err != nil {
		t.Fatal(err)
	}
}
