package geofence_test

import (
	"fmt"
	"time"

	"github.com/nofly-dev/nofly/geofence"
)

// A service keeps the index in use in a Current, answers every position
// from it, and swaps a new one in when the zone file changes.
func ExampleCurrent() {
	var zones geofence.Current

	set, err := geofence.LoadFile("../testdata/zones/airports.geojson")
	if err != nil {
		fmt.Println(err) // every problem, each naming file, feature, id and field
		return
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		fmt.Println(err)
		return
	}
	old := zones.Store(ix)
	fmt.Println("loaded", set.Version, "replacing", old.Version() == "")
	fmt.Println("changes:", len(geofence.Diff(old, ix).Added), "zones added")

	// Hot path: one Query per position, reusing the hits slice.
	hits := make([]geofence.Hit, 0, 8)
	p := geofence.Point{
		Lat: 51.4706, Lon: -0.4619, Time: time.Date(2026, 12, 2, 10, 15, 3, 0, time.UTC),
		Heights: geofence.Heights{}.Set(geofence.AMSL, 85),
	}
	hits = zones.Load().Query(p, hits)
	for _, h := range hits {
		fmt.Printf("%s %s height assumed: %v\n", h.Zone.ID, h.Zone.Category, h.HeightAssumed)
	}
	// An active alarm stays raised while StillInside holds (clear_buffer_m).
	p.Lon -= 0.08 // about 5.5 km west: outside the 5 km circle and its 100 m buffer
	fmt.Println("still inside EGLL-ATZ:", zones.Load().StillInside("EGLL-ATZ", p))
	// Output:
	// loaded nofly-airports-2026-12-02 replacing true
	// changes: 92 zones added
	// EGLL-ATZ restricted height assumed: false
	// EGLL-RPZ restricted height assumed: false
	// EGLL-CTR-LOW warning height assumed: true
	// still inside EGLL-ATZ: false
}
