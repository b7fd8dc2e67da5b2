// Package consume is the alerter's runtime: a Kafka consumer group whose
// members each run, for every partition they are assigned, an alerts.Engine
// over that partition's records, and commit each batch to Redis in one
// versioned script (dedup.Redis) before its offset goes to Kafka.
//
// A Group is configured by Options (injected clients: a kafka.Dialer and a
// go-redis client), so a command, a test, a benchmark or a demo can run one
// or several alerters in one process. Replay runs the same engine over a
// recorded file without Kafka or Redis.
//
// The order of the commit — Redis first, Kafka's offset after, never ahead —
// and why it gives exactly-once alarms through crashes, rebalances and
// zombies is argued failure mode by failure mode in docs/exactly-once.md;
// the per-partition choreography is the sequencer's (sequencer.go).
package consume
