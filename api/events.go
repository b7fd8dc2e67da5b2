package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// The event history (GET /v1/events, NDJSON) and its live stream (GET
// /v1/events/stream, Server-Sent Events, api/stream.go) read every
// partition's outbox (<tag>:outbox, docs/redis-layout.md): raised, cleared
// and acked events, each partition in its outbox's order.
//
// Interleaving: the sequence is every partition's entries merged by entry
// id (Redis's clock in milliseconds at append, then the entry's sequence
// number in that millisecond), ties by partition number. A read holds back
// the entries of the millisecond Redis is still in (TIME after the read),
// since another partition may still get an entry with a smaller id in it,
// and the entries past the lowest last id of a partition that had more: so
// every reader, live or catching up, on any instance, sees the same order
// and the same cursors. A cursor holds a position per partition
// (api/cursor.go), so even an order that differed (a Redis clock stepping
// back) could not lose or repeat an event.

const (
	defaultEventsLimit = 1000
	maxEventsLimit     = 10000
	// readCount is the most entries read from one partition per round.
	readCount = 500
	// maxFilterLen bounds a filter value.
	maxFilterLen = 256
)

// mountEvents adds the /v1/events routes.
func (s *Server) mountEvents(r chi.Router) *eventsAPI {
	e := newEventsAPI(s)
	e.mount(r)
	return e
}

func (e *eventsAPI) mount(r chi.Router) {
	r.With(e.s.eventsRole(RoleViewer)).Get("/v1/events", e.s.handleEvents)
	r.With(e.s.eventsRole(RoleViewer)).Get("/v1/events/stream", e.handleStream)
}

// eventsRole is the role check of an events route. TODO(H1): s.require
// once api/auth.go is committed.
func (s *Server) eventsRole(role Role) func(http.Handler) http.Handler { return s.require(role) }

// eventMeta are the fields of an event the filters and the SSE event name
// look at.
type eventMeta struct {
	Type     string `json:"type"`
	DroneID  string `json:"drone_id"`
	ZoneID   string `json:"zone_id"`
	Category string `json:"category"`
}

// outboxEntry is one event of a partition's outbox.
type outboxEntry struct {
	part int
	id   streamID
	json []byte // the event's JSON, as in the outbox
	meta eventMeta
}

// entryLess is the merge order: entry id, then partition.
func entryLess(a, b *outboxEntry) int {
	switch {
	case a.id.less(b.id):
		return -1
	case b.id.less(a.id):
		return 1
	}
	return a.part - b.part
}

// eventFilter keeps the events of one zone, drone and category (empty: any).
type eventFilter struct{ zone, drone, category string }

func (f eventFilter) match(m *eventMeta) bool {
	return (f.zone == "" || f.zone == m.ZoneID) && (f.drone == "" || f.drone == m.DroneID) &&
		(f.category == "" || f.category == m.Category)
}

// paramError is a bad request parameter: a 400 naming it.
type paramError struct{ field, msg string }

func (e *paramError) Error() string { return e.field + ": " + e.msg }

// goneError is a cursor older than what is retained: entries after it
// were trimmed (or it names a stream that is not there any more).
type goneError struct {
	part    int
	after   streamID
	trimmed streamID // the last entry id deleted
	why     string
}

func (e *goneError) Error() string {
	return fmt.Sprintf("the cursor is older than the events retained: partition %d %s", e.part, e.why)
}

// forgedError is a cursor position in the future: past its stream's last
// id and ahead of Redis's clock, so no Redis handed it out.
type forgedError struct {
	part  int
	after streamID
	now   uint64 // Redis's TIME, ms
}

func (e *forgedError) Error() string {
	return fmt.Sprintf("the cursor's position in partition %d is ahead of the server's clock (%d ms past it): not a cursor this API returned",
		e.part, e.after.ms-e.now)
}

// singleParam returns query parameter name (absent: ""), refusing a repeated
// one.
func singleParam(q url.Values, name string) (string, bool, *paramError) {
	vs, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) != 1 {
		return "", true, &paramError{name, "given more than once"}
	}
	return vs[0], true, nil
}

