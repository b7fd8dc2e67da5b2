package httpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nofly-dev/nofly/internal/httpserve/hostiletest"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// fast are limits short enough for a test to watch them act.
func fast() Limits {
	return Limits{HTTPReadHeaderTimeout: 300 * time.Millisecond, HTTPReadTimeout: 500 * time.Millisecond,
		HTTPWriteTimeout: 500 * time.Millisecond, HTTPIdleTimeout: time.Second, HTTPMaxHeaderBytes: 4 << 10,
		HTTPMinBodyRate: 8 << 10, HTTPMaxConns: 1000}
}

// serve serves h under l on a loopback listener until the test ends.
func serve(t *testing.T, l Limits, h http.Handler) (string, *Listener, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	ln, err := l.Listen("127.0.0.1:0", func(n int) []byte {
		return fmt.Appendf(nil, `{"error":"more than %d connections","code":"too_many_connections"}`, n)
	}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, l, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), ln, m
}

// echo answers the length of the body it read.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprint(w, n)
})

func TestValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tt := range []struct {
		field string
		mod   func(*Limits)
	}{
		{"HTTPReadHeaderTimeout", func(l *Limits) { l.HTTPReadHeaderTimeout = 0 }},
		{"HTTPReadTimeout", func(l *Limits) { l.HTTPReadTimeout = time.Second }},
		{"HTTPWriteTimeout", func(l *Limits) { l.HTTPWriteTimeout = 0 }},
		{"HTTPIdleTimeout", func(l *Limits) { l.HTTPIdleTimeout = time.Millisecond }},
		{"HTTPMaxHeaderBytes", func(l *Limits) { l.HTTPMaxHeaderBytes = 100 }},
		{"HTTPMinBodyRate", func(l *Limits) { l.HTTPMinBodyRate = 0 }},
		{"HTTPMaxConns", func(l *Limits) { l.HTTPMaxConns = 0 }},
	} {
		l := DefaultLimits()
		tt.mod(&l)
		var fe *FieldError
		if err := l.Validate(); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: %v", tt.field, err)
		}
	}
}

// TestMaxConns: the cap is lowered to leave FDReserve descriptors, never
// below minConns.
func TestMaxConns(t *testing.T) {
	for _, tt := range []struct {
		want  int
		fds   uint64
		n     int
		asked bool
	}{
		{4096, 0, 4096, true},
		{4096, 1 << 20, 4096, true},
		{4096, 4096 + FDReserve, 4096, true},
		{4096, 4096, 4096 - FDReserve, false},
		{4096, 1024, 1024 - FDReserve, false},
		{4096, 256, minConns, false},
	} {
		if n, ok := MaxConns(tt.want, tt.fds); n != tt.n || ok != tt.asked {
			t.Errorf("MaxConns(%d, %d) = %d, %v; want %d, %v", tt.want, tt.fds, n, ok, tt.n, tt.asked)
		}
	}
}

// TestBodyPace: a body that keeps up with HTTPMinBodyRate is read whole
// even when it takes longer than HTTPReadTimeout; one that falls behind is
// cut when its schedule runs out.
func TestBodyPace(t *testing.T) {
	l := fast()
	addr, _, _ := serve(t, l, echo)
	for _, tt := range []struct {
		name  string
		chunk int
		every time.Duration
		total int
		ok    bool
	}{
		// 16 KiB/s against 8 KiB/s: 24 KiB in 1.5 s, three read timeouts.
		{"at twice the rate", 1 << 10, 62 * time.Millisecond, 24 << 10, true},
		// 1 KiB/s: behind from the first byte; cut after about 0.5 s + 1/8 s.
		{"trickled", 128, 125 * time.Millisecond, 24 << 10, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			type answer struct {
				b    []byte
				took time.Duration
			}
			ans := make(chan answer, 1)
			go func() {
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				b, _ := io.ReadAll(c)
				ans <- answer{b, time.Since(start)}
			}()
			fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", tt.total)
			chunk := bytes.Repeat([]byte("a"), tt.chunk)
			sent := 0
		send:
			for sent < tt.total {
				if _, err := c.Write(chunk); err != nil {
					break
				}
				sent += tt.chunk
				select {
				case a := <-ans: // the server answered (or closed) before the end
					ans <- a
					break send
				case <-time.After(tt.every): // the pace under test
				}
			}
			a := <-ans
			b, took := a.b, a.took
			got := string(b)
			if tt.ok {
				if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.HasSuffix(got, fmt.Sprint(tt.total)) || took < l.HTTPReadTimeout {
					t.Fatalf("after %v: %q; want 200 with %d, after more than the read timeout", took, got, tt.total)
				}
				return
			}
			// The schedule of the bytes that got in: ReadTimeout plus a few
			// bytes at the rate; the server's answer or close comes then.
			if !strings.HasPrefix(got, "HTTP/1.1 400") || took > l.HTTPReadTimeout+time.Second {
				t.Fatalf("trickled body: %q after %v; want the handler's 400 (its read failed) near %v", got, took, l.HTTPReadTimeout)
			}
			t.Logf("trickled body cut after %v (%d bytes sent): %q", took, sent, firstLine(got))
		})
	}
}

