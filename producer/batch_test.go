package producer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// TestEncodeBatchDecodesWithKafkaGo encodes batches with every codec and
// reads them back with kafka-go's own record-set decoder, checking the v2
// header fields the broker deduplicates on and the CRC-32C.
func TestEncodeBatchDecodesWithKafkaGo(t *testing.T) {
	t0 := time.UnixMilli(1764670503250)
	recs := []Record{
		{Key: []byte("UAV-0042"), Value: []byte(`{"seq":1}`), Time: t0, Headers: []Header{{Key: "h", Value: []byte("v")}, {Key: "nil"}}},
		{Key: nil, Value: []byte("no key"), Time: t0.Add(-3 * time.Millisecond)},
		{Key: []byte{}, Value: nil, Time: t0.Add(time.Second)},
	}
	for _, tc := range []struct {
		name  string
		codec kafka.Compression
	}{
		{"none", 0}, {"gzip", kafka.Gzip}, {"snappy", kafka.Snappy}, {"lz4", kafka.Lz4}, {"zstd", kafka.Zstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tails [][]byte
			var times []int64
			for i := range recs {
				tails = append(tails, appendRecordTail(nil, &recs[i]))
				times = append(times, recs[i].Time.UnixMilli())
				if got, want := tailSize(&recs[i]), len(tails[i]); got != want {
					t.Fatalf("tailSize = %d, encoded %d", got, want)
				}
			}
			sess := batchSession{producerID: 4242, epoch: 7}
			enc, err := encodeBatch([]byte("junk"), sess, 2147483646, tc.codec, tails, times)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(enc, []byte("junk")) {
				t.Fatal("encodeBatch must append to dst")
			}
			enc = enc[4:]
			size := int(binary.BigEndian.Uint32(enc))
			if size != len(enc)-4 {
				t.Fatalf("size prefix %d, batch is %d bytes", size, len(enc)-4)
			}
			b := enc[4:]
			if got, want := binary.BigEndian.Uint32(b[offCRC:]), crc32.Checksum(b[crcCoveredFrom:], castagnoli); got != want {
				t.Fatalf("crc %08x, want %08x", got, want)
			}
			if got := int(binary.BigEndian.Uint32(b[offBatchLength:])); got != len(b)-12 {
				t.Fatalf("batchLength %d, want %d", got, len(b)-12)
			}
			if got := int64(binary.BigEndian.Uint64(b[43:])); got != sess.producerID {
				t.Fatalf("producer id %d", got)
			}
			if got := int16(binary.BigEndian.Uint16(b[51:])); got != sess.epoch {
				t.Fatalf("epoch %d", got)
			}
			if got := int32(binary.BigEndian.Uint32(b[offBaseSequence:])); got != 2147483646 {
				t.Fatalf("base sequence %d", got)
			}
			if got := int64(binary.BigEndian.Uint64(b[35:])); got != t0.Add(time.Second).UnixMilli() {
				t.Fatalf("max timestamp %d", got)
			}

			var rs protocol.RecordSet
			if _, err := rs.ReadFrom(bytes.NewReader(enc)); err != nil {
				t.Fatalf("kafka-go cannot decode our batch: %v", err)
			}
			if rs.Version != 2 {
				t.Fatalf("magic %d", rs.Version)
			}
			for i := 0; ; i++ {
				r, err := rs.Records.ReadRecord()
				if err == io.EOF {
					if i != len(recs) {
						t.Fatalf("decoded %d records, want %d", i, len(recs))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				want := recs[i]
				if r.Offset != int64(i) || !r.Time.Equal(want.Time) {
					t.Errorf("record %d: offset %d time %v, want %d %v", i, r.Offset, r.Time, i, want.Time)
				}
				if k := readAll(t, r.Key); (k == nil) != (want.Key == nil) || !bytes.Equal(k, want.Key) {
					t.Errorf("record %d key %q (nil %v), want %q", i, k, k == nil, want.Key)
				}
				if v := readAll(t, r.Value); (v == nil) != (want.Value == nil) || !bytes.Equal(v, want.Value) {
					t.Errorf("record %d value %q, want %q", i, v, want.Value)
				}
				if fmt.Sprint(headersOf(r.Headers)) != fmt.Sprint(want.Headers) {
					t.Errorf("record %d headers %v, want %v", i, headersOf(r.Headers), want.Headers)
				}
			}
		})
	}
}

func readAll(t *testing.T, b protocol.Bytes) []byte {
	t.Helper()
	if b == nil {
		return nil
	}
	out, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if out == nil {
		out = []byte{}
	}
	return out
}

func headersOf(hs []protocol.Header) []Header {
	var out []Header
	for _, h := range hs {
		out = append(out, Header{Key: h.Key, Value: h.Value})
	}
	return out
}

func TestIncrementSequenceWraps(t *testing.T) {
	for _, tc := range []struct {
		seq  int32
		n    int
		want int32
	}{
		{0, 5, 5},
		{2147483640, 7, 2147483647},
		{2147483640, 8, 0},
		{2147483647, 1, 0},
		{2147483646, 10, 8},
	} {
		if got := incrementSequence(tc.seq, tc.n); got != tc.want {
			t.Errorf("incrementSequence(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}
