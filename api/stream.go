package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// The live stream (GET /v1/events/stream). One hub per Server reads every
// outbox with one blocking XREAD and keeps a ring of the latest entries in
// memory; a client first catches up from Redis (XRANGE, like GET
// /v1/events) until its cursor is inside the ring's window, then follows
// the ring. Clients pull from the ring at their own pace: the hub never
// waits for one, and one that falls out of the window goes back to Redis
// reads. So connected clients cost one XREAD per round of new events, not
// one per client.

// Defaults of the stream's knobs (eventsAPI).
const (
	defaultKeepAlive = 15 * time.Second
	defaultRing      = 8192
	hubBlock         = time.Second
	// defaultRound is the least time between the starts of two hub rounds
	// that found events: under a flood, streams wake (and write, and
	// flush) at most this often, with every event that came meanwhile,
	// instead of once per Redis commit. It is also the most an event
	// waits in Redis for its round (issue 32: 50 ms was a fifth of the
	// operator's 50 ms p99 budget on its own).
	defaultRound = 10 * time.Millisecond
	// writeTimeout bounds one write to a client: one that does not read is
	// dropped rather than held forever.
	writeTimeout = 30 * time.Second
)

// eventsAPI serves the /v1/events routes of one Handler: the stream hub
// (started with the first stream, stopped with the last or when the HTTP
// server shuts down) and the SSE client gauge.
type eventsAPI struct {
	s         *Server
	keepAlive time.Duration // a comment line this often
	ring      int           // entries the hub keeps
	round     time.Duration // least time between hub rounds with events

	mu      sync.Mutex
	hub     *hub
	refs    int
	done    chan struct{} // closed when the HTTP server shuts down
	closing sync.Once
	servers sync.Map // *http.Server → struct{}: shutdown hook registered
	clients prometheus.Gauge
}

func newEventsAPI(s *Server) *eventsAPI {
	e := &eventsAPI{s: s, keepAlive: defaultKeepAlive, ring: defaultRing, round: defaultRound, done: make(chan struct{})}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "nofly", Subsystem: "api", Name: "sse_clients",
		Help: "Clients connected to GET /v1/events/stream."})
	if s.o.Registerer != nil {
		if err := s.o.Registerer.Register(g); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				s.log.Warn("events: sse_clients gauge not registered", "err", err)
			} else if eg, ok := are.ExistingCollector.(prometheus.Gauge); ok {
				g = eg // a second Handler on the same registry
			}
		}
	}
	e.clients = g
	return e
}

// closeStreams ends every stream and stops the hub; a stream asked for
// later gets 503. It runs on the HTTP server's Shutdown, which waits for
// open streams otherwise.
func (e *eventsAPI) closeStreams() {
	e.closing.Do(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		close(e.done)
		if e.hub != nil {
			e.hub.cancel()
			e.hub = nil
		}
	})
}

// onShutdown registers closeStreams with the request's HTTP server, once.
func (e *eventsAPI) onShutdown(r *http.Request) {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return
	}
	if _, loaded := e.servers.LoadOrStore(srv, struct{}{}); !loaded {
		srv.RegisterOnShutdown(e.closeStreams)
	}
}

// acquireHub returns the running hub, starting it for the first stream;
// nil once the server shuts down.
func (e *eventsAPI) acquireHub() *hub {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.done:
		return nil
	default:
	}
	if e.hub == nil {
		e.hub = startHub(e.s.o.Redis, e.s.outboxKeys(), e.ring, e.round, e.s.log)
	}
	e.refs++
	return e.hub
}

// releaseHub stops the hub after its last stream; it ends on its own
// (within an XREAD block), nobody waits for it.
func (e *eventsAPI) releaseHub(h *hub) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs--; e.refs == 0 && e.hub == h {
		h.cancel()
		e.hub = nil
	}
}

