package dedup_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func alarmEv(alarm, typ, ts string) dedup.Event {
	id := alarm + ":" + typ
	return dedup.Event{ID: id, JSON: []byte(`{"event_id":"` + id + `","alarm_id":"` + alarm + `","type":"` + typ + `","zone_name":"\"ts\":\"x","ts":"` + ts + `","lat":1}`)}
}

// TestRedisAlarmIndex: the batch script files every appended raised and
// cleared event in the alarm index (active/cleared sets scored by raise
// time, the events under their ids) and deletes cleared alarms once past
// the retention, keeping active ones.
func TestRedisAlarmIndex(t *testing.T) {
	ctx := context.Background()
	c := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "dedup")
	const retention = 300 * time.Millisecond
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: prefix, Topic: "t", AlarmRetention: retention})
	if err != nil {
		t.Fatal(err)
	}
	k := redislayout.Of(prefix, "t", 1)
	version := dedup.NoVersion
	commit := func(es ...dedup.Event) dedup.Result {
		t.Helper()
		res, err := s.Commit(ctx, 1, version, dedup.Batch{Events: es, Applied: version + 5})
		if err != nil {
			t.Fatal(err)
		}
		version += 5
		return res
	}
	const t1, t2, t3 = "2026-12-02T10:00:00Z", "2026-12-02T10:00:01.5Z", "2026-12-02T10:00:03Z"
	ms := func(ts string) float64 {
		v, _ := time.Parse(time.RFC3339Nano, ts)
		return float64(v.UnixMilli())
	}
	zset := func(key string) []redis.Z {
		t.Helper()
		z, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	fields := func() []string {
		t.Helper()
		f, err := c.HKeys(ctx, k.Alarms()).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(f)
		return f
	}

	// Raise a and b; a clear of z, never raised here, is appended but not indexed.
	commit(alarmEv("a", "raised", t1), alarmEv("b", "raised", t2), alarmEv("z", "cleared", t3))
	// b raised again (suppressed: not re-indexed), c raised and cleared in one batch, a cleared.
	if res := commit(alarmEv("b", "raised", t3), alarmEv("c", "raised", t3), alarmEv("c", "cleared", t3), alarmEv("a", "cleared", t3)); res.Appended != 3 {
		t.Fatalf("second batch: %+v", res)
	}
	steps := []struct {
		name string
		got  any
		want any
	}{
		{"active", zset(k.AlarmsActive()), []redis.Z{{Score: ms(t2), Member: "b"}}},
		{"cleared", zset(k.AlarmsCleared()), []redis.Z{{Score: ms(t1), Member: "a"}, {Score: ms(t3), Member: "c"}}},
		{"fields", fields(), []string{"a:cleared", "a:raised", "b:raised", "c:cleared", "c:raised"}},
		{"gc members", len(zset(k.AlarmsGC())), 2},
	}
	for _, st := range steps {
		if !equal(st.got, st.want) {
			t.Errorf("%s = %v, want %v", st.name, st.got, st.want)
		}
	}
	if got := c.HGet(ctx, k.Alarms(), "b:raised").Val(); got != string(alarmEv("b", "raised", t2).JSON) {
		t.Errorf("b:raised = %s, want the first raise's JSON", got)
	}
	// An ack field as the ack script writes it goes with the alarm.
	c.HSet(ctx, k.Alarms(), "a:acked", "{}")
	time.Sleep(retention + 50*time.Millisecond)
	commit(alarmEv("d", "raised", t3))
	if got, want := fields(), []string{"b:raised", "d:raised"}; !slices.Equal(got, want) {
		t.Errorf("after the retention, fields = %q, want %q (active alarms kept)", got, want)
	}
	if z := zset(k.AlarmsCleared()); len(z) != 0 {
		t.Errorf("cleared after the retention = %v", z)
	}
	if z := zset(k.AlarmsGC()); len(z) != 0 {
		t.Errorf("gc after the retention = %v", z)
	}
	if z := zset(k.AlarmsActive()); len(z) != 2 {
		t.Errorf("active = %v, want b and d", z)
	}
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case []redis.Z:
		return slices.Equal(x, b.([]redis.Z))
	case []string:
		return slices.Equal(x, b.([]string))
	}
	return a == b
}
