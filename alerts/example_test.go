package alerts_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// One partition's engine over a batch, made durable with one commit.
func ExampleEngine() {
	set, _, _ := geofence.Parse(strings.NewReader(`{"type":"FeatureCollection","features":[
	  {"type":"Feature","properties":{"id":"RWY","name":"Runway","category":"restricted"},
	   "geometry":{"type":"Polygon","coordinates":[[[0,0],[0.01,0],[0.01,0.01],[0,0.01],[0,0]]]}}]}`))
	zones, _ := geofence.NewIndex(set)

	ctx := context.Background()
	store := dedup.NewMemory(0) // dedup.NewRedis in production
	snap, _ := store.Load(ctx, 0)
	engine, _ := alerts.NewEngine(0, snap)

	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var recs []alerts.Record
	for i, fix := range []struct {
		seq int64
		lon float64
	}{{1, -0.01}, {2, 0.005}, {2, 0.005}, {3, 0.02}} { // outside, inside, duplicate, outside
		p := telemetry.Position{DroneID: "UAV-1", Seq: fix.seq, TS: t0.Add(time.Duration(fix.seq) * time.Second), Lat: 0.005, Lon: fix.lon}
		recs = append(recs, alerts.Record{Offset: int64(10 + i), Value: p.AppendJSON(nil)})
	}
	out := engine.Apply(zones, recs)
	if _, err := store.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
		fmt.Println(err) // dedup.ErrFenced: another engine owns the partition
		return
	}
	for _, e := range out.Events {
		fmt.Println(strings.TrimSpace(fmt.Sprintln(e.Type, e.DroneID, e.ZoneID, e.Seq, e.Reason)))
	}
	fmt.Printf("applied %d, duplicates %d, version %d\n", out.Stats.Applied, out.Stats.Duplicates, out.Batch.Applied)
	// Output:
	// raised UAV-1 RWY 2
	// cleared UAV-1 RWY 3 exited
	// applied 3, duplicates 1, version 13
}
