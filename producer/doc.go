// Package producer is an idempotent Kafka producer for one topic, built on
// kafka-go's protocol client (kafka-go has no idempotent writer, its issue
// #233): InitProducerId for a producer id and epoch, v2 record batches
// encoded here carrying producer id, epoch and base sequence (CRC-32C), sent
// with acks=all, every partition's ready batch of one leader in one Produce
// request.
//
//	p, err := producer.New(ctx, producer.Config{Brokers: brokers, Topic: "telemetry.positions"})
//	...
//	err = p.Produce(ctx, []producer.Record{producer.NewRecord(key, value)})
//	// nil: every record is in the log (acks=all); else a *ProduceError names
//	// the indexes that are not, and errors.Is(err, producer.ErrBrokerUnavailable)
//	// says "answer 503".
//
// # What idempotence covers
//
// Within one producer session (one producer id and epoch), a batch is
// retried with the same bytes and the same sequence until the broker answers,
// so a batch the broker wrote but whose acknowledgement was lost is not
// written twice: the broker recognises the sequence and answers
// DUPLICATE_SEQUENCE_NUMBER, or, for the last 5 batches, success with the
// original offset. Per partition, records reach the log in the order of the
// Produce calls that carried them: one batch per partition is in flight at a
// time (kafka-go's Client may put concurrent requests on separate
// connections, which would reorder them).
//
// # One request per broker
//
// A partition's batch does not go in a request of its own: the batches
// queued when the sender wakes go together, one Produce request per leader
// (request.go); the sender waits up to 200 µs for partitions still
// encoding, so one Produce call's batches of every partition go together.
// Requests do not wait for one another: a slow broker holds only the
// partitions it leads. The broker's cost is mostly per request (at
// ingest's 8 records a partition batch, 6.7-9.8 µs a record with one
// request per batch: BENCHMARKS.md). Each partition's answer in the
// response is handled as before; a failure of the whole request is each
// batch's failure, retried on its own. A partition still has one batch in
// flight, and an attempt its caller gave up on is dropped unless already
// sent, so a batch is never twice in one request.
//
// # What it does not cover
//
//   - A producer restart gets a new producer id: a record the previous
//     process sent, whose Produce did not return nil, and that the caller
//     sends again, can be in the log twice. The record's own place in its
//     drone's order, (ts, seq), is the second line of defence: the alerter
//     ignores a record not after the last it applied (docs/design.md, "How
//     exactly-once is obtained", 2).
//   - A record whose Produce returned an error may still be in the log when
//     the outcome was unknown: ErrBrokerUnavailable after the delivery
//     timeout, ErrClosed, or the caller's context ending (then it is even
//     written after Produce returned, still once). ErrRejected, ErrAborted
//     and ErrInvalidRecord mean "not written".
//   - No transactions, no atomicity across partitions or Produce calls.
//   - The partition count is read once, in New; the key→partition mapping
//     (murmur2, like the Java client's default partitioner) is that of the
//     count at start.
//
// # Linger: none for a caller who waits
//
// Produce always waits for its records' acknowledgement, so lingering for
// more records only delays its return. By default a partition therefore
// sends as soon as it holds records and nothing of it is in flight: a call
// queues its records of one partition under that partition's lock, so the
// batch taken holds all of them, plus whatever other calls queued
// meanwhile. Records that arrive while the partition's one batch is in
// flight wait for it and form the next batch, so batches grow with load
// without a timer (BenchmarkProduceLinger: 4 callers x 500 records over 6
// partitions give ~150 records a batch). This is what franz-go's
// ProduceSync does (v1.22.3, pkg/kgo/producer.go): once the call's records
// are buffered it stops the linger timer of every partition they went to
// and starts a drain, which sends every partition's buffered records of
// that broker, not only the caller's; partitions it did not touch keep
// lingering for asynchronous Produce calls. Config.AlwaysLinger restores
// the old behaviour, every batch waiting up to Linger: fewer, larger
// batches when calls are sparse (less broker CPU per record), for up to
// Linger more latency per call.
//
// # Broker answers (as the Java producer handles them)
//
//	answer                                        what happens
//	success                                       acknowledged; sequence advances. A success on a retry
//	                                              with an offset below the high watermark read before the
//	                                              retry is counted in Stats.Duplicates.
//	DUPLICATE_SEQUENCE_NUMBER                     already written: acknowledged, Stats.Duplicates++.
//	network error, timeout, REQUEST_TIMED_OUT,    retried with the same bytes, backoff 100ms doubling to 1s
//	NOT_ENOUGH_REPLICAS(_AFTER_APPEND), other     with jitter, until DeliveryTimeout; then ErrBrokerUnavailable
//	retriable (kafka.Error.Temporary)             and, as the batch may be in the log, an epoch bump.
//	NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, as above, after dropping kafka-go's cached metadata so the
//	UNKNOWN_TOPIC_OR_PARTITION, no leader known   next attempt goes to the new leader.
//	OUT_OF_ORDER_SEQUENCE_NUMBER,                 the broker lost our sequence: the batch fails (ErrSequence),
//	UNKNOWN_PRODUCER_ID                           the epoch is bumped locally (KIP-360: same id, epoch+1,
//	                                              sequences from 0), like the Java idempotent producer.
//	INVALID_PRODUCER_EPOCH, PRODUCER_FENCED       the broker holds a newer epoch of our id: the batch fails
//	                                              (ErrSequence) and the producer takes a new id.
//	anything else (MESSAGE_TOO_LARGE,             the batch fails with ErrRejected; not written, so the
//	INVALID_RECORD, authorization...)             sequence does not advance.
//
// When a batch fails, the records queued behind it on the same partition fail
// too, with ErrAborted: sent, they would land ahead of the failed ones and a
// retry would reorder the partition. An epoch bump waits until no batch of
// any partition is in flight: a batch still retried under the old epoch
// after the bump could be in the log already and be written again under the
// new one, where the broker cannot recognise it.
//
// # Traps (found by trying it)
//
//   - RawRecordSet is written to the request byte for byte: the encoded batch
//     carries its own 4-byte size prefix.
//   - A RawRecordSet's reader is consumed by one send: every attempt gets a
//     fresh reader over the same bytes.
//   - InitProducerId must send producer id and epoch -1 to get an id. Without
//     a transactional id the broker always allocates a new id, even when
//     given the current id and epoch: the epoch bump is done client-side.
//   - kafka-go's Client.InitProducerID routes through a FindCoordinator
//     lookup for the (empty) transactional id; it works against Kafka 4.4,
//     but this package sends InitProducerId to a bootstrap broker directly
//     over protocol.Conn, which needs no coordinator.
//   - Kafka 4.4 answers a resent batch among the partition's last 5 with
//     success and its original offset, not DUPLICATE_SEQUENCE_NUMBER, and an
//     older one with OUT_OF_ORDER_SEQUENCE_NUMBER (TestBrokerAnswersToResentBatches).
//     With one batch in flight per partition a retry is always the newest.
//   - kafka-go's rawproduce.Request refuses partitions of different leaders
//     in one request ("mismatching leaders"), by its own cached layout: the
//     sender groups by the leaders of a metadata request of its own, and
//     reads it again after any failed request (a retry, then, regroups).
//   - kafka-go's Client has no "refresh metadata" call; dropping the
//     transport's connection pools (CloseIdleConnections) does it.
//   - A kafka.Writer{} literal defaults to acks=none: set RequiredAcks
//     wherever the plain Writer is used (the tests and benchmarks do).
//   - kafka-go's shared DefaultTransport may hold a metadata snapshot taken
//     before a topic was created: readers in tests use a transport of their own.
//   - Kafka 4.x moved DumpLogSegments to org.apache.kafka.tools and prints
//     "isvalid" where older versions printed "crcValid".
package producer
