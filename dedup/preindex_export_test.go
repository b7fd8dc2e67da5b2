package dedup

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// preIndexCommitScript is the batch script of the release before the
// alarm index's secondary sets, verbatim (commit ef2b820): the upgrade
// test writes partitions with it as that release left them, and
// BenchmarkAlarmIndexCost weighs the sets' cost against it.
var preIndexCommitScript = redis.NewScript(`
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
local nd, nt, nf, ng = tonumber(ARGV[4]), tonumber(ARGV[8]), tonumber(ARGV[14]), tonumber(ARGV[16])
local first, last = 17, 16 + 2 * nd
local dids, dchg = {}, {}
for i = first, last, 2 do
  dids[#dids + 1] = 0
  dids[#dids + 1] = ARGV[i]
  dchg[#dchg + 1] = ARGV[2]
  dchg[#dchg + 1] = ARGV[i]
end
while first <= last do
  local upto = math.min(last, first + 999)
  redis.call('HSET', KEYS[2], unpack(ARGV, first, upto))
  first = upto + 1
end
chunked('ZADD', KEYS[15], dids)
chunked('ZADD', KEYS[17], dchg)
local tlen, tttl, tpfx = tonumber(ARGV[9]), ARGV[10], ARGV[11]
for i = last + 1, last + 2 * nt, 2 do
  local k = tpfx .. ARGV[i]
  if redis.call('RPUSH', k, ARGV[i + 1]) > tlen then
    redis.call('LTRIM', k, -tlen, -1)
  end
  redis.call('PEXPIRE', k, tttl)
end
last = last + 2 * nt
if nf > 0 then
  local tk = {}
  for i = last + 1, last + nf do tk[#tk + 1] = tpfx .. ARGV[i] end
  for a = last + 1, last + nf, 1000 do
    redis.call('HDEL', KEYS[2], unpack(ARGV, a, math.min(last + nf, a + 999)))
  end
  chunked('DEL', nil, tk)
  for _, k in ipairs({KEYS[15], KEYS[16], KEYS[17]}) do
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
    redis.call('XADD', outbox, '*', '` + redislayout.FieldEventID + `', id, '` + redislayout.FieldEvent + `', ev)
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
  chunked('HDEL', KEYS[6], f)
  chunked('ZREM', KEYS[8], due)
  chunked('ZREM', KEYS[9], due)
end
table.insert(live, 1, ARGV[2])
redis.call('SET', KEYS[4], table.concat(live, ' '))
redis.call('SET', KEYS[1], ARGV[2])
return {1, appended, m - appended}
`)

// PreIndexCommit commits b as the release before the secondary sets did
// (preIndexCommitScript, with that release's arguments).
func (r *Redis) PreIndexCommit(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
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
	args := make([]any, 0, 16+2*len(b.Drones)+2*len(b.Tracks)+len(b.Forgotten)+3*placed+3*len(b.Events))
	args = append(args, strconv.FormatInt(expected, 10), strconv.FormatInt(b.Applied, 10),
		r.ttlArg, len(b.Drones), k.EventBucketPrefix(), k.EventPrefix(),
		r.retentionArg, len(b.Tracks), r.trackLenArg, r.trackTTLArg, k.TrackPrefix(),
		strconv.FormatInt(b.ZoneVersion, 10), strconv.FormatInt(b.Clock, 10), len(b.Forgotten),
		strconv.FormatInt(b.AuthVersion, 10), placed)
	for id, st := range b.Drones {
		args = append(args, id, st)
	}
	for id, pt := range b.Tracks {
		args = append(args, id, pt)
	}
	for _, id := range b.Forgotten {
		args = append(args, id)
	}
	for _, pl := range b.Placed {
		if placeable(pl) {
			args = append(args, pl.Lon, pl.Lat, pl.ID)
		}
	}
	for _, e := range b.Events {
		args = append(args, e.ID, e.JSON, indexArg(e))
	}
	res, err := preIndexCommitScript.Run(ctx, r.c, keys, args...).Slice()
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

// secondarySetsLua are the lines this release added to the batch script
// for the secondary sets (and their mark), as they stand in its text.
var secondarySetsLua = []string{
	alarmDimsLua + `
local xa = {}
for j = 1, #ra, 2 do
  local d = dims(rh[j + 1])
  if d then ixput(xa, KEYS[7], d, ra[j], ra[j + 1]) end
end
for key, l in pairs(xa) do chunked('ZADD', key, l) end
`, `  local xr, xc = {}, {}
  raisedDims(KEYS[6], gone, function(j, d)
    ixput(xr, KEYS[7], d, nil, gone[j])
    ixput(xc, KEYS[8], d, zc[2 * j - 1], gone[j])
  end)
  for key, l in pairs(xr) do chunked('ZREM', key, l) end
  for key, l in pairs(xc) do chunked('ZADD', key, l) end
`, `  local xg = {}
  raisedDims(KEYS[6], due, function(j, d) ixput(xg, KEYS[8], d, nil, due[j]) end)
  for key, l in pairs(xg) do chunked('ZREM', key, l) end
`, `local ixk = KEYS[6] .. ':ixv'
if cur == '-1' then
  redis.call('SET', ixk, ARGV[2] .. ' done')
else
  local w1, rest = string.match(redis.call('GET', ixk) or '', '^(%S+) (.*)$')
  if w1 == cur then
    redis.call('SET', ixk, ARGV[2] .. ' ' .. rest)
  end
end
`,
}

// noSecondarySetsScript is the batch script without secondarySetsLua:
// the same script as this release's but for the secondary sets, so that
// their cost is weighed alone. Built at first use: a script whose lines
// changed fails the benchmark, not every test.
var noSecondarySetsScript = sync.OnceValues(func() (*redis.Script, error) {
	src := reflect.ValueOf(commitScript).Elem().FieldByName("src").String()
	for _, b := range secondarySetsLua {
		if !strings.Contains(src, b) {
			return nil, errors.New("dedup: the batch script no longer holds the secondary sets' lines as secondarySetsLua has them: update it")
		}
		src = strings.Replace(src, b, "", 1)
	}
	return redis.NewScript(src), nil
})

// CommitWithoutSecondarySets is Commit with noSecondarySetsScript (not
// safe for concurrent use with Commit: it swaps the script for the call).
func (r *Redis) CommitWithoutSecondarySets(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
	script, err := noSecondarySetsScript()
	if err != nil {
		return Result{}, err
	}
	cs := commitScript
	commitScript = script
	defer func() { commitScript = cs }()
	return r.Commit(ctx, partition, expected, b)
}
