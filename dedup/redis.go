package dedup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// DefaultPrefix is the default first part of every key's hash tag.
const DefaultPrefix = "nofly"

// RedisOptions configure a Redis store. Topic is required.
type RedisOptions struct {
	Prefix   string        // DefaultPrefix when empty
	Topic    string        // the Kafka topic whose partitions the store versions
	EventTTL time.Duration // DefaultEventTTL when <= 0
	// AlarmRetention is how long a cleared alarm stays in the alarm index
	// after the commit that cleared it (DefaultAlarmRetention when <= 0).
	// Active alarms stay whatever their age.
	AlarmRetention time.Duration
	// TrackLen is how many points a drone's track keeps (DefaultTrackLen
	// when <= 0); TrackTTL is how long a track lives after its last point
	// (DefaultTrackTTL when <= 0).
	TrackLen int
	TrackTTL time.Duration
	// HeldTrackLen is how many points a held track (Batch.Held) keeps
	// (DefaultHeldTrackLen when <= 0).
	HeldTrackLen int
	// Replicas, when on, makes Load and Commit succeed only once the
	// partition's primary has that many replicas holding the state read
	// or written (--redis-min-replicas): what a failover could take back
	// is never acted on. docs/exactly-once.md has the argument.
	Replicas redisreplica.Wait
}

// Redis is the Store on a Redis server (or Cluster: every key of a
// partition shares one hash tag). docs/redis-layout.md is its layout.
type Redis struct {
	c      redis.UniversalClient
	prefix string
	topic  string
	ttl    time.Duration
	ttlArg string // ttl in milliseconds, as the script's argument
	// The script's other constant arguments: alarm retention and track TTL
	// in milliseconds, track length; and a held track's length, sent
	// beside its point.
	retentionArg, trackTTLArg, trackLenArg, heldLenArg string
	wait                                               redisreplica.Wait
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
	if o.AlarmRetention <= 0 {
		o.AlarmRetention = DefaultAlarmRetention
	}
	if o.TrackLen <= 0 {
		o.TrackLen = DefaultTrackLen
	}
	if o.TrackTTL <= 0 {
		o.TrackTTL = DefaultTrackTTL
	}
	if o.HeldTrackLen <= 0 {
		o.HeldTrackLen = DefaultHeldTrackLen
	}
	if err := o.Replicas.Validate(); err != nil {
		return nil, fmt.Errorf("dedup: %w", err)
	}
	if o.AlarmRetention < time.Millisecond || o.TrackTTL < time.Millisecond {
		return nil, fmt.Errorf("dedup: RedisOptions.AlarmRetention %v and TrackTTL %v must be at least 1ms", o.AlarmRetention, o.TrackTTL)
	}
	return &Redis{c: c, prefix: o.Prefix, topic: o.Topic, ttl: o.EventTTL,
		ttlArg:       strconv.FormatInt(o.EventTTL.Milliseconds(), 10),
		retentionArg: strconv.FormatInt(o.AlarmRetention.Milliseconds(), 10),
		trackTTLArg:  strconv.FormatInt(o.TrackTTL.Milliseconds(), 10),
		trackLenArg:  strconv.Itoa(o.TrackLen), heldLenArg: strconv.Itoa(o.HeldTrackLen), wait: o.Replicas}, nil
}

// Keys names a partition's keys (docs/redis-layout.md).
func (r *Redis) Keys(partition int) redislayout.Keys {
	return redislayout.Of(r.prefix, r.topic, partition)
}

