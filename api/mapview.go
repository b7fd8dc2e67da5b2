package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/gchold"
)

// The map views the dashboard draws from (package dashboard): the caller's
// role, the zone set in force as parsed (one GeoJSON feature per volume,
// whatever the stored format), and a coalesced stream of drone positions.

// Defaults of the positions stream.
const (
	// positionsEvery is the stream's tick: at most one update per drone
	// per tick, whatever the telemetry rate.
	positionsEvery = time.Second
	// positionsWindow is how far back a drone's last position may be for
	// the stream to send it (the dashboard's track length).
	positionsWindow = 2 * time.Minute
	// positionsIdle is the longest gap between two frames.
	positionsIdle = 5 * time.Second
)

type mapAPI struct {
	s      *Server
	ev     *eventsAPI // its shutdown ends the positions streams too
	zones  *zonestore.Store
	drones *dronestore.Store
	every  time.Duration

	mu     sync.Mutex
	cached mapZones   // the drawing of the version last asked for
	view   *viewIndex // the views of the version last asked for
	// viewBuild is held (a token in it) while a version's view index is built.
	viewBuild chan struct{}

	// The positions streams' producer (positions_hub.go), running while
	// hubRefs > 0.
	hubMu     sync.Mutex
	hub       *posHub
	hubRefs   int
	posReads  prometheus.Counter
	posStates prometheus.Counter
	// posStreams counts the open positions streams (made with the Handler).
	posStreams prometheus.Gauge
}

// mapZones is one zone set version drawn, encoded once.
type mapZones struct {
	version int64
	body    []byte
}

func (s *Server) mountMap(r chi.Router, ev *eventsAPI) {
	st, err := dronestore.New(dronestore.Options{Redis: s.o.Redis, Prefix: s.o.Prefix, Topic: s.o.Topic, Partitions: s.o.Partitions,
		SignalLostAfter: s.o.SignalLostAfter})
	if err != nil {
		panic(err) // New checked the same Options
	}
	m := &mapAPI{s: s, ev: ev, drones: st, every: positionsEvery,
		zones:  zonestore.New(s.o.Redis, zonestore.Options{Prefix: s.o.Prefix, Retention: s.o.AlarmRetention, Now: s.o.Now, Replicas: s.o.Replicas}),
		cached: mapZones{version: -1}, viewBuild: make(chan struct{}, 1)}
	r.With(s.require(RoleViewer)).Get("/v1/me", m.me)
	r.With(s.require(RoleViewer)).Get("/v1/map/zones", m.zonesView)
	r.With(s.require(RoleViewer)).Get("/v1/map/zones/search", (&zoneSearch{m: m}).serve)
	m.registerPositions()
	r.With(s.require(RoleViewer)).Get("/v1/map/positions", m.positions)
}

// me is GET /v1/me: who the token is, so a page can offer only what its
// role may do.
func (m *mapAPI) me(w http.ResponseWriter, r *http.Request) {
	c, _ := CallerFrom(r.Context()) // require set it (anonymous without a token file)
	me := map[string]any{"name": c.Name, "role": c.Role.String(),
		"can_ack": c.Role >= RoleOperator, "can_edit_zones": c.Role >= RoleAdmin, "via": c.Via}
	if c.csrf != "" { // a session: its writes need it as X-CSRF-Token
		me["csrf_token"] = c.csrf
	}
	writeJSON(w, http.StatusOK, me)
}

// The drawing of a zone volume: GeoJSON geometry (a MultiPolygon, or the
// centre Point of a circle with radius_m) and what an operator reads.
type drawnProps struct {
	ZoneID      string        `json:"zone_id"`
	Name        string        `json:"name"`
	Category    string        `json:"category"`
	Restriction string        `json:"restriction,omitempty"`
	Authority   string        `json:"authority,omitempty"`
	Volume      int           `json:"volume"`
	RadiusM     *float64      `json:"radius_m,omitempty"`
	Floor       *drawnLimit   `json:"floor"`
	Ceiling     *drawnLimit   `json:"ceiling"`
	ActiveFrom  *time.Time    `json:"active_from"`
	ActiveUntil *time.Time    `json:"active_until"`
	Windows     []drawnWindow `json:"windows"`
}

