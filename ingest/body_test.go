package ingest

import (
	"bytes"
	"compress/gzip"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestContentEncoding(t *testing.T) {
	body := ndjsonOf("UAV-1", "UAV-2", "UAV-3")
	zipped := gzipped(t, body)
	corrupt := bytes.Clone(zipped)
	corrupt[len(corrupt)/2] ^= 0xff
	badCRC := bytes.Clone(zipped)
	badCRC[len(badCRC)-5] ^= 0xff // the CRC-32 precedes the 4-byte length
	tests := []struct {
		name        string
		encoding    string
		body        []byte
		lim         Limits
		wantCode    int
		wantRecords int
		wantErr     string
	}{
		{name: "none", body: body, wantCode: 202, wantRecords: 3},
		{name: "identity", encoding: "identity", body: body, wantCode: 202, wantRecords: 3},
		{name: "gzip", encoding: "gzip", body: zipped, wantCode: 202, wantRecords: 3},
		{name: "GZIP, x-gzip alias", encoding: "X-GZIP", body: zipped, wantCode: 202, wantRecords: 3},
		{name: "gzip then identity", encoding: "gzip, identity", body: zipped, wantCode: 202, wantRecords: 3},
		{name: "decompressed exactly at the limit", encoding: "gzip", body: zipped,
			lim: Limits{MaxBodyBytes: int64(len(body))}, wantCode: 202, wantRecords: 3},
		{name: "decompressed one byte over the limit", encoding: "gzip", body: zipped,
			lim: Limits{MaxBodyBytes: int64(len(body) - 1)}, wantCode: 413,
			wantErr: "body decompressed is more than the limit of " + strconv.Itoa(len(body)-1) + " bytes"},
		{name: "compressed over the limit", encoding: "gzip", body: zipped,
			lim: Limits{MaxBodyBytes: int64(len(zipped) - 1)}, wantCode: 413},
		{name: "corrupt stream", encoding: "gzip", body: corrupt, wantCode: 400, wantErr: "body is not a valid gzip stream"},
		{name: "bad checksum", encoding: "gzip", body: badCRC, wantCode: 400, wantErr: "gzip: invalid checksum"},
		{name: "truncated", encoding: "gzip", body: zipped[:len(zipped)-10], wantCode: 400, wantErr: "it ends before the stream does"},
		{name: "not gzip at all", encoding: "gzip", body: body, wantCode: 400, wantErr: "gzip: invalid header"},
		{name: "empty gzip body", encoding: "gzip", body: nil, wantCode: 400, wantErr: "body is not a valid gzip stream"},
		{name: "brotli", encoding: "br", body: body, wantCode: 415, wantErr: `Content-Encoding "br" is not supported; send gzip or no encoding`},
		{name: "deflate", encoding: "deflate", body: body, wantCode: 415, wantErr: `"deflate"`},
		{name: "gzip twice", encoding: "gzip, gzip", body: gzipped(t, zipped), wantCode: 415, wantErr: `"gzip, gzip"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProducer{}
			s := newTestServer(t, fp, tt.lim)
			q := authReq{body: tt.body}
			if tt.encoding != "" {
				q.header = map[string]string{"Content-Encoding": tt.encoding}
			}
			a := sendReq(t, s, q)
			if a.code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", a.code, tt.wantCode, a.raw)
			}
			if n := len(fp.produced()); n != tt.wantRecords {
				t.Errorf("produced %d records, want %d", n, tt.wantRecords)
			}
			if !strings.Contains(a.body.Error, tt.wantErr) {
				t.Errorf("error %q lacks %q", a.body.Error, tt.wantErr)
			}
			if tt.wantCode == 415 && a.header.Get("Accept-Encoding") != "gzip" {
				t.Errorf("415 without Accept-Encoding: gzip")
			}
		})
	}
}

// TestGzipBomb: 64 MiB of blanks in a 64 KiB gzip stream against a 1 MiB
// limit is a 413, and answering it allocates a small multiple of the limit,
// not the decompressed size.
func TestGzipBomb(t *testing.T) {
	const inflated, limit = 64 << 20, 1 << 20
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	chunk := bytes.Repeat([]byte{' '}, 1<<20)
	for range inflated / len(chunk) {
		if _, err := zw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if zb.Len() > limit/4 {
		t.Fatalf("the bomb is %d bytes compressed; it should be far under the limit", zb.Len())
	}
	fp := &fakeProducer{}
	s := newTestServer(t, fp, Limits{MaxBodyBytes: limit})
	bomb := zb.Bytes()
	sendReq(t, s, authReq{body: bomb, header: map[string]string{"Content-Encoding": "gzip"}}) // warm the buffer pool and the router

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := sendReq(t, s, authReq{body: bomb, header: map[string]string{"Content-Encoding": "gzip"}})
	runtime.ReadMemStats(&after)
	if a.code != 413 {
		t.Fatalf("status %d, want 413: %s", a.code, a.raw)
	}
	if len(fp.produced()) != 0 {
		t.Fatal("the bomb produced records")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*limit {
		t.Errorf("answering the bomb allocated %d bytes; the limit is %d and the bomb inflates to %d", alloc, limit, inflated)
	}
}
