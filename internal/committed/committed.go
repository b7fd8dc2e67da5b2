// Package committed reads a Kafka partition as a read_committed consumer
// sees it: control batches (transaction markers) skipped, records of aborted
// transactions dropped, nothing at or past the last stable offset.
//
// kafka-go's Reader and Client.Fetch skip control batches but hand out the
// records of aborted transactions, so anything that must not count an
// aborted write (the outbox's resume point, tests of alerts.events) reads
// through here.
package committed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Record is one committed record.
type Record struct {
	Offset  int64
	Time    time.Time
	Key     []byte
	Value   []byte
	Headers []kafka.Header
}

// Header returns the value of the first header named key, and whether
// there was one.
func (r Record) Header(key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// Reader reads committed records of one topic.
type Reader struct {
	Addr  net.Addr
	Topic string
	// Transport carries every request; its connections are the caller's
	// to close. Required.
	Transport *kafka.Transport
	// MaxBytes bounds one fetch. Default 4 MiB.
	MaxBytes int
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
}

func (r *Reader) client() *kafka.Client {
	return &kafka.Client{Addr: r.Addr, Transport: r.Transport, Timeout: r.timeout()}
}

func (r *Reader) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 10 * time.Second
}

// Offsets returns the partition's log start offset and its last stable
// offset (the end for read_committed readers: below it every transaction is
// decided).
func (r *Reader) Offsets(ctx context.Context, partition int) (start, stable int64, err error) {
	res, err := r.client().ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics:         map[string][]kafka.OffsetRequest{r.Topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}},
		IsolationLevel: kafka.ReadCommitted,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("committed: list offsets of %s/%d: %w", r.Topic, partition, err)
	}
	for _, po := range res.Topics[r.Topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, 0, fmt.Errorf("committed: list offsets of %s/%d: %w", r.Topic, partition, po.Error)
		}
		return po.FirstOffset, po.LastOffset, nil
	}
	return 0, 0, fmt.Errorf("committed: list offsets of %s/%d: partition not in the answer", r.Topic, partition)
}

// Read returns the committed records of partition with offsets in
// [from, to), in offset order. to must not exceed the last stable offset
// (Offsets), or Read waits for records that a read_committed fetch does not
// return yet, until ctx ends.
func (r *Reader) Read(ctx context.Context, partition int, from, to int64) ([]Record, error) {
	var out []Record
	next := from
	for next < to {
		recs, after, err := r.fetch(ctx, partition, next)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.Offset >= next && rec.Offset < to {
				out = append(out, rec)
			}
		}
		if after <= next {
			return nil, fmt.Errorf("committed: fetch %s/%d@%d returned nothing below %d", r.Topic, partition, next, to)
		}
		next = after
	}
	return out, nil
}

// ReadAll returns every committed record of partition still in the log,
// up to the last stable offset.
func (r *Reader) ReadAll(ctx context.Context, partition int) ([]Record, error) {
	start, stable, err := r.Offsets(ctx, partition)
	if err != nil {
		return nil, err
	}
	return r.Read(ctx, partition, start, stable)
}

// Poll waits for committed records of partition at or after offset: one
// read_committed fetch, which the broker holds (up to half a second) until
// the last stable offset passes offset, so a follower sees a transaction's
// records as soon as its commit marker is written. It returns the records
// and the offset to poll next (offset itself when none came: not an
// error). Concurrent polls need a Transport each: a broker answers one
// request of a connection at a time.
func (r *Reader) Poll(ctx context.Context, partition int, offset int64) ([]Record, int64, error) {
	return r.fetch(ctx, partition, offset)
}

// Last returns the partition's last committed record, scanning back from
// the last stable offset in growing windows (the tail may be aborted
// writes and markers). ok is false when no committed record is left.
func (r *Reader) Last(ctx context.Context, partition int) (rec Record, ok bool, start, stable int64, err error) {
	start, stable, err = r.Offsets(ctx, partition)
	if err != nil {
		return Record{}, false, 0, 0, err
	}
	for window := int64(64); ; window *= 8 {
		from := max(start, stable-window)
		recs, err := r.Read(ctx, partition, from, stable)
		if err != nil {
			return Record{}, false, start, stable, err
		}
		if len(recs) > 0 {
			return recs[len(recs)-1], true, start, stable, nil
		}
		if from == start {
			return Record{}, false, start, stable, nil
		}
	}
}

