package redislayout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReadOutbox returns up to n entries of k's outbox after stream id after
// (StartID or "" for the start). With block > 0 it waits up to block for the
// first one (XREAD BLOCK, on a connection of its own for that time); with
// block <= 0 it returns at once (XRANGE). No entries and no error means none
// came. This is the one reader of the outbox: the dispatcher's outputs, the
// dedup store's full read, tools and the demo all use it.
func ReadOutbox(ctx context.Context, rdb redis.Cmdable, k Keys, after string, n int, block time.Duration) ([]Entry, error) {
	msgs, err := read(ctx, rdb, k.Outbox(), after, n, block)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(msgs))
	for i, m := range msgs {
		out[i] = entryOf(m)
	}
	return out, nil
}

// ReadDeadLetters returns up to n dead letters of output in k's partition
// after stream id after (StartID or "" for the oldest), without waiting.
func ReadDeadLetters(ctx context.Context, rdb redis.Cmdable, k Keys, output, after string, n int) ([]DeadLetter, error) {
	msgs, err := read(ctx, rdb, k.Dead(output), after, n, 0)
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, len(msgs))
	for i, m := range msgs {
		d := DeadLetter{ID: m.ID, Entry: entryOf(m)}
		d.Entry.ID, _ = m.Values[FieldOutboxID].(string)
		d.Reason, _ = m.Values[FieldReason].(string)
		// Informational only (redrive posts the entry again whatever they
		// say): 0 when absent or not a number.
		d.Attempts = atoi(m.Values[FieldAttempts])
		d.Status = atoi(m.Values[FieldStatus])
		out[i] = d
	}
	return out, nil
}

func read(ctx context.Context, rdb redis.Cmdable, stream, after string, n int, block time.Duration) ([]redis.XMessage, error) {
	if after == "" {
		after = StartID
	}
	if block <= 0 {
		msgs, err := rdb.XRangeN(ctx, stream, "("+after, "+", int64(n)).Result()
		if err != nil {
			return nil, fmt.Errorf("redislayout: xrange %s: %w", stream, err)
		}
		return msgs, nil
	}
	res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, after}, Count: int64(n), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redislayout: xread %s: %w", stream, err)
	}
	var msgs []redis.XMessage
	for _, s := range res {
		msgs = append(msgs, s.Messages...)
	}
	return msgs, nil
}

// entryOf reads an outbox entry or a dead letter's copy of one. The event
// id is the JSON's own event_id: since issue 32 the outbox holds the event
// alone (a second field cost Redis ~0.7 µs an event); entries written
// before it, and dead letters, also carry it in FieldEventID, which is
// read when present, so an outbox upgraded in place reads on.
func entryOf(m redis.XMessage) Entry {
	e := Entry{ID: m.ID}
	if v, ok := m.Values[FieldEvent].(string); ok {
		e.Event = []byte(v)
	}
	if id, ok := m.Values[FieldEventID].(string); ok {
		e.EventID = id
	} else {
		e.EventID = EventIDOf(e.Event)
	}
	return e
}

// eventIDPrefix is how alerts.Event.AppendJSON begins every event.
const eventIDPrefix = `{"event_id":"`

// EventIDOf returns the event_id member of an event's JSON: read in place
// when it is the first member without escapes, as the alerter writes it,
// else decoded; "" when the JSON has none, as an entry without the field
// read before (only something other than the alerter writes such an
// entry; redrive stops at it).
func EventIDOf(event []byte) string {
	if rest, ok := bytes.CutPrefix(event, []byte(eventIDPrefix)); ok {
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i])
		}
	}
	var v struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(event, &v) != nil {
		return ""
	}
	return v.EventID
}

func atoi(v any) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
}
