package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func TestMethodLabel(t *testing.T) {
	for m, want := range map[string]string{"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH",
		"DELETE": "DELETE", "OPTIONS": "OPTIONS", "get": "other", "PROPFIND": "other", "XFOO": "other", "": "other"} {
		if got := methodLabel(m); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", m, got, want)
		}
	}
}

// limitsServer serves the API of e's options, changed by mod, under the
// server limits l (httpserve, as the alerter serves it).
func limitsServer(t *testing.T, l httpserve.Limits, mod func(*Options)) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	var reg *prometheus.Registry
	e := newAuthEnv(t, func(o *Options) {
		reg = o.Registerer.(*prometheus.Registry)
		if mod != nil {
			mod(o)
		}
	})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpserve.NewServer(e.h, l, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, reg
}

// openStream opens GET path with token on a raw connection and returns
// it with the answer's status line and headers read.
func openStream(t *testing.T, srv *httptest.Server, path, token string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, res
}

// gaugeOf is the value of the gauge name with the label value (-1: none).
func gaugeOf(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// TestHostileStreamCaps: a token past its streams gets 429, the instance
// past its total 503, both with Retry-After and the error body; both
// stream routes count together; a closed stream frees its slot; and a
// stream is not ended by the server's read timeout.
func TestHostileStreamCaps(t *testing.T) {
	l := httpserve.DefaultLimits()
	l.HTTPReadTimeout, l.HTTPWriteTimeout = time.Second, time.Second
	srv, reg := limitsServer(t, l, func(o *Options) { o.MaxStreams, o.MaxStreamsPerToken = 5, 2 })
	const events, positions = "/v1/events/stream", "/v1/map/positions"
	type step struct {
		token, path string
		status      int
		limit       string
	}
	var open []net.Conn
	for i, s := range []step{
		{"viewer", events, 200, ""},
		{"viewer", positions, 200, ""},
		{"viewer", events, 429, "per token"},
		{"operator", positions, 200, ""},
		{"operator", events, 200, ""},
		{"admin", events, 200, ""},
		{"admin", positions, 503, "in total"},
	} {
		c, res := openStream(t, srv, s.path, testTokens[s.token])
		if res.StatusCode != s.status {
			t.Fatalf("step %d: %s %s: %d, want %d", i, s.token, s.path, res.StatusCode, s.status)
		}
		if s.status == 200 {
			open = append(open, c)
			continue
		}
		var e errorBody
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil || e.Code != "too_many_streams" || e.Details["limit"] != s.limit ||
			res.Header.Get("Retry-After") != "5" {
			t.Fatalf("step %d: %s %s: %v %+v %v", i, s.token, s.path, res.Header, e, err)
		}
	}
	if ev, pos := gaugeOf(t, reg, "nofly_api_streams", events), gaugeOf(t, reg, "nofly_api_streams", positions); ev != 3 || pos != 2 {
		t.Errorf("nofly_api_streams: events %v, positions %v; want 3 and 2", ev, pos)
	}
	// Past twice the read timeout the streams are still open (a read waits,
	// it does not find the end).
	quiet := time.Now().Add(2 * l.HTTPReadTimeout)
	for i, c := range open {
		_ = c.SetReadDeadline(quiet)
		for {
			_, err := c.Read(make([]byte, 4096))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if err != nil {
				t.Fatalf("stream %d ended within twice the read timeout: %v", i, err)
			}
		}
	}
	open[0].Close() // viewer's events stream
	testenv.CheckFor(t, 10*time.Second, func() error {
		if g := gaugeOf(t, reg, "nofly_api_streams", events); g != 2 {
			return fmt.Errorf("events streams %v, want 2 once one closed", g)
		}
		return nil
	})
	if _, res := openStream(t, srv, events, testTokens["viewer"]); res.StatusCode != 200 {
		t.Fatalf("viewer after closing a stream: %d", res.StatusCode)
	}
}

// TestBulkLimit: past MaxBulkRequests a bulk route waits for a slot, and
// answers 503 busy with Retry-After when none frees in time; other routes
// never wait.
func TestBulkLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Options{Redis: testenv.RedisClient(t), Topic: "t", Partitions: 1, MaxBulkRequests: 2, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	lim := s.newLimits()
	lim.bulkWait = time.Second
	release := make(chan struct{})
	var running sync.WaitGroup
	r := chi.NewRouter().With(lim.limitBulk)
	r.Get("/v1/zones/history", func(w http.ResponseWriter, r *http.Request) {
		running.Done()
		<-release
		io.WriteString(w, "history")
	})
	r.Get("/v1/alarms", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "alarms") })
	srv := httptest.NewServer(r)
	defer srv.Close()
	get := func(path string) (int, string, http.Header) {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	running.Add(2)
	done := make(chan string, 3)
	for range 2 {
		go func() { _, b, _ := get("/v1/zones/history"); done <- b }()
	}
	running.Wait() // both slots taken
	if code, b, _ := get("/v1/alarms"); code != 200 || b != "alarms" {
		t.Fatalf("a route that is not bulk waited: %d %s", code, b)
	}
	code, b, h := get("/v1/zones/history")
	var e errorBody
	if code != 503 || json.Unmarshal([]byte(b), &e) != nil || e.Code != "busy" || h.Get("Retry-After") != "1" {
		t.Fatalf("a third bulk request: %d %v %s", code, h, b)
	}
	// A third that waits while a slot frees gets it.
	running.Add(1)
	go func() { _, b, _ := get("/v1/zones/history"); done <- b }()
	testenv.CheckFor(t, 5*time.Second, func() error {
		if g := gaugeOf(t, reg, "nofly_api_bulk_requests", "waiting"); g != 1 {
			return fmt.Errorf("%v waiting, want 1", g)
		}
		return nil
	})
	close(release)
	for range 3 {
		if b := <-done; b != "history" {
			t.Errorf("a bulk request answered %q", b)
		}
	}
}

