package outbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// parseID splits a stream id "ms-seq".
func parseID(id string) (ms, seq uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return 0, 0, fmt.Errorf("outbox: stream id %q: want ms-seq", id)
	}
	if ms, err = strconv.ParseUint(a, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("outbox: stream id %q: %w", id, err)
	}
	if seq, err = strconv.ParseUint(b, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("outbox: stream id %q: %w", id, err)
	}
	return ms, seq, nil
}

// advanceScript sets the cursor KEYS[1] to ARGV[1] unless it already is at or
// past it (a zombie or a late retry never moves a cursor back) and, when
// KEYS[2] is given, appends the dead letter ARGV[2..] (field, value pairs) to
// it in the same atomic step. Returns 1 if the cursor moved.
var advanceScript = redis.NewScript(`
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
if KEYS[2] then
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
end
local cur = redis.call('GET', KEYS[1])
if cur then
  local cms, cseq = parse(cur)
  local nms, nseq = parse(ARGV[1])
  if cms and (cms > nms or (cms == nms and cseq >= nseq)) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`)

// advance moves output's cursor to id, appending dead (field, value pairs)
// to the output's dead-letter stream first when dead is not nil.
func advance(ctx context.Context, rdb redis.UniversalClient, k redislayout.Keys, output, id string, dead []any) error {
	ks := []string{k.Cursor(output)}
	args := []any{id}
	if dead != nil {
		ks = append(ks, k.Dead(output))
		args = append(args, dead...)
	}
	if err := advanceScript.Run(ctx, rdb, ks, args...).Err(); err != nil {
		return fmt.Errorf("outbox: advance %s to %s: %w", output, id, err)
	}
	return nil
}

// progress is what an output tells the lag tracker: the id it (re)started
// after, and how many entries it has passed since.
type progress struct {
	mu       sync.Mutex
	gen      int // incremented at each (re)start
	start    string
	advanced int64
}

func (p *progress) restart(after string) {
	p.mu.Lock()
	p.gen++
	p.start = after
	p.advanced = 0
	p.mu.Unlock()
}

func (p *progress) add(n int) {
	p.mu.Lock()
	p.advanced += int64(n)
	p.mu.Unlock()
}

func (p *progress) snapshot() (gen int, start string, advanced int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen, p.start, p.advanced
}

// lagBase relates an output's start id to the stream's entries-added counter:
// count entries lay after start when the counter read added.
type lagBase struct {
	gen          int
	added, count int64
}

// measureBase counts the entries after start, up to the last id generated
// when entries-added was read, paging through the stream. It costs one pass
// over the output's backlog, once per (re)start.
func measureBase(ctx context.Context, rdb redis.UniversalClient, stream, start string) (added, count int64, err error) {
	info, err := rdb.XInfoStream(ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("outbox: xinfo %s: %w", stream, err)
	}
	end := info.LastGeneratedID
	from := "(" + start
	for {
		msgs, err := rdb.XRangeN(ctx, stream, from, end, 1000).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("outbox: xrange %s: %w", stream, err)
		}
		count += int64(len(msgs))
		if len(msgs) < 1000 {
			return info.EntriesAdded, count, nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// entriesAdded reads the stream's entries-added counter (0 if it does not exist).
func entriesAdded(ctx context.Context, rdb redis.UniversalClient, stream string) (int64, error) {
	info, err := rdb.XInfoStream(ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return 0, nil
		}
		return 0, fmt.Errorf("outbox: xinfo %s: %w", stream, err)
	}
	return info.EntriesAdded, nil
}

// trimOutbox deletes the outbox entries older than retention (by their id's
// time, appended at now - retention) that every named output has passed:
// those up to the lowest of their cursors. An output without a cursor has
// delivered nothing, so nothing is trimmed. The Kafka output's cursor lags
// Kafka's tail, never leads it, so trimming to it keeps every entry Kafka
// may still need. It returns how many entries went and how many are left.
func trimOutbox(ctx context.Context, rdb redis.UniversalClient, k redislayout.Keys, outputs []string, retention time.Duration, now time.Time) (trimmed, left int64, err error) {
	ks := make([]string, len(outputs))
	for i, o := range outputs {
		ks[i] = k.Cursor(o)
	}
	vals, err := rdb.MGet(ctx, ks...).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("outbox: read cursors: %w", err)
	}
	minMS, minSeq := uint64(max(0, now.Add(-retention).UnixMilli())), uint64(0)
	hold := false
	for i, v := range vals {
		cur, ok := v.(string)
		if !ok {
			hold = true
			continue
		}
		ms, seq, err := parseID(cur)
		if err != nil {
			return 0, 0, fmt.Errorf("outbox: cursor %s: %w", ks[i], err)
		}
		if ms < minMS || (ms == minMS && seq < minSeq) {
			minMS, minSeq = ms, seq
		}
	}
	if !hold {
		// MINID keeps entries at or above the id: the cursor's own entry
		// stays, which costs one entry and no comparison.
		trimmed, err = rdb.XTrimMinID(ctx, k.Outbox(), fmt.Sprintf("%d-%d", minMS, minSeq)).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("outbox: xtrim %s: %w", k.Outbox(), err)
		}
	}
	left, err = rdb.XLen(ctx, k.Outbox()).Result()
	if err != nil {
		return trimmed, 0, fmt.Errorf("outbox: xlen %s: %w", k.Outbox(), err)
	}
	return trimmed, left, nil
}
