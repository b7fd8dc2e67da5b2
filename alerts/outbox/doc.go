// Package outbox moves alarm events from a partition's Redis outbox stream to
// the outside world: the Kafka topic alerts.events exactly once, and
// configured webhooks at least once with an idempotency key. Every output
// drains on its own goroutine with its own cursor, so a webhook that is down
// never slows Kafka, the other webhooks, or the engine (which only XADDs).
//
//	d, err := outbox.NewDispatcher(outbox.Config{Topic: "telemetry.positions", Webhooks: hooks},
//		dispatcherRedis, outbox.NewKafkaOutput(brokers, "alerts.events", producer.Config{}))
//	...
//	go d.Run(ctx, partition) // for each partition this instance owns; returns when ctx ends
//
// # Redis keys
//
// Every key of partition p lives under the hash tag of the dedup store,
// tag = {<prefix>:<telemetry topic>:<p>} (e.g. {nofly:telemetry.positions:3}),
// so each script touches one Cluster slot:
//
//	<tag>:outbox                   stream, written by the dedup store only (fields event_id, event).
//	                               The dispatcher only reads it (XREAD BLOCK) and never trims it.
//	<tag>:cursor:kafka             string, stream id of the last entry acknowledged by Kafka.
//	                               Advisory: Kafka's last record is the truth; this is read only
//	                               when retention emptied the alerts.events partition.
//	<tag>:cursor:webhook:<name>    string, stream id of the last entry delivered (or dead-lettered)
//	                               by webhook <name>. Written after each entry; never moves backwards.
//	<tag>:dead:webhook:<name>      stream of dead letters: outbox_id, event_id, event, reason,
//	                               attempts, status (last HTTP status, 0 for none). Written in the
//	                               same script call that moves the cursor past the entry.
//
// # Invariants
//
//   - Kafka is the Kafka output's cursor: the dispatcher of partition p is the
//     only writer of alerts.events partition p (same partition count as the
//     telemetry topic; key = drone_id), each record carries the header
//     nofly-outbox-id (the stream entry id), and on start, and after any produce
//     error (whose outcome is unknown), the dispatcher closes its producer,
//     which waits for every batch in flight, then reads the partition's last
//     record and resumes after the id in its header. Nothing already there is
//     sent again, nothing missing is skipped.
//   - Run returns only after its producer is closed, so a Run started after
//     another returned for the same partition sees everything the first wrote.
//   - A webhook cursor moves past an entry only after a 2xx, or in the same
//     atomic step that writes the entry to the dead-letter stream: no entry
//     is silently dropped.
//   - The Redis stream is the only queue: an output holds at most one read
//     batch in memory, and those entries stay in the stream until its cursor
//     moves past them. Nothing is dropped on a timeout.
//
// # Limits
//
// Exactly-once into Kafka holds while at most one dispatcher runs partition p
// at a time. Before each produce the Kafka output checks that the
// partition's end offset is the one it expects (the end offset is the
// partition's version); if another writer moved it (a zombie that lost the
// partition and does not know yet, or the new owner), it re-reads the tail,
// resumes after it and backs off. That check and the produce are not atomic,
// so two dispatchers that send at the same moment both write that batch:
// with two writers running flat out on one partition, 1-5% of events were
// doubled in TestKafkaTwoWriters (without the check, every event would be).
// A crashed process whose last produce request reached the broker but was not
// yet appended when the new dispatcher read the tail may duplicate that batch
// too (a window of the broker's request latency). Downstream readers dedup on
// event_id, as DESIGN.md says.
//
// Nobody trims the outbox stream yet; the dispatcher only reads it.
//
// Give the dispatcher its own Redis client: each output holds one pooled
// connection in XREAD BLOCK, so a pool shared with the engine's scripts
// must have room for partitions × (1 + webhooks) blocked connections.
package outbox