func parseFilter(q url.Values) (eventFilter, *paramError) {
	var f eventFilter
	for _, p := range []struct {
		name string
		dst  *string
	}{{"zone", &f.zone}, {"drone", &f.drone}, {"category", &f.category}} {
		v, ok, perr := singleParam(q, p.name)
		if perr != nil {
			return f, perr
		}
		if !ok {
			continue
		}
		// Characters, as the description's maxLength counts them.
		if v == "" || utf8.RuneCountInString(v) > maxFilterLen || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return f, &paramError{p.name, fmt.Sprintf("must be 1 to %d characters of UTF-8 text", maxFilterLen)}
		}
		if p.name == "drone" && !droneFilter.MatchString(v) {
			return f, &paramError{p.name, paramMessages["drone"]}
		}
		*p.dst = v
	}
	return f, nil
}

// droneFilter is the description's drone id pattern.
var droneFilter = describedPattern("GET /v1/events", "drone")

func parseLimit(q url.Values) (int, *paramError) {
	v, ok, perr := singleParam(q, "limit")
	if perr != nil || !ok {
		return defaultEventsLimit, perr
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxEventsLimit {
		return 0, &paramError{"limit", fmt.Sprintf("must be an integer from 1 to %d", maxEventsLimit)}
	}
	return n, nil
}

// parseCursor decodes a cursor given in field and checks it has one
// position per partition.
func (s *Server) parseCursor(field, v string) (cursor, *paramError) {
	c, err := decodeCursor(v)
	if err != nil {
		return nil, &paramError{field, err.Error() + " (use a cursor this API returned)"}
	}
	if len(c) != s.o.Partitions {
		return nil, &paramError{field, fmt.Sprintf("the cursor has %d partitions, the topic %d", len(c), s.o.Partitions)}
	}
	return c, nil
}

// outboxReader reads the merged event sequence after a cursor from Redis.
type outboxReader struct {
	rdb   redis.UniversalClient
	keys  []string
	cur   cursor
	unset []bool // no position yet: start at the oldest entry retained
}

func (s *Server) outboxKeys() []string {
	keys := make([]string, s.o.Partitions)
	for p := range keys {
		keys[p] = redislayout.Of(s.o.Prefix, s.o.Topic, p).Outbox()
	}
	return keys
}

// newOutboxReader reads after c, or from the oldest entry retained when c
// is nil.
func (s *Server) newOutboxReader(c cursor) *outboxReader {
	r := &outboxReader{rdb: s.o.Redis, keys: s.outboxKeys(), cur: c, unset: make([]bool, s.o.Partitions)}
	if c == nil {
		r.cur = make(cursor, s.o.Partitions)
		for p := range r.unset {
			r.unset[p] = true
		}
	}
	return r
}

// advance moves the cursor past e (delivered or filtered out).
func (r *outboxReader) advance(e *outboxEntry) { r.cur[e.part] = e.id }

// next reads up to count entries of each partition after the cursor and
// returns them in merge order, up to the lowest last id of a partition that
// returned count (more may follow: more is true) and before the millisecond
// Redis is in. It checks, after reading,
// that no entry after the cursor was trimmed: a goneError otherwise.
func (r *outboxReader) next(ctx context.Context, count int) (entries []outboxEntry, more bool, err error) {
	ranges := make([]*redis.XMessageSliceCmd, len(r.keys))
	infos := make([]*redis.XInfoStreamCmd, len(r.keys))
	var now *redis.TimeCmd
	_, err = r.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		// Before the ranges: an entry of an earlier millisecond than it is
		// in them.
		now = pl.Time(ctx)
		for p, k := range r.keys {
			start := "(" + r.cur[p].String()
			if r.unset[p] {
				start = "-"
			}
			ranges[p] = pl.XRangeN(ctx, k, start, "+", int64(count))
			// After the range: the trim it reports covers what the range read.
			infos[p] = pl.XInfoStream(ctx, k)
		}
		return nil
	})
	if err != nil && !isNoSuchKey(err) {
		return nil, false, fmt.Errorf("events: read outboxes: %w", err)
	}
	t, err := now.Result()
	if err != nil {
		return nil, false, fmt.Errorf("events: redis time: %w", err)
	}
	nowMs := uint64(t.UnixMilli())
	limit := &streamID{nowMs, 0}
	limit = ptr(limit.prev()) // the current millisecond is held back
	for p := range r.keys {
		msgs, err := ranges[p].Result()
		if err != nil {
			return nil, false, fmt.Errorf("events: xrange %s: %w", r.keys[p], err)
		}
		st, err := streamStateOf(infos[p])
		if err != nil {
			return nil, false, fmt.Errorf("events: %s: %w", r.keys[p], err)
		}
		if r.unset[p] {
			// From the oldest retained: just before it.
			r.cur[p], r.unset[p] = st.oldest.prev(), false
		}
		if err := st.check(p, r.cur[p], nowMs); err != nil {
			return nil, false, err
		}
		for _, m := range msgs {
			e, ok := entryFrom(p, m)
			if !ok || !r.cur[p].less(e.id) {
				continue
			}
			entries = append(entries, e)
		}
		if len(msgs) == count {
			id, err := parseStreamID(msgs[len(msgs)-1].ID)
			if err == nil && id.less(*limit) {
				limit = &id
			}
			more = true
		}
	}
	entries = slices.DeleteFunc(entries, func(e outboxEntry) bool { return limit.less(e.id) })
	slices.SortFunc(entries, func(a, b outboxEntry) int { return entryLess(&a, &b) })
	return entries, more, nil
}

