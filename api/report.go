package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/paulmach/orb"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// GET /v1/alarms/{alarm_id}/report: an alarm's story as evidence, for the
// police and the aviation authority: the alarm, its zone, the drone's
// track from ReportBefore before the raise to ReportAfter after the clear
// (from the track the alerter keeps: alerts.AlarmTrackInterval, TrackHold),
// the timeline and the pilot where known, as GeoJSON, KML, CSV or a
// print-ready HTML page.

const (
	// ReportBefore is how much track before the raise a report shows: the
	// approach (the points of before the entry are the ten-second ones).
	ReportBefore = 2 * time.Minute
	// ReportAfter is how much track after the clear it shows.
	ReportAfter = 2 * time.Minute
	// maxReportPoints bounds the track points of one report (a held track
	// keeps dedup.DefaultHeldTrackLen, 1,200): the answer stays a few
	// hundred kilobytes whatever the Redis list holds.
	maxReportPoints = 2000
)

// The report formats (?format=), html when absent.
var reportFormats = []string{"html", "geojson", "kml", "csv"}

// Where a report's zone geometry comes from (zone_source).
const (
	zoneAtRaise  = "raise"   // the zone set version the alarm was raised with
	zoneCurrent  = "current" // that version is no longer kept: the current one
	zoneNotFound = "none"    // the zone is in neither
)

// reportAPI builds the reports.
type reportAPI struct {
	a     *alarmsAPI
	zones *zonestore.Store
}

// mountReport adds GET /v1/alarms/{alarm_id}/report (role viewer).
func (a *alarmsAPI) mountReport(r chi.Router) {
	s := a.s
	rp := &reportAPI{a: a, zones: zonestore.New(s.o.Redis, zonestore.Options{Prefix: s.o.Prefix, Retention: s.o.AlarmRetention,
		MaxBytes: s.o.ZoneHistoryMaxBytes, Now: s.o.Now})}
	r.With(s.alarmsRole(RoleViewer)).Get("/v1/alarms/{alarm_id}/report", rp.report)
}

