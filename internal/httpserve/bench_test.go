package httpserve

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkBody: a 20 KB request body (100 telemetry records) read by a
// handler over loopback HTTP, by a plain server and through Limits.Handler
// (the deadlines moved at each read): the cost of pacing bodies.
//
//	go test -run '^$' -bench BenchmarkBody -benchtime 20000x ./internal/httpserve
func BenchmarkBody(b *testing.B) {
	body := bytes.Repeat([]byte("a"), 20<<10)
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"plain", read}, {"paced", DefaultLimits().Handler(read)}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.h)
			defer srv.Close()
			c := srv.Client()
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				res, err := c.Post(srv.URL, "application/x-ndjson", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusAccepted {
					b.Fatal(res.Status)
				}
			}
		})
	}
}
