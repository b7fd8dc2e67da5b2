package producer

import "time"

// Header is a record header: a key and an optional value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record to produce to the producer's topic.
//
// Produce copies Key, Value and Headers into its own buffers before it
// returns or blocks, so the caller may reuse them as soon as Produce returns,
// even when it returns early because its context ended.
type Record struct {
	Key, Value []byte
	Headers    []Header
	// Time is the record's create time; the zero time means "now".
	Time time.Time
	// Partition is the target partition. -1 (AnyPartition, what NewRecord
	// sets) picks one with the Java client's default partitioner: murmur2 of
	// the key, so a drone maps to the same partition whichever client writes
	// it. A record with a nil key and -1 goes to a partition chosen round
	// robin per Produce call. >= 0 names the partition explicitly (the outbox
	// dispatcher writes partition p of alerts.events).
	//
	// Note that the zero value is partition 0, not "any": build records with
	// NewRecord, or set Partition explicitly.
	Partition int
}

// AnyPartition asks the partitioner to choose the record's partition.
const AnyPartition = -1

// NewRecord returns a record for key and value whose partition is chosen by
// the murmur2 partitioner.
func NewRecord(key, value []byte) Record {
	return Record{Key: key, Value: value, Partition: AnyPartition}
}
