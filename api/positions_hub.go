package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts/dronestore"
)

// The positions streams' one producer (issue 26). Each GET
// /v1/map/positions stream used to list every drone hash once a second
// for itself (a page of 1,000 drones at a time, each page scanning every
// hash again): five streams over 50,000 known drones took ~1.3 cores on
// an idle pipeline. Now, as the event streams share one hub (stream.go),
// one producer per Handler reads the drone states once a tick while any
// positions stream is open (it starts with the first and stops with the
// last), and every stream builds its frames from the producer's
// snapshots: the Redis reads and the decoding no longer grow with the
// streams, and a stream's own work is to write its frame (one the
// producer encoded once, for a stream that has every earlier snapshot).
// The frames are the ones the page knows (docs/design.md, "Dashboard").

// posEntry is one drone of a snapshot. It is never changed once
// published: a drone that moves gets a new entry.
type posEntry struct {
	id       string
	ts       time.Time
	lat, lon float64
	alarmed  bool // it has an active alarm: never folded into a cluster while the view has room
	stale    bool
	key      string // what the page draws besides the position: stale, the alarms and their signal
	changed  uint64 // the snapshot in which ts moved forward or key changed
	json     []byte // its posDrone, encoded
}

// drawnKey is what of d, besides its position, the page draws: whether it
// is stale, and its alarms with their signal. A drone that falls silent
// has no new position but must be sent again when it turns stale, when
// the clock raises or clears one of its alarms, or when their signal is
// lost or regained.
func drawnKey(d *dronestore.Drone) string {
	var b strings.Builder
	if d.Stale {
		b.WriteByte('s')
	}
	for _, a := range d.ActiveAlarms {
		b.WriteString(a.AlarmID)
		if a.SignalLostSince != nil {
			b.WriteByte('l')
		}
		b.WriteByte(',')
	}
	return b.String()
}

// posSnap is what the producer read in one tick.
type posSnap struct {
	seq    uint64 // 1 for the producer's first tick
	at     time.Time
	zv     int64
	err    error       // the read failed: no drones, streams say so
	drones []*posEntry // by drone id
	moved  int         // drones with changed == seq

	// delta is the frame of the drones that moved in this snapshot, for a
	// stream that has every earlier one; full, built once on first use,
	// has every drone.
	delta    []byte
	fullOnce sync.Once
	full     []byte
}

// frame is the positions event of the given drones.
func (s *posSnap) frame(full bool, drones []*posEntry) []byte {
	at, _ := json.Marshal(s.at)
	n := 96 + len(at)
	for _, d := range drones {
		n += len(d.json) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `event: positions`+"\n"+`data: {"at":`...)
	b = append(b, at...)
	b = append(b, `,"zone_version":`...)
	b = strconv.AppendInt(b, s.zv, 10)
	b = append(b, `,"full":`...)
	b = strconv.AppendBool(b, full)
	b = append(b, `,"drones":[`...)
	for i, d := range drones {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d.json...)
	}
	return append(b, "]}\n\n"...)
}

// fullFrame is the frame with every drone.
func (s *posSnap) fullFrame() []byte {
	s.fullOnce.Do(func() { s.full = s.frame(true, s.drones) })
	return s.full
}

// since is the frame for a stream whose last snapshot was seq (older than
// s.seq-1: it missed ticks), and how many drones it names.
func (s *posSnap) since(seq uint64) ([]byte, int) {
	var ds []*posEntry
	for _, d := range s.drones {
		if d.changed > seq {
			ds = append(ds, d)
		}
	}
	return s.frame(false, ds), len(ds)
}

// posHub is the producer.
type posHub struct {
	m      *mapAPI
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	snap   *posSnap
	notify chan struct{} // closed when snap changes, or the producer stops
}

