package dedup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the default first part of every key's hash tag.
const DefaultPrefix = "nofly"

// RedisOptions configure a Redis store. Topic is required.
type RedisOptions struct {
	Prefix   string        // DefaultPrefix when empty
	Topic    string        // the Kafka topic whose partitions the store versions
	EventTTL time.Duration // DefaultEventTTL when <= 0
}

// Redis is the Store on a Redis server (or Cluster: every key of a
// partition shares one hash tag). docs/redis-layout.md is its layout.
type Redis struct {
	c      redis.UniversalClient
	prefix string
	topic  string
	ttl    time.Duration
}

// NewRedis returns a store on client c.
func NewRedis(c redis.UniversalClient, o RedisOptions) (*Redis, error) {
	if c == nil {
		return nil, errors.New("dedup: nil redis client")
	}
	if o.Topic == "" {
		return nil, errors.New("dedup: RedisOptions.Topic is empty")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.EventTTL <= 0 {
		o.EventTTL = DefaultEventTTL
	}
	if o.EventTTL < time.Second {
		return nil, fmt.Errorf("dedup: RedisOptions.EventTTL %v is below one second", o.EventTTL)
	}
	return &Redis{c: c, prefix: o.Prefix, topic: o.Topic, ttl: o.EventTTL}, nil
}

// Tag returns the hash tag of a partition's keys: {prefix:topic:partition}.
func (r *Redis) Tag(partition int) string {
	return "{" + r.prefix + ":" + r.topic + ":" + strconv.Itoa(partition) + "}"
}

// AppliedKey, DronesKey, OutboxKey and EventKey name a partition's keys.
func (r *Redis) AppliedKey(p int) string          { return r.Tag(p) + ":applied" }
func (r *Redis) DronesKey(p int) string           { return r.Tag(p) + ":drones" }
func (r *Redis) OutboxKey(p int) string           { return r.Tag(p) + ":outbox" }
func (r *Redis) EventKey(p int, id string) string { return r.Tag(p) + ":ev:" + id }

// Load implements Store. The version and the states are read in one
// MULTI/EXEC, so they belong together.
func (r *Redis) Load(ctx context.Context, partition int) (Snapshot, error) {
	var applied *redis.StringCmd
	var drones *redis.MapStringStringCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		applied = p.Get(ctx, r.AppliedKey(partition))
		drones = p.HGetAll(ctx, r.DronesKey(partition))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d: %w", partition, err)
	}
	s := Snapshot{Applied: NoVersion}
	v, err := applied.Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return Snapshot{}, fmt.Errorf("dedup: load partition %d applied: %w", partition, err)
	default:
		if s.Applied, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Snapshot{}, fmt.Errorf("dedup: partition %d: bad applied offset %q: %w", partition, v, err)
		}
	}
	m, err := drones.Result()
	if err != nil {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d drones: %w", partition, err)
	}
	s.Drones = make(map[string][]byte, len(m))
	for k, v := range m {
		s.Drones[k] = []byte(v)
	}
	return s, nil
}

// commitScript is the whole batch in one atomic step; see
// docs/redis-layout.md. It returns {1, appended, suppressed} or
// {0, current_version} when fenced (having written nothing).
var commitScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '-1' end
if cur ~= ARGV[1] then
  return {0, cur}
end
local nd = tonumber(ARGV[4])
local i = 5
if nd > 0 then
  local args = {}
  for j = 1, 2 * nd do args[j] = ARGV[i + j - 1] end
  redis.call('HSET', KEYS[2], unpack(args))
end
i = i + 2 * nd
local ttl = ARGV[3]
local appended, suppressed = 0, 0
for k = 4, #KEYS do
  local id, ev = ARGV[i], ARGV[i + 1]
  i = i + 2
  if redis.call('SET', KEYS[k], '1', 'NX', 'EX', ttl) then
    redis.call('XADD', KEYS[3], '*', 'event_id', id, 'event', ev)
    appended = appended + 1
  else
    suppressed = suppressed + 1
  end
end
redis.call('SET', KEYS[1], ARGV[2])
return {1, appended, suppressed}
`)

// Commit implements Store: one EVALSHA (EVAL when the script is not cached)
// whatever the size of the batch.
func (r *Redis) Commit(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
	if err := checkBatch(expected, b); err != nil {
		return Result{}, err
	}
	keys := make([]string, 0, 3+len(b.Events))
	keys = append(keys, r.AppliedKey(partition), r.DronesKey(partition), r.OutboxKey(partition))
	args := make([]any, 0, 4+2*len(b.Drones)+2*len(b.Events))
	args = append(args, strconv.FormatInt(expected, 10), strconv.FormatInt(b.Applied, 10),
		strconv.FormatInt(int64(r.ttl/time.Second), 10), len(b.Drones))
	for id, st := range b.Drones {
		args = append(args, id, st)
	}
	for _, e := range b.Events {
		keys = append(keys, r.EventKey(partition, e.ID))
		args = append(args, e.ID, e.JSON)
	}
	res, err := commitScript.Run(ctx, r.c, keys, args...).Slice()
	if err != nil {
		return Result{}, fmt.Errorf("dedup: commit partition %d at version %d: %w", partition, expected, err)
	}
	if len(res) < 2 {
		return Result{}, fmt.Errorf("dedup: commit partition %d: unexpected reply %v", partition, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return Result{}, fmt.Errorf("%w: partition %d is at version %v, not %d", ErrFenced, partition, res[1], expected)
	}
	a, _ := res[1].(int64)
	s, _ := res[2].(int64)
	return Result{Appended: int(a), Suppressed: int(s)}, nil
}

// Outbox implements OutboxReader (XRANGE over the whole stream).
func (r *Redis) Outbox(ctx context.Context, partition int) ([]Entry, error) {
	var out []Entry
	start := "-"
	for {
		msgs, err := r.c.XRangeN(ctx, r.OutboxKey(partition), start, "+", 10000).Result()
		if err != nil {
			return nil, fmt.Errorf("dedup: read outbox of partition %d: %w", partition, err)
		}
		for _, m := range msgs {
			id, _ := m.Values["event_id"].(string)
			ev, _ := m.Values["event"].(string)
			out = append(out, Entry{ID: m.ID, EventID: id, Event: []byte(ev)})
		}
		if len(msgs) < 10000 {
			return out, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