// streamState is what XINFO STREAM tells about an outbox.
type streamState struct {
	exists bool
	// oldest is the first entry retained (after last when none is).
	oldest, last, deleted streamID
	// trimmed: entries were deleted (entries-added > length).
	trimmed bool
}

func streamStateOf(cmd *redis.XInfoStreamCmd) (streamState, error) {
	info, err := cmd.Result()
	if isNoSuchKey(err) {
		return streamState{}, nil
	}
	if err != nil {
		return streamState{}, err
	}
	st := streamState{exists: true, trimmed: info.EntriesAdded > info.Length}
	if st.last, err = parseStreamID(info.LastGeneratedID); err != nil {
		return st, err
	}
	if info.MaxDeletedEntryID != "" {
		if st.deleted, err = parseStreamID(info.MaxDeletedEntryID); err != nil {
			return st, err
		}
	}
	st.oldest = st.last.next()
	if info.Length > 0 {
		if st.oldest, err = parseStreamID(info.FirstEntry.ID); err != nil {
			return st, err
		}
	}
	return st, nil
}

// check is nil when every entry after c is still in the stream. Trimming
// (XTRIM MINID) removes the oldest entries and XINFO does not say which
// was the last one removed, so a position before the oldest retained entry
// is refused unless no id lies between them or nothing was ever removed:
// a 410 rather than a silent gap. An XDEL is caught by max-deleted-entry-id.
//
// A position past the stream's last id whose milliseconds are ahead of
// nowMs (Redis's TIME) was never handed out by any Redis whose clock is
// this one's: a forged cursor, a forgedError (400), not a 410.
func (st streamState) check(p int, c streamID, nowMs uint64) error {
	switch {
	case (!st.exists || st.last.less(c)) && c.ms > nowMs:
		return &forgedError{part: p, after: c, now: nowMs}
	case !st.exists && c != (streamID{}):
		return &goneError{part: p, after: c, why: fmt.Sprintf("has no outbox any more (the cursor is at %s)", c)}
	case !st.exists:
		return nil
	case st.last.less(c):
		return &goneError{part: p, after: c, trimmed: st.last,
			why: fmt.Sprintf("has no entry %s: its last is %s (a cursor of another history?)", c, st.last)}
	case c.less(st.deleted):
		return &goneError{part: p, after: c, trimmed: st.deleted, why: fmt.Sprintf("had entries after %s deleted (through %s)", c, st.deleted)}
	case st.trimmed && c.next().less(st.oldest):
		return &goneError{part: p, after: c, trimmed: st.oldest.prev(),
			why: fmt.Sprintf("was trimmed past %s: its oldest retained entry is %s", c, st.oldest)}
	}
	return nil
}

// entryFrom parses an outbox message; false for one that is not an event
// (the writer is ours: this is defensive).
func entryFrom(p int, m redis.XMessage) (outboxEntry, bool) {
	id, err := parseStreamID(m.ID)
	if err != nil {
		return outboxEntry{}, false
	}
	v, _ := m.Values[redislayout.FieldEvent].(string)
	e := outboxEntry{part: p, id: id, json: []byte(v)}
	if len(e.json) < 2 || e.json[0] != '{' || e.json[len(e.json)-1] != '}' {
		return outboxEntry{}, false
	}
	var ok bool
	if e.meta, ok = scanMeta(e.json); !ok && json.Unmarshal(e.json, &e.meta) != nil {
		return outboxEntry{}, false
	}
	return e, true
}

