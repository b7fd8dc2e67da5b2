package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

type storeUnderTest interface {
	dedup.Store
	dedup.OutboxReader
}

// implementations returns every Store, fresh: the contract suite runs
// against each.
func implementations(t *testing.T) map[string]func(t *testing.T) storeUnderTest {
	return map[string]func(t *testing.T) storeUnderTest{
		"memory": func(t *testing.T) storeUnderTest { return dedup.NewMemory(time.Hour) },
		"redis": func(t *testing.T) storeUnderTest {
			s, err := dedup.NewRedis(testenv.RedisClient(t), dedup.RedisOptions{
				Prefix: testenv.RedisPrefix(t, "dedup"), Topic: "telemetry.positions", EventTTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func ev(id string) dedup.Event { return dedup.Event{ID: id, JSON: []byte(`{"event_id":"` + id + `"}`)} }

func eventIDs(t *testing.T, s storeUnderTest, p int) []string {
	t.Helper()
	es, err := s.Outbox(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.EventID
		if want := `{"event_id":"` + e.EventID + `"}`; string(e.Event) != want {
			t.Errorf("entry %s event = %s, want %s", e.ID, e.Event, want)
		}
	}
	return ids
}

func TestStoreContract(t *testing.T) {
	ctx := context.Background()
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("EmptyPartition", func(t *testing.T) {
				s := mk(t)
				snap, err := s.Load(ctx, 3)
				if err != nil {
					t.Fatal(err)
				}
				if snap.Applied != dedup.NoVersion || len(snap.Drones) != 0 {
					t.Fatalf("empty partition = %+v", snap)
				}
			})
			t.Run("CommitThenLoad", func(t *testing.T) {
				s := mk(t)
				res, err := s.Commit(ctx, 1, dedup.NoVersion, dedup.Batch{
					Drones: map[string][]byte{"A": []byte(`{"seq":3}`), "B": []byte(`{"seq":9}`)},
					Events: []dedup.Event{ev("x:raised"), ev("y:raised")}, Applied: 41})
				if err != nil {
					t.Fatal(err)
				}
				if res != (dedup.Result{Appended: 2}) {
					t.Errorf("result = %+v", res)
				}
				res, err = s.Commit(ctx, 1, 41, dedup.Batch{
					Drones: map[string][]byte{"A": []byte(`{"seq":4}`)},
					Events: []dedup.Event{ev("x:cleared")}, Applied: 45})
				if err != nil || res.Appended != 1 {
					t.Fatalf("second commit: %+v, %v", res, err)
				}
				snap, err := s.Load(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				if snap.Applied != 45 || string(snap.Drones["A"]) != `{"seq":4}` || string(snap.Drones["B"]) != `{"seq":9}` || len(snap.Drones) != 2 {
					t.Errorf("snapshot = applied %d drones %q", snap.Applied, snap.Drones)
				}
				if got := fmt.Sprint(eventIDs(t, s, 1)); got != "[x:raised y:raised x:cleared]" {
					t.Errorf("outbox = %s", got)
				}
				if other, _ := s.Load(ctx, 2); other.Applied != dedup.NoVersion || len(other.Drones) != 0 {
					t.Errorf("partition 2 touched: %+v", other)
				}
			})
			t.Run("StaleVersionRefusedWritesNothing", func(t *testing.T) {
				s := mk(t)
				if _, err := s.Commit(ctx, 0, dedup.NoVersion, dedup.Batch{Drones: map[string][]byte{"A": []byte("1")}, Events: []dedup.Event{ev("a:raised")}, Applied: 10}); err != nil {
					t.Fatal(err)
				}
				for _, expected := range []int64{dedup.NoVersion, 5, 11} {
					_, err := s.Commit(ctx, 0, expected, dedup.Batch{
						Drones: map[string][]byte{"A": []byte("zombie"), "Z": []byte("zombie")},
						Events: []dedup.Event{ev("z:raised")}, Applied: 20})
					if !errors.Is(err, dedup.ErrFenced) {
						t.Fatalf("commit at stale version %d: err = %v, want ErrFenced", expected, err)
					}
				}
				snap, _ := s.Load(ctx, 0)
				if snap.Applied != 10 || len(snap.Drones) != 1 || string(snap.Drones["A"]) != "1" {
					t.Errorf("a refused commit wrote: %+v", snap)
				}
				if got := fmt.Sprint(eventIDs(t, s, 0)); got != "[a:raised]" {
					t.Errorf("outbox = %s", got)
				}
				// The refused event's unique key was not claimed either.
				res, err := s.Commit(ctx, 0, 10, dedup.Batch{Events: []dedup.Event{ev("z:raised")}, Applied: 11})
				if err != nil || res.Appended != 1 {
					t.Errorf("commit after refusal: %+v, %v", res, err)
				}
			})
			t.Run("UniqueKeySuppressesReplayedEvent", func(t *testing.T) {
				s := mk(t)
				if _, err := s.Commit(ctx, 0, dedup.NoVersion, dedup.Batch{Events: []dedup.Event{ev("a:raised")}, Applied: 0}); err != nil {
					t.Fatal(err)
				}
				res, err := s.Commit(ctx, 0, 0, dedup.Batch{Events: []dedup.Event{ev("a:raised"), ev("a:cleared"), ev("a:cleared")}, Applied: 7})
				if err != nil {
					t.Fatal(err)
				}
				if res != (dedup.Result{Appended: 1, Suppressed: 2}) {
					t.Errorf("result = %+v", res)
				}
				if got := fmt.Sprint(eventIDs(t, s, 0)); got != "[a:raised a:cleared]" {
					t.Errorf("outbox = %s", got)
				}
			})
			t.Run("BadBatchRejected", func(t *testing.T) {
				s := mk(t)
				for _, tc := range []struct{ expected, applied int64 }{{dedup.NoVersion, dedup.NoVersion}, {5, 5}, {5, 4}, {-3, 2}} {
					if _, err := s.Commit(ctx, 0, tc.expected, dedup.Batch{Applied: tc.applied}); err == nil || errors.Is(err, dedup.ErrFenced) {
						t.Errorf("commit expected %d applied %d: err = %v, want a usage error", tc.expected, tc.applied, err)
					}
				}
			})
		})
	}
}

func TestRedisKeysShareHashTagAndExpire(t *testing.T) {
	ctx := context.Background()
	c := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "dedup")
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: prefix, Topic: "telemetry.positions", EventTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, 3, dedup.NoVersion, dedup.Batch{Drones: map[string][]byte{"A": []byte("s")}, Events: []dedup.Event{ev("e1")}, Applied: 2}); err != nil {
		t.Fatal(err)
	}
	// The key strings themselves are pinned by redislayout's tests.
	k := redislayout.Of(prefix, "telemetry.positions", 3)
	if s.Keys(3) != k {
		t.Errorf("store keys of partition 3 = %q, want %q", s.Keys(3).Tag(), k.Tag())
	}
	for key, typ := range map[string]string{k.Applied(): "string", k.Drones(): "hash", k.Outbox(): "stream", k.Event("e1"): "string"} {
		if got := c.Type(ctx, key).Val(); got != typ {
			t.Errorf("TYPE %s = %q, want %q", key, got, typ)
		}
	}
	if ttl := c.TTL(ctx, k.Event("e1")).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("unique key TTL = %v, want about 1h", ttl)
	}
	if got := c.Get(ctx, k.Applied()).Val(); got != "2" {
		t.Errorf("applied = %q", got)
	}
	msgs := c.XRange(ctx, k.Outbox(), "-", "+").Val()
	if len(msgs) != 1 || len(msgs[0].Values) != 2 || msgs[0].Values[redislayout.FieldEventID] != "e1" || msgs[0].Values[redislayout.FieldEvent] != `{"event_id":"e1"}` {
		t.Errorf("outbox = %+v", msgs)
	}
}

