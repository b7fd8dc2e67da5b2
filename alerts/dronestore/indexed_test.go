package dronestore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/alerts/dronestore/dronetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/embedded"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestListIndexedEqualsScan: every filter, paged with cursors at several
// page sizes, answers from the drone indexes exactly what reading every
// state answers (the partitions' marks removed), over 900 drones on three
// partitions, some flown on two of them (a repartition), some placed
// beyond the geo set's latitudes.
func TestListIndexedEqualsScan(t *testing.T) {
	servers := map[string]func(t *testing.T) redis.UniversalClient{
		"redis": func(t *testing.T) redis.UniversalClient { return testenv.RedisClient(t) },
		// The embedded default's (miniredis, cmd/demo): its GEOSEARCH
		// answers the demo's drones API.
		"embedded": func(t *testing.T) redis.UniversalClient {
			r, err := embedded.StartRedis(0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1,
				ReadTimeout: testenv.TestRedisTimeout, WriteTimeout: testenv.TestRedisTimeout})
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
	}
	for name, server := range servers {
		t.Run(name, func(t *testing.T) { testListIndexedEqualsScan(t, server(t)) })
	}
}

func testListIndexedEqualsScan(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, "droneix")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := dronetest.Zones()
	if err != nil {
		t.Fatal(err)
	}
	st, err := dronestore.New(dronestore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(29, 1))
	byP := make([][]telemetry.Position, 3)
	for i := range 900 {
		id := fmt.Sprintf("D%04d", rng.IntN(100000))
		lat, lon := 51+rng.Float64(), -1+rng.Float64()*2
		if i%100 == 0 {
			lat = 86 + rng.Float64()*3 // beyond the geo set
		}
		p := i % 3
		ts := base.Add(time.Duration(rng.IntN(600)) * time.Second)
		byP[p] = append(byP[p], dronetest.Pos(id, 1, ts, lat, lon))
		if i%50 == 0 { // the same drone later on the next partition
			byP[(p+1)%3] = append(byP[(p+1)%3], dronetest.Pos(id, 2, ts.Add(time.Second), 51.2, -0.3))
		}
	}
	for p, ps := range byP {
		if _, err := dronetest.Fly(ctx, ds, zs, p, ps...); err != nil {
			t.Fatal(err)
		}
	}
	pageAll := func(f dronestore.Filter) []string {
		t.Helper()
		var got []string
		for range 10000 {
			page, next, err := st.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > max(f.Limit, 1) && f.Limit > 0 {
				t.Fatalf("page of %d drones, limit %d", len(page), f.Limit)
			}
			for _, d := range page {
				got = append(got, fmt.Sprintf("%s@%d:%.5f,%.5f", d.DroneID, d.Partition, *d.Lat, *d.Lon))
			}
			if next == "" {
				return got
			}
			f.Cursor = next
		}
		t.Fatal("cursors never end")
		return nil
	}
	filters := []struct {
		name string
		f    dronestore.Filter
	}{
		{"all", dronestore.Filter{}},
		{"small box", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -0.6, MinLat: 51.3, MaxLon: -0.2, MaxLat: 51.6}}},
		{"box on the repartitioned drones' new place", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -0.31, MinLat: 51.19, MaxLon: -0.29, MaxLat: 51.21}}},
		{"box beyond 85°", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -1, MinLat: 80, MaxLon: 1, MaxLat: 90}}},
		{"wide box", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -170, MinLat: -80, MaxLon: 170, MaxLat: 80}}},
		{"empty box", dronestore.Filter{BBox: &dronestore.BBox{MinLon: 10, MinLat: 10, MaxLon: 11, MaxLat: 11}}},
		{"active since", dronestore.Filter{ActiveSince: base.Add(9 * time.Minute)}},
		{"box and active since", dronestore.Filter{BBox: &dronestore.BBox{MinLon: -1, MinLat: 51, MaxLon: 0, MaxLat: 51.5}, ActiveSince: base.Add(5 * time.Minute)}},
	}
	want := map[string][]string{}
	for _, limit := range []int{0, 7, 100, 1000} {
		for _, tt := range filters {
			f := tt.f
			f.Limit = limit
			want[fmt.Sprint(tt.name, limit)] = pageAll(f)
		}
	}
	// The same without the indexes.
	for p := range 3 {
		if err := rdb.Del(ctx, ds.Keys(p).DroneIndexed()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{0, 7, 100, 1000} {
		for _, tt := range filters {
			f := tt.f
			f.Limit = limit
			got := want[fmt.Sprint(tt.name, limit)]
			scan := pageAll(f)
			if !slices.Equal(got, scan) {
				t.Errorf("%s, limit %d: the indexes list %d drones, reading every state %d\nindexed %.300q\nscanned %.300q", tt.name, limit, len(got), len(scan), got, scan)
			}
			if tt.name == "all" && len(scan) < 850 {
				t.Errorf("all: %d drones listed, want the ~880 flown", len(scan))
			}
		}
	}
}

// TestListBoxFindsADroneBetweenPlaces: the engine writes a drone's place
// in the geo set again only once it moved alerts.PlaceStepM; a box that
// holds its position but not its last place still finds it, and a box
// that holds its last place but not its position does not.
func TestListBoxFindsADroneBetweenPlaces(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "droneplace")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := dronetest.Zones()
	if err != nil {
		t.Fatal(err)
	}
	st, err := dronestore.New(dronestore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ds.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := alerts.NewEngine(0, snap)
	if err != nil {
		t.Fatal(err)
	}
	const lat, step = 51.3, 0.0009 // ~63 m of longitude a batch
	lon, placedAt, off := -0.8, 0.0, int64(0)
	moves := 0
	for i := range 12 {
		p := dronetest.Pos("SLOW", int64(i+1), base.Add(time.Duration(i)*time.Second), lat, lon)
		out := e.Apply(zs, []alerts.Record{{Offset: off, Value: p.AppendJSON(nil)}})
		off++
		if _, err := ds.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
			t.Fatal(err)
		}
		if len(out.Batch.Placed) == 1 {
			placedAt = lon
			moves++
		}
		around := func(w, e float64) []string {
			ds, _, err := st.List(ctx, dronestore.Filter{BBox: &dronestore.BBox{MinLon: w, MinLat: lat - 0.001, MaxLon: e, MaxLat: lat + 0.001}})
			if err != nil {
				t.Fatal(err)
			}
			return ids(ds)
		}
		if got := around(lon-0.00001, lon+0.01); len(got) != 1 {
			t.Errorf("batch %d: a box from the drone's position eastwards (its place %.4f is %.0f m west) lists %v", i, placedAt, (lon-placedAt)*69500, got)
		}
		if placedAt != lon {
			if got := around(placedAt-0.01, lon-0.00001); len(got) != 0 {
				t.Errorf("batch %d: a box around its place but short of its position lists %v", i, got)
			}
		}
		lon += step
	}
	if moves < 3 || moves > 9 {
		t.Errorf("placed %d times in 12 moves of ~63 m: want about every other one", moves)
	}
}
