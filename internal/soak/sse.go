package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sseEvent is one raise or clear read from /v1/events/stream: the drone's
// index and seq, and when it arrived (ns since the start).
type sseEvent struct {
	drone int
	seq   int64
	at    int64
}

// sseClient follows /v1/events/stream as a dashboard's EventSource does,
// resuming with Last-Event-ID after a broken connection.
type sseClient struct {
	url, token string
	start      time.Time
	log        *slog.Logger

	mu        sync.Mutex
	pending   []sseEvent // raises and clears not yet matched to a 202
	other     int        // events of other types (approaching…)
	foreign   int        // raises and clears of drones not the soak's
	reconnect int
}

func (s *sseClient) run(ctx context.Context) {
	last := ""
	for ctx.Err() == nil {
		id, err := s.follow(ctx, last)
		if id != "" {
			last = id
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("event stream broken; reconnecting", "err", err)
		s.mu.Lock()
		s.reconnect++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// follow reads one connection until it breaks and returns the last
// event id seen.
func (s *sseClient) follow(ctx context.Context, lastID string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("event stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("event stream: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				s.add(data)
			}
			data = ""
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
			lastID = id
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[5:], " ")
		}
	}
	if err := sc.Err(); err != nil {
		return lastID, fmt.Errorf("event stream: %w", err)
	}
	return lastID, fmt.Errorf("event stream ended")
}

func (s *sseClient) add(data string) {
	now := time.Since(s.start).Nanoseconds()
	var e struct {
		Type  string `json:"type"`
		Drone string `json:"drone_id"`
		Seq   int64  `json:"seq"`
	}
	err := json.Unmarshal([]byte(data), &e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || (e.Type != "raised" && e.Type != "cleared") {
		s.other++
		return
	}
	i, ok := droneIndex(e.Drone)
	if !ok {
		s.foreign++
		return
	}
	s.pending = append(s.pending, sseEvent{drone: i, seq: e.Seq, at: now})
}

// match takes the pending events whose 202 is known and returns their
// latencies; an event still unmatched after giveUp ns is dropped and
// counted as unmatched (its request failed, or the clock went back).
func (s *sseClient) match(log *acceptLog, now, giveUp int64) (lat []time.Duration, unmatched int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := s.pending[:0]
	for _, e := range s.pending {
		if at, ok := log.of(e.drone, e.seq); ok {
			lat = append(lat, time.Duration(e.at-at))
			continue
		}
		if now-e.at > giveUp {
			unmatched++
			continue
		}
		keep = append(keep, e)
	}
	s.pending = keep
	return lat, unmatched
}