// indexScript builds a partition's drone indexes (ids, places) from its
// drone hash, once: for a partition written before the batch script kept
// them. One atomic step, so a batch committed meanwhile is either in the
// hash it reads or after it. Returns the drones indexed, or -1 when the
// mark says it was done.
// KEYS = drones, drone ids, drone geo, mark.
var indexScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local st = redis.call('HGETALL', KEYS[1])
local ids, geo = {}, {}
for i = 1, #st, 2 do
  local id = st[i]
  ids[#ids + 1] = 0
  ids[#ids + 1] = id
  local ok, d = pcall(cjson.decode, st[i + 1])
  if ok and type(d) == 'table' and type(d.pos) == 'table' then
    local lat, lon = tonumber(d.pos.lat), tonumber(d.pos.lon)
    if lat and lon and lat >= -` + geoMaxLatLua + ` and lat <= ` + geoMaxLatLua + ` and lon >= -180 and lon <= 180 then
      geo[#geo + 1] = lon
      geo[#geo + 1] = lat
      geo[#geo + 1] = id
    end
  end
end
for a = 1, #ids, 1000 do redis.call('ZADD', KEYS[2], unpack(ids, a, math.min(#ids, a + 999))) end
for a = 1, #geo, 999 do redis.call('GEOADD', KEYS[3], unpack(geo, a, math.min(#geo, a + 998))) end
redis.call('SET', KEYS[4], '1')
return #st / 2
`)

// geoMaxLatLua is GeoMaxLat in the scripts' text.
const geoMaxLatLua = "85.05112878"

// ChangesKeep is how long the drone changes stream keeps a batch's entry
// (trimmed by the batch script, MINID ~ now - ChangesKeep, on Redis's
// clock): a reader that reads less often than that rereads the partition's
// states (the entries' chain tells it).
const ChangesKeep = 2 * time.Minute

// changesKeepMS is ChangesKeep in the script's text.
const changesKeepMS = "120000"

// IndexDrones builds the partition's drone indexes from its drone hash
// when the partition was written before the batch script kept them (its
// mark is absent), and returns how many drones it indexed (-1: nothing to
// do). Load calls it; it blocks Redis for one pass over the partition's
// drones, once.
func (r *Redis) IndexDrones(ctx context.Context, partition int) (int, error) {
	k := r.Keys(partition)
	n, err := indexScript.Run(ctx, r.c, []string{k.Drones(), k.DroneIDs(), k.DroneGeo(), k.DroneIndexed()}).Int()
	if err != nil {
		return 0, fmt.Errorf("dedup: index the drones of partition %d: %w", partition, err)
	}
	return n, nil
}

// Load implements Store. The version and the states are read in one
// MULTI/EXEC, so they belong together. A partition written before the
// drone indexes existed gets them first (IndexDrones).
func (r *Redis) Load(ctx context.Context, partition int) (Snapshot, error) {
	if _, err := r.IndexDrones(ctx, partition); err != nil {
		return Snapshot{}, err
	}
	if r.wait.On() {
		return r.loadReplicated(ctx, partition)
	}
	var applied, clock, zonever, authver *redis.StringCmd
	var drones *redis.MapStringStringCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		k := r.Keys(partition)
		applied = p.Get(ctx, k.Applied())
		drones = p.HGetAll(ctx, k.Drones())
		clock = p.Get(ctx, k.Clock())
		zonever = p.Get(ctx, k.ZoneVersion())
		authver = p.Get(ctx, k.AuthVersion())
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
	if s.Clock, s.ZoneVersion, err = clockAndZoneVersion(clock, zonever); err != nil {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d: %w", partition, err)
	}
	if s.AuthVersion, err = authVersion(authver); err != nil {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d: %w", partition, err)
	}
	return s, nil
}

// clockAndZoneVersion reads a partition's stored clock (0 when none) and
// zone version (-1 when none).
func clockAndZoneVersion(clock, zonever *redis.StringCmd) (int64, int64, error) {
	c, zv := int64(0), int64(-1)
	if v, err := clock.Result(); err == nil {
		if c, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("bad clock %q: %w", v, err)
		}
	} else if !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	if v, err := zonever.Result(); err == nil {
		if zv, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("bad zone version %q: %w", v, err)
		}
	} else if !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	return c, zv, nil
}

// authVersion reads a partition's stored authorisation version (0 when
// none).
func authVersion(c *redis.StringCmd) (int64, error) {
	v, err := c.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, err
	}
	av, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad authorisation version %q: %w", v, err)
	}
	return av, nil
}

// commitScript is the whole batch in one atomic step; see
// docs/redis-layout.md. It returns {1, appended, suppressed} or
// {0, current_version} when fenced (having written nothing).
//
// KEYS = applied, drones, outbox, event mark, legacy flag, alarms, active
// alarms, cleared alarms, alarm GC, zone version, zone switches, clock,
// authorisation version, authorisation switches, drone ids, drone geo,
// drone changes (a stream: one entry per batch, XADD after the states,
// fields a = the new applied offset, p = the expected version, d = the
// drone ids written, newline-separated; trimmed to ChangesKeep), drone
// indexes' mark.
// ARGV = expected version, new applied offset, ttl milliseconds, n drones,
// the prefix of the event buckets (Keys.EventBucketPrefix), the prefix of
// the earlier layout's event keys (Keys.EventPrefix), alarm retention
// milliseconds, n tracks, track length, track TTL milliseconds, the prefix
// of the track keys (Keys.TrackPrefix), the batch's zone version, the
// batch's log clock (unix ms, "0": none), n forgotten drones, the batch's
// authorisation set version ("0": none), n placed drones, n new drones,
// then (drone id, state) × n, then (drone id, track point, keep) × t
// (keep: how many points the drone's track keeps, "" for the track length;
// a held track's length for Batch.Held), then
// forgotten drone id × f (state, track and the two index entries deleted,
// after the states are written), then (longitude, latitude, drone id) × g
// (GEOADD: the drones' places), then new drone id × w (ZADD 0 into the
// drone ids), then
// (event id, event JSON, index) × m, where index is the raise time in unix
// milliseconds for a raised event, "c" for a cleared one, "l" for a
// signal_lost (the alarm's :lost entry set), "g" for a signal_regained
// (removed, as a clear does), "a" for an authorized or unauthorized (the
// alarm's :auth entry set) and "" for an event the alarm index ignores. The bucket, legacy and track keys are built
// here from the prefixes; they share the partition's hash tag, so they are
// in the slot of the declared keys. The drone states go to HSET straight
// from ARGV, in chunks (Lua's unpack is bounded by its C stack).
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
// TTL. The alarm index costs per batch one HSET and one ZADD for the raises,
// one ZMSCORE, ZREM, two ZADD and one HSET for the clears, and one
// ZRANGEBYSCORE for the GC (plus one HDEL and two ZREM when alarms are
// due), whatever the number of events; its secondary sets (by drone, zone
// and category, alarmDimsLua) one call per set touched, and an HMGET of
// the raised events of the clears and of the GC, and their mark a GET and
// a SET (redislayout.Keys.AlarmsIndexMark). A track is three calls per sampled
// drone (RPUSH, LTRIM once full, PEXPIRE): one key per drone. The outbox
// field names come from redislayout, spliced into the text (constants, so
// the script and its SHA never change at run time).
var commitScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '-1' end
if cur ~= ARGV[1] then
  return {0, cur}
end
local function chunked(cmd, key, t)
  for a = 1, #t, 1000 do
    if key then
      redis.call(cmd, key, unpack(t, a, math.min(#t, a + 999)))
    else
      redis.call(cmd, unpack(t, a, math.min(#t, a + 999)))
    end
  end
end
local nd, nt, nf, ng, nn = tonumber(ARGV[4]), tonumber(ARGV[8]), tonumber(ARGV[14]), tonumber(ARGV[16]), tonumber(ARGV[17])
local first, last = 18, 17 + 2 * nd
local dlist = {}
for i = first, last, 2 do dlist[#dlist + 1] = ARGV[i] end
while first <= last do
  local upto = math.min(last, first + 999)
  redis.call('HSET', KEYS[2], unpack(ARGV, first, upto))
  first = upto + 1
end
local tlen, tttl, tpfx = tonumber(ARGV[9]), ARGV[10], ARGV[11]
for i = last + 1, last + 3 * nt, 3 do
  local k = tpfx .. ARGV[i]
  local keep = tonumber(ARGV[i + 2]) or tlen
  if redis.call('RPUSH', k, ARGV[i + 1]) > keep then
    redis.call('LTRIM', k, -keep, -1)
  end
  redis.call('PEXPIRE', k, tttl)
end
last = last + 3 * nt
if nf > 0 then
  local tk = {}
  for i = last + 1, last + nf do tk[#tk + 1] = tpfx .. ARGV[i] end
  for a = last + 1, last + nf, 1000 do
    redis.call('HDEL', KEYS[2], unpack(ARGV, a, math.min(last + nf, a + 999)))
  end
  chunked('DEL', nil, tk)
  for _, k in ipairs({KEYS[15], KEYS[16]}) do
    for a = last + 1, last + nf, 1000 do
      redis.call('ZREM', k, unpack(ARGV, a, math.min(last + nf, a + 999)))
    end
  end
  last = last + nf
end
for a = last + 1, last + 3 * ng, 999 do
  redis.call('GEOADD', KEYS[16], unpack(ARGV, a, math.min(last + 3 * ng, a + 998)))
end
last = last + 3 * ng
if nn > 0 then
  local ids = {}
  for i = last + 1, last + nn do
    ids[#ids + 1] = 0
    ids[#ids + 1] = ARGV[i]
  end
  chunked('ZADD', KEYS[15], ids)
  last = last + nn
end
if cur == '-1' then
  redis.call('SET', KEYS[18], '1') -- a partition indexed from its first batch
end
if ARGV[13] ~= '0' then redis.call('SET', KEYS[12], ARGV[13]) end
local zv = ARGV[12]
if zv ~= '0' and redis.call('GET', KEYS[10]) ~= zv then
  redis.call('RPUSH', KEYS[11], zv .. ' ' .. ARGV[1])
  redis.call('SET', KEYS[10], zv)
end
local av = ARGV[15]
if av ~= '0' and redis.call('GET', KEYS[13]) ~= av then
  redis.call('RPUSH', KEYS[14], av .. ' ' .. ARGV[1])
  redis.call('SET', KEYS[13], av)
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
for i = last + 1, #ARGV, 3 do
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
local rh, ra, cl, ch, lh, lg = {}, {}, {}, {}, {}, {}
for j = 1, m do
  local id = ids[j]
  if not claimed[id] then
    claimed[id] = true
    local at = last + 3 * j - 2
    local ev, ix = ARGV[at + 1], ARGV[at + 2]
    redis.call('XADD', outbox, '*', '` + redislayout.FieldEvent + `', ev)
    appended = appended + 1
    fresh[2 * appended - 1] = id
    fresh[2 * appended] = '1'
    if ix == 'c' then
      cl[#cl + 1] = string.sub(id, 1, -9)
      ch[#ch + 1] = id
      ch[#ch + 1] = ev
      lg[#lg + 1] = string.sub(id, 1, 32) .. ':lost'
    elseif ix == 'l' then
      lh[#lh + 1] = string.sub(id, 1, 32) .. ':lost'
      lh[#lh + 1] = ev
    elseif ix == 'g' then
      lg[#lg + 1] = string.sub(id, 1, 32) .. ':lost'
    elseif ix == 'a' then
      lh[#lh + 1] = string.sub(id, 1, 32) .. ':auth'
      lh[#lh + 1] = ev
    elseif ix ~= '' then
      rh[#rh + 1] = id
      rh[#rh + 1] = ev
      ra[#ra + 1] = ix
      ra[#ra + 1] = string.sub(id, 1, -8)
    end
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
  chunked('HSET', bpfx .. newest, fresh)
  if created then redis.call('PEXPIREAT', bpfx .. newest, newest) end
end
chunked('HSET', KEYS[6], rh)
chunked('ZADD', KEYS[7], ra)
` + alarmDimsLua + `
local xa = {}
for j = 1, #ra, 2 do
  local d = dims(rh[j + 1])
  if d then ixput(xa, KEYS[7], d, ra[j], ra[j + 1]) end
end
for key, l in pairs(xa) do chunked('ZADD', key, l) end
chunked('HSET', KEYS[6], lh)
chunked('HDEL', KEYS[6], lg)
if #cl > 0 then
  local nows, zc, zg, hc, gone = string.format('%d', now), {}, {}, {}, {}
  for a = 1, #cl, 1000 do
    local b = math.min(#cl, a + 999)
    local sc = redis.call('ZMSCORE', KEYS[7], unpack(cl, a, b))
    for j = a, b do
      local s = sc[j - a + 1]
      if s then
        gone[#gone + 1] = cl[j]
        zc[#zc + 1] = s
        zc[#zc + 1] = cl[j]
        zg[#zg + 1] = nows
        zg[#zg + 1] = cl[j]
        hc[#hc + 1] = ch[2 * j - 1]
        hc[#hc + 1] = ch[2 * j]
      end
    end
  end
  chunked('ZREM', KEYS[7], gone)
  chunked('ZADD', KEYS[8], zc)
  chunked('ZADD', KEYS[9], zg)
  chunked('HSET', KEYS[6], hc)
  local xr, xc = {}, {}
  raisedDims(KEYS[6], gone, function(j, d)
    ixput(xr, KEYS[7], d, nil, gone[j])
    ixput(xc, KEYS[8], d, zc[2 * j - 1], gone[j])
  end)
  for key, l in pairs(xr) do chunked('ZREM', key, l) end
  for key, l in pairs(xc) do chunked('ZADD', key, l) end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', string.format('%d', now - tonumber(ARGV[7])), 'LIMIT', 0, 500 + appended)
if #due > 0 then
  local f = {}
  for _, a in ipairs(due) do
    f[#f + 1] = a .. ':raised'
    f[#f + 1] = a .. ':cleared'
    f[#f + 1] = a .. ':acked'
    f[#f + 1] = a .. ':lost'
    f[#f + 1] = a .. ':auth'
  end
  local xg = {}
  raisedDims(KEYS[6], due, function(j, d) ixput(xg, KEYS[8], d, nil, due[j]) end)
  for key, l in pairs(xg) do chunked('ZREM', key, l) end
  chunked('HDEL', KEYS[6], f)
  chunked('ZREM', KEYS[8], due)
  chunked('ZREM', KEYS[9], due)
end
local ixk = KEYS[6] .. ':ixv'
if cur == '-1' then
  redis.call('SET', ixk, ARGV[2] .. ' done')
else
  local w1, rest = string.match(redis.call('GET', ixk) or '', '^(%S+) (.*)$')
  if w1 == cur then
    redis.call('SET', ixk, ARGV[2] .. ' ' .. rest)
  end
end
table.insert(live, 1, ARGV[2])
redis.call('SET', KEYS[4], table.concat(live, ' '))
redis.call('XADD', KEYS[17], 'MINID', '~', string.format('%d', now - ` + changesKeepMS + `), '*',
  'a', ARGV[2], 'p', ARGV[1], 'd', table.concat(dlist, '\n'))
redis.call('SET', KEYS[1], ARGV[2])
return {1, appended, m - appended}
`)

// placeable reports whether the spatial index can hold pl: a GEOADD of
// anything else fails, and with it the whole batch.
func placeable(pl Placed) bool {
	return pl.Lat >= -GeoMaxLat && pl.Lat <= GeoMaxLat && pl.Lon >= -180 && pl.Lon <= 180
}

// Commit implements Store: one EVALSHA (EVAL when the script is not cached)
// whatever the size of the batch.
func (r *Redis) Commit(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
	if err := checkBatch(expected, b); err != nil {
		return Result{}, err
	}
	k := r.Keys(partition)
	keys := []string{k.Applied(), k.Drones(), k.Outbox(), k.EventMark(), k.Legacy(),
		k.Alarms(), k.AlarmsActive(), k.AlarmsCleared(), k.AlarmsGC(), k.ZoneVersion(), k.ZoneSwitches(), k.Clock(), k.AuthVersion(), k.AuthSwitches(),
		k.DroneIDs(), k.DroneGeo(), k.DroneChanges(), k.DroneIndexed()}
	placed := 0
	for _, pl := range b.Placed {
		if placeable(pl) {
			placed++
		}
	}
	args := make([]any, 0, 17+2*len(b.Drones)+3*len(b.Tracks)+len(b.Forgotten)+3*placed+len(b.New)+3*len(b.Events))
	args = append(args, strconv.FormatInt(expected, 10), strconv.FormatInt(b.Applied, 10),
		r.ttlArg, len(b.Drones), k.EventBucketPrefix(), k.EventPrefix(),
		r.retentionArg, len(b.Tracks), r.trackLenArg, r.trackTTLArg, k.TrackPrefix(),
		strconv.FormatInt(b.ZoneVersion, 10), strconv.FormatInt(b.Clock, 10), len(b.Forgotten),
		strconv.FormatInt(b.AuthVersion, 10), placed, len(b.New))
	for id, st := range b.Drones {
		args = append(args, id, st)
	}
	for id, pt := range b.Tracks {
		keep := ""
		if b.Held[id] {
			keep = r.heldLenArg
		}
		args = append(args, id, pt, keep)
	}
	for _, id := range b.Forgotten {
		args = append(args, id)
	}
	for _, pl := range b.Placed {
		if placeable(pl) {
			args = append(args, pl.Lon, pl.Lat, pl.ID)
		}
	}
	for _, id := range b.New {
		args = append(args, id)
	}
	for _, e := range b.Events {
		args = append(args, e.ID, e.JSON, indexArg(e))
	}
	// On the slot's primary's own client, so a cluster client's retries
	// after a network error never resend a script of unknown outcome.
	cmd, werr := r.wait.Run(ctx, r.c, commitScript, keys, args...)
	res, err := cmd.Slice()
	if err != nil {
		return Result{}, fmt.Errorf("dedup: commit partition %d at version %d: %w", partition, expected, err)
	}
	if len(res) < 2 {
		return Result{}, fmt.Errorf("dedup: commit partition %d: unexpected reply %v", partition, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return Result{}, fmt.Errorf("%w: partition %d is at version %v, not %d", ErrFenced, partition, res[1], expected)
	}
	if werr != nil {
		// The batch is on the primary, maybe not on its replicas: the
		// caller reloads (confirming the state) before it goes on.
		return Result{}, fmt.Errorf("dedup: commit partition %d at version %d ran on the primary but may be lost in a failover: %w", partition, expected, werr)
	}
	a, _ := res[1].(int64)
	s, _ := res[2].(int64)
	return Result{Appended: int(a), Suppressed: int(s)}, nil
}

// loadScript reads the version and the states atomically and then writes
// the partition's replication check key (ARGV[1], the version read), so
// that the WAIT after it covers every write the state read came from.
// KEYS = applied, drones, replication check. Returns {applied or false,
// flat HGETALL of the drones}.
var loadScript = redis.NewScript(`
local a = redis.call('GET', KEYS[1])
local d = redis.call('HGETALL', KEYS[2])
redis.call('SET', KEYS[3], a or '-1')
return {a, d, redis.call('GET', KEYS[4]), redis.call('GET', KEYS[5]), redis.call('GET', KEYS[6])}
`)

// loadReplicated is Load when writes wait for replicas: a state the
// primary has but its replicas may not is not a state to go on from (its
// next commit, sent to a promoted replica without it, would be fenced), so
// the load fails until the replicas have it.
func (r *Redis) loadReplicated(ctx context.Context, partition int) (Snapshot, error) {
	k := r.Keys(partition)
	cmd, werr := r.wait.Run(ctx, r.c, loadScript, []string{k.Applied(), k.Drones(), k.ReplCheck(), k.Clock(), k.ZoneVersion(), k.AuthVersion()})
	res, err := cmd.Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d: %w", partition, err)
	}
	if werr != nil {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d: the state is not confirmed on the replicas: %w", partition, werr)
	}
	if len(res) < 2 {
		return Snapshot{}, fmt.Errorf("dedup: load partition %d: unexpected reply %v", partition, res)
	}
	s := Snapshot{Applied: NoVersion}
	if v, ok := res[0].(string); ok {
		if s.Applied, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Snapshot{}, fmt.Errorf("dedup: partition %d: bad applied offset %q: %w", partition, v, err)
		}
	}
	flat, _ := res[1].([]any)
	s.Drones = make(map[string][]byte, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		st, _ := flat[i+1].(string)
		s.Drones[id] = []byte(st)
	}
	s.ZoneVersion = -1
	if len(res) >= 4 {
		if v, ok := res[2].(string); ok {
			if s.Clock, err = strconv.ParseInt(v, 10, 64); err != nil {
				return Snapshot{}, fmt.Errorf("dedup: partition %d: bad clock %q: %w", partition, v, err)
			}
		}
		if v, ok := res[3].(string); ok {
			if s.ZoneVersion, err = strconv.ParseInt(v, 10, 64); err != nil {
				return Snapshot{}, fmt.Errorf("dedup: partition %d: bad zone version %q: %w", partition, v, err)
			}
		}
	}
	if len(res) >= 5 {
		if v, ok := res[4].(string); ok {
			if s.AuthVersion, err = strconv.ParseInt(v, 10, 64); err != nil {
				return Snapshot{}, fmt.Errorf("dedup: partition %d: bad authorisation version %q: %w", partition, v, err)
			}
		}
	}
	return s, nil
}

// indexArg is the script's alarm-index argument of e: the raise time in
// unix milliseconds for a raised event, "c" for a cleared one, "" for any
// other (or a raised event without a readable ts, which the index skips).
func indexArg(e Event) string {
	switch {
	case len(e.ID) > 32 && strings.HasPrefix(e.ID[32:], InfixLost):
		return "l"
	case len(e.ID) > 32 && strings.HasPrefix(e.ID[32:], InfixRegained):
		return "g"
	case len(e.ID) > 32 && (strings.HasPrefix(e.ID[32:], InfixAuthorized) || strings.HasPrefix(e.ID[32:], InfixUnauthorized)):
		return "a"
	case strings.HasSuffix(e.ID, SuffixCleared):
		return "c"
	case strings.HasSuffix(e.ID, SuffixRaised):
		if ts, ok := eventTS(e.JSON); ok {
			return strconv.FormatInt(ts.UnixMilli(), 10)
		}
	}
	return ""
}

// eventTS reads the top-level "ts" of an event's JSON. The events are flat
// objects, and in JSON the bytes "ts":" cannot occur inside a string value
// (its quotes would be escaped), so the first occurrence is the key.
func eventTS(js []byte) (time.Time, bool) {
	const key = `"ts":"`
	i := bytes.Index(js, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := js[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return ts, err == nil
}

// Track returns drone's track on partition, oldest point first.
func (r *Redis) Track(ctx context.Context, partition int, drone string) ([][]byte, error) {
	pts, err := r.c.LRange(ctx, r.Keys(partition).Track(drone), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("dedup: track of %q on partition %d: %w", drone, partition, err)
	}
	out := make([][]byte, len(pts))
	for i, p := range pts {
		out[i] = []byte(p)
	}
	return out, nil
}

// ZoneSwitches returns the partition's zone switches, oldest first.
func (r *Redis) ZoneSwitches(ctx context.Context, partition int) ([]ZoneSwitch, error) {
	return r.switches(ctx, partition, r.Keys(partition).ZoneSwitches(), "zone")
}

// AuthSwitches returns the partition's authorisation set switches, oldest
// first (the same form as zone switches).
func (r *Redis) AuthSwitches(ctx context.Context, partition int) ([]ZoneSwitch, error) {
	return r.switches(ctx, partition, r.Keys(partition).AuthSwitches(), "authorisation")
}

func (r *Redis) switches(ctx context.Context, partition int, key, what string) ([]ZoneSwitch, error) {
	ls, err := r.c.LRange(ctx, key, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("dedup: %s switches of partition %d: %w", what, partition, err)
	}
	out := make([]ZoneSwitch, 0, len(ls))
	for _, l := range ls {
		sw, err := ParseZoneSwitch(l)
		if err != nil {
			return nil, fmt.Errorf("dedup: partition %d: %w", partition, err)
		}
		out = append(out, sw)
	}
	return out, nil
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
