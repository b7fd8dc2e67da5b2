package ingest

// The intake's part of the hostile-client suite (issue 26): what a web
// page the operator visits, a forged forwarding header or a doubled
// header can do, and what the intake answers.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/producer"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hostileServer is an intake on a loopback listener without feed keys (the
// workstation's default) unless mod says otherwise.
func hostileServer(t *testing.T, fp *fakeProducer, mod func(*Options)) (*Server, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	o := Options{Producer: fp, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Web: httpguard.Config{Listen: "127.0.0.1:8080", Hostname: "ops-box"}}
	if mod != nil {
		mod(&o)
	}
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// send makes a request: POSTs carry one NDJSON record; Host 127.0.0.1:8080
// and a loopback peer unless hdr says ("Host", "RemoteAddr").
func send(h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(rec("UAV-1", 1))
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, body)
	r.RemoteAddr = "127.0.0.1:40000"
	if method == http.MethodPost {
		r.Header.Set("Content-Type", ndjson)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		switch hdr[i] {
		case "Host":
			r.Host = hdr[i+1]
		case "RemoteAddr":
			r.RemoteAddr = hdr[i+1]
		case "Content-Type":
			r.Header.Set("Content-Type", hdr[i+1])
		default:
			r.Header.Add(hdr[i], hdr[i+1])
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func errorOf(t *testing.T, w *httptest.ResponseRecorder) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
		t.Errorf("%d: not the error body: %s", w.Code, w.Body)
	}
	return e
}

// TestHostileDNSRebindingRefused: a request whose Host is a rebinding
// page's name gets 421 on every route but the probes and produces
// nothing; the listener's address, localhost, the hostname and a public
// URL's host are served.
func TestHostileDNSRebindingRefused(t *testing.T) {
	fp := &fakeProducer{}
	s, _ := hostileServer(t, fp, func(o *Options) { o.Web.PublicURLs = []string{"http://ingest:8080"} })
	for _, host := range []string{"attacker.example:8080", "rebind.attacker.example", "127.0.0.1.nip.io:8080", "10.0.0.9:8080"} {
		for _, rt := range [][2]string{{"POST", "/v1/telemetry"}, {"POST", RouteRID}, {"POST", RouteODID}, {"GET", "/metrics"}, {"GET", "/nope"}} {
			w := send(s, rt[0], rt[1], "Host", host)
			e := errorOf(t, w)
			if w.Code != http.StatusMisdirectedRequest || e.Code != "misdirected_request" || !strings.Contains(e.Error, "--public-url") {
				t.Errorf("Host %s: %s %s: %d %s, want 421 naming --public-url", host, rt[0], rt[1], w.Code, w.Body)
			}
		}
		for _, p := range []string{"/healthz", "/readyz"} {
			if w := send(s, "GET", p, "Host", host); w.Code != 200 {
				t.Errorf("Host %s: probe %s: %d", host, p, w.Code)
			}
		}
	}
	if n := len(fp.produced()); n != 0 {
		t.Fatalf("%d records produced from foreign Hosts", n)
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "ops-box:8080", "ingest:8080", "[::1]:8080"} {
		if w := send(s, "POST", "/v1/telemetry", "Host", host); w.Code != http.StatusAccepted {
			t.Errorf("Host %s: %d %s", host, w.Code, w.Body)
		}
	}
}

// TestHostileCrossSiteTelemetryRefused: a loopback intake without feed keys
// takes no write a page of another origin sends (the intake has no CORS);
// its own origin's and a public URL's are taken. A body a page may post
// without a preflight (text/plain, a form) is a 415 as before.
func TestHostileCrossSiteTelemetryRefused(t *testing.T) {
	fp := &fakeProducer{}
	s, _ := hostileServer(t, fp, func(o *Options) { o.Web.PublicURLs = []string{"https://ingest.example.com"} })
	for _, hdr := range [][]string{
		{"Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://attacker.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://localhost:3000", "Sec-Fetch-Site", "same-site"},
		{"Origin", "null"},
	} {
		w := send(s, "POST", "/v1/telemetry", hdr...)
		if e := errorOf(t, w); w.Code != http.StatusForbidden || e.Code != "cross_site" {
			t.Errorf("%v: %d %s, want 403 cross_site", hdr, w.Code, w.Body)
		}
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		if w := send(s, "POST", "/v1/telemetry", "Content-Type", ct, "Origin", "http://127.0.0.1:8080"); w.Code != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %s: %d", ct, w.Code)
		}
	}
	if n := len(fp.produced()); n != 0 {
		t.Fatalf("%d records produced from refused writes", n)
	}
	for _, hdr := range [][]string{
		{"Origin", "http://127.0.0.1:8080", "Sec-Fetch-Site", "same-origin"},
		{"Origin", "https://ingest.example.com", "Host", "ingest.example.com"},
		{},
	} {
		if w := send(s, "POST", "/v1/telemetry", hdr...); w.Code != http.StatusAccepted {
			t.Errorf("%v: %d %s", hdr, w.Code, w.Body)
		}
	}
}