type drawnLimit struct {
	M   float64 `json:"m"`
	Ref string  `json:"ref"`
}

// drawnWindow is a geofence.Window; Weekly holds [start, end) seconds since
// Monday 00:00 UTC.
type drawnWindow struct {
	From   *time.Time `json:"from"`
	Until  *time.Time `json:"until"`
	Weekly [][2]int32 `json:"weekly"`
}

type drawnFeature struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Geometry   map[string]any `json:"geometry"`
	Properties drawnProps     `json:"properties"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func drawnLimitOf(l *geofence.Limit) *drawnLimit {
	if l == nil {
		return nil
	}
	return &drawnLimit{M: l.M, Ref: l.Ref.String()}
}

// drawnPropsOf is what an operator reads of volume i of z.
func drawnPropsOf(z *geofence.Zone, i int) drawnProps {
	ws := make([]drawnWindow, len(z.Windows))
	for k, w := range z.Windows {
		ws[k] = drawnWindow{From: optTime(w.From), Until: optTime(w.Until), Weekly: make([][2]int32, len(w.Weekly))}
		for j, iv := range w.Weekly {
			ws[k].Weekly[j] = [2]int32{iv.Start, iv.End}
		}
	}
	v := &z.Volumes[i]
	p := drawnProps{ZoneID: z.ID, Name: z.Name, Category: string(z.Category), Restriction: z.Restriction,
		Authority: z.Authority, Volume: i, Floor: drawnLimitOf(v.Floor), Ceiling: drawnLimitOf(v.Ceiling),
		ActiveFrom: optTime(z.ActiveFrom), ActiveUntil: optTime(z.ActiveUntil), Windows: ws}
	if len(v.Area) == 0 && v.Circle != nil {
		r := v.Circle.RadiusM
		p.RadiusM = &r
	}
	return p
}

// drawZones is the set's features, one per volume of each zone.
func drawZones(set *geofence.ZoneSet) []drawnFeature {
	fs := make([]drawnFeature, 0, len(set.Zones))
	for _, z := range set.Zones {
		for i, v := range z.Volumes {
			var g map[string]any
			if len(v.Area) > 0 {
				g = map[string]any{"type": "MultiPolygon", "coordinates": v.Area}
			} else if v.Circle != nil {
				g = map[string]any{"type": "Point", "coordinates": v.Circle.Center}
			} else {
				continue // a volume has an area or a circle (the parsers see to it)
			}
			fs = append(fs, drawnFeature{Type: "Feature", ID: z.ID + "#" + strconv.Itoa(i), Geometry: g, Properties: drawnPropsOf(z, i)})
		}
	}
	return fs
}

// zonesView is GET /v1/map/zones: the zone set in force drawn, with its
// version as the ETag (If-None-Match: 304, so a page may ask often); with
// bbox or zoom, the view's zones only (zonesInView).
func (m *mapAPI) zonesView(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	if q.Has("bbox") || q.Has("zoom") {
		m.zonesInView(w, r, q)
		return
	}
	v, err := m.zones.Version(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "read the zone set version: "+err.Error(), nil)
		return
	}
	tag := etag(v)
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == tag || inm == "*") {
		w.Header().Set("ETag", tag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body, ver, err := m.drawn(ctx, v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	w.Header().Set("ETag", etag(ver))
	w.Header().Set("Content-Type", "application/geo+json")
	// Not stored by the browser (alarm data, per token): a client that
	// keeps its copy revalidates it with If-None-Match, as the page does.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// zonesInView answers GET /v1/map/zones?bbox=&zoom=: bbox defaults to the
// world, zoom to maxZoom (simplified least).
func (m *mapAPI) zonesInView(w http.ResponseWriter, r *http.Request, q url.Values) {
	ctx := r.Context()
	p := viewParams{box: dronestore.BBox{MinLon: -180, MinLat: -90, MaxLon: 180, MaxLat: 90}, zoom: maxZoom}
	if q.Has("bbox") {
		b, err := parseBBox(q.Get("bbox"))
		if err != nil {
			badDroneParam(w, "bbox", err.Error())
			return
		}
		p.box = b
	}
	if q.Has("zoom") {
		z, err := strconv.Atoi(q.Get("zoom"))
		if err != nil || z < 0 || z > maxZoom {
			badDroneParam(w, "zoom", "must be an integer from 0 to "+strconv.Itoa(maxZoom))
			return
		}
		p.zoom = z
	}
	v, err := m.zones.Version(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "read the zone set version: "+err.Error(), nil)
		return
	}
	// The browser may keep a view (zones, not alarms) and must ask again
	// each time: the ETag is per version, so a revalidation is a 304 until
	// the zones change.
	const cache = "private, no-cache"
	tag := viewTag(v, p)
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == tag || inm == "*") {
		w.Header().Set("ETag", tag)
		w.Header().Set("Cache-Control", cache)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	vi, err := m.viewIndexOf(ctx, v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	if vi.version != v && r.Header.Get("If-None-Match") == viewTag(vi.version, p) {
		// The previous version answers while v is indexed: the client has it.
		w.Header().Set("ETag", viewTag(vi.version, p))
		w.Header().Set("Cache-Control", cache)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body, err := vi.answer(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	w.Header().Set("ETag", viewTag(vi.version, p))
	w.Header().Set("Content-Type", "application/geo+json")
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// currentSet reads and parses the zone store's current version (an empty
// store is an empty set of version 0).
func (m *mapAPI) currentSet(ctx context.Context) (*geofence.ZoneSet, int64, error) {
	e, err := m.zones.Current(ctx)
	if errors.Is(err, zonestore.ErrEmpty) {
		e, err = zonestore.Entry{Zones: json.RawMessage(`{"type":"FeatureCollection","features":[]}`)}, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the zone set: %w", err)
	}
	var set *geofence.ZoneSet
	// The collector held off while a national set parses (gchold).
	gchold.Do(gchold.Budget(len(e.Zones)), func() { set, _, err = m.s.o.ZoneValidator.Loader.Parse(bytes.NewReader(e.Zones)) })
	if err != nil {
		// Stored versions were validated on the way in; one that no longer
		// parses here is this instance's problem to report, not to hide.
		return nil, 0, fmt.Errorf("zone set version %d does not load here: %w", e.Version, err)
	}
	return set, e.Version, nil
}

// drawn returns the current version's drawing: from the cache when v (the
// version just read) is the one drawn last, without reading the set.
func (m *mapAPI) drawn(ctx context.Context, v int64) ([]byte, int64, error) {
	m.mu.Lock()
	c := m.cached
	m.mu.Unlock()
	if c.version == v {
		return c.body, c.version, nil
	}
	set, ver, err := m.currentSet(ctx)
	if err != nil {
		return nil, 0, err
	}
	b, err := json.Marshal(map[string]any{"type": "FeatureCollection", "zone_version": ver,
		"zones": len(set.Zones), "features": drawZones(set)})
	if err != nil {
		return nil, 0, fmt.Errorf("encode zone set version %d: %w", ver, err)
	}
	b = append(b, '\n')
	m.mu.Lock()
	if ver >= m.cached.version {
		m.cached = mapZones{version: ver, body: b}
	}
	m.mu.Unlock()
	return b, ver, nil
}

// viewIndexOf returns the view index of version v, or of a newer one read
// meanwhile, built once per version (parsing 100,000 zones takes seconds):
// the requests that find none wait for the one building it. While a newer
// version is being indexed, the previous one answers (its own version in
// the answer and the ETag, so a page asks again): a zone change does not
// stall every page for the rebuild.
func (m *mapAPI) viewIndexOf(ctx context.Context, v int64) (*viewIndex, error) {
	m.mu.Lock()
	vi := m.view
	m.mu.Unlock()
	if vi != nil && vi.version >= v {
		return vi, nil
	}
	if vi != nil {
		select {
		case m.viewBuild <- struct{}{}:
			// Not the request's context: the build outlives it.
			go func() {
				defer func() { <-m.viewBuild }()
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if _, err := m.buildViewIndex(bctx, v); err != nil {
					m.s.log.Error("api: index the zone views", "zone_version", v, "error", err)
				}
			}()
		default: // being built
		}
		return vi, nil
	}
	select {
	case m.viewBuild <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the zone views being indexed: %w", ctx.Err())
	}
	defer func() { <-m.viewBuild }()
	return m.buildViewIndex(ctx, v)
}

// buildViewIndex indexes the current version unless version v or a newer
// one is indexed already; the caller holds viewBuild.
func (m *mapAPI) buildViewIndex(ctx context.Context, v int64) (*viewIndex, error) {
	m.mu.Lock()
	vi := m.view
	m.mu.Unlock()
	if vi != nil && vi.version >= v {
		return vi, nil
	}
	start := time.Now()
	set, ver, err := m.currentSet(ctx)
	if err != nil {
		return nil, err
	}
	vi = newViewIndex(ver, set)
	m.s.log.Info("api: zone views indexed", "zone_version", ver, "zones", len(set.Zones), "volumes", len(vi.feats),
		"took", time.Since(start).Round(time.Millisecond))
	m.mu.Lock()
	if m.view == nil || ver >= m.view.version {
		m.view = vi
	}
	vi = m.view
	m.mu.Unlock()
	return vi, nil
}

// posDrone is one drone of a positions frame.
type posDrone struct {
	DroneID string    `json:"drone_id"`
	TS      time.Time `json:"ts"`
	Lat     float64   `json:"lat"`
	Lon     float64   `json:"lon"`
	AltM    *float64  `json:"alt_m"`
	AltRef  *string   `json:"alt_ref"`
	// LastSeen (the log's clock) and Stale: a drone with an active alarm
	// is sent however long it has been silent, and the page draws it lost.
	LastSeen *time.Time `json:"last_seen"`
	Stale    bool       `json:"stale"`
	Alarms   []posAlarm `json:"alarms"`
	// Operator is its pilot as last reported (absent: never), compact: the
	// page draws it and its age; the range and bearing it computes.
	Operator *posPilot `json:"operator,omitempty"`
}

// posPilot is a pilot in a positions frame: where (to 6 decimals, 0.1
// m), the location type and the ts of the position that reported it.
type posPilot struct {
	Lat  float64   `json:"lat"`
	Lon  float64   `json:"lon"`
	Type string    `json:"type"`
	TS   time.Time `json:"ts"`
}

type posAlarm struct {
	AlarmID         string     `json:"alarm_id"`
	ZoneID          string     `json:"zone_id"`
	ZoneName        string     `json:"zone_name"`
	Category        string     `json:"category"`
	SignalLostSince *time.Time `json:"signal_lost_since"`
}

// posFrame is one `positions` event of the stream.
type posFrame struct {
	At          time.Time  `json:"at"`
	ZoneVersion int64      `json:"zone_version"`
	Full        bool       `json:"full"`
	Drones      []posDrone `json:"drones"`
}

// mountDashboard serves Options.Dashboard at / and its files, beside the
// API: one route per top-level file or folder of Options.DashboardFiles, so
// an unknown path stays the API's JSON 404.
func (s *Server) mountDashboard(r chi.Router) {
	if s.o.Dashboard == nil {
		return
	}
	r.Method(http.MethodGet, "/", s.o.Dashboard)
	r.Method(http.MethodHead, "/", s.o.Dashboard)
	for _, e := range s.o.DashboardFiles {
		p := "/" + e
		if strings.HasSuffix(e, "/") {
			p += "*"
		}
		r.Method(http.MethodGet, p, s.o.Dashboard)
		r.Method(http.MethodHead, p, s.o.Dashboard)
	}
}