// hubEntry is an entry of the ring: the event and, prepared once for every
// client that follows the hub's own sequence, the hub's cursor after it
// and the whole SSE frame, blk.b[off:end]. The frames of one round are
// consecutive in one block, so such a client writes a round's frames with
// one Write from the block instead of copying each.
type hubEntry struct {
	outboxEntry
	cursor   string
	blk      *frameBlock
	off, end int
}

// frameBlock holds the frames of one hub round, joined; never written after
// the round is added.
type frameBlock struct{ b []byte }

func (he *hubEntry) frame() []byte { return he.blk.b[he.off:he.end:he.end] }

// hub reads all outboxes and keeps the latest entries.
type hub struct {
	rdb    redis.UniversalClient
	keys   []string
	log    interface{ Warn(string, ...any) }
	round  time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.RWMutex
	ready  bool
	ring   []*hubEntry // circular, len = capacity
	first  uint64      // position of the oldest entry held
	next   uint64      // position of the next entry
	base   cursor      // per partition: every entry after it is held
	vec    cursor      // per partition: the last entry read
	notify chan struct{}
}

func startHub(rdb redis.UniversalClient, keys []string, ring int, round time.Duration, log interface{ Warn(string, ...any) }) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{rdb: rdb, keys: keys, log: log, round: round, cancel: cancel, done: make(chan struct{}),
		ring: make([]*hubEntry, ring), notify: make(chan struct{})}
	go h.run(ctx)
	return h
}

// run snapshots each outbox's last id, then reads everything after it.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	defer func() {
		h.mu.Lock()
		h.ready = false
		close(h.notify)
		h.mu.Unlock()
	}()
	backoff := 100 * time.Millisecond
	retry := func(what string, err error) bool {
		if ctx.Err() != nil {
			return false
		}
		h.log.Warn("events: stream hub: "+what, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		return true
	}
	var start cursor
	for {
		var err error
		if start, err = lastIDs(ctx, h.rdb, h.keys); err == nil {
			break
		}
		if !retry("snapshot", err) {
			return
		}
	}
	h.mu.Lock()
	h.base, h.vec, h.ready = slices.Clone(start), slices.Clone(start), true
	h.broadcastLocked()
	h.mu.Unlock()
	// Each round: TIME, then a read of every outbox after the hub's
	// position, in one pipeline. Entries of a millisecond before that TIME
	// are all in the read (later ones get a later id): those are taken,
	// the rest waits for the next round. With nothing new, a blocking
	// XREAD waits for the next entry (its reply may lack other streams'
	// entries, so it only wakes the loop).
	streams := make([]string, 2*len(h.keys))
	copy(streams, h.keys)
	read := &redis.XReadArgs{Streams: streams, Count: readCount, Block: -1}
	wait := &redis.XReadArgs{Streams: streams, Count: 1, Block: hubBlock}
	for ctx.Err() == nil {
		began := time.Now()
		for p := range h.keys {
			streams[len(h.keys)+p] = h.vec[p].String() // only run writes vec
		}
		var tc *redis.TimeCmd
		var xc *redis.XStreamSliceCmd
		_, err := h.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			tc = pl.Time(ctx)
			xc = pl.XRead(ctx, read)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			if !retry("read", err) {
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		now, _ := tc.Result()
		res, _ := xc.Result()
		if h.add(res, uint64(now.UnixMilli())) {
			// The spacing counts from this round's start: the time the
			// read and the broadcast took is not waited again.
			if wait := h.round - time.Since(began); wait > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
			}
			continue
		}
		if len(res) > 0 {
			// All held back: that millisecond is about to end.
			time.Sleep(time.Millisecond)
			continue
		}
		if err := h.rdb.XRead(ctx, wait).Err(); err != nil && !errors.Is(err, redis.Nil) {
			if !retry("xread", err) {
				return
			}
		}
	}
}

