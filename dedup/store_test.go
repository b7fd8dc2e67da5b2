package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/embedded"
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
		// The embedded default's Redis (miniredis, cmd/demo): the same
		// contract, so the demo is proven to keep the store's promises.
		"embedded": func(t *testing.T) storeUnderTest {
			r, err := embedded.StartRedis(0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: "dedup", Topic: "telemetry.positions", EventTTL: time.Hour})
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
	bucket, exp := onlyBucket(t, c, k, "2")
	for key, typ := range map[string]string{k.Applied(): "string", k.Drones(): "hash", k.Outbox(): "stream",
		k.EventMark(): "string", bucket: "hash", k.Event("e1"): "none", k.Legacy(): "none"} {
		if got := c.Type(ctx, key).Val(); got != typ {
			t.Errorf("TYPE %s = %q, want %q", key, got, typ)
		}
	}
	if v := c.HGet(ctx, bucket, "e1").Val(); v != "1" {
		t.Errorf("HGET %s e1 = %q, want \"1\"", bucket, v)
	}
	// One expiry a bucket, named by it: at least a TTL, at most one and a half.
	if pttl := c.PTTL(ctx, bucket).Val(); pttl <= 89*time.Minute || pttl > 90*time.Minute {
		t.Errorf("bucket PTTL = %v, want about 1h30m", pttl)
	}
	if at := c.PExpireTime(ctx, bucket).Val(); at != time.Duration(exp)*time.Millisecond {
		t.Errorf("bucket expires at %v ms, its name says %d", at.Milliseconds(), exp)
	}
	if got := c.Get(ctx, k.Applied()).Val(); got != "2" {
		t.Errorf("applied = %q", got)
	}
	msgs := c.XRange(ctx, k.Outbox(), "-", "+").Val()
	// The event alone: its id is the JSON's (issue 32: a second field cost
	// Redis ~0.7 µs an event).
	if len(msgs) != 1 || len(msgs[0].Values) != 1 || msgs[0].Values[redislayout.FieldEvent] != `{"event_id":"e1"}` {
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
	// At least batches commits, and more (up to 10x) until a kill has hit
	// one mid-command: on a loaded machine 200 may all fall between kills.
	next := 0
	for next < batches || (failures == 0 && next < 10*batches) {
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
		t.Fatalf("no commit failed in %d batches (%d kills): the test did not exercise a dropped connection", next, kills)
	}
	ids := eventIDs(t, s, 0)
	if len(ids) != next*20 {
		t.Errorf("outbox has %d events, want %d", len(ids), next*20)
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

// onlyBucket reads the partition's event mark, checks that its applied
// offset is applied and that it names one bucket, and returns that bucket's
// key and expiry.
func onlyBucket(t *testing.T, c *redis.Client, k redislayout.Keys, applied string) (string, int64) {
	t.Helper()
	bs := markBuckets(t, c, k, applied)
	if len(bs) != 1 {
		t.Fatalf("mark names buckets %v, want one", bs)
	}
	return k.EventBucket(bs[0]), bs[0]
}

// markBuckets returns the bucket expiries the partition's event mark names,
// checking that its first word is applied.
func markBuckets(t *testing.T, c *redis.Client, k redislayout.Keys, applied string) []int64 {
	t.Helper()
	mark, err := c.Get(context.Background(), k.EventMark()).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", k.EventMark(), err)
	}
	w := strings.Fields(mark)
	if len(w) == 0 || w[0] != applied {
		t.Fatalf("mark %q: want it to start with the applied offset %s", mark, applied)
	}
	var out []int64
	for _, s := range w[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("mark %q: %v", mark, err)
		}
		out = append(out, n)
	}
	return out
}

// committer commits batches of events on one partition of a Redis store,
// following the version, and drops the drone states before each commit: the
// unique keys are all that stands between a decision taken again and a
// second append.
type committer struct {
	t       *testing.T
	s       *dedup.Redis
	c       *redis.Client
	version int64
	legacy  bool // commit with the earlier layout's script
}

func (w *committer) commit(ids ...string) dedup.Result {
	w.t.Helper()
	ctx := context.Background()
	if err := w.c.Del(ctx, w.s.Keys(0).Drones()).Err(); err != nil {
		w.t.Fatal(err)
	}
	b := dedup.Batch{Drones: map[string][]byte{"A": []byte("s")}, Applied: w.version + 1}
	for _, id := range ids {
		b.Events = append(b.Events, ev(id))
	}
	commit := w.s.Commit
	if w.legacy {
		commit = w.s.LegacyCommit
	}
	res, err := commit(ctx, 0, w.version, b)
	if err != nil {
		w.t.Fatal(err)
	}
	w.version = b.Applied
	return res
}

func (w *committer) want(res dedup.Result, appended, suppressed int, what string) {
	w.t.Helper()
	if res != (dedup.Result{Appended: appended, Suppressed: suppressed}) {
		w.t.Errorf("%s: %+v, want %d appended, %d suppressed", what, res, appended, suppressed)
	}
}

