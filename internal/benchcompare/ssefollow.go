package benchcompare

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// sseFollower is an operator's screen: one client of the alerter's
// GET /v1/events/stream, connected before the traffic, noting when each
// event's frame arrived (issue 32: the latency that counts is to the
// screen, not to alerts.events).
type sseFollower struct {
	url   string // http://<alerter>/v1/events/stream
	start time.Time

	mu     sync.Mutex
	events []seenEvent

	fails failures // broken connections
}

func (f *sseFollower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// maxSSELine bounds one line of the stream the follower reads.
const maxSSELine = 1 << 20

// run reads the stream until ctx ends, reconnecting (with Last-Event-ID)
// after a broken connection.
func (f *sseFollower) run(ctx context.Context, ready chan<- struct{}) {
	var last string
	once := sync.OnceFunc(func() { close(ready) })
	defer once()
	for ctx.Err() == nil {
		err := f.follow(ctx, &last, once)
		if ctx.Err() != nil {
			return
		}
		f.fails.retry(ctx, err)
	}
}

func (f *sseFollower) follow(ctx context.Context, last *string, connected func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("GET %s: %s %s", f.url, res.Status, bytes.TrimSpace(b))
	}
	connected()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), maxSSELine)
	var id string
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[4:])
		case bytes.HasPrefix(line, []byte("data: ")):
			now := time.Since(f.start).Nanoseconds()
			var e struct {
				ID    string `json:"event_id"`
				Drone string `json:"drone_id"`
				Seq   int64  `json:"seq"`
			}
			if json.Unmarshal(line[6:], &e) != nil || e.ID == "" {
				continue // not an alarm event (none is sent today)
			}
			f.mu.Lock()
			f.events = append(f.events, seenEvent{id: e.ID, drone: e.Drone, seq: e.Seq, at: now})
			f.mu.Unlock()
		case len(line) == 0 && id != "":
			*last = id
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// matchSSE is the latency from each event's record's 202 to its frame on
// the stream, and from its Redis outbox append (the stream id, as the
// events topic's header tells it) to the frame: the hub's and the write's
// share.
func (r *E2EResult) matchSSE(f *sseFollower, topic *eventFollower, accepted *acceptLog) {
	f.mu.Lock()
	defer f.mu.Unlock()
	topic.mu.Lock()
	outboxOf := make(map[string]int64, len(topic.events))
	for _, e := range topic.events {
		outboxOf[e.id] = e.outbox
	}
	topic.mu.Unlock()
	seen := make(map[string]bool, len(f.events))
	var ds, fromOutbox []time.Duration
	startMs := r.Started.UnixMilli()
	for _, e := range f.events {
		if seen[e.id] {
			r.SSEDuplicateEvents++
			continue
		}
		seen[e.id] = true
		r.SSEEvents++
		at, ok := accepted.at(e.drone, e.seq)
		if !ok {
			continue
		}
		ds = append(ds, time.Duration(e.at-at))
		if ob := outboxOf[e.id]; ob > 0 {
			// Against the outbox millisecond: up to 1 ms more than the
			// true share.
			fromOutbox = append(fromOutbox, time.Duration(startMs*int64(time.Millisecond)+e.at-ob*int64(time.Millisecond)))
		}
	}
	r.LatencyToSSE = Summarize(ds)
	r.LatencyOutboxToSSE = Summarize(fromOutbox)
	r.SSEReconnects, _ = f.fails.get()
}