// registerPositions makes the positions streams' metrics, with the
// Handler: the gauge of open streams exists before the first.
func (m *mapAPI) registerPositions() {
	m.posReads = register(m.s.o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_api_positions_reads_total",
		Help: "Ticks of the positions streams' one producer (one a second while any stream is open, whatever their number)."}))
	m.posStreams = register(m.s.o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{Name: "nofly_api_positions_streams",
		Help: "Open positions streams (GET /v1/map/positions) of this instance."}))
	m.posStates = register(m.s.o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{Name: "nofly_api_positions_states_read_total",
		Help: "Drone states the positions streams' producer read from Redis: those written since its last tick, not every state."}))
}

func (m *mapAPI) startPosHub() *posHub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &posHub{m: m, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{})}
	go h.run(ctx)
	return h
}

// acquirePosHub returns the running producer, starting it for the first
// stream; nil once the server shuts down.
func (m *mapAPI) acquirePosHub() *posHub {
	m.hubMu.Lock()
	defer m.hubMu.Unlock()
	select {
	case <-m.ev.done:
		return nil
	default:
	}
	if m.hub == nil {
		m.hub = m.startPosHub()
	}
	m.hubRefs++
	return m.hub
}

// releasePosHub stops the producer after its last stream; it ends on its
// own (within a read), nobody waits for it.
func (m *mapAPI) releasePosHub(h *posHub) {
	m.hubMu.Lock()
	defer m.hubMu.Unlock()
	if m.hubRefs--; m.hubRefs == 0 && m.hub == h {
		h.cancel()
		m.hub = nil
	}
}

// current returns the latest snapshot (nil before the first) and a
// channel closed when there is a newer one or the producer stopped.
func (h *posHub) current() (*posSnap, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap, h.notify
}

func (h *posHub) publish(s *posSnap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snap = s
	close(h.notify)
	h.notify = make(chan struct{})
}

