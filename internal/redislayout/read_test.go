package redislayout_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestReadOutbox reads a stream of five entries after an id, n at most,
// blocking and not, against the real Redis; the reference is the entries as
// they were added.
func TestReadOutbox(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	k := redislayout.Of(testenv.RedisPrefix(t, "layout"), "t", 0)
	var all []redislayout.Entry
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		e := redislayout.Entry{EventID: id + ":raised", Event: []byte(`{"event_id":"` + id + `:raised"}`)}
		sid, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: e.Values()}).Result()
		if err != nil {
			t.Fatal(err)
		}
		e.ID = sid
		all = append(all, e)
	}
	tests := []struct {
		name  string
		after string
		n     int
		block time.Duration
		want  []redislayout.Entry
	}{
		{"from the start", "", 10, 0, all},
		{"from StartID, n at most", redislayout.StartID, 2, 0, all[:2]},
		{"after an id", all[1].ID, 10, 0, all[2:]},
		{"after an id, n at most", all[1].ID, 2, 0, all[2:4]},
		{"after the last: none", all[4].ID, 10, 0, nil},
		{"blocking, from the start, n at most", "", 3, 50 * time.Millisecond, all[:3]},
		{"blocking, after an id", all[2].ID, 10, 50 * time.Millisecond, all[3:]},
		{"blocking, after the last: none once the time is up", all[4].ID, 10, 50 * time.Millisecond, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := redislayout.ReadOutbox(ctx, rdb, k, tt.after, tt.n, tt.block)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}

	t.Run("blocking wakes on a new entry", func(t *testing.T) {
		e := redislayout.Entry{EventID: "f:raised", Event: []byte(`{"event_id":"f:raised"}`)}
		go func() {
			time.Sleep(100 * time.Millisecond)
			rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: e.Values()})
		}()
		got, err := redislayout.ReadOutbox(ctx, rdb, k, all[4].ID, 10, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].EventID != e.EventID || string(got[0].Event) != string(e.Event) {
			t.Errorf("got %+v, want the entry %s", got, e.EventID)
		}
	})
}

// TestReadDeadLetters reads back dead letters written with DeadLetter.Values.
func TestReadDeadLetters(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	k := redislayout.Of(testenv.RedisPrefix(t, "layout"), "t", 1)
	out := redislayout.WebhookOutput("ops")
	var all []redislayout.DeadLetter
	for i, id := range []string{"a", "b", "c"} {
		d := redislayout.DeadLetter{Entry: redislayout.Entry{ID: "7-" + id, EventID: id, Event: []byte(`{"x":"` + id + `"}`)},
			Reason: "permanent: HTTP 400", Attempts: i + 1, Status: 400 + i}
		sid, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Dead(out), Values: d.Values()}).Result()
		if err != nil {
			t.Fatal(err)
		}
		d.ID = sid
		all = append(all, d)
	}
	tests := []struct {
		name  string
		after string
		n     int
		want  []redislayout.DeadLetter
	}{
		{"oldest first", "", 10, all},
		{"n at most", "", 2, all[:2]},
		{"after an id", all[0].ID, 10, all[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := redislayout.ReadDeadLetters(ctx, rdb, k, out, tt.after, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestReadOutboxAcrossTheUpgrade reads an outbox upgraded in place: entries
// of the layout before issue 32 (an event_id field, then the event) and of
// the present one (the event alone) interleaved, as a partition's outbox is
// while the alerter is upgraded. Every entry reads with its event's id; the
// reference is the ids the entries were added with.
func TestReadOutboxAcrossTheUpgrade(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	k := redislayout.Of(testenv.RedisPrefix(t, "layout-upgrade"), "t", 0)
	var want []redislayout.Entry
	for i, id := range []string{"a:raised", "a:acked", "b:raised", "a:cleared", "b:signal_lost:1"} {
		e := redislayout.Entry{EventID: id, Event: []byte(`{"event_id":"` + id + `","drone_id":"UAV-1"}`)}
		vals := e.Values()
		if i%2 == 0 {
			vals = e.LegacyValues()
		}
		sid, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: vals}).Result()
		if err != nil {
			t.Fatal(err)
		}
		e.ID = sid
		want = append(want, e)
	}
	for _, block := range []time.Duration{0, 50 * time.Millisecond} {
		got, err := redislayout.ReadOutbox(ctx, rdb, k, "", 10, block)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("block %v: got %+v, want %+v", block, got, want)
		}
	}
}

// TestEventIDOf reads the id from the JSON as the alerter writes it and as
// anything else might.
func TestEventIDOf(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"first member, as AppendJSON writes it", `{"event_id":"a:raised","type":"raised"}`, "a:raised"},
		{"another member first", `{"type":"raised","event_id":"a:raised"}`, "a:raised"},
		{"spaces", `{ "event_id" : "a:raised" }`, "a:raised"},
		{"an escape in the id", `{"event_id":"a\u003a\"raised"}`, `a:"raised`},
		{"no event_id", `{"type":"raised"}`, ""},
		{"not an object", `["a:raised"]`, ""},
		{"truncated", `{"event_id":"a:rai`, ""},
		{"empty", ``, ""},
		{"not a string", `{"event_id":12}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redislayout.EventIDOf([]byte(tt.json)); got != tt.want {
				t.Errorf("EventIDOf(%s) = %q, want %q", tt.json, got, tt.want)
			}
		})
	}
}
