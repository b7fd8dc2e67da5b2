package dedup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
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
	ttlArg string // ttl in milliseconds, as the script's argument
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
	return &Redis{c: c, prefix: o.Prefix, topic: o.Topic, ttl: o.EventTTL,
		ttlArg: strconv.FormatInt(o.EventTTL.Milliseconds(), 10)}, nil
}

// Keys names a partition's keys (docs/redis-layout.md).
func (r *Redis) Keys(partition int) redislayout.Keys {
	return redislayout.Of(r.prefix, r.topic, partition)
}

// Load implements Store. The version and the states are read in one
// MULTI/EXEC, so they belong together.
func (r *Redis) Load(ctx context.Context, partition int) (Snapshot, error) {
	var applied *redis.StringCmd
	var drones *redis.MapStringStringCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		k := r.Keys(partition)
		applied = p.Get(ctx, k.Applied())
		drones = p.HGetAll(ctx, k.Drones())
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
//
// KEYS = applied, drones, outbox, event mark, legacy flag. ARGV = expected
// version, new applied offset, ttl milliseconds, n drones, the prefix of the
// event buckets (Keys.EventBucketPrefix), the prefix of the earlier layout's
// event keys (Keys.EventPrefix), then (drone id, state) × n, then (event id,
// event JSON) × m. The bucket and legacy keys are built here from the
// prefixes; they share the partition's hash tag, so they are in the slot of
// the declared keys. The drone states go to HSET straight from ARGV, in
// chunks (Lua's unpack is bounded by its C stack).
//
// Per event the script makes one call, the XADD. The unique keys cost one
// HMGET per live bucket, one HSET into the newest bucket and, while the
// legacy flag lives, one MGET of the earlier layout's keys, each for the
// whole batch. A bucket takes new ids for half a TTL after it is created and
// expires a TTL after that, so an id lives between one and one and a half
// TTLs; its expiry is set once, when it is created (PEXPIREAT), and names
// it. The mark lists the live buckets; its first word, the applied offset
// this script last wrote, tells whether something else (the earlier
// layout's script) committed since, which (re)starts the legacy flag for one
// TTL. The outbox field names come from redislayout, spliced into the text
// (constants, so the script and its SHA never change at run time).
var commitScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '-1' end
if cur ~= ARGV[1] then
  return {0, cur}
end
local nd = tonumber(ARGV[4])
local first, last = 7, 6 + 2 * nd
while first <= last do
  local upto = math.min(last, first + 999)
  redis.call('HSET', KEYS[2], unpack(ARGV, first, upto))
  first = upto + 1
end
local ttl, bpfx, lpfx, outbox = tonumber(ARGV[3]), ARGV[5], ARGV[6], KEYS[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mark = redis.call('GET', KEYS[4])
local live, legacy = {}, false
if mark then
  local w1 = true
  for w in string.gmatch(mark, '%S+') do
    if w1 then
      legacy, w1 = w ~= cur, false
    elseif tonumber(w) > now then
      live[#live + 1] = w
    end
  end
else
  legacy = cur ~= '-1'
end
if legacy then
  redis.call('SET', KEYS[5], '1', 'PX', ttl)
else
  legacy = redis.call('EXISTS', KEYS[5]) == 1
end
local ids, m = {}, 0
for i = last + 1, #ARGV, 2 do
  m = m + 1
  ids[m] = ARGV[i]
end
local claimed = {}
local function lookup(cmd, key, pfx)
  for a = 1, m, 1000 do
    local b = math.min(m, a + 999)
    local r
    if pfx then
      local ks = {}
      for j = a, b do ks[j - a + 1] = pfx .. ids[j] end
      r = redis.call(cmd, unpack(ks))
    else
      r = redis.call(cmd, key, unpack(ids, a, b))
    end
    for j = a, b do
      if r[j - a + 1] then claimed[ids[j]] = true end
    end
  end
end
if m > 0 then
  for _, e in ipairs(live) do lookup('HMGET', bpfx .. e) end
  if legacy then lookup('MGET', nil, lpfx) end
end
local fresh, appended = {}, 0
for j = 1, m do
  local id = ids[j]
  if not claimed[id] then
    claimed[id] = true
    redis.call('XADD', outbox, '*', '` + redislayout.FieldEventID + `', id, '` + redislayout.FieldEvent + `', ARGV[last + 2 * j])
    appended = appended + 1
    fresh[2 * appended - 1] = id
    fresh[2 * appended] = '1'
  end
end
if appended > 0 then
  local newest = live[#live]
  local created = false
  if newest == nil or tonumber(newest) - ttl <= now then
    newest = string.format('%d', now + ttl + math.ceil(ttl / 2))
    live[#live + 1] = newest
    created = true
  end
  for a = 1, 2 * appended, 1000 do
    redis.call('HSET', bpfx .. newest, unpack(fresh, a, math.min(2 * appended, a + 999)))
  end
  if created then redis.call('PEXPIREAT', bpfx .. newest, newest) end
end
table.insert(live, 1, ARGV[2])
redis.call('SET', KEYS[4], table.concat(live, ' '))
redis.call('SET', KEYS[1], ARGV[2])
return {1, appended, m - appended}
`)

// Commit implements Store: one EVALSHA (EVAL when the script is not cached)
// whatever the size of the batch.
func (r *Redis) Commit(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
	if err := checkBatch(expected, b); err != nil {
		return Result{}, err
	}
	k := r.Keys(partition)
	keys := []string{k.Applied(), k.Drones(), k.Outbox(), k.EventMark(), k.Legacy()}
	args := make([]any, 0, 6+2*len(b.Drones)+2*len(b.Events))
	args = append(args, strconv.FormatInt(expected, 10), strconv.FormatInt(b.Applied, 10),
		r.ttlArg, len(b.Drones), k.EventBucketPrefix(), k.EventPrefix())
	for id, st := range b.Drones {
		args = append(args, id, st)
	}
	for _, e := range b.Events {
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

// Outbox implements OutboxReader (the whole stream, XRANGE by pages).
func (r *Redis) Outbox(ctx context.Context, partition int) ([]Entry, error) {
	var out []Entry
	k, after := r.Keys(partition), redislayout.StartID
	for {
		es, err := redislayout.ReadOutbox(ctx, r.c, k, after, 10000, 0)
		if err != nil {
			return nil, fmt.Errorf("dedup: read outbox of partition %d: %w", partition, err)
		}
		out = append(out, es...)
		if len(es) < 10000 {
			return out, nil
		}
		after = es[len(es)-1].ID
	}
}
