package benchcompare

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSSEFollower: the screen client reads each event's frame, skips
// comments and frames without an event id, and after a broken connection
// asks again from the last id it got (Last-Event-ID).
func TestSSEFollower(t *testing.T) {
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		if r.Header.Get("Last-Event-ID") == "" {
			fmt.Fprint(w, ": hello\n\nid: c1\nevent: alarm\ndata: {\"event_id\":\"e1\",\"drone_id\":\"D1\",\"seq\":3}\n\n")
			fmt.Fprint(w, "id: c2\ndata: {\"kind\":\"not an event\"}\n\n")
			return // the connection breaks
		}
		fmt.Fprint(w, "id: c3\ndata: {\"event_id\":\"e2\",\"drone_id\":\"D2\",\"seq\":5}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	start := time.Now()
	f := &sseFollower{url: srv.URL, start: start}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { f.run(ctx, ready); close(done) }()
	<-ready
	for deadline := time.Now().Add(5 * time.Second); f.count() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("events %d after 5 s", f.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if len(lastIDs) < 2 || lastIDs[0] != "" || lastIDs[1] != "c2" {
		t.Fatalf("Last-Event-ID of the requests: %q, want \"\" then c2", lastIDs)
	}
	if f.events[0].id != "e1" || f.events[0].drone != "D1" || f.events[0].seq != 3 || f.events[1].id != "e2" {
		t.Fatalf("events %+v", f.events)
	}

	// matchSSE: latency from the 202 and from the outbox (the topic's
	// header) to the frame; a repeat counted once.
	acc := newAcceptLog()
	acc.add("D1", 3, int64(10*time.Millisecond))
	acc.add("D2", 5, int64(20*time.Millisecond))
	st := time.UnixMilli(1_800_000_000_000)
	f.events = []seenEvent{
		{id: "e1", drone: "D1", seq: 3, at: int64(18 * time.Millisecond)},
		{id: "e2", drone: "D2", seq: 5, at: int64(50 * time.Millisecond)},
		{id: "e1", drone: "D1", seq: 3, at: int64(60 * time.Millisecond)},
	}
	topic := &eventFollower{events: []seenEvent{{id: "e1", outbox: st.UnixMilli() + 15}, {id: "e2", outbox: st.UnixMilli() + 40}}}
	r := &E2EResult{Started: st}
	r.matchSSE(f, topic, acc)
	if r.SSEEvents != 2 || r.SSEDuplicateEvents != 1 {
		t.Fatalf("events %d, duplicates %d", r.SSEEvents, r.SSEDuplicateEvents)
	}
	if r.LatencyToSSE.Min != 8*time.Millisecond || r.LatencyToSSE.Max != 30*time.Millisecond {
		t.Errorf("202 → SSE %+v", r.LatencyToSSE)
	}
	if r.LatencyOutboxToSSE.Min != 3*time.Millisecond || r.LatencyOutboxToSSE.Max != 10*time.Millisecond {
		t.Errorf("outbox → SSE %+v", r.LatencyOutboxToSSE)
	}
}
