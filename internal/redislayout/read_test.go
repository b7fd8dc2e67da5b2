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
		e := redislayout.Entry{EventID: "f:raised", Event: []byte(`{}`)}
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
