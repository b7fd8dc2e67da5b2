package dedup_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/embedded"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// droneIndexes reads a partition's drone indexes: the ids, the changes
// stream's entries ("<a> <p> <sorted ids>") and the places.
func droneIndexes(t *testing.T, c redis.UniversalClient, s *dedup.Redis, p int) (ids []string, changes []string, places map[string][2]float64) {
	t.Helper()
	ctx := context.Background()
	k := s.Keys(p)
	ids, err := c.ZRangeByLex(ctx, k.DroneIDs(), &redis.ZRangeBy{Min: "-", Max: "+"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	xs, err := c.XRange(ctx, k.DroneChanges(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		var d []string
		if v, _ := x.Values["d"].(string); v != "" {
			d = strings.Split(v, "\n")
		}
		slices.Sort(d)
		changes = append(changes, fmt.Sprint(x.Values["a"], " ", x.Values["p"], " ", strings.Join(d, ",")))
	}
	members, err := c.ZRange(ctx, k.DroneGeo(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	places = map[string][2]float64{}
	if len(members) > 0 {
		pos, err := c.GeoPos(ctx, k.DroneGeo(), members...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range members {
			places[m] = [2]float64{pos[i].Longitude, pos[i].Latitude}
		}
	}
	return ids, changes, places
}

// TestDroneIndexes is the contract of the drone indexes the batch script
// keeps beside the states: every drone written is in the id set and the
// change set (at the batch's offset), placed where its last position is,
// a forgotten drone leaves all three, and a position Redis's geo set
// cannot hold neither fails the batch nor is placed.
func TestDroneIndexes(t *testing.T) {
	for name, server := range redisServers() {
		t.Run(name, func(t *testing.T) { testDroneIndexes(t, server(t)) })
	}
}

// redisServers are the real Redis and the embedded default's (miniredis,
// cmd/demo): the drone indexes' scripts hold on both.
func redisServers() map[string]func(t *testing.T) redis.UniversalClient {
	return map[string]func(t *testing.T) redis.UniversalClient{
		"redis": func(t *testing.T) redis.UniversalClient { return testenv.RedisClient(t) },
		"embedded": func(t *testing.T) redis.UniversalClient {
			r, err := embedded.StartRedis(0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
	}
}

func testDroneIndexes(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "droneix"), Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	state := []byte(`{"seq":1}`)
	steps := []struct {
		name      string
		batch     dedup.Batch
		wantIDs   []string
		wantChg   []string
		wantPlace map[string][2]float64
	}{
		{"first", dedup.Batch{Applied: 10, New: []string{"A", "B", "C"},
			Drones: map[string][]byte{"A": state, "B": state, "C": state},
			Placed: []dedup.Placed{{ID: "A", Lon: -0.45, Lat: 51.47}, {ID: "B", Lon: 2.55, Lat: 49.0}}},
			[]string{"A", "B", "C"}, []string{"10 -1 A,B,C"},
			map[string][2]float64{"A": {-0.45, 51.47}, "B": {2.55, 49.0}}},
		{"A moves, C beyond the geo set's latitudes", dedup.Batch{Applied: 20,
			Drones: map[string][]byte{"A": state, "C": state},
			Placed: []dedup.Placed{{ID: "A", Lon: -0.40, Lat: 51.50}, {ID: "C", Lon: 10, Lat: 89.5}}},
			[]string{"A", "B", "C"}, []string{"10 -1 A,B,C", "20 10 A,C"},
			map[string][2]float64{"A": {-0.40, 51.50}, "B": {2.55, 49.0}}},
		{"B forgotten, D new", dedup.Batch{Applied: 30, Forgotten: []string{"B"}, New: []string{"D"},
			Drones: map[string][]byte{"D": state}, Placed: []dedup.Placed{{ID: "D", Lon: 13.4, Lat: 52.5}}},
			[]string{"A", "C", "D"}, []string{"10 -1 A,B,C", "20 10 A,C", "30 20 D"},
			map[string][2]float64{"A": {-0.40, 51.50}, "D": {13.4, 52.5}}},
		{"a batch that writes no state", dedup.Batch{Applied: 35},
			[]string{"A", "C", "D"}, []string{"10 -1 A,B,C", "20 10 A,C", "30 20 D", "35 30 "},
			map[string][2]float64{"A": {-0.40, 51.50}, "D": {13.4, 52.5}}},
	}
	version := dedup.NoVersion
	for _, st := range steps {
		if _, err := s.Commit(ctx, 0, version, st.batch); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		version = st.batch.Applied
		ids, chg, places := droneIndexes(t, c, s, 0)
		if !slices.Equal(ids, st.wantIDs) {
			t.Errorf("%s: ids %v, want %v", st.name, ids, st.wantIDs)
		}
		if !slices.Equal(chg, st.wantChg) {
			t.Errorf("%s: changes %q, want %q", st.name, chg, st.wantChg)
		}
		if len(places) != len(st.wantPlace) {
			t.Errorf("%s: places %v, want %v", st.name, places, st.wantPlace)
		}
		for id, w := range st.wantPlace {
			g, ok := places[id]
			if !ok || abs(g[0]-w[0]) > 1e-4 || abs(g[1]-w[1]) > 1e-4 {
				t.Errorf("%s: %s placed at %v (%v), want %v", st.name, id, g, ok, w)
			}
		}
	}
	if n, err := c.Exists(ctx, s.Keys(0).DroneIndexed()).Result(); err != nil || n != 1 {
		t.Errorf("a partition indexed from its first batch has no mark (%d, %v)", n, err)
	}
	if n, err := s.IndexDrones(ctx, 0); err != nil || n != -1 {
		t.Errorf("IndexDrones on an indexed partition = %d, %v; want -1 (nothing to do)", n, err)
	}
}

// TestIndexDronesUpgrade: a partition written before the indexes (its
// states in the hash, no mark) gets them from its states when an alerter
// loads it, once; the batches after it keep them.
func TestIndexDronesUpgrade(t *testing.T) {
	for name, server := range redisServers() {
		t.Run(name, func(t *testing.T) { testIndexDronesUpgrade(t, server(t)) })
	}
}

func testIndexDronesUpgrade(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "droneixup"), Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Keys(1)
	// The earlier layout: states with and without a position, one not
	// JSON at all (it is still listed by id, never placed).
	old := map[string]string{
		"A": `{"seq":4,"pos":{"ts":"2026-12-02T10:04:31.5Z","lat":51.4702,"lon":-0.4543}}`,
		"B": `{"seq":2}`,
		"C": `{"seq":9,"pos":{"ts":"2026-12-02T10:04:31.5Z","lat":88.1,"lon":20}}`,
		"D": `not json`,
	}
	for i := range 1200 { // more than one chunk of each call
		old["Z"+strconv.Itoa(i)] = fmt.Sprintf(`{"seq":1,"pos":{"ts":"2026-12-02T10:04:31.5Z","lat":%g,"lon":%g}}`, 40+float64(i)/100, float64(i)/100)
	}
	if err := c.HSet(ctx, k.Drones(), old).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, k.Applied(), "41", 0).Err(); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Drones) != len(old) {
		t.Fatalf("loaded %d states, want %d", len(snap.Drones), len(old))
	}
	ids, _, places := droneIndexes(t, c, s, 1)
	if len(ids) != len(old) {
		t.Errorf("indexed %d ids, want %d", len(ids), len(old))
	}
	if len(places) != 1201 {
		t.Errorf("placed %d drones, want 1201 (A and the Z's: B has no position, C is beyond 85°, D is not a state)", len(places))
	}
	if g := places["A"]; abs(g[0]+0.4543) > 1e-4 || abs(g[1]-51.4702) > 1e-4 {
		t.Errorf("A placed at %v", g)
	}
	// Once: a drone removed from the sets by hand is not put back.
	if err := c.ZRem(ctx, k.DroneIDs(), "A").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.IndexDrones(ctx, 1); err != nil || n != -1 {
		t.Errorf("second IndexDrones = %d, %v; want -1", n, err)
	}
	if _, err := s.Commit(ctx, 1, 41, dedup.Batch{Applied: 50, New: []string{"A"}, Drones: map[string][]byte{"A": []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	ids, chg, _ := droneIndexes(t, c, s, 1)
	if !slices.Contains(ids, "A") || !slices.Equal(chg, []string{"50 41 A"}) {
		t.Errorf("after a batch writing A: in ids %v, changes %q (want [50 41 A])", slices.Contains(ids, "A"), chg)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