// TestLargeAnswersArePaced: an answer longer than the write timeout allows
// reaches a client that keeps reading at --http-min-body-rate whole; a
// client that stops reading is dropped, and its bulk slot freed.
func TestLargeAnswersArePaced(t *testing.T) {
	l := httpserve.DefaultLimits()
	// A 2 s write timeout: the first bytes (a 3.1 MB version read and
	// encoded under -race) took over 1 s on a loaded machine, and the
	// connection was closed before the answer began.
	l.HTTPReadTimeout, l.HTTPWriteTimeout, l.HTTPMinBodyRate = time.Second, 2*time.Second, 2<<20
	var prefix string
	srv, reg := limitsServer(t, l, func(o *Options) { prefix = o.Prefix })
	store := zonestore.New(testenv.RedisClient(t), zonestore.Options{Prefix: prefix})
	for v := range 8 {
		if _, err := store.Put(context.Background(), int64(v), "geojson", json.RawMessage(bigZoneSet(2000, v+1)), "test"); err != nil {
			t.Fatal(err)
		}
	}
	get := func() (net.Conn, *bufio.Reader) {
		c, res := openStream(t, srv, "/v1/zones/history", testTokens["viewer"])
		if res.StatusCode != 200 {
			t.Fatalf("history: %d", res.StatusCode)
		}
		return c, bufio.NewReaderSize(res.Body, 64<<10)
	}
	// Steady at 4 MiB/s, twice the minimum rate: 25 MB in about 6 s, three
	// write timeouts.
	c, body := get()
	start := time.Now()
	n := int64(0)
	buf := make([]byte, 64<<10)
	for {
		k, err := body.Read(buf)
		n += int64(k)
		if err != nil {
			if err != io.EOF {
				t.Fatalf("steady reader: %v after %d bytes", err, n)
			}
			break
		}
		time.Sleep(16 * time.Millisecond) // the reader's pace under test
	}
	c.Close()
	took := time.Since(start)
	if n < 25e6 || took < 2*l.HTTPWriteTimeout {
		t.Fatalf("steady reader: %d bytes in %v; want the whole 25 MB, over more than two write timeouts", n, took)
	}
	t.Logf("a reader at ~4 MiB/s got the %d-byte history in %v (write timeout %v)", n, took, l.HTTPWriteTimeout)
	// Stalled after the first 64 KiB: dropped, its slot freed.
	c, body = get()
	if _, err := io.ReadFull(body, buf); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 30*time.Second, func() error {
		if g := gaugeOf(t, reg, "nofly_api_bulk_requests", "running"); g != 0 {
			return fmt.Errorf("%v bulk requests running", g)
		}
		return nil
	})
	c.Close()
}
