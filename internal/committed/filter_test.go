package committed

import (
	"fmt"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

const txn = protocol.Attributes(1 << 4)

func data(pid int64, attrs protocol.Attributes, offsets ...int64) protocol.RecordReader {
	recs := make([]protocol.Record, len(offsets))
	for i, o := range offsets {
		recs[i] = protocol.Record{Offset: o, Value: protocol.NewBytes([]byte(fmt.Sprint(o)))}
	}
	return &protocol.RecordBatch{Attributes: attrs, BaseOffset: offsets[0], ProducerID: pid,
		Records: protocol.NewRecordReader(recs...)}
}

func marker(pid, offset int64, commit bool) protocol.RecordReader {
	typ := int16(0) // ABORT
	if commit {
		typ = 1
	}
	b := protocol.NewControlBatch(protocol.ControlRecord{Offset: offset, Type: typ})
	b.Attributes, b.BaseOffset, b.ProducerID = txn|protocol.Control, offset, pid
	return b
}

// TestFilter pins the read_committed rules on synthetic fetch answers: the
// broker's aborted-transaction list hides a producer's transactional
// batches from the transaction's first offset to its ABORT marker, and
// nothing else.
func TestFilter(t *testing.T) {
	cases := []struct {
		name    string
		batches []protocol.RecordReader
		aborted []fetch.ResponseTransaction
		want    []int64
		after   int64
	}{
		{"committed transaction", []protocol.RecordReader{data(1, txn, 0, 1), marker(1, 2, true)}, nil, []int64{0, 1}, 3},
		{"aborted transaction", []protocol.RecordReader{data(1, txn, 0, 1), marker(1, 2, false)},
			[]fetch.ResponseTransaction{{ProducerID: 1, FirstOffset: 0}}, nil, 3},
		{"interleaved producers, the aborted one writes again", []protocol.RecordReader{
			data(1, txn, 0), data(2, txn, 1), marker(1, 2, false), data(1, txn, 3), marker(2, 4, true), marker(1, 5, true)},
			[]fetch.ResponseTransaction{{ProducerID: 1, FirstOffset: 0}}, []int64{1, 3}, 6},
		{"aborted transaction that began before the fetch offset", []protocol.RecordReader{data(1, txn, 10, 11), marker(1, 12, false), data(3, 0, 13)},
			[]fetch.ResponseTransaction{{ProducerID: 1, FirstOffset: 4}}, []int64{13}, 14},
		{"non-transactional batch of a producer id listed as aborted", []protocol.RecordReader{data(1, 0, 0, 1)},
			[]fetch.ResponseTransaction{{ProducerID: 1, FirstOffset: 0}}, []int64{0, 1}, 2},
		{"empty answer", nil, nil, nil, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := int64(7)
			var rr protocol.RecordReader
			if tc.batches != nil {
				rr = &protocol.RecordStream{Records: tc.batches}
				from = 0
			}
			recs, after, err := filter(rr, tc.aborted, from)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range recs {
				got = append(got, r.Offset)
				if string(r.Value) != fmt.Sprint(r.Offset) {
					t.Errorf("record %d has value %q", r.Offset, r.Value)
				}
			}
			if !slices.Equal(got, tc.want) || after != tc.after {
				t.Fatalf("offsets %v, next %d; want %v, next %d", got, after, tc.want, tc.after)
			}
		})
	}
}
