// Command approachreport measures approaching warnings on the simulated
// mission fleet (GNSS noise on) through the alerter's engine: lead time
// before each real entry, warning episodes per real approach, and false
// warnings for drones that pass by (internal/approachreport).
//
//	go run ./cmd/approachreport --drones 600 --duration 2h
//	go run ./cmd/approachreport --derived   # velocity from the noisy positions alone
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/approachreport"
)

func main() {
	drones := flag.Int("drones", 600, "drones in the fleet")
	duration := flag.Duration("duration", 2*time.Hour, "simulated time, one fix per drone per second")
	seed := flag.Uint64("seed", 28, "the fleet's seed")
	stray := flag.Float64("stray-share", 0, "share of drones that enter zones (0: the fleet's default, 0.3)")
	derived := flag.Bool("derived", false, "drop speed and heading from every fix: the velocity is derived from the noisy positions")
	zones := flag.String("zones", "testdata/zones/airports.geojson", "zone file")
	before := flag.String("approach-before", alerts.DefaultApproachBefore, "horizon by category, as the alerter's --approach-before")
	buffer := flag.Int("approach-buffer", alerts.DefaultApproachBufferM, "metres, as the alerter's --approach-buffer")
	flag.Parse()
	if err := run(*drones, *duration, *seed, *stray, *derived, *zones, *before, *buffer); err != nil {
		fmt.Fprintln(os.Stderr, "approachreport:", err)
		os.Exit(1)
	}
}

func run(drones int, duration time.Duration, seed uint64, stray float64, derived bool, zones, before string, buffer int) error {
	set, err := geofence.LoadFile(zones)
	if err != nil {
		return err
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		return err
	}
	b, err := alerts.ParseApproachBefore(before)
	if err != nil {
		return fmt.Errorf("--approach-before: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	began := time.Now()
	r, err := approachreport.Measure(ctx, approachreport.Options{Drones: drones, Duration: duration, Seed: seed, StrayShare: stray,
		Derived: derived, Approach: alerts.ApproachSettings{Before: b, BufferM: float64(buffer)}, Zones: ix})
	if err != nil {
		return err
	}
	label := "reported speed and heading"
	if derived {
		label = "velocity derived from the positions"
	}
	r.Print(os.Stdout, fmt.Sprintf("%s, --approach-before %s --approach-buffer %d", label, before, buffer))
	fmt.Fprintf(os.Stderr, "measured in %s\n", time.Since(began).Round(time.Second))
	return nil
}