// TestRedisConnectionKilledMidCommit drops the store's connections (CLIENT
// KILL ID of the connections named by this test only: the server is shared)
// while it commits: a commit that fails may or may not have taken
// effect, and reloading the version tells which. Retrying from the reloaded
// version yields every event exactly once.
func TestRedisConnectionKilledMidCommit(t *testing.T) {
	ctx := context.Background()
	addr := testenv.Redis(t)
	name := testenv.UniqueName("dedup-victim")
	c := redis.NewClient(&redis.Options{Addr: addr, ClientName: name, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	killer := testenv.RedisClient(t)
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "dedup"), Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	const batches = 200
	stop := make(chan struct{})
	done := make(chan struct{})
	kills := 0
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			kills += testenv.KillRedisClients(ctx, killer, name)
		}
	}()
	failures := 0
	version := dedup.NoVersion
	for next := 0; next < batches; {
		b := dedup.Batch{Drones: map[string][]byte{"A": []byte(fmt.Sprint(next))}, Applied: int64(next)}
		for j := 0; j < 20; j++ {
			b.Events = append(b.Events, ev(fmt.Sprintf("%d-%d", next, j)))
		}
		_, err := s.Commit(ctx, 0, version, b)
		if err != nil {
			if errors.Is(err, dedup.ErrFenced) {
				t.Fatalf("fenced with one writer: %v", err)
			}
			failures++
			// Unknown outcome: reload to learn the version.
			testenv.CheckFor(t, 10*time.Second, func() error {
				snap, err := s.Load(ctx, 0)
				if err == nil {
					version = snap.Applied
				}
				return err
			})
			next = int(version) + 1
			continue
		}
		version = b.Applied
		next++
	}
	close(stop)
	<-done
	if failures == 0 {
		t.Fatalf("no commit failed in %d batches (%d kills): the test did not exercise a dropped connection", batches, kills)
	}
	ids := eventIDs(t, s, 0)
	if len(ids) != batches*20 {
		t.Errorf("outbox has %d events, want %d", len(ids), batches*20)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("duplicate event %s", id)
		}
		seen[id] = true
	}
	t.Logf("%d batches, %d connection kills, %d failed commits", batches, kills, failures)
}
