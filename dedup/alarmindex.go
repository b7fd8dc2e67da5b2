package dedup

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// alarmDimsLua is the Lua both the batch script and the backfill splice in
// to keep the alarm index's secondary sets (redislayout.Keys.AlarmsActiveBy,
// AlarmsClearedBy): a raised event's drone, zone and category, read from its
// JSON, name the sets its alarm id goes to.
//
// dims reads them without decoding the whole event (cjson costs about 2.5x
// more): in an event's JSON the bytes "drone_id":" (and the others) cannot
// occur inside a string value, whose quotes are escaped, so the first
// occurrence after the previous field is the key; a value with an escape in
// it (a zone id with a quote or beyond ASCII) falls back to cjson. Events
// are flat and put the three in this order (alerts.Event.AppendJSON).
// ixput groups members by set, so each set costs one call per batch.
// raisedDims reads the raised events of alarm ids, 1,000 per HMGET.
const alarmDimsLua = `
local ixfields = {'"drone_id":"', '"zone_id":"', '"category":"'}
local ixby = {'` + redislayout.ByDrone + `', '` + redislayout.ByZone + `', '` + redislayout.ByCategory + `'}
local function ixstr(x) if type(x) == 'string' then return x end return '' end
local function dims(js)
  local v, at = {}, 1
  for i = 1, 3 do
    local _, q = string.find(js, ixfields[i], at, true)
    local s = q and string.match(js, '^([^"\\]*)"', q + 1)
    if not s then
      local ok, e = pcall(cjson.decode, js)
      if not ok or type(e) ~= 'table' then return nil end
      return {ixstr(e.drone_id), ixstr(e.zone_id), ixstr(e.category)}
    end
    v[i] = s
    at = q + #s + 2
  end
  return v
end
local function ixput(t, base, d, score, member)
  for i = 1, 3 do
    if d[i] ~= '' then
      local key = base .. ':' .. ixby[i] .. ':' .. d[i]
      local l = t[key]
      if not l then
        l = {}
        t[key] = l
      end
      if score then l[#l + 1] = score end
      l[#l + 1] = member
    end
  end
end
local function raisedDims(hash, ids, fn)
  for a = 1, #ids, 1000 do
    local b = math.min(#ids, a + 999)
    local f = {}
    for j = a, b do f[#f + 1] = ids[j] .. '` + SuffixRaised + `' end
    local js = redis.call('HMGET', hash, unpack(f))
    for j = a, b do
      local d = js[j - a + 1] and dims(js[j - a + 1])
      if d then fn(j, d) end
    end
  end
end
`

// backfillScript files up to ARGV[1] alarms of a partition written before
// the secondary sets existed (or after an earlier release committed to
// it) in those sets, continuing from the progress in the mark: the active
// alarms first, then the cleared ones (which also leave the active sets:
// an earlier release's clear did not move them), each set in ascending
// (raise time, alarm id) order. The position, not a rank, is the progress,
// so alarms cleared or deleted between two steps shift nothing; an alarm
// raised or cleared by this release's batch script in between is filed by
// that script. A mark naming another applied offset than the partition's
// (an earlier release committed since) starts over. Returns {1 when the
// mark says done, alarms filed}.
// KEYS = applied, alarms, alarms:active, alarms:cleared, mark.
var backfillScript = redis.NewScript(alarmDimsLua + `
local function chunked(cmd, key, t)
  for a = 1, #t, 1000 do
    redis.call(cmd, key, unpack(t, a, math.min(#t, a + 999)))
  end
end
local cur = redis.call('GET', KEYS[1]) or '-1'
local w = {}
for x in string.gmatch(redis.call('GET', KEYS[5]) or '', '%S+') do w[#w + 1] = x end
local phase, ps, pm = 'a', nil, nil
if w[1] == cur then
  if w[2] == 'done' then return {1, 0} end
  if w[2] == 'c' then phase = 'c' end
  if w[3] and w[4] then ps, pm = w[3], w[4] end
end
local n = tonumber(ARGV[1])
local set = KEYS[3]
if phase == 'c' then set = KEYS[4] end
local ids, sc, off, fin = {}, {}, 0, false
while true do
  local r = redis.call('ZRANGEBYSCORE', set, ps or '-inf', '+inf', 'WITHSCORES', 'LIMIT', off, n)
  for i = 1, #r, 2 do
    if not ps or tonumber(r[i + 1]) > tonumber(ps) or r[i] > pm then
      ids[#ids + 1] = r[i]
      sc[#sc + 1] = r[i + 1]
    end
  end
  if #r < 2 * n then
    fin = true
    break
  end
  if #ids > 0 then break end
  off = off + n
end
local add, rem = {}, {}
raisedDims(KEYS[2], ids, function(j, d)
  ixput(add, set, d, sc[j], ids[j])
  if phase == 'c' then ixput(rem, KEYS[3], d, nil, ids[j]) end
end)
for key, l in pairs(add) do chunked('ZADD', key, l) end
for key, l in pairs(rem) do chunked('ZREM', key, l) end
local mark = cur .. ' done'
if not fin then
  mark = cur .. ' ' .. phase .. ' ' .. sc[#sc] .. ' ' .. ids[#ids]
elseif phase == 'a' then
  mark = cur .. ' c'
end
redis.call('SET', KEYS[5], mark)
if fin and phase == 'c' then return {1, #ids} end
return {0, #ids}
`)

// BackfillAlarmIndex runs one step of the backfill of partition k's
// secondary alarm sets, filing up to chunk alarms (each step is one atomic
// script, so Redis is blocked for one chunk at a time), and reports
// whether the partition's sets now hold every alarm. Anyone may run it,
// concurrently with the batch script and other backfills: the progress is
// in the partition's mark, read and moved by each step. docs/redis-layout.md
// ("Alarms") has the argument.
func BackfillAlarmIndex(ctx context.Context, c redis.Scripter, k redislayout.Keys, chunk int) (done bool, filed int, err error) {
	if chunk <= 0 {
		return false, 0, fmt.Errorf("dedup: backfill chunk %d", chunk)
	}
	res, err := backfillScript.Run(ctx, c, []string{k.Applied(), k.Alarms(), k.AlarmsActive(), k.AlarmsCleared(), k.AlarmsIndexMark()}, chunk).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("dedup: backfill the alarm index of %s: %w", k.Tag(), err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("dedup: backfill the alarm index of %s: reply %v", k.Tag(), res)
	}
	return res[0] == 1, int(res[1]), nil
}

// AlarmIndexDone reports whether a partition's secondary alarm sets hold
// every alarm, from its mark and applied offset as read (absent: ""): the
// mark must name the applied offset, so a batch an earlier release
// committed since, which did not keep the sets, makes it false. A
// partition nothing was applied to holds no alarms.
func AlarmIndexDone(mark, applied string) bool {
	return applied == "" || mark == applied+" done"
}