// TestHostileIngestTrustedProxies: without feed keys only loopback clients
// write; behind a trusted proxy on loopback the forwarded client decides
// (a remote one is refused, however the client wrote X-Forwarded-For), and
// is the one logged; an untrusted peer's forwarding header is ignored.
func TestHostileIngestTrustedProxies(t *testing.T) {
	fp := &fakeProducer{}
	s, logs := hostileServer(t, fp, func(o *Options) { o.Web.TrustedProxies = []string{"127.0.0.1"} })
	for _, tt := range []struct {
		remote, xff string
		code        int
	}{
		{"127.0.0.1:5000", "203.0.113.5", 403},
		{"127.0.0.1:5000", "127.0.0.1, 203.0.113.5", 403},
		{"127.0.0.1:5000", "unknown", 403},
		{"127.0.0.1:5000", "127.0.0.1", 202},
		{"127.0.0.1:5000", "", 202},
		{"192.0.2.10:5000", "127.0.0.1", 403}, // not a trusted proxy: its header is ignored
	} {
		hdr := []string{"RemoteAddr", tt.remote}
		if tt.xff != "" {
			hdr = append(hdr, "X-Forwarded-For", tt.xff)
		}
		if w := send(s, "POST", "/v1/telemetry", hdr...); w.Code != tt.code {
			t.Errorf("peer %s, X-Forwarded-For %q: %d %s, want %d", tt.remote, tt.xff, w.Code, w.Body, tt.code)
		}
	}
	if n := len(fp.produced()); n != 2 {
		t.Errorf("%d records produced, want 2", n)
	}
	if l := logs.String(); !strings.Contains(l, `"remote":"203.0.113.5:0"`) {
		t.Errorf("the log does not name the forwarded client: %s", l)
	}
}

// TestHostileIngestInternalErrorsHidden: a 500 (Kafka refused the records)
// and a 503 /readyz answer without Kafka's error chain or a broker's
// address; the log has them, the 500's under its request id.
func TestHostileIngestInternalErrorsHidden(t *testing.T) {
	refused := fmt.Errorf("broker 10.0.0.3:9092 (kafka-2.internal): %w", &producer.ProduceError{Records: []producer.RecordError{{Index: 0, Err: producer.ErrRejected}}})
	fp := &fakeProducer{err: refused}
	s, logs := hostileServer(t, fp, func(o *Options) {
		o.Ready = func(context.Context) error {
			return errors.New("metadata: dial tcp 10.0.0.3:9092: connect: connection refused")
		}
	})
	w := send(s, "POST", "/v1/telemetry")
	e := errorOf(t, w)
	if w.Code != 500 || e.Code != "produce_failed" || len(e.RequestID) != 16 || !strings.Contains(e.Error, e.RequestID) {
		t.Fatalf("%d %s, want 500 produce_failed with a request id", w.Code, w.Body)
	}
	r := send(s, "GET", "/readyz")
	for _, body := range []string{w.Body.String(), r.Body.String()} {
		for _, sec := range []string{"10.0.0.3", "kafka-2", "dial", "refused the batch", "rejected"} {
			if strings.Contains(body, sec) {
				t.Errorf("an answer says %q: %s", sec, body)
			}
		}
	}
	if r.Code != 503 {
		t.Errorf("/readyz: %d", r.Code)
	}
	l := logs.String()
	if !strings.Contains(l, `"request_id":"`+e.RequestID+`"`) || !strings.Contains(l, "kafka-2.internal") || !strings.Contains(l, "connection refused") {
		t.Errorf("the log lacks the detail: %s", l)
	}
}

// TestHostileIngestHeaders: two Authorization headers on a write are a 400
// (the first no longer wins); /v1 answers are no-store, every answer
// nosniff.
func TestHostileIngestHeaders(t *testing.T) {
	fp := &fakeProducer{}
	s, _ := hostileServer(t, fp, func(o *Options) { o.Feeds = testFeeds(t) })
	for _, pair := range [][2]string{{keyAny, "nope"}, {"nope", keyAny}, {keyAny, keyAny}} {
		w := send(s, "POST", "/v1/telemetry", "Authorization", "Bearer "+pair[0], "Authorization", "Bearer "+pair[1])
		if e := errorOf(t, w); w.Code != 400 || e.Code != "bad_request" || !strings.Contains(e.Error, "Authorization") {
			t.Errorf("two Authorization headers: %d %s", w.Code, w.Body)
		}
	}
	if n := len(fp.produced()); n != 0 {
		t.Fatalf("%d records produced", n)
	}
	w := send(s, "POST", "/v1/telemetry", "Authorization", "Bearer "+keyAny)
	if w.Code != 202 || w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("202: Cache-Control %q, nosniff %q", w.Header().Get("Cache-Control"), w.Header().Get("X-Content-Type-Options"))
	}
	if w := send(s, "POST", "/v1/telemetry"); w.Code != 401 || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("401: Cache-Control %q", w.Header().Get("Cache-Control"))
	}
	if w := send(s, "POST", "/v1/telemetry", "Authorization", "Bearer "+keyAny, "Content-Type", strings.Repeat("x", 10000)); w.Code != 415 || w.Body.Len() > 1024 {
		t.Errorf("a huge Content-Type: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := send(s, "GET", "/metrics"); w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Error("/metrics is not nosniff")
	}
}