// run reads a snapshot every tick until ctx ends.
func (h *posHub) run(ctx context.Context) {
	defer close(h.done)
	m := h.m
	tick := time.NewTicker(m.every)
	defer tick.Stop()
	entries := map[string]*posEntry{}
	fd := m.drones.Feed()
	for seq := uint64(1); ; seq++ {
		s := h.read(ctx, fd, seq, entries)
		if ctx.Err() != nil {
			return
		}
		h.m.posReads.Inc()
		h.publish(s)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// read is one tick: the zone version and every drone within the window,
// each drone's entry renewed when its position is newer than the last
// one read (entries holds them from tick to tick). The Feed reads from
// Redis only the states written since the last tick.
func (h *posHub) read(ctx context.Context, fd *dronestore.Feed, seq uint64, entries map[string]*posEntry) *posSnap {
	m := h.m
	now := m.s.o.Now()
	s := &posSnap{seq: seq, at: now.UTC()}
	var err error
	if s.zv, err = m.zones.Version(ctx); err != nil {
		s.err = err
		return s
	}
	ds, err := fd.Active(ctx, now.Add(-positionsWindow))
	if err != nil {
		s.err = err
		return s
	}
	m.posStates.Add(float64(fd.Reads()))
	seen := make(map[string]struct{}, len(ds))
	for i := range ds {
		d := &ds[i]
		if d.TS == nil || d.Lat == nil || d.Lon == nil {
			continue
		}
		seen[d.DroneID] = struct{}{}
		key := drawnKey(d)
		if e := entries[d.DroneID]; e != nil && !d.TS.After(e.ts) && e.key == key {
			continue
		}
		pd := posDrone{DroneID: d.DroneID, TS: *d.TS, Lat: *d.Lat, Lon: *d.Lon, AltM: d.AltM, AltRef: d.AltRef,
			LastSeen: d.LastSeen, Stale: d.Stale, Alarms: make([]posAlarm, len(d.ActiveAlarms))}
		for i, a := range d.ActiveAlarms {
			pd.Alarms[i] = posAlarm{AlarmID: a.AlarmID, ZoneID: a.ZoneID, ZoneName: a.ZoneName, Category: a.Category,
				SignalLostSince: a.SignalLostSince}
		}
		if o := d.Operator; o != nil {
			pd.Operator = &posPilot{Lat: round6(o.Lat), Lon: round6(o.Lon), Type: o.Type, TS: o.TS}
		}
		b, err := json.Marshal(pd)
		if err != nil {
			s.err = err
			return s
		}
		entries[d.DroneID] = &posEntry{id: d.DroneID, ts: *d.TS, lat: *d.Lat, lon: *d.Lon, alarmed: len(d.ActiveAlarms) > 0,
			stale: d.Stale, key: key, changed: seq, json: b}
	}
	// Drones gone quiet past the window are forgotten, so what is kept
	// stays bounded by the drones flying now.
	for id := range entries {
		if _, ok := seen[id]; !ok {
			delete(entries, id)
		}
	}
	s.drones = make([]*posEntry, 0, len(entries))
	var moved []*posEntry
	for _, e := range entries {
		s.drones = append(s.drones, e)
	}
	slices.SortFunc(s.drones, func(a, b *posEntry) int { return strings.Compare(a.id, b.id) })
	for _, e := range s.drones {
		if e.changed == seq {
			moved = append(moved, e)
		}
	}
	s.moved = len(moved)
	s.delta = s.frame(false, moved)
	return s
}

// positions is GET /v1/map/positions: Server-Sent Events, each tick
// (positionsEvery) one `positions` event with every drone whose last
// position is newer than the one last sent to this client, within
// positionsWindow; the first frame ("full": true) has every such drone.
// Each frame says the zone set version in force. The frames come from the
// Handler's one producer (posHub); no cursor: a client that reconnects
// gets a full frame again.
//
// With bbox (and zoom), the stream is the viewport's (positions_view.go):
// only the drones inside it, clustered past maxViewDrones.
func (m *mapAPI) positions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	view, ok := parsePosView(w, r)
	if !ok {
		return
	}
	m.ev.onShutdown(r)
	h := m.acquirePosHub()
	if h == nil {
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down", nil)
		return
	}
	defer m.releasePosHub(h)
	m.posStreams.Inc()
	defer m.posStreams.Dec()
	var vs *viewStream
	if view.box != nil {
		vs = &viewStream{v: view}
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if write([]byte(": connected\n\n")) != nil {
		return
	}
	var had uint64 // the last snapshot this client has (0: none)
	lastZV, lastWrite := int64(-1), time.Time{}
	for {
		s, wait := h.current()
		if s != nil && s.seq != had {
			var frame []byte
			moved := 0
			switch {
			case s.err != nil:
				// A comment keeps the client's "stale" clock honest: the
				// stream is alive, the data is not. The error itself is in
				// the alerter's log, never on the wire.
				frame = []byte(": no positions (the alerter's log says why)\n\n")
			case vs != nil:
				if frame = vs.frame(s, had); frame != nil {
					moved = 1
				} else if had != 0 && (s.zv != lastZV || time.Since(lastWrite) >= positionsIdle) {
					frame = s.viewFrame(false, vs.clustered, 0, nil, nil, nil)
				}
			case had == 0:
				frame, moved = s.fullFrame(), len(s.drones)
			case had == s.seq-1:
				frame, moved = s.delta, s.moved
			default:
				frame, moved = s.since(had)
			}
			// A frame with no drone still goes out when the zone version
			// changed, and at least every positionsIdle: the page's "stale"
			// clock tells a quiet sky from a dead stream.
			if s.err == nil && had != 0 && moved == 0 && s.zv == lastZV && time.Since(lastWrite) < positionsIdle {
				frame = nil
			}
			if s.err == nil {
				had = s.seq
			}
			if frame != nil {
				if s.err == nil {
					lastZV, lastWrite = s.zv, time.Now()
				}
				if write(frame) != nil {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.ev.done:
			return
		case <-wait:
		}
	}
}
