-- A versioned store's change (docs/redis-layout.md, "Zone store" and
-- "Authorisation store"): all or nothing, against the version the change
-- was made on.
-- KEYS = version, current, history, times
-- ARGV = expected_version, entry_json, at_ms, cutoff_ms, min_keep, max_keep
-- Returns {1, new_version} or {0, current_version} (nothing written).
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local expected = tonumber(ARGV[1])
if cur ~= expected then
  return {0, cur}
end
local v = cur + 1
redis.call('SET', KEYS[1], v)
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[3], v, ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], v)
-- Trim: a version older than the cutoff goes unless it is one of the last
-- min_keep; past max_keep versions the oldest go whatever their age.
local minKeep, maxKeep = tonumber(ARGV[5]), tonumber(ARGV[6])
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[4])) do
  if tonumber(old) <= v - minKeep then
    redis.call('ZREM', KEYS[4], old)
    redis.call('HDEL', KEYS[3], old)
  end
end
local n = redis.call('ZCARD', KEYS[4])
if n > maxKeep then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[4], 0, n - maxKeep - 1)) do
    redis.call('ZREM', KEYS[4], old)
    redis.call('HDEL', KEYS[3], old)
  end
end
return {1, v}