// fetch reads one read_committed fetch from offset and returns its
// committed records and the offset after the last batch it held.
func (r *Reader) fetch(ctx context.Context, partition int, offset int64) ([]Record, int64, error) {
	maxBytes := r.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 4 << 20
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	m, err := r.Transport.RoundTrip(ctx, r.Addr, &fetch.Request{
		ReplicaID: -1, MaxWaitTime: 500, MinBytes: 1, MaxBytes: int32(maxBytes),
		IsolationLevel: 1, // read_committed
		SessionID:      -1, SessionEpoch: -1,
		Topics: []fetch.RequestTopic{{Topic: r.Topic, Partitions: []fetch.RequestPartition{{
			Partition: int32(partition), CurrentLeaderEpoch: -1, FetchOffset: offset,
			LogStartOffset: -1, PartitionMaxBytes: int32(maxBytes),
		}}}},
	})
	if err != nil {
		return nil, 0, fmt.Errorf("committed: fetch %s/%d@%d: %w", r.Topic, partition, offset, err)
	}
	res := m.(*fetch.Response)
	if res.ErrorCode != 0 {
		return nil, 0, fmt.Errorf("committed: fetch %s/%d@%d: %w", r.Topic, partition, offset, kafka.Error(res.ErrorCode))
	}
	if len(res.Topics) != 1 || len(res.Topics[0].Partitions) != 1 {
		return nil, 0, fmt.Errorf("committed: fetch %s/%d@%d: unexpected answer", r.Topic, partition, offset)
	}
	p := &res.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return nil, 0, fmt.Errorf("committed: fetch %s/%d@%d: %w", r.Topic, partition, offset, kafka.Error(p.ErrorCode))
	}
	recs, after, err := filter(p.RecordSet.Records, p.AbortedTransactions, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("committed: read %s/%d@%d: %w", r.Topic, partition, offset, err)
	}
	return recs, after, nil
}

// filter walks the batches of one fetch answer as the Java consumer does
// (CompletedFetch.nextFetchedRecord): an aborted transaction listed by the
// broker starts hiding its producer's transactional batches at its first
// offset, until that producer's ABORT marker.
func filter(rr protocol.RecordReader, aborted []fetch.ResponseTransaction, offset int64) ([]Record, int64, error) {
	if rr == nil {
		return nil, offset, nil
	}
	var batches []protocol.RecordReader
	if s, ok := rr.(*protocol.RecordStream); ok {
		batches = s.Records
	} else {
		batches = []protocol.RecordReader{rr}
	}
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	hidden := make(map[int64]bool)
	after := offset
	var out []Record
	for _, b := range batches {
		var base, pid int64
		var attrs protocol.Attributes
		switch b := b.(type) {
		case *protocol.ControlBatch:
			base, pid, attrs = b.BaseOffset, b.ProducerID, b.Attributes
		case *protocol.RecordBatch:
			base, pid, attrs = b.BaseOffset, b.ProducerID, b.Attributes
		default:
			return nil, 0, fmt.Errorf("unexpected batch type %T (message format below v2?)", b)
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= base {
			hidden[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if cb, ok := b.(*protocol.ControlBatch); ok {
			cr, err := cb.ReadControlRecord()
			if err != nil {
				return nil, 0, fmt.Errorf("control record at %d: %w", base, err)
			}
			if cr.Type == 0 { // ABORT
				delete(hidden, pid)
			}
			after = max(after, cr.Offset+1)
			continue
		}
		skip := attrs.Transactional() && hidden[pid]
		for {
			rec, err := b.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("record of the batch at %d: %w", base, err)
			}
			after = max(after, rec.Offset+1)
			if skip {
				closeRecord(rec)
				continue
			}
			r, err := toRecord(rec)
			if err != nil {
				return nil, 0, fmt.Errorf("record at %d: %w", rec.Offset, err)
			}
			out = append(out, r)
		}
	}
	return out, after, nil
}

func toRecord(r *protocol.Record) (Record, error) {
	defer closeRecord(r)
	key, err := protocol.ReadAll(r.Key)
	if err != nil {
		return Record{}, err
	}
	val, err := protocol.ReadAll(r.Value)
	if err != nil {
		return Record{}, err
	}
	return Record{Offset: r.Offset, Time: r.Time, Key: key, Value: val, Headers: r.Headers}, nil
}

func closeRecord(r *protocol.Record) {
	if r.Key != nil {
		r.Key.Close()
	}
	if r.Value != nil {
		r.Value.Close()
	}
}
