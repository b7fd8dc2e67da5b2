package dedup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// eventCopyScript appends ARGV[3..] to the outbox stream (KEYS[1]), each
// with the event id ARGV[2] in a field of its own as the outbox had it
// before issue 32, and, by ARGV[1], also writes each to the index hash
// (KEYS[2]): "json" the event itself, as the batch script's alarm index
// does; "ref" a stream id in its place (what issue 32 point 3 asks);
// "none" nothing. "no-id" appends each event alone, without the id field,
// as the outbox does now (the id is the JSON's first member); "one-entry"
// appends the call's events as one stream entry (a field each) and nothing
// else: the outbox with an entry per batch.
// The hash's fields are deleted in the same call, as the index's GC
// deletes them later, so the copy's whole life is weighed.
var eventCopyScript = redis.NewScript(`
local ids = {}
if ARGV[1] == 'one-entry' then
  local f = {}
  for i = 3, #ARGV do f[#f + 1] = 'e'; f[#f + 1] = ARGV[i] end
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', 200, '*', unpack(f))
  return 1
end
if ARGV[1] == 'no-id' then
  for i = 3, #ARGV do
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', 20000, '*', 'event', ARGV[i])
  end
  return 1
end
for i = 3, #ARGV do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', 20000, '*', 'event_id', ARGV[2], 'event', ARGV[i])
end
if ARGV[1] ~= 'none' then
  local h, f = {}, {}
  for i = 3, #ARGV do
    local k = ids[i - 2] .. ':raised'
    f[#f + 1] = k
    h[#h + 1] = k
    if ARGV[1] == 'json' then h[#h + 1] = ARGV[i] else h[#h + 1] = ids[i - 2] end
  end
  redis.call('HSET', KEYS[2], unpack(h))
  redis.call('HDEL', KEYS[2], unpack(f))
end
return #ids`)

// BenchmarkEventCopyCost weighs issue 32 point 3's second copy: Redis's
// main-thread CPU per event for appending 100 events a call to a stream
// (the outbox) alone, and with each also written to a hash (the alarm
// index) as the event's JSON or as a reference, and appending them as one
// entry; alternating blocks of 200 calls of each in one run. The event is a raise as the alerter encodes
// it (alerts.Event.AppendJSON). Run it against a Redis of its own
// (NOFLY_REDIS_ADDR) to keep other commands out of the CPU figures.
//
//	go test -run '^$' -bench EventCopyCost -benchtime 3x ./dedup
func BenchmarkEventCopyCost(b *testing.B) {
	rc := testenv.RedisClient(b)
	ctx := context.Background()
	alt := 118.5
	ev := alerts.Event{EventID: "0f8e3c9a2b7d4e6f0f8e3c9a2b7d4e6f:raised", AlarmID: "0f8e3c9a2b7d4e6f0f8e3c9a2b7d4e6f",
		Type: "raised", DroneID: "UAV-0042", ZoneID: "EGLL-FRZ", ZoneName: "Heathrow FRZ", Category: "restricted",
		Seq: 1234, TS: time.Date(2026, 12, 6, 20, 0, 0, 123e6, time.UTC), Lat: 51.4702, Lon: -0.4543, AltM: &alt, AltRef: "wgs84",
		Reason: "entered"}
	js := string(ev.AppendJSON(nil))
	args := make([]any, 102)
	args[1] = ev.EventID
	for i := 2; i < len(args); i++ {
		args[i] = js
	}
	keys := []string{"{bench-eventcopy}:outbox", "{bench-eventcopy}:index"}
	b.Cleanup(func() { rc.Del(ctx, keys...) })
	const calls = 200
	modes := []string{"none", "no-id", "json", "ref", "one-entry"}
	cpu := map[string]time.Duration{}
	for i := 0; i < b.N; i++ {
		for k := range modes {
			m := modes[(i+k)%len(modes)]
			args[0] = m
			u0 := sampleRedis(b, rc)
			for range calls {
				if err := eventCopyScript.Run(ctx, rc, keys, args...).Err(); err != nil {
					b.Fatal(err)
				}
			}
			cpu[m] += sampleRedis(b, rc).cpu - u0.cpu
		}
	}
	events := float64(b.N * calls * 100)
	for _, m := range modes {
		b.ReportMetric(float64(cpu[m].Nanoseconds())/events/1000, fmt.Sprintf("%s_redis_µs/event", m))
	}
	b.ReportMetric(float64(len(js)), "event_bytes")
	b.ReportMetric(0, "ns/op")
}
