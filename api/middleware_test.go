package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestBodyLimit: a body over the route's limit is a 413 naming the body;
// PUT /v1/zones has a larger limit, so a 2 MiB set gets through to the
// route (which refuses its content, not its size).
func TestBodyLimit(t *testing.T) {
	e := newAuthEnv(t, nil)
	big := `{"note":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := []struct {
		name, method, path, token, body string
		code                            int
		errCode                         string
	}{
		{"ack over the default limit", "POST", "/v1/alarms/A1/ack", testTokens["operator"], big, 413, "too_large"},
		{"zone feature over the default limit", "PUT", "/v1/zones/Z1", testTokens["admin"], big, 413, "too_large"},
		{"zone set under its own limit", "PUT", "/v1/zones", testTokens["admin"], big, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.do(t, tt.method, tt.path, tt.token, tt.body)
			if a.code != tt.code || (tt.errCode != "" && a.body.Code != tt.errCode) {
				t.Fatalf("%d %q, want %d %q: %.300s", a.code, a.body.Code, tt.code, tt.errCode, a.raw)
			}
			if a.code == 413 && a.body.Details["field"] != "body" {
				t.Errorf("413 details %v", a.body.Details)
			}
		})
	}

	// Without a Content-Length the limit holds on reading: MaxBytesReader.
	s, err := New(Options{Redis: testenv.RedisClient(t), Topic: "t", Partitions: 1, BodyLimit: 10, BodyLimits: map[string]int64{"POST /big": 100}})
	if err != nil {
		t.Fatal(err)
	}
	// In a group, as Handler has it: the limit is looked up after routing.
	r := chi.NewRouter().With(s.limitBody)
	read := func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		if _, err := b.ReadFrom(r.Body); err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error(), nil)
			return
		}
		w.Write([]byte(strconv.Itoa(b.Len())))
	}
	r.Post("/small", read)
	r.Post("/big", read)
	for _, c := range []struct {
		path string
		n    int
		code int
	}{{"/small", 10, 200}, {"/small", 11, 413}, {"/big", 100, 200}, {"/big", 101, 413}} {
		req := httptest.NewRequest("POST", c.path, struct{ *strings.Reader }{strings.NewReader(strings.Repeat("a", c.n))})
		req.ContentLength = -1
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("%s with %d bytes: %d, want %d", c.path, c.n, rec.Code, c.code)
		}
	}
}

// TestRateLimits: past the per-token or per-address rate the answer is 429
// with Retry-After and the error body naming the limit; another token (or
// address) is not held back by it.
func TestRateLimits(t *testing.T) {
	t.Run("per token", func(t *testing.T) {
		e := newAuthEnv(t, func(o *Options) { o.RatePerToken = 3 })
		for i := range 3 {
			if a := e.do(t, "GET", "/v1/zones", testTokens["viewer"], ""); a.code != 200 {
				t.Fatalf("request %d: %d %s", i, a.code, a.raw)
			}
		}
		a := e.do(t, "GET", "/v1/zones", testTokens["viewer"], "")
		if a.code != 429 || a.body.Code != "rate_limited" || a.body.Details["limit"] != "per token" {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		if ra, err := strconv.Atoi(a.hdr.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("Retry-After %q", a.hdr.Get("Retry-After"))
		}
		if a := e.do(t, "GET", "/v1/zones", testTokens["admin"], ""); a.code != 200 {
			t.Errorf("another token: %d %s", a.code, a.raw)
		}
		if a := e.do(t, "GET", "/metrics", "", ""); a.code != 200 {
			t.Errorf("/metrics is limited: %d", a.code)
		}
	})
	t.Run("per address", func(t *testing.T) {
		e := newAuthEnv(t, func(o *Options) { o.RatePerAddr = 2 })
		// Unknown tokens count too: guessing is limited.
		e.do(t, "GET", "/v1/zones", "guess-1", "")
		e.do(t, "GET", "/v1/zones", "guess-2", "")
		a := e.do(t, "GET", "/v1/zones", testTokens["viewer"], "")
		if a.code != 429 || a.body.Details["limit"] != "per client address" || a.hdr.Get("Retry-After") == "" {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		req := httptest.NewRequest("GET", "/v1/zones", nil)
		req.Host = testHost
		req.RemoteAddr = "192.0.2.7:4000"
		req.Header.Set("Authorization", "Bearer "+testTokens["viewer"])
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("another address: %d", rec.Code)
		}
	})
}

// TestCORS: no CORS header without CORSOrigins; with them an allowed
// origin's preflight is answered and its requests carry the header, and
// any other origin gets none.
func TestCORS(t *testing.T) {
	preflight := []string{"Origin", "https://ops.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization"}
	t.Run("off", func(t *testing.T) {
		e := newAuthEnv(t, nil)
		a := e.do(t, "OPTIONS", "/v1/alarms/A1/ack", "", "", preflight...)
		if a.hdr.Get("Access-Control-Allow-Origin") != "" || a.code == 204 {
			t.Errorf("preflight answered without CORSOrigins: %d %v", a.code, a.hdr)
		}
		a = e.do(t, "GET", "/v1/zones", testTokens["viewer"], "", "Origin", "https://ops.example")
		if a.hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("CORS header without CORSOrigins: %v", a.hdr)
		}
	})
	t.Run("on", func(t *testing.T) {
		e := newAuthEnv(t, func(o *Options) { o.CORSOrigins = []string{"https://ops.example"} })
		a := e.do(t, "OPTIONS", "/v1/alarms/A1/ack", "", "", preflight...)
		if a.code != 204 || a.hdr.Get("Access-Control-Allow-Origin") != "https://ops.example" ||
			!strings.Contains(a.hdr.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(a.hdr.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("preflight: %d %v", a.code, a.hdr)
		}
		a = e.do(t, "GET", "/v1/zones", testTokens["viewer"], "", "Origin", "https://ops.example")
		if a.code != 200 || a.hdr.Get("Access-Control-Allow-Origin") != "https://ops.example" || !strings.Contains(a.hdr.Get("Vary"), "Origin") {
			t.Errorf("request: %d %v", a.code, a.hdr)
		}
		a = e.do(t, "GET", "/v1/zones", testTokens["viewer"], "", "Origin", "https://evil.example")
		if a.hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("another origin allowed: %v", a.hdr)
		}
	})
}

// TestRecover: a handler's panic is a 500 with the error body and a log
// line, and the server goes on.
func TestRecover(t *testing.T) {
	var logs bytes.Buffer
	s, err := New(Options{Redis: testenv.RedisClient(t), Topic: "t", Partitions: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(s.observe, s.recoverer)
	r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"code":"internal"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "handler panicked") || !strings.Contains(logs.String(), `"status":500`) {
		t.Errorf("logs: %s", logs.String())
	}
}
