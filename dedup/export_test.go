package dedup

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// legacyCommitScript is the commit script of the layout before event
// buckets, verbatim: one string key per event, claimed with SET NX EX. The
// upgrade tests write the old layout with it and BenchmarkCommitLayouts
// compares the two.
var legacyCommitScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '-1' end
if cur ~= ARGV[1] then
  return {0, cur}
end
local nd = tonumber(ARGV[4])
local first, last = 6, 5 + 2 * nd
while first <= last do
  local upto = math.min(last, first + 999)
  redis.call('HSET', KEYS[2], unpack(ARGV, first, upto))
  first = upto + 1
end
local ttl, pfx, outbox = ARGV[3], ARGV[5], KEYS[3]
local appended, suppressed = 0, 0
for i = last + 1, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('SET', pfx .. id, '1', 'NX', 'EX', ttl) then
    redis.call('XADD', outbox, '*', '` + redislayout.FieldEventID + `', id, '` + redislayout.FieldEvent + `', ARGV[i + 1])
    appended = appended + 1
  else
    suppressed = suppressed + 1
  end
end
redis.call('SET', KEYS[1], ARGV[2])
return {1, appended, suppressed}
`)

// LegacyCommit commits b as the earlier release did (legacyCommitScript).
func (r *Redis) LegacyCommit(ctx context.Context, partition int, expected int64, b Batch) (Result, error) {
	if err := checkBatch(expected, b); err != nil {
		return Result{}, err
	}
	k := r.Keys(partition)
	args := []any{strconv.FormatInt(expected, 10), strconv.FormatInt(b.Applied, 10),
		strconv.FormatInt(int64(r.ttl.Seconds()), 10), len(b.Drones), k.EventPrefix()}
	for id, st := range b.Drones {
		args = append(args, id, st)
	}
	for _, e := range b.Events {
		args = append(args, e.ID, e.JSON)
	}
	res, err := legacyCommitScript.Run(ctx, r.c, []string{k.Applied(), k.Drones(), k.Outbox()}, args...).Slice()
	if err != nil {
		return Result{}, fmt.Errorf("dedup: legacy commit: %w", err)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return Result{}, fmt.Errorf("%w: at version %v", ErrFenced, res[1])
	}
	a, _ := res[1].(int64)
	s, _ := res[2].(int64)
	return Result{Appended: int(a), Suppressed: int(s)}, nil
}