// value is a gauge's or counter's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\r\n"); return l }

// TestHostileSlowBodiesAreClosed: 500 bodies that never finish are all
// closed within the read timeout (and a little), and the server serves
// meanwhile.
func TestHostileSlowBodiesAreClosed(t *testing.T) {
	l := fast()
	addr, ln, _ := serve(t, l, echo)
	cs := hostiletest.SlowBodiesN(t, 500, addr, "POST", "/", 1<<20)
	res, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "5" {
		t.Fatalf("a request beside the attack: %d %q", res.StatusCode, b)
	}
	last, status := cs.Closed(t, l.HTTPReadTimeout+hostiletest.Slack)
	t.Logf("500 slow bodies: the last closed after %v (read timeout %v); answers %v", last, l.HTTPReadTimeout, status)
	testenv.CheckFor(t, 5*time.Second, func() error {
		if n := ln.Open(); n != 0 {
			return fmt.Errorf("%d connections still counted open", n)
		}
		return nil
	})
}

// TestHostileSlowlorisHeaders: headers that never end are closed at the
// header timeout, even while they keep trickling.
func TestHostileSlowlorisHeaders(t *testing.T) {
	l := fast()
	addr, _, _ := serve(t, l, echo)
	cs := hostiletest.Slowloris(t, addr, 200)
	// One more header byte for each after half the timeout: still cut at
	// the deadline counted from the first byte.
	time.Sleep(l.HTTPReadHeaderTimeout / 2) // the attacker's pace
	cs.Trickle()
	last, _ := cs.Closed(t, l.HTTPReadHeaderTimeout+hostiletest.Slack)
	t.Logf("200 slowloris headers: the last closed after %v (header timeout %v)", last, l.HTTPReadHeaderTimeout)
}

// TestHostileConnectionCap: beyond the cap a connection is answered 503
// with the JSON error and closed at once (not left waiting in the
// backlog); a freed slot serves again; the metrics count both.
func TestHostileConnectionCap(t *testing.T) {
	l := fast()
	l.HTTPMaxConns = 20
	l.HTTPReadHeaderTimeout, l.HTTPReadTimeout = time.Minute, time.Minute // held connections stay
	addr, ln, m := serve(t, l, echo)
	held := hostiletest.Hold(t, addr, 20)
	testenv.CheckFor(t, 5*time.Second, func() error {
		if n := ln.Open(); n != 20 {
			return fmt.Errorf("%d open, want 20", n)
		}
		return nil
	})
	for i := range 5 {
		res, body := hostiletest.Refused(t, addr, "/")
		var e struct{ Error, Code string }
		if res.StatusCode != 503 || json.Unmarshal(body, &e) != nil || e.Code != "too_many_connections" ||
			res.Header.Get("Retry-After") == "" || !res.Close {
			t.Fatalf("connection %d over the cap: %d %v %s", 21+i, res.StatusCode, res.Header, body)
		}
	}
	if got := value(t, m.refused); got != 5 {
		t.Errorf("refused_total %v, want 5", got)
	}
	if got := value(t, m.open); got != 20 {
		t.Errorf("connections gauge %v, want 20", got)
	}
	held.CloseFirst(1)
	testenv.CheckFor(t, 5*time.Second, func() error {
		res, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("hi"))
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("status %d once a slot is free", res.StatusCode)
		}
		return nil
	})
}

// TestStreamOutlivesReadTimeout: a handler's context ends the read timeout
// after its request, unless it is a Stream; a Paced answer to a client
// that keeps reading is not cut by the write timeout.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	l := fast()
	wait := 3 * l.HTTPReadTimeout
	addr, _, _ := serve(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			Stream(w, r)
		case "/paced":
			pw := Paced(w, r)
			chunk := bytes.Repeat([]byte("b"), 4<<10)
			for range 6 { // 24 KiB over 1.5 s at 16 KiB/s: past the write timeout
				if _, err := pw.Write(chunk); err != nil {
					return
				}
				time.Sleep(250 * time.Millisecond) // an answer produced slowly
			}
			return
		}
		select {
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout) // unseen: the writes fail too
			return
		case <-time.After(wait):
		}
		fmt.Fprint(w, "alive")
	}))
	for _, tt := range []struct {
		path string
		want string
	}{{"/plain", ""}, {"/stream", "alive"}, {"/paced", strings.Repeat("b", 24<<10)}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+tt.path, nil)
		res, err := http.DefaultClient.Do(req)
		got := ""
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			got = string(b)
		}
		cancel()
		if got != tt.want {
			t.Errorf("%s: %d bytes (%v), want %d", tt.path, len(got), err, len(tt.want))
		}
	}
}