// TestRedisUniqueKeyAcrossBuckets: with a TTL of 2 s a bucket takes new ids
// for 1 s and expires 3 s after it was created. An id is suppressed in the
// bucket after its own and until its bucket expires (at least the TTL after
// it was claimed), the expired bucket is dropped from the mark, and only
// then is the id appended again.
func TestRedisUniqueKeyAcrossBuckets(t *testing.T) {
	c := testenv.RedisClient(t)
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "dedup"), Topic: "t", EventTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Keys(0)
	w := &committer{t: t, s: s, c: c, version: dedup.NoVersion}
	t0 := time.Now()
	w.want(w.commit("a", "a"), 1, 1, "a twice in its first batch")
	first, _ := onlyBucket(t, c, k, "0")

	time.Sleep(time.Until(t0.Add(1200 * time.Millisecond)))
	w.want(w.commit("a", "b"), 1, 1, "a again once its bucket closed, b new")
	bs := markBuckets(t, c, k, "1")
	if len(bs) != 2 || k.EventBucket(bs[0]) != first {
		t.Fatalf("mark buckets %v: want the first (%s) and a second", bs, first)
	}
	if !c.HExists(context.Background(), k.EventBucket(bs[1]), "b").Val() || c.HExists(context.Background(), k.EventBucket(bs[1]), "a").Val() {
		t.Errorf("second bucket: want b and not a (a stays claimed in the first)")
	}

	time.Sleep(time.Until(t0.Add(1900 * time.Millisecond)))
	w.want(w.commit("a", "b"), 0, 2, "a and b within the TTL of their claims")

	time.Sleep(time.Until(t0.Add(3300 * time.Millisecond)))
	w.want(w.commit("a", "b"), 1, 1, "a once the first bucket expired, b whose bucket lives")
	if bs := markBuckets(t, c, k, "3"); len(bs) != 2 || k.EventBucket(bs[0]) == first {
		t.Errorf("mark buckets %v: want the expired first bucket gone and two live", bs)
	}
}

// TestRedisUpgradeFromPerEventKeys: a partition written by the earlier
// layout (a SET NX EX string per event) and then committed on the bucket
// layout keeps suppressing the events claimed before the upgrade until their
// keys expire; so does a partition an earlier release's alerter committed to
// after this one had (a mixed-version group during a rolling upgrade). A
// partition only this layout ever wrote never reads the old keys.
func TestRedisUpgradeFromPerEventKeys(t *testing.T) {
	ctx := context.Background()
	c := testenv.RedisClient(t)
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "dedup"), Topic: "t", EventTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Keys(0)
	old := &committer{t: t, s: s, c: c, version: dedup.NoVersion, legacy: true}
	old.want(old.commit("a", "b", "c"), 3, 0, "earlier release")
	if c.Type(ctx, k.Event("a")).Val() != "string" || c.Exists(ctx, k.EventMark()).Val() != 0 {
		t.Fatal("the legacy script did not write the earlier layout")
	}
	snap, err := s.Load(ctx, 0)
	if err != nil || snap.Applied != 0 {
		t.Fatalf("load of the earlier layout: %+v, %v", snap, err)
	}

	w := &committer{t: t, s: s, c: c, version: old.version}
	w.want(w.commit("a", "d"), 1, 1, "first commit after the upgrade: a claimed before it, d new")
	if pttl := c.PTTL(ctx, k.Legacy()).Val(); pttl <= 59*time.Minute || pttl > time.Hour {
		t.Errorf("legacy flag PTTL = %v, want about the TTL (1h)", pttl)
	}
	w.want(w.commit("b", "d"), 0, 2, "second commit: b claimed before the upgrade, d after")
	if err := c.Del(ctx, k.Event("c")).Err(); err != nil { // as if it expired
		t.Fatal(err)
	}
	w.want(w.commit("c"), 1, 0, "c once its old key expired")

	// The flag expired (it outlives every key written before it was set,
	// those having at most a TTL left then); an earlier release's alerter
	// commits; this layout takes the partition back and must read the old
	// keys again.
	if err := c.Del(ctx, k.Legacy()).Err(); err != nil {
		t.Fatal(err)
	}
	w.want(w.commit("d", "g"), 1, 1, "no flag: d claimed in a bucket, g new")
	if c.Exists(ctx, k.Legacy()).Val() != 0 {
		t.Error("a commit after this layout's own commit set the legacy flag")
	}
	old.version = w.version
	old.want(old.commit("e"), 1, 0, "earlier release after the upgrade")
	w.version = old.version
	w.want(w.commit("e", "f"), 1, 1, "back on this layout: e claimed by the earlier release, f new")
	if c.Exists(ctx, k.Legacy()).Val() != 1 {
		t.Error("the legacy flag was not set again")
	}

	// A fresh partition: no legacy flag, no old keys written.
	fresh := &committer{t: t, s: s, c: c, version: dedup.NoVersion}
	fresh.s, _ = dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "dedup"), Topic: "t", EventTTL: time.Hour})
	fresh.want(fresh.commit("a"), 1, 0, "fresh partition")
	fk := fresh.s.Keys(0)
	if c.Exists(ctx, fk.Legacy(), fk.Event("a")).Val() != 0 {
		t.Error("a fresh partition got a legacy flag or an old-layout key")
	}
}

// TestRedisLargeBatch: more ids in one batch than one lookup or claim call
// takes (1,000 arguments), on a partition reading old keys too.
func TestRedisLargeBatch(t *testing.T) {
	c := testenv.RedisClient(t)
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: testenv.RedisPrefix(t, "dedup"), Topic: "t", EventTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 2500; i++ {
		ids = append(ids, fmt.Sprintf("%04d:raised", i))
	}
	old := &committer{t: t, s: s, c: c, version: dedup.NoVersion, legacy: true}
	old.want(old.commit(ids[:1200]...), 1200, 0, "earlier release, 1,200 events")
	w := &committer{t: t, s: s, c: c, version: old.version}
	w.want(w.commit(append(ids, ids[2400:]...)...), 1300, 1300, "2,600 events: 1,200 old, 100 twice")
	w.want(w.commit(append(ids, "new")...), 1, 2500, "all 2,500 again and one new")
	if got := len(eventIDs(t, s, 0)); got != 2501 {
		t.Errorf("outbox has %d entries, want 2,501", got)
	}
}
