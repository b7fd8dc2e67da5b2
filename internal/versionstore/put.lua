-- A versioned store's change (docs/redis-layout.md, "Zone store" and
-- "Authorisation store"): all or nothing, against the version the change
-- was made on.
-- KEYS = version, current, history, times, staged, entry, audit stream
-- ARGV = expected_version, entry_json, at_ms, cutoff_ms, min_keep, max_keep,
--        max_bytes (0: no byte bound), staged ("1": the entry was written
--        to KEYS[5] in pieces and entry_json is empty), audit entry JSON
--        ("": none), the audit stream's MINID
-- Returns {1, new_version} or {0, current_version} (nothing written).
--
-- A staged entry (a large one: a national zone set is tens of MB) is
-- renamed to KEYS[6], the version's own key, and current and the history
-- hold "@" .. KEYS[6]: no command copies or logs the entry whole, so none
-- blocks Redis for long (with appendfsync always, a command writing 166 MB
-- held every partition's commits for 0.8 s).
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local expected = tonumber(ARGV[1])
local staged = ARGV[8] == '1'
if cur ~= expected then
  if staged then
    redis.call('UNLINK', KEYS[5])
  end
  return {0, cur}
end
local v = cur + 1
local entry = ARGV[2]
if staged then
  redis.call('RENAME', KEYS[5], KEYS[6])
  redis.call('PERSIST', KEYS[6])
  entry = '@' .. KEYS[6]
end
redis.call('SET', KEYS[1], v)
redis.call('SET', KEYS[2], entry)
redis.call('HSET', KEYS[3], v, entry)
redis.call('ZADD', KEYS[4], ARGV[3], v)
-- The change's audit entry (package audit), in the step that makes the
-- change: a change is never without it, a conflict (retried) adds none.
if ARGV[9] ~= '' then
  redis.call('XADD', KEYS[7], 'MINID', '~', ARGV[10], '*', 'entry', ARGV[9])
end

-- ref is the key a kept version's entry is in when it was staged, else
-- nil; an entry in the hash is JSON, never starting with "@".
local function ref(old)
  if redis.call('HSTRLEN', KEYS[3], old) > 512 then
    return nil
  end
  local e = redis.call('HGET', KEYS[3], old)
  if e and string.sub(e, 1, 1) == '@' then
    return string.sub(e, 2)
  end
  return nil
end
local function drop(old)
  local r = ref(old)
  if r then
    redis.call('UNLINK', r) -- freed off the main thread
  end
  redis.call('ZREM', KEYS[4], old)
  redis.call('HDEL', KEYS[3], old)
end
local function size(old)
  local r = ref(old)
  if r then
    return redis.call('STRLEN', r)
  end
  return redis.call('HSTRLEN', KEYS[3], old)
end

-- Trim: a version older than the cutoff goes unless it is one of the last
-- min_keep; past max_keep versions the oldest go whatever their age.
local minKeep, maxKeep = tonumber(ARGV[5]), tonumber(ARGV[6])
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[4])) do
  if tonumber(old) <= v - minKeep then
    drop(old)
  end
end
local n = redis.call('ZCARD', KEYS[4])
if n > maxKeep then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[4], 0, n - maxKeep - 1)) do
    drop(old)
  end
end
-- Past max_bytes of kept entries the oldest go whatever their age and
-- min_keep, but never the new version: a history of national sets (tens
-- of MB each) is bounded in bytes, not only in count.
local maxBytes = tonumber(ARGV[7])
if maxBytes > 0 then
  local kept = redis.call('ZRANGE', KEYS[4], 0, -1)
  local sizes, total = {}, 0
  for i, old in ipairs(kept) do
    sizes[i] = size(old)
    total = total + sizes[i]
  end
  for i, old in ipairs(kept) do
    if total <= maxBytes then
      break
    end
    if tonumber(old) ~= v then
      drop(old)
      total = total - sizes[i]
    end
  end
end
return {1, v}
