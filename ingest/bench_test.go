package ingest

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nofly-dev/nofly/producer"
)

type nopProducer struct{}

func (nopProducer) Produce(context.Context, []producer.Record) error { return nil }

// BenchmarkPostTelemetry measures the handler path (read, decode, validate,
// encode, hand to a producer that returns at once, answer) for a request of
// 100 records, by content type.
func BenchmarkPostTelemetry(b *testing.B) {
	const n = 100
	var nd, ndOp, arr bytes.Buffer
	arr.WriteByte('[')
	for i := range n {
		nd.WriteString(rec("UAV-0042", i))
		nd.WriteByte('\n')
		r := rec("UAV-0042", i)
		ndOp.WriteString(r[:len(r)-1] + `,"operator":{"lat":51.469,"lon":-0.452,"alt_m":95.5,"type":"live"}}` + "\n")
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.WriteString(rec("UAV-0042", i))
	}
	arr.WriteByte(']')
	for _, bc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"ndjson", "application/x-ndjson", nd.Bytes()},
		{"json-array", "application/json", arr.Bytes()},
		{"ndjson-operator", "application/x-ndjson", ndOp.Bytes()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := NewServer(Options{Producer: nopProducer{}, Logger: slogDiscard()})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				w := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/telemetry", bytes.NewReader(bc.body))
				req.RemoteAddr = "127.0.0.1:40000"
				req.Header.Set("Content-Type", bc.contentType)
				s.ServeHTTP(w, req)
				if w.Code != http.StatusAccepted {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