// scanMeta reads the four fields eventMeta wants from compact event JSON
// (alerts.Event.AppendJSON's) without decoding the rest: the hub does it
// once per event for every stream. False when the JSON is not in that form
// (then json.Unmarshal decides).
func scanMeta(b []byte) (eventMeta, bool) {
	var m eventMeta
	for _, f := range []struct {
		key string
		dst *string
	}{{`"type":"`, &m.Type}, {`"drone_id":"`, &m.DroneID}, {`"zone_id":"`, &m.ZoneID}, {`"category":"`, &m.Category}} {
		// A key is preceded by { or , (inside a string a quote is escaped).
		i := bytes.Index(b, []byte(f.key))
		if i < 1 || (b[i-1] != '{' && b[i-1] != ',') {
			return m, false
		}
		rest := b[i+len(f.key):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
			return m, false // an escape: leave it to encoding/json
		}
		*f.dst = string(rest[:j])
	}
	return m, true
}

func ptr[T any](v T) *T { return &v }

func isNoSuchKey(err error) bool { return err != nil && strings.Contains(err.Error(), "no such key") }

// appendWithCursor appends the event's JSON with a "cursor" field added
// last.
func appendWithCursor(dst, ev []byte, cur []byte) []byte {
	dst = append(dst, ev[:len(ev)-1]...)
	if len(ev) > 2 {
		dst = append(dst, ',')
	}
	dst = append(dst, `"cursor":"`...)
	dst = append(dst, cur...)
	return append(dst, `"}`...)
}

// handleEvents is GET /v1/events: the events after ?after (from the oldest
// retained without it), at most ?limit, as NDJSON, each with its cursor.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, perr := parseFilter(q)
	if perr == nil {
		var limit int
		if limit, perr = parseLimit(q); perr == nil {
			var c cursor
			if v, ok, perr2 := singleParam(q, "after"); perr2 != nil {
				perr = perr2
			} else if ok {
				c, perr = s.parseCursor("after", v)
			}
			if perr == nil {
				s.serveEvents(w, r, s.newOutboxReader(c), f, limit)
				return
			}
		}
	}
	s.writeParamError(w, perr)
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, rd *outboxReader, f eventFilter, limit int) {
	ctx := r.Context()
	count := min(max(limit, 16), readCount)
	entries, more, err := rd.next(ctx, count)
	if err != nil {
		s.writeReadError(w, r, err, "after")
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	var line, cur []byte
	sent := 0
	for {
		for i := range entries {
			e := &entries[i]
			rd.advance(e)
			if !f.match(&e.meta) {
				continue
			}
			cur = rd.cur.appendEncoded(cur[:0])
			line = append(appendWithCursor(line[:0], e.json, cur), '\n')
			if _, err := w.Write(line); err != nil {
				return // the client went away
			}
			if sent++; sent == limit {
				return
			}
		}
		if !more {
			return
		}
		if entries, more, err = rd.next(ctx, count); err != nil {
			if ctx.Err() == nil {
				s.log.Error("events: read failed mid-response; aborting it", "err", err)
			}
			// Headers are out: end the response as broken, never as a
			// complete one that silently lacks events.
			panic(http.ErrAbortHandler)
		}
	}
}

// writeParamError answers 400 naming the parameter.
func (s *Server) writeParamError(w http.ResponseWriter, perr *paramError) {
	eventsError(w, http.StatusBadRequest, "bad_request", perr.Error(), map[string]any{"field": perr.field})
}

// writeReadError answers a failed first read: 400 for a forged cursor
// from the future, 410 for a cursor too old, 500 otherwise.
func (s *Server) writeReadError(w http.ResponseWriter, r *http.Request, err error, field string) {
	var forged *forgedError
	if errors.As(err, &forged) {
		eventsError(w, http.StatusBadRequest, "bad_request", field+": "+err.Error(), map[string]any{"field": field, "partition": forged.part})
		return
	}
	var gone *goneError
	if errors.As(err, &gone) {
		d := map[string]any{"field": field, "partition": gone.part, "after": gone.after.String()}
		if gone.trimmed != (streamID{}) {
			d["trimmed_through"] = gone.trimmed.String()
		}
		eventsError(w, http.StatusGone, "cursor_expired", err.Error()+"; start again without a cursor (GET /v1/events from the oldest retained)", d)
		return
	}
	if r.Context().Err() != nil {
		return
	}
	s.log.Error("events: read outboxes", "err", err)
	eventsError(w, http.StatusInternalServerError, "internal", "could not read the events", nil)
}

// eventsError writes the API's error body. TODO(H1): writeError once
// api/errors.go is committed.
func eventsError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"error": msg, "code": code, "details": details})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
