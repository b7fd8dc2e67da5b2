package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// frame is one SSE event or comment.
type frame struct {
	id, event, data, comment string
	ev                       line
}

// sseStream is an open GET /v1/events/stream.
type sseStream struct {
	t      *testing.T
	res    *http.Response
	cancel context.CancelFunc
	frames chan frame
	err    chan error
}

func (env *eventsEnv) stream(query string, hdr ...string) *sseStream {
	env.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.ts.URL+"/v1/events/stream?"+query, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		env.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		env.t.Fatalf("GET /v1/events/stream?%s: %s %s", query, res.Status, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		env.t.Errorf("Content-Type %q", ct)
	}
	st := &sseStream{t: env.t, res: res, cancel: cancel, frames: make(chan frame, 100000), err: make(chan error, 1)}
	go st.read()
	env.t.Cleanup(st.close)
	return st
}

func (st *sseStream) close() {
	st.cancel()
	st.res.Body.Close()
}

func (st *sseStream) read() {
	sc := bufio.NewScanner(st.res.Body)
	sc.Buffer(nil, 1<<20)
	var f frame
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			if f != (frame{}) {
				if f.data != "" {
					if err := json.Unmarshal([]byte(f.data), &f.ev); err != nil {
						st.err <- fmt.Errorf("data %q: %w", f.data, err)
						return
					}
				}
				st.frames <- f
			}
			f = frame{}
		case strings.HasPrefix(l, ":"):
			f.comment = strings.TrimSpace(l[1:])
		case strings.HasPrefix(l, "id: "):
			f.id = l[4:]
		case strings.HasPrefix(l, "event: "):
			f.event = l[7:]
		case strings.HasPrefix(l, "data: "):
			f.data = l[6:]
		default:
			st.err <- fmt.Errorf("unexpected SSE line %q", l)
			return
		}
	}
	st.err <- errors.Join(io.EOF, sc.Err())
}

// events reads n events (skipping comments) within timeout.
func (st *sseStream) events(n int, timeout time.Duration) []frame {
	st.t.Helper()
	var out []frame
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case f := <-st.frames:
			if f.comment == "" {
				out = append(out, f)
			}
		case err := <-st.err:
			st.t.Fatalf("stream ended after %d of %d events: %v", len(out), n, err)
		case <-deadline:
			st.t.Fatalf("%d of %d events within %v", len(out), n, timeout)
		}
	}
	return out
}

// quiet checks no event comes within d.
func (st *sseStream) quiet(d time.Duration) {
	st.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case f := <-st.frames:
			if f.comment == "" {
				st.t.Fatalf("unexpected event %s", f.data)
			}
		case err := <-st.err:
			st.t.Fatalf("stream ended: %v", err)
		case <-deadline:
			return
		}
	}
}

func frameIDs(fs []frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ev.EventID
	}
	return out
}

// checkFrames checks that each frame is its NDJSON line: id = cursor,
// event = type, data = the line.
func checkFrames(t *testing.T, got []frame, want []line) {
	t.Helper()
	if !slices.Equal(frameIDs(got), eventIDs(want)) {
		for i := range min(len(got), len(want)) {
			if got[i].ev.EventID != want[i].EventID {
				t.Logf("first difference at %d: got %s, want %s", i, got[i].data, want[i].raw)
				break
			}
		}
		t.Fatalf("stream: %d events %v..., want %d %v...", len(got), frameIDs(got)[:min(3, len(got))], len(want), eventIDs(want)[:min(3, len(want))])
	}
	for i, f := range got {
		if f.id != f.ev.Cursor || f.event != f.ev.Type || f.data != want[i].raw {
			t.Fatalf("frame %d: id %q event %q data %s; want id = cursor, event = type, data = %s", i, f.id, f.event, f.data, want[i].raw)
		}
	}
}

