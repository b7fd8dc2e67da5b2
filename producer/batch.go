package producer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/segmentio/kafka-go"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Offsets inside a v2 record batch (KIP-98), counted from baseOffset.
const (
	batchHeaderSize   = 61 // baseOffset .. recordCount
	offBatchLength    = 8
	offCRC            = 17
	offAttributes     = 21
	attrTransactional = 1 << 4 // in the attributes
	offBaseSequence   = 53
	crcCoveredFrom    = offAttributes
	magicV2           = 2
	noPartitionLeader = -1
)

// appendRecordTail appends what of a v2 record does not depend on its place
// in a batch: key, value and headers. Produce copies records into this form
// at once, so the caller may reuse its buffers, and a batch is assembled
// from tails without touching the caller's memory again.
func appendRecordTail(dst []byte, r *Record) []byte {
	dst = appendNullableBytes(dst, r.Key)
	dst = appendNullableBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullableBytes(dst, h.Value)
	}
	return dst
}

func appendNullableBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// tailSize is len(appendRecordTail(nil, r)) without building it.
func tailSize(r *Record) int {
	n := nullableSize(r.Key) + nullableSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintSize(int64(len(h.Key))) + len(h.Key) + nullableSize(h.Value)
	}
	return n
}

func nullableSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int64(len(b))) + len(b)
}

func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// batchSession is what the broker deduplicates on.
type batchSession struct {
	producerID int64
	epoch      int16
	// transactional marks every batch of the session as part of a
	// transaction (TxnWriter); the broker then holds it back from
	// read_committed readers until the transaction's marker.
	transactional bool
}

// encodeBatch appends one v2 record batch holding tails (with create times
// in ms) to dst, preceded by its own int32 size: kafka-go sends a
// RawRecordSet byte for byte, and the produce request's records field is a
// length-prefixed byte string.
//
// The bytes are built once per batch and resent unchanged on every retry, so
// the broker sees the same producer id, epoch and base sequence each time.
func encodeBatch(dst []byte, s batchSession, baseSeq int32, codec kafka.Compression, tails [][]byte, times []int64) ([]byte, error) {
	if len(tails) == 0 {
		return nil, fmt.Errorf("producer: empty batch")
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size prefix, patched below
	hdr := len(dst)
	dst = append(dst, make([]byte, batchHeaderSize)...)
	b := dst[hdr:]

	baseTS, maxTS := times[0], times[0]
	for _, t := range times[1:] {
		if t > maxTS {
			maxTS = t
		}
	}
	binary.BigEndian.PutUint64(b[0:], 0) // baseOffset: the broker assigns it
	binary.BigEndian.PutUint32(b[12:], uint32(noPartitionLeader&0xffffffff))
	b[16] = magicV2
	attrs := uint16(codec) & 0x7 // create time
	if s.transactional {
		attrs |= attrTransactional
	}
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint32(b[23:], uint32(len(tails)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(baseTS))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[43:], uint64(s.producerID))
	binary.BigEndian.PutUint16(b[51:], uint16(s.epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSeq))
	binary.BigEndian.PutUint32(b[57:], uint32(len(tails)))

	if codec == 0 {
		dst = appendRecords(dst, tails, times, baseTS)
	} else {
		scratch := scratchPool.Get().(*[]byte)
		rb := appendRecords((*scratch)[:0], tails, times, baseTS)
		out := bytes.NewBuffer(dst)
		w := codec.Codec().NewWriter(out)
		if _, err := w.Write(rb); err != nil {
			return nil, fmt.Errorf("producer: compress batch: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("producer: compress batch: %w", err)
		}
		dst = out.Bytes()
		*scratch = rb[:0] // keep the grown buffer for the next batch
		scratchPool.Put(scratch)
	}

	b = dst[hdr:]
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[crcCoveredFrom:], castagnoli))
	binary.BigEndian.PutUint32(dst[start:], uint32(len(b)))
	return dst, nil
}

// scratchPool holds the uncompressed records of a batch while it is compressed.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

func appendRecords(dst []byte, tails [][]byte, times []int64, baseTS int64) []byte {
	for i, tail := range tails {
		tsDelta := times[i] - baseTS
		body := 1 + varintSize(tsDelta) + varintSize(int64(i)) + len(tail)
		dst = binary.AppendVarint(dst, int64(body))
		dst = append(dst, 0) // record attributes: unused
		dst = binary.AppendVarint(dst, tsDelta)
		dst = binary.AppendVarint(dst, int64(i))
		dst = append(dst, tail...)
	}
	return dst
}

// rawReader returns a fresh reader over an encoded batch: kafka-go consumes
// the reader of a RawRecordSet on each send, so every attempt needs its own.
func rawReader(encoded []byte) io.Reader { return bytes.NewReader(encoded) }
