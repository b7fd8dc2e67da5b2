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
// Every key of partition p lives under the hash tag of the dedup store, so
// each script touches one Cluster slot. Besides the outbox stream (written
// by the dedup store only, read here with XREAD BLOCK and trimmed once every
// output passed an entry older than Config.Retention), the dispatcher keeps
// one cursor per output (Kafka's is advisory: Kafka's last record is the
// truth) and one dead-letter stream per webhook, written in the same script
// call that moves the webhook's cursor past the entry. The keys and fields
// are named by internal/redislayout; docs/redis-layout.md is the contract.
//
// # Invariants
//
//   - Kafka is the Kafka output's cursor. The dispatcher of partition p is the
//     only writer of alerts.events partition p (same partition count as the
//     telemetry topic; key = drone_id), each record carries the header
//     nofly-outbox-id (the stream entry id), and on start, and after any produce
//     error (whose outcome is unknown), the dispatcher drops its producer,
//     starts a new one (which settles the old one's open transaction and
//     fences any other writer of p), then reads the partition's last
//     committed record and resumes after the id in its header. Nothing
//     already there is sent again, nothing missing is skipped.
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
// Exactly-once into Kafka is for read_committed readers. Each batch is a
// Kafka transaction under the partition's transactional id
// (TransactionalID: "nofly-outbox:<topic>:<p>"), written by
// producer.TxnWriter. A dispatcher that starts (or restarts after an error)
// first initialises that id, which makes the broker abort what an earlier
// writer left open and refuse that writer from then on (PRODUCER_FENCED),
// then closes the partition (an aborted empty transaction, whose marker ends
// any transaction of the id the coordinator lost track of, and a wait until
// the last stable offset reaches the end), and only then reads the
// committed tail. So a zombie dispatcher that lost
// the partition and does not know yet, or a crashed process whose last
// request is still on the wire, cannot append after the new owner read the
// tail: two writers on one partition fence each other in turn and no event
// is doubled (TestKafkaTwoWriters: 0 doubled, both fenced). A
// read_uncommitted reader (kafka-go's Reader, Fetch) also sees the records
// of aborted transactions; internal/committed reads as read_committed does,
// and downstream readers can still dedup on event_id, as docs/design.md says.
//
// The outbox stream is trimmed every Config.TrimInterval to the lowest
// cursor of the partition's outputs, keeping entries younger than
// Config.Retention (24h): an output with no cursor (a webhook just added)
// holds every entry. If Kafka loses acknowledged records (an unclean leader
// election, a topic deleted and made again), the Kafka output resumes from
// the tail it finds, and entries already trimmed are not sent again.
//
// Give the dispatcher its own Redis client: each output holds one pooled
// connection in XREAD BLOCK, so a pool shared with the engine's scripts
// must have room for partitions × (1 + webhooks) blocked connections.
package outbox