// TestStreamResume: a stream without a cursor starts at new events; one
// resumed with Last-Event-ID (or ?after) gets exactly the rest, each frame
// the NDJSON line of its event, whether it comes from Redis or the hub's
// memory, also after falling out of a small ring.
func TestStreamResume(t *testing.T) {
	t.Parallel()
	for _, ring := range []int{defaultRing, 4} {
		t.Run(fmt.Sprintf("ring %d", ring), func(t *testing.T) {
			t.Parallel()
			env := newEventsEnv(t, 3, func(e *eventsAPI) { e.ring = ring })
			env.addMany(7) // before: not sent to a stream without a cursor
			live := env.stream("")
			live.quiet(100 * time.Millisecond)
			if n := env.gauge("nofly_api_sse_clients"); n != 1 {
				t.Errorf("nofly_api_sse_clients = %v with one stream", n)
			}
			env.addMany(40)
			all := env.events("limit=10000")
			got := live.events(40, 10*time.Second)
			checkFrames(t, got, all[7:])
			live.close()

			// Resume after event k of the stream: more came meanwhile.
			env.addMany(600)
			all = env.events("limit=10000")
			for _, k := range []int{0, 17, 39} {
				for _, how := range []string{"Last-Event-ID", "after"} {
					var st *sseStream
					if how == "after" {
						st = env.stream("after=" + got[k].id)
					} else {
						// A reconnecting EventSource sends the URL it first used.
						st = env.stream("after="+all[0].Cursor, "Last-Event-ID", got[k].id)
					}
					rest := all[7+k+1:]
					checkFrames(t, st.events(len(rest), 20*time.Second), rest)
					// And then live ones, once, in order.
					env.addMany(5)
					more := env.events("limit=10000&after=" + all[len(all)-1].Cursor)
					checkFrames(t, st.events(5, 10*time.Second), more)
					st.quiet(50 * time.Millisecond)
					st.close()
					all = append(all, more...)
				}
			}
			testenv.CheckFor(t, 5*time.Second, func() error {
				if n := env.gauge("nofly_api_sse_clients"); n != 0 {
					return fmt.Errorf("nofly_api_sse_clients = %v with every stream closed", n)
				}
				return nil
			})
			env.e.mu.Lock()
			h := env.e.hub
			env.e.mu.Unlock()
			if h != nil {
				t.Error("the hub still runs after the last stream ended")
			}
		})
	}
}

// TestStreamFilters: filters apply to the stream; a resume after a
// filtered stream's last event gives the filtered rest.
func TestStreamFilters(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 2, nil)
	st := env.stream("zone=Z1&category=prohibited")
	env.addMany(30)
	var want []line
	all := env.events("")
	for _, l := range all {
		if l.ZoneID == "Z1" {
			want = append(want, l)
		}
	}
	got := st.events(len(want), 10*time.Second)
	checkFrames(t, got, want)
	st.quiet(100 * time.Millisecond)
	st.close()
	env.add(0, alerts.Cleared, "D9", "Z1", "prohibited")
	env.add(1, alerts.Acked, "D9", "Z0", "restricted")
	env.add(0, alerts.Acked, "D9", "Z1", "prohibited")
	st = env.stream("drone=D9&zone=Z1", "Last-Event-ID", got[len(got)-1].id)
	fs := st.events(2, 10*time.Second)
	if fs[0].event != alerts.Cleared || fs[1].event != alerts.Acked || fs[0].ev.ZoneID != "Z1" || fs[1].ev.ZoneID != "Z1" {
		t.Errorf("filtered resume: %v", frameIDs(fs))
	}
}

// TestStreamKeepAlive: a comment line comes every keep-alive interval
// when no event does.
func TestStreamKeepAlive(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 1, func(e *eventsAPI) { e.keepAlive = 50 * time.Millisecond })
	st := env.stream("")
	var comments []string
	deadline := time.After(5 * time.Second)
	for len(comments) < 3 {
		select {
		case f := <-st.frames:
			if f.comment == "" {
				t.Fatalf("unexpected event %s", f.data)
			}
			comments = append(comments, f.comment)
		case err := <-st.err:
			t.Fatal(err)
		case <-deadline:
			t.Fatalf("comments within 5s: %v", comments)
		}
	}
	if comments[0] != "connected" || comments[1] != "keepalive" || comments[2] != "keepalive" {
		t.Errorf("comments %v", comments)
	}
}