// add appends an XREAD's entries in merge order, up to the lowest last id
// of a stream that returned a full count and before millisecond nowMS
// (the rest comes with the next read). False if it held back everything.
func (h *hub) add(res []redis.XStream, nowMS uint64) bool {
	var entries []outboxEntry
	limit := ptr(streamID{nowMS, 0}.prev())
	for _, st := range res {
		p := slices.Index(h.keys, st.Stream)
		if p < 0 {
			continue
		}
		for _, m := range st.Messages {
			if e, ok := entryFrom(p, m); ok {
				entries = append(entries, e)
			}
		}
		if len(st.Messages) == readCount {
			if id, err := parseStreamID(st.Messages[len(st.Messages)-1].ID); err == nil && id.less(*limit) {
				limit = &id
			}
		}
	}
	entries = slices.DeleteFunc(entries, func(e outboxEntry) bool { return limit.less(e.id) })
	slices.SortFunc(entries, func(a, b outboxEntry) int { return entryLess(&a, &b) })
	if len(entries) == 0 {
		return false
	}
	// Frames are built outside the lock, into one block; vec is only
	// written here.
	vec := slices.Clone(h.vec)
	built := make([]*hubEntry, 0, len(entries))
	size := 0
	for i := range entries {
		// id, data and the cursor twice, event type: a little more.
		size += len(entries[i].json) + 2*(4+len(vec)*8) + 48
	}
	blk := &frameBlock{b: make([]byte, 0, size)}
	var cur []byte
	for i := range entries {
		e := &entries[i]
		if !vec[e.part].less(e.id) {
			continue
		}
		vec[e.part] = e.id
		cur = vec.appendEncoded(cur[:0])
		he := &hubEntry{outboxEntry: *e, cursor: string(cur), blk: blk, off: len(blk.b)}
		blk.b = appendFrame(blk.b, e, cur)
		he.end = len(blk.b)
		built = append(built, he)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := uint64(len(h.ring))
	for _, he := range built {
		if h.next-h.first == n {
			old := h.ring[h.first%n]
			h.base[old.part] = old.id
			h.ring[h.first%n] = nil
			h.first++
		}
		h.ring[h.next%n] = he
		h.next++
	}
	h.vec = vec
	h.broadcastLocked()
	return true
}

func (h *hub) broadcastLocked() {
	close(h.notify)
	h.notify = make(chan struct{})
}

// attach returns the position to follow the ring from for a client at c,
// or false when some partition's position is older than the ring holds (or
// the hub is not reading yet).
func (h *hub) attach(c cursor) (uint64, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.ready {
		return 0, false
	}
	for p := range c {
		if c[p].less(h.base[p]) {
			return 0, false
		}
	}
	return h.first, true
}

// since returns up to max entries from position pos, and a channel closed
// when more come; ok is false when pos fell out of the ring or the hub
// stopped.
func (h *hub) since(pos uint64, max int, dst []*hubEntry) (entries []*hubEntry, next uint64, wait <-chan struct{}, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.ready || pos < h.first {
		return dst, pos, nil, false
	}
	n := uint64(len(h.ring))
	for ; pos < h.next && len(dst) < max; pos++ {
		dst = append(dst, h.ring[pos%n])
	}
	return dst, pos, h.notify, true
}

// lastIDs returns each stream's last generated id (0-0 for one that does
// not exist yet).
func lastIDs(ctx context.Context, rdb redis.UniversalClient, keys []string) (cursor, error) {
	infos := make([]*redis.XInfoStreamCmd, len(keys))
	_, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range keys {
			infos[p] = pl.XInfoStream(ctx, k)
		}
		return nil
	})
	if err != nil && !isNoSuchKey(err) {
		return nil, err
	}
	c := make(cursor, len(keys))
	for p := range keys {
		info, err := infos[p].Result()
		if isNoSuchKey(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if c[p], err = parseStreamID(info.LastGeneratedID); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// appendFrame appends e's SSE frame: id (the cursor), event (the type) and
// data (the event with its cursor).
func appendFrame(dst []byte, e *outboxEntry, cur []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, cur...)
	if e.meta.Type != "" && !strings.ContainsAny(e.meta.Type, "\r\n") {
		dst = append(dst, "\nevent: "...)
		dst = append(dst, e.meta.Type...)
	}
	dst = append(dst, "\ndata: "...)
	// Event JSON is compact (no newline); cursors are base64url.
	dst = appendWithCursor(dst, e.json, cur)
	return append(dst, "\n\n"...)
}

// handleStream is GET /v1/events/stream.
func (e *eventsAPI) handleStream(w http.ResponseWriter, r *http.Request) {
	s := e.s
	q := r.URL.Query()
	f, perr := parseFilter(q)
	var c cursor
	field := "after"
	if perr == nil {
		if v := r.Header.Get("Last-Event-ID"); v != "" {
			// A reconnecting EventSource sends it with the URL it first
			// used: it is the later position.
			field = "Last-Event-ID"
			c, perr = s.parseCursor(field, v)
		} else if v, ok, perr2 := singleParam(q, "after"); perr2 != nil {
			perr = perr2
		} else if ok {
			c, perr = s.parseCursor(field, v)
		}
	}
	if perr != nil {
		s.writeParamError(w, perr)
		return
	}
	ctx := r.Context()
	var rd *outboxReader
	var first []outboxEntry
	var more bool
	if c == nil {
		// New events only: after each outbox's last entry now.
		start, err := lastIDs(ctx, s.o.Redis, s.outboxKeys())
		if err != nil {
			s.writeReadError(w, r, err, field)
			return
		}
		rd = s.newOutboxReader(start)
	} else {
		// Check the cursor (410) before the 200; what it read is sent first.
		rd = s.newOutboxReader(c)
		var err error
		if first, more, err = rd.next(ctx, readCount); err != nil {
			s.writeReadError(w, r, err, field)
			return
		}
	}
	e.onShutdown(r)
	h := e.acquireHub()
	if h == nil {
		eventsError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down", nil)
		return
	}
	defer e.releaseHub(h)
	e.clients.Inc()
	defer e.clients.Dec()

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	st := &sseClient{e: e, w: w, rc: http.NewResponseController(w), f: f, rd: rd, hub: h}
	if err := st.run(ctx, first, more); err != nil && ctx.Err() == nil {
		s.log.Info("events: stream ended", "err", err)
	}
}

// sseClient is one stream's loop.
type sseClient struct {
	e   *eventsAPI
	w   http.ResponseWriter
	rc  *http.ResponseController
	f   eventFilter
	rd  *outboxReader // its cursor is the client's position
	hub *hub
	out sseOut
}

var errStreamClosed = errors.New("the server closed the stream")

// minSharedWrite is the least run of a hub block's frames written from the
// block: a shorter one is copied, as a Write (an HTTP chunk) of its own
// would cost more than the copy.
const minSharedWrite = 4 << 10

// sseOut is a stream's output until the next flush, in order: bytes of its
// own (comments, frames built for this client's cursor) and runs of
// consecutive frames of a hub block, which are written from the block.
type sseOut struct {
	own  []byte
	from int      // own[from:] is not in segs yet
	segs [][]byte // what to write, in order
	// The run of shared frames being extended: blk.b[runOff:runEnd].
	blk            *frameBlock
	runOff, runEnd int
}

// ownBytes returns the buffer to append the stream's own bytes to (then
// assign it back to o.own); the shared run before it ends.
func (o *sseOut) ownBytes() []byte {
	o.endRun()
	return o.own
}

// shared queues the hub's frame of he.
func (o *sseOut) shared(he *hubEntry) {
	if o.blk == he.blk && o.runEnd == he.off {
		o.runEnd = he.end
		return
	}
	o.endRun()
	o.blk, o.runOff, o.runEnd = he.blk, he.off, he.end
}

func (o *sseOut) endRun() {
	if o.blk == nil {
		return
	}
	b := o.blk.b[o.runOff:o.runEnd:o.runEnd]
	o.blk = nil
	if len(b) < minSharedWrite {
		o.own = append(o.own, b...)
		return
	}
	o.seal()
	o.segs = append(o.segs, b)
}

// seal moves the own bytes not queued yet to segs.
func (o *sseOut) seal() {
	if len(o.own) > o.from {
		// Later appends write past this slice (or to a new array): it
		// stays as it is.
		o.segs = append(o.segs, o.own[o.from:len(o.own):len(o.own)])
		o.from = len(o.own)
	}
}

func (o *sseOut) reset() {
	clear(o.segs)
	o.segs, o.own, o.from = o.segs[:0], o.own[:0], 0
}

func (c *sseClient) flush() error {
	c.out.endRun()
	c.out.seal()
	if len(c.out.segs) == 0 {
		return nil
	}
	defer c.out.reset()
	_ = c.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	for _, b := range c.out.segs {
		if _, err := c.w.Write(b); err != nil {
			return err
		}
	}
	return c.rc.Flush()
}

// comment queues an SSE comment line.
func (c *sseClient) comment(text string) {
	b := append(c.out.ownBytes(), ": "...)
	b = append(b, text...)
	c.out.own = append(b, "\n\n"...)
}

// deliver advances past e and queues it unless filtered out.
func (c *sseClient) deliver(e *outboxEntry) {
	c.rd.advance(e)
	if c.f.match(&e.meta) {
		b := c.out.ownBytes()
		c.out.own = appendFrame(b, e, c.rd.cur.appendEncoded(nil))
	}
}

func (c *sseClient) run(ctx context.Context, first []outboxEntry, more bool) error {
	ev := c.e
	keep := time.NewTicker(ev.keepAlive)
	defer keep.Stop()
	// An immediate comment: the client sees the stream open.
	c.comment("connected")
	for i := range first {
		c.deliver(&first[i])
	}
	if err := c.flush(); err != nil {
		return err
	}
	var pending []*hubEntry
	for {
		// From Redis while the position is older than the ring's window.
		pos, inRing := c.hub.attach(c.rd.cur)
		if !inRing {
			if !more {
				// Caught up with Redis but the hub has not started reading:
				// wait a little rather than spin.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-ev.done:
					return errStreamClosed
				case <-keep.C:
					c.comment("keepalive")
				case <-time.After(20 * time.Millisecond):
				}
			}
			entries, m, err := c.rd.next(ctx, readCount)
			if err != nil {
				return err
			}
			more = m
			for i := range entries {
				c.deliver(&entries[i])
			}
			if err := c.flush(); err != nil {
				return err
			}
			continue
		}
		// From memory: the hub's sequence, skipping what was delivered.
		aligned := false
		for {
			var wait <-chan struct{}
			var ok bool
			pending, pos, wait, ok = c.hub.since(pos, 256, pending[:0])
			if !ok {
				more = true // fell behind the window (or the hub stopped): Redis
				break
			}
			for _, he := range pending {
				if !c.rd.cur[he.part].less(he.id) {
					continue // delivered from Redis already
				}
				if aligned {
					c.rd.advance(&he.outboxEntry)
					if c.f.match(&he.meta) {
						c.out.shared(he)
					}
					continue
				}
				c.deliver(&he.outboxEntry)
				// Once the position is the hub's own, use its frames.
				aligned = c.rd.cur.String() == he.cursor
			}
			clear(pending)
			if err := c.flush(); err != nil {
				return err
			}
			if len(pending) == 256 {
				continue
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ev.done:
				return errStreamClosed
			case <-keep.C:
				c.comment("keepalive")
			case <-wait:
			}
		}
	}
}
