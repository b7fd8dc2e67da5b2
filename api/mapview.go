package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts/dronestore"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
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
	cached mapZones // the drawing of the version last asked for

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
		cached: mapZones{version: -1}}
	r.With(s.require(RoleViewer)).Get("/v1/me", m.me)
	r.With(s.require(RoleViewer)).Get("/v1/map/zones", m.zonesView)
	m.registerPositions()
	r.With(s.require(RoleViewer)).Get("/v1/map/positions", m.positions)
}

// me is GET /v1/me: who the token is, so a page can offer only what its
// role may do.
func (m *mapAPI) me(w http.ResponseWriter, r *http.Request) {
	c, _ := CallerFrom(r.Context()) // require set it (anonymous without a token file)
	writeJSON(w, http.StatusOK, map[string]any{"name": c.Name, "role": c.Role.String(),
		"can_ack": c.Role >= RoleOperator, "can_edit_zones": c.Role >= RoleAdmin})
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

// drawZones is the set's features, one per volume of each zone.
func drawZones(set *geofence.ZoneSet) []drawnFeature {
	fs := make([]drawnFeature, 0, len(set.Zones))
	for _, z := range set.Zones {
		ws := make([]drawnWindow, len(z.Windows))
		for i, w := range z.Windows {
			ws[i] = drawnWindow{From: optTime(w.From), Until: optTime(w.Until), Weekly: make([][2]int32, len(w.Weekly))}
			for j, iv := range w.Weekly {
				ws[i].Weekly[j] = [2]int32{iv.Start, iv.End}
			}
		}
		for i, v := range z.Volumes {
			p := drawnProps{ZoneID: z.ID, Name: z.Name, Category: string(z.Category), Restriction: z.Restriction,
				Authority: z.Authority, Volume: i, Floor: drawnLimitOf(v.Floor), Ceiling: drawnLimitOf(v.Ceiling),
				ActiveFrom: optTime(z.ActiveFrom), ActiveUntil: optTime(z.ActiveUntil), Windows: ws}
			var g map[string]any
			if len(v.Area) > 0 {
				g = map[string]any{"type": "MultiPolygon", "coordinates": v.Area}
			} else if v.Circle != nil {
				r := v.Circle.RadiusM
				p.RadiusM = &r
				g = map[string]any{"type": "Point", "coordinates": v.Circle.Center}
			} else {
				continue // a volume has an area or a circle (the parsers see to it)
			}
			fs = append(fs, drawnFeature{Type: "Feature", ID: z.ID + "#" + strconv.Itoa(i), Geometry: g, Properties: p})
		}
	}
	return fs
}

// zonesView is GET /v1/map/zones: the zone set in force drawn, with its
// version as the ETag (If-None-Match: 304, so a page may ask often).
func (m *mapAPI) zonesView(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
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

// drawn returns the current version's drawing: from the cache when v (the
// version just read) is the one drawn last, without reading the set.
func (m *mapAPI) drawn(ctx context.Context, v int64) ([]byte, int64, error) {
	m.mu.Lock()
	c := m.cached
	m.mu.Unlock()
	if c.version == v {
		return c.body, c.version, nil
	}
	e, err := m.zones.Current(ctx)
	if errors.Is(err, zonestore.ErrEmpty) {
		e, err = zonestore.Entry{Zones: json.RawMessage(`{"type":"FeatureCollection","features":[]}`)}, nil
	}
	if err != nil {
		return nil, 0, errors.New("read the zone set: " + err.Error())
	}
	set, _, err := m.s.o.ZoneValidator.Loader.Parse(bytes.NewReader(e.Zones))
	if err != nil {
		// Stored versions were validated on the way in; one that no longer
		// parses here is this instance's problem to report, not to hide.
		return nil, 0, errors.New("zone set version " + strconv.FormatInt(e.Version, 10) + " does not load here: " + err.Error())
	}
	b, err := json.Marshal(map[string]any{"type": "FeatureCollection", "zone_version": e.Version,
		"zones": len(set.Zones), "features": drawZones(set)})
	if err != nil {
		return nil, 0, err
	}
	b = append(b, '\n')
	m.mu.Lock()
	if e.Version >= m.cached.version {
		m.cached = mapZones{version: e.Version, body: b}
	}
	m.mu.Unlock()
	return b, e.Version, nil
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