// storyEvent is one line of the timeline.
type storyEvent struct {
	Kind string    `json:"kind"` // raised, acked, signal_lost, authorized, cleared
	TS   time.Time `json:"ts"`
	Lat  *float64  `json:"lat,omitempty"`
	Lon  *float64  `json:"lon,omitempty"`
	AltM *float64  `json:"alt_m,omitempty"`
	// Text says what happened, for a reader: the zone entered, who
	// acknowledged, the clear's reason.
	Text string `json:"text"`
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

// storyPilot is the pilot as the alarm JSON carries it (alerts.Pilot's
// fields; read from the JSON, so a report names what the alarm answers).
type storyPilot struct {
	Lat        float64   `json:"lat"`
	Lon        float64   `json:"lon"`
	AltM       *float64  `json:"alt_m"`
	Type       string    `json:"type"`
	TS         time.Time `json:"ts"`
	RangeM     *float64  `json:"range_m"`
	BearingDeg *float64  `json:"bearing_deg"`
}

// story is what every format of a report tells.
type story struct {
	Alarm     alarmstore.Alarm
	AlarmJSON json.RawMessage // the alarm as GET /v1/alarms/{id} answers it
	// Zone is the zone's definition (nil: found in no kept version);
	// ZoneVersion the version it was read from, ZoneSource which.
	Zone        *geofence.Zone
	ZoneVersion int64
	ZoneSource  string
	// From and To bound the track shown; Track is the points within,
	// oldest first; KeptFrom is the oldest point the alerter still had
	// (zero: none), so a reader knows whether the window was cut.
	From, To time.Time
	Track    []alerts.Fix
	KeptFrom time.Time
	Timeline []storyEvent
	// Pilot is the pilot as known at the raise, PilotLatest as the drone's
	// state holds it now (nil: not reported, or not in this alarm's JSON).
	Pilot, PilotLatest *storyPilot
	Generated          time.Time
}

func (rp *reportAPI) report(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "alarm_id")
	q := r.URL.Query()
	format := "html"
	if q.Has("format") {
		if vs := q["format"]; len(vs) != 1 || !slices.Contains(reportFormats, vs[0]) {
			badParam(w, "format", "must be one of "+strings.Join(reportFormats, ", "))
			return
		}
		format = q.Get("format")
	}
	st, err := rp.story(r.Context(), id)
	switch {
	case errors.Is(err, alarmstore.ErrNotFound):
		notFound(w, id)
		return
	case err != nil:
		rp.a.internal(w, r, "build the report", err)
		return
	}
	var body []byte
	var ctype string
	switch format {
	case "geojson":
		body, err = st.geoJSON()
		ctype = "application/geo+json"
	case "kml":
		body, err = st.kml()
		ctype = "application/vnd.google-earth.kml+xml"
	case "csv":
		body, err = st.csv()
		ctype = "text/csv; charset=utf-8"
	default:
		body, err = st.html()
		ctype = "text/html; charset=utf-8"
		// Its own strict policy: no script, no request; the one style
		// sheet admitted by its hash, images only inline.
		w.Header().Set("Content-Security-Policy", reportCSP)
	}
	if err != nil {
		rp.a.internal(w, r, "encode the report", err)
		return
	}
	// The page opens in a browser tab, to read or print; the data are
	// files.
	disp := "attachment"
	if format == "html" {
		disp = "inline"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", disp+`; filename="nofly-alarm-`+st.Alarm.AlarmID+`.`+format+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// story reads alarm id's story: the alarm (one pipelined HMGET over the
// partitions), its zone (one GET of the version it was raised with, or
// of the current one) and its drone's track (one LRANGE).
func (rp *reportAPI) story(ctx context.Context, id string) (*story, error) {
	al, err := rp.a.st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	// The pilot as the drone's state holds it now (operator_latest).
	as := []alarmstore.Alarm{al}
	if err := rp.a.st.Pilots(ctx, as); err != nil {
		return nil, err
	}
	al = as[0]
	raw, err := json.Marshal(al)
	if err != nil {
		return nil, fmt.Errorf("report: encode alarm: %w", err)
	}
	st := &story{Alarm: al, AlarmJSON: raw, Generated: rp.a.s.o.Now().UTC()}
	var pilots struct {
		Operator       *storyPilot `json:"operator"`
		OperatorLatest *storyPilot `json:"operator_latest"`
	}
	if err := json.Unmarshal(raw, &pilots); err == nil {
		st.Pilot, st.PilotLatest = pilots.Operator, pilots.OperatorLatest
	}
	st.From = al.Raised.TS.Add(-ReportBefore)
	if al.Cleared != nil {
		st.To = al.Cleared.TS.Add(ReportAfter)
	}
	if err := rp.readTrack(ctx, st); err != nil {
		return nil, err
	}
	if err := rp.readZone(ctx, st); err != nil {
		return nil, err
	}
	st.Timeline = timelineOf(&al)
	return st, nil
}

// readTrack reads the drone's kept track on the alarm's partition and
// keeps the points within [From, To] (To zero: an active alarm, up to its
// last point, which then sets To).
func (rp *reportAPI) readTrack(ctx context.Context, st *story) error {
	s := rp.a.s
	k := redislayout.Of(s.o.Prefix, s.o.Topic, st.Alarm.Partition)
	pts, err := s.o.Redis.LRange(ctx, k.Track(st.Alarm.DroneID), -maxReportPoints, -1).Result()
	if err != nil {
		return fmt.Errorf("report: track of %q: %w", st.Alarm.DroneID, err)
	}
	for i, p := range pts {
		f, err := alerts.DecodeFix([]byte(p))
		if err != nil {
			continue // one bad point does not hide the rest
		}
		if i == 0 {
			st.KeptFrom = f.TS
		}
		if f.TS.Before(st.From) || (!st.To.IsZero() && f.TS.After(st.To)) {
			continue
		}
		st.Track = append(st.Track, f)
	}
	// Points arrive in sample order; a drone clock reset may put one out of
	// ts order, and a report reads by time.
	slices.SortStableFunc(st.Track, func(a, b alerts.Fix) int { return a.TS.Compare(b.TS) })
	if st.To.IsZero() {
		st.To = st.Alarm.Raised.TS
		if n := len(st.Track); n > 0 && st.Track[n-1].TS.After(st.To) {
			st.To = st.Track[n-1].TS
		}
	}
	return nil
}

// readZone reads the zone's definition from the version the alarm was
// raised with, or from the current version when that one is no longer
// kept (zone_source says which).
func (rp *reportAPI) readZone(ctx context.Context, st *story) error {
	st.ZoneSource = zoneNotFound
	var entries []zonestore.Entry
	if v := st.Alarm.ZoneVersion; v > 0 {
		raw, ok, err := rp.zones.HistoryEntry(ctx, v)
		if err != nil {
			return fmt.Errorf("report: zone version %d: %w", v, err)
		}
		if ok {
			var e zonestore.Entry
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				return fmt.Errorf("report: zone version %d: %w", v, err)
			}
			entries = append(entries, e)
		}
	}
	cur, err := rp.zones.Current(ctx)
	switch {
	case errors.Is(err, zonestore.ErrEmpty):
	case err != nil:
		return fmt.Errorf("report: current zone set: %w", err)
	default:
		entries = append(entries, cur)
	}
	for i, e := range entries {
		z, err := oneZone(rp.a.s.o.ZoneValidator.Loader, e.Zones, st.Alarm.ZoneID)
		if err != nil {
			return fmt.Errorf("report: zone %q of version %d: %w", st.Alarm.ZoneID, e.Version, err)
		}
		if z == nil {
			continue
		}
		st.Zone, st.ZoneVersion, st.ZoneSource = z, e.Version, zoneCurrent
		if i == 0 && e.Version == st.Alarm.ZoneVersion {
			st.ZoneSource = zoneAtRaise
		}
		return nil
	}
	return nil
}

// oneZone parses zone id of a stored document alone: the document with
// that feature only, so a report reads one zone of a national set, not
// 100,000. Nil when the document has no such zone.
func oneZone(l geofence.Loader, doc json.RawMessage, id string) (*geofence.Zone, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(doc, &members); err != nil {
		return nil, err
	}
	f, ok, err := zonestore.Feature(doc, id)
	if err != nil || !ok {
		return nil, err
	}
	members["features"] = json.RawMessage("[" + string(f) + "]")
	one, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	set, _, err := l.Parse(strings.NewReader(string(one)))
	if err != nil {
		return nil, err
	}
	for _, z := range set.Zones {
		if z.ID == id {
			return z, nil
		}
	}
	return nil, nil
}

// timelineOf is the alarm's timeline, by time: the raise, the current
// signal loss, the ack and the clear. The index keeps the alarm's latest
// loss and authorisation change, not each one: the outbox and the events
// topic have them all.
func timelineOf(al *alarmstore.Alarm) []storyEvent {
	f := func(v float64) *float64 { return &v }
	name := al.ZoneName
	if name == "" {
		name = al.ZoneID
	}
	tl := []storyEvent{{Kind: "raised", TS: al.Raised.TS, Lat: f(al.Raised.Lat), Lon: f(al.Raised.Lon), AltM: al.Raised.AltM,
		Text: fmt.Sprintf("entered %s (%s, %s), seq %d", name, al.ZoneID, al.Category, al.Raised.Seq)}}
	if al.Authorization != nil {
		until := ""
		if !al.Authorization.Until.IsZero() {
			until = ", until " + al.Authorization.Until.UTC().Format(time.RFC3339)
		}
		tl = append(tl, storyEvent{Kind: "authorized", TS: al.Raised.TS,
			Text: "covered by authorisation " + al.Authorization.ID + " (" + al.Authorization.Reference + until + ")"})
	}
	if al.SignalLostSince != nil {
		tl = append(tl, storyEvent{Kind: "signal_lost", TS: *al.SignalLostSince, Text: "signal lost: last heard then"})
	}
	if al.Ack != nil {
		tl = append(tl, storyEvent{Kind: "acked", TS: al.Ack.At, By: al.Ack.By, Note: al.Ack.Note,
			Text: "acknowledged by " + al.Ack.By})
	}
	if c := al.Cleared; c != nil {
		tl = append(tl, storyEvent{Kind: "cleared", TS: c.TS, Lat: f(c.Lat), Lon: f(c.Lon), AltM: c.AltM,
			Text: "cleared: " + c.Reason})
	}
	slices.SortStableFunc(tl, func(a, b storyEvent) int { return a.TS.Compare(b.TS) })
	return tl
}

// zoneRings is the zone's areas as polygons, a circle drawn as a 64-gon:
// what the report's formats draw.
func zoneRings(z *geofence.Zone) []orb.Polygon {
	if z == nil {
		return nil
	}
	var out []orb.Polygon
	for _, v := range z.Volumes {
		if len(v.Area) > 0 {
			out = append(out, v.Area...)
		} else if v.Circle != nil {
			out = append(out, circleRing(v.Circle.Center, v.Circle.RadiusM))
		}
	}
	return out
}

func circleRing(c orb.Point, r float64) orb.Polygon {
	const n = 64
	const m = 111195 // metres per degree of a great circle
	ring := make(orb.Ring, 0, n+1)
	for i := 0; i <= n; i++ {
		a := 2 * math.Pi * float64(i%n) / n
		ring = append(ring, orb.Point{c[0] + r*math.Sin(a)/(m*math.Cos(c[1]*math.Pi/180)), c[1] + r*math.Cos(a)/m})
	}
	return orb.Polygon{ring}
}