// TestStreamShutdown: the HTTP server's Shutdown ends open streams at once
// (they would hold it for its whole timeout), and a later stream gets 503.
func TestStreamShutdown(t *testing.T) {
	t.Parallel()
	rdb := newEventsEnv(t, 1, nil).rdb
	s, err := New(Options{Redis: rdb, Prefix: "unused-" + t.Name(), Topic: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := newEventsAPI(s)
	r := chi.NewRouter()
	e.mount(r)
	ts := httptest.NewServer(r)
	defer ts.Close()
	env := &eventsEnv{t: t, s: s, e: e, ts: ts, rdb: rdb}
	sts := []*sseStream{env.stream(""), env.stream("")}
	for _, st := range sts {
		if f := <-st.frames; f.comment != "connected" {
			t.Fatalf("first frame %+v", f)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if err := ts.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("Shutdown took %v with two open streams", d)
	}
	for _, st := range sts {
		select {
		case err := <-st.err:
			if !errors.Is(err, io.EOF) {
				t.Errorf("stream ended with %v, want EOF", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("stream still open after Shutdown")
		}
	}
	// The same API on a new server: streams are closed for good.
	ts2 := httptest.NewServer(r)
	defer ts2.Close()
	res, err := http.Get(ts2.URL + "/v1/events/stream")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream after shutdown: %s", res.Status)
	}
}

// gauge reads a gauge from the Server's registry (-1: not there).
func (env *eventsEnv) gauge(name string) float64 {
	env.t.Helper()
	mfs, err := env.reg.Gather()
	if err != nil {
		env.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestSSEOut: a stream's queued output is written in order; runs of
// consecutive frames of one hub block of at least minSharedWrite bytes are
// written from the block (not copied), shorter ones and frames of different
// blocks or with a gap between them are not joined.
func TestSSEOut(t *testing.T) {
	// Two blocks of frames: small (100 B) and big (minSharedWrite) ones.
	mk := func(sizes ...int) []*hubEntry {
		blk := &frameBlock{}
		var hs []*hubEntry
		for i, n := range sizes {
			he := &hubEntry{blk: blk, off: len(blk.b)}
			blk.b = append(blk.b, strings.Repeat(string(rune('a'+i)), n)...)
			he.end = len(blk.b)
			hs = append(hs, he)
		}
		return hs
	}
	big := minSharedWrite
	a, b := mk(100, 100, big, big, 100), mk(big, 100)
	type op struct {
		own string    // or
		he  *hubEntry // a shared frame
	}
	for _, tc := range []struct {
		name   string
		ops    []op
		shared []int // per segment written: 1 if from a block, 0 if copied
	}{
		{"own only", []op{{own: "x"}, {own: "y"}}, []int{0}},
		{"short run copied", []op{{own: "x"}, {he: a[0]}, {he: a[1]}, {own: "y"}}, []int{0}},
		{"long run from the block", []op{{own: "x"}, {he: a[0]}, {he: a[1]}, {he: a[2]}, {he: a[3]}, {own: "y"}}, []int{0, 1, 0}},
		{"gap splits a run", []op{{he: a[2]}, {he: a[4]}, {he: a[3]}}, []int{1, 0, 1}},
		{"blocks not joined", []op{{he: a[3]}, {he: a[4]}, {he: b[0]}, {he: b[1]}}, []int{1, 1}},
		{"own between runs", []op{{he: a[2]}, {own: "x"}, {he: a[3]}}, []int{1, 0, 1}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o sseOut
			var want []byte
			for _, op := range tc.ops {
				if op.he != nil {
					o.shared(op.he)
					want = append(want, op.he.frame()...)
				} else {
					o.own = append(o.ownBytes(), op.own...)
					want = append(want, op.own...)
				}
			}
			o.endRun()
			o.seal()
			var got []byte
			var shared []int
			for _, s := range o.segs {
				got = append(got, s...)
				inBlock := 0
				if overlaps(s, a[0].blk.b) || overlaps(s, b[0].blk.b) {
					inBlock = 1
				}
				shared = append(shared, inBlock)
			}
			if string(got) != string(want) {
				t.Fatalf("written %q, want %q", got, want)
			}
			if !slices.Equal(shared, tc.shared) {
				t.Fatalf("segments from a block: %v, want %v", shared, tc.shared)
			}
			o.reset()
			if len(o.segs) != 0 || len(o.own) != 0 {
				t.Fatalf("after reset: %d segments, %d own bytes", len(o.segs), len(o.own))
			}
		})
	}
}

// overlaps reports whether s lies in b's array.
func overlaps(s, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	for i := range b {
		if &b[i] == &s[0] {
			return true
		}
	}
	return false
}
