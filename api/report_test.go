package api

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// reportZones is one square zone; the drone flies west to east through it.
const reportZones = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"RPZ-27L","name":"Runway 27L protection","category":"restricted"},
 "geometry":{"type":"Polygon","coordinates":[[[-0.46,51.46],[-0.44,51.46],[-0.44,51.48],[-0.46,51.48],[-0.46,51.46]]]}}]}`

// reportEnv is an alarm raised, acked and cleared through the real engine
// and batch script on the real Redis, with its zone set version stored,
// behind the API's tokens.
type reportEnv struct {
	t        *testing.T
	srv      *httptest.Server
	ds       *dedup.Redis
	alarm    string
	raise    time.Time
	clear    time.Time
	viewer   string
	operator string
}

var reportT0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// ReportPositions is the flight: one position a second for 300 s, outside
// the zone (0-149 s), inside (150-209 s), outside (210-299 s).
func reportPosition(sec int) telemetry.Position {
	lon := -0.50 + float64(sec)*0.0004 // 0.0004°/s, ~28 m/s
	switch {
	case sec < 150:
		lon = -0.4605 - float64(150-sec)*0.0002
	case sec < 210:
		lon = -0.459 + float64(sec-150)*0.0003
	default:
		lon = -0.435 + float64(sec-210)*0.0002
	}
	p := telemetry.Position{DroneID: "UAV-7", Seq: int64(sec + 1), TS: reportT0.Add(time.Duration(sec) * time.Second),
		Lat: 51.47, Lon: lon, AltM: telemetry.Float(60), AltRef: telemetry.RefAGL}
	if sec%3 == 0 { // the pilot, in every third record (a Remote ID System message)
		p.Operator = &telemetry.Operator{Lat: 51.465, Lon: -0.49, Type: "takeoff"}
	}
	return p
}

func newReportEnv(t *testing.T) *reportEnv {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "api-report")
	zs := zonestore.New(rdb, zonestore.Options{Prefix: prefix})
	var v zonestore.Validator
	_, doc, _, err := v.Normalize([]byte(reportZones))
	if err != nil {
		t.Fatal(err)
	}
	entry, err := zs.Put(ctx, 0, "geojson", doc, "test")
	if err != nil {
		t.Fatal(err)
	}
	ix, _, err := v.Index(entry)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	// The ack is stamped with the server's clock: during the flight.
	var now atomic.Int64
	now.Store(reportT0.Add(175 * time.Second).UnixMilli())
	e := &reportEnv{t: t, viewer: "viewer-token-0123456789", operator: "operator-token-0123456789"}
	toks := &Tokens{Tokens: []Token{{Name: "wall", Role: RoleViewer, Hash: HashToken(e.viewer)},
		{Name: "duty-officer", Role: RoleOperator, Hash: HashToken(e.operator)}}}
	e.ds = ds
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 2, Tokens: toks,
		Registerer: prometheus.NewRegistry(), Now: func() time.Time { return time.UnixMilli(now.Load()).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(s.authenticate)
	s.mountAlarms(r)
	e.srv = httptest.NewServer(r)
	t.Cleanup(e.srv.Close)

	fly := func(from, to int) {
		for sec := from; sec < to; sec++ {
			p := reportPosition(sec)
			out := eng.Apply(ix, []alerts.Record{{Offset: int64(sec), Value: p.AppendJSON(nil), Time: p.TS}})
			if out == nil {
				t.Fatalf("second %d: nothing to commit", sec)
			}
			for _, ev := range out.Events {
				switch ev.Type {
				case alerts.Raised:
					e.alarm, e.raise = ev.AlarmID, ev.TS
				case alerts.Cleared:
					e.clear = ev.TS
				}
			}
			if _, err := ds.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	fly(0, 180)
	if e.alarm == "" {
		t.Fatal("no alarm raised")
	}
	// Acked while active, with a note a spreadsheet would run.
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/alarms/"+e.alarm+"/ack", strings.NewReader(`{"note":"=HYPERLINK(\"http://x\")\npatrol sent to gate 4"}`))
	req.Header.Set("Authorization", "Bearer "+e.operator)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("ack: %d %s", resp.StatusCode, b)
	}
	fly(180, 300)
	now.Store(reportT0.Add(time.Hour).UnixMilli())
	if e.clear.IsZero() {
		t.Fatal("not cleared")
	}
	return e
}

func (e *reportEnv) get(path, token string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestAlarmReport(t *testing.T) {
	e := newReportEnv(t)
	base := "/v1/alarms/" + e.alarm + "/report"

	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			path, token string
			status      int
			field       string
		}{
			{base + "?format=pdf", e.viewer, 400, "format"},
			{base + "?format=", e.viewer, 400, "format"},
			{base + "?format=csv&format=kml", e.viewer, 400, "format"},
			{"/v1/alarms/" + strings.Repeat("0", 32) + "/report", e.viewer, 404, ""},
			{base, "", 401, ""},
			{base, "not-a-token", 401, ""},
		} {
			resp, b := e.get(tt.path, tt.token)
			if resp.StatusCode != tt.status {
				t.Errorf("%s: %d %s, want %d", tt.path, resp.StatusCode, b, tt.status)
				continue
			}
			var body errorBody
			if err := json.Unmarshal(b, &body); err != nil {
				t.Errorf("%s: %s: %v", tt.path, b, err)
			}
			if tt.field != "" && body.Details["field"] != tt.field {
				t.Errorf("%s: details %v, want field %s", tt.path, body.Details, tt.field)
			}
		}
	})

	t.Run("geojson", func(t *testing.T) {
		resp, b := e.get(base+"?format=geojson", e.viewer)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/geo+json" {
			t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="nofly-alarm-`+e.alarm+`.geojson"` {
			t.Errorf("Content-Disposition %q", cd)
		}
		var fc struct {
			Type     string `json:"type"`
			Features []struct {
				Geometry struct {
					Type        string          `json:"type"`
					Coordinates json.RawMessage `json:"coordinates"`
				} `json:"geometry"`
				Properties map[string]any `json:"properties"`
			} `json:"features"`
			Alarm      map[string]any `json:"alarm"`
			Window     struct{ From, To time.Time }
			Timeline   []storyEvent `json:"timeline"`
			ZoneSource string       `json:"zone_source"`
			ZoneVer    int64        `json:"zone_version"`
		}
		if err := json.Unmarshal(b, &fc); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		var pts []time.Time
		for _, f := range fc.Features {
			k, _ := f.Properties["kind"].(string)
			kinds[k]++
			if k == "track_point" {
				ts, _ := time.Parse(time.RFC3339Nano, f.Properties["ts"].(string))
				pts = append(pts, ts)
			}
		}
		if fc.Type != "FeatureCollection" || kinds["zone"] != 1 || kinds["track"] != 1 || kinds["raised"] != 1 || kinds["cleared"] != 1 ||
			kinds["pilot"] != 1 || kinds["pilot_latest"] != 1 {
			t.Errorf("features by kind %v", kinds)
		}
		if fc.ZoneSource != zoneAtRaise || fc.ZoneVer != 1 || fc.Alarm["alarm_id"] != e.alarm {
			t.Errorf("zone %s v%d, alarm %v", fc.ZoneSource, fc.ZoneVer, fc.Alarm["alarm_id"])
		}
		if !fc.Window.From.Equal(e.raise.Add(-ReportBefore)) || !fc.Window.To.Equal(e.clear.Add(ReportAfter)) {
			t.Errorf("window %v to %v; raise %v clear %v", fc.Window.From, fc.Window.To, e.raise, e.clear)
		}
		// The track covers the window: ten-second points before the entry
		// from its start, every second while alarmed, on after the clear.
		if len(pts) == 0 {
			t.Fatal("no track points")
		}
		first, last := pts[0], pts[len(pts)-1]
		if first.Before(fc.Window.From) || first.After(fc.Window.From.Add(10*time.Second)) {
			t.Errorf("first point %v, window from %v", first, fc.Window.From)
		}
		if !last.After(e.clear.Add(30 * time.Second)) {
			t.Errorf("last point %v, clear %v", last, e.clear)
		}
		during := 0
		for _, p := range pts {
			if !p.Before(e.raise) && !p.After(e.clear) {
				during++
			}
		}
		if alarmed := int(e.clear.Sub(e.raise)/time.Second) + 1; during != alarmed {
			t.Errorf("%d points from raise to clear, want %d (one a second)", during, alarmed)
		}
		var tl []string
		for _, ev := range fc.Timeline {
			tl = append(tl, ev.Kind)
			if ev.Kind == "acked" && (ev.By != "duty-officer" || !strings.Contains(ev.Note, "patrol sent")) {
				t.Errorf("ack %+v", ev)
			}
		}
		if strings.Join(tl, " ") != "raised acked cleared" {
			t.Errorf("timeline %v", tl)
		}
	})

	t.Run("kml", func(t *testing.T) {
		resp, b := e.get(base+"?format=kml", e.viewer)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.google-earth.kml+xml" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var k struct {
			XMLName  xml.Name
			Document struct {
				Placemarks []struct {
					Name      string `xml:"name"`
					TimeStamp *struct {
						When string `xml:"when"`
					} `xml:"TimeStamp"`
					Track *struct {
						When  []string `xml:"when"`
						Coord []string `xml:"http://www.google.com/kml/ext/2.2 coord"`
					} `xml:"http://www.google.com/kml/ext/2.2 Track"`
					Polygon *struct{} `xml:"MultiGeometry>Polygon"`
				} `xml:"Placemark"`
				Styles []struct {
					ID string `xml:"id,attr"`
				} `xml:"Style"`
			} `xml:"Document"`
		}
		if err := xml.Unmarshal(b, &k); err != nil {
			t.Fatal(err)
		}
		if k.XMLName.Space != "http://www.opengis.net/kml/2.2" || k.XMLName.Local != "kml" {
			t.Errorf("root %v", k.XMLName)
		}
		var names []string
		tracked := false
		for _, p := range k.Document.Placemarks {
			names = append(names, p.Name)
			if p.Track != nil {
				tracked = len(p.Track.When) > 60 && len(p.Track.When) == len(p.Track.Coord)
			}
			if (p.Name == "raised" || p.Name == "cleared") && (p.TimeStamp == nil || p.TimeStamp.When == "") {
				t.Errorf("%s without a TimeStamp", p.Name)
			}
		}
		if !tracked || len(k.Document.Styles) == 0 || !strings.Contains(strings.Join(names, "|"), "Runway 27L protection (RPZ-27L)|Track of UAV-7|Path of UAV-7|raised|cleared") {
			t.Errorf("placemarks %q, gx:Track %v, styles %d", names, tracked, len(k.Document.Styles))
		}
	})

	t.Run("csv", func(t *testing.T) {
		resp, b := e.get(base+"?format=csv", e.viewer)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if !bytes.Contains(b, []byte("\r\n")) {
			t.Error("not CRLF")
		}
		rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(rows[0], ",") != "ts,kind,lat,lon,alt_m,alt_ref,by,note" {
			t.Errorf("header %v", rows[0])
		}
		byKind := map[string][]string{}
		for _, r := range rows[1:] {
			byKind[r[1]] = r
		}
		ack := byKind["acked"]
		if ack == nil || ack[6] != "duty-officer" || !strings.HasPrefix(ack[7], `'=HYPERLINK("http://x")`) || !strings.Contains(ack[7], "\npatrol sent") {
			t.Errorf("acked row %q", ack)
		}
		if tr := byKind["track"]; tr == nil || !strings.HasPrefix(tr[3], "-0.4") || tr[4] != "60" {
			t.Errorf("track row %q: a negative longitude is a number, not a formula", tr)
		}
	})

	t.Run("html", func(t *testing.T) {
		resp, b := e.get(base, e.viewer) // html by default
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if cd := resp.Header.Get("Content-Disposition"); cd != `inline; filename="nofly-alarm-`+e.alarm+`.html"` {
			t.Errorf("Content-Disposition %q", cd)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.HasPrefix(csp, "default-src 'none'; style-src 'sha256-") {
			t.Errorf("CSP %q", csp)
		}
		h := string(b)
		for _, want := range []string{"<svg", "<polyline", "Runway 27L protection", "duty-officer", "=HYPERLINK(&#34;http://x&#34;)", "@page", "break-before: page", "cleared: exited"} {
			if !strings.Contains(h, want) {
				t.Errorf("html lacks %q", want)
			}
		}
		for _, bad := range []string{"<script", " src=", " href=", "url("} {
			if strings.Contains(h, bad) {
				t.Errorf("html has %q", bad)
			}
		}
	})
}

// TestAlarmReportZoneSource: a zone version the history no longer holds
// gives the current version's zone (zone_source current); a zone in no
// kept version gives none, and the report still tells the alarm; a drone
// without a kept track gives no track, said so.
func TestAlarmReportZoneSource(t *testing.T) {
	e := newReportEnv(t)
	w := storetest.NewWriter(e.ds)
	at := reportT0.Add(-time.Hour)
	old := storetest.Raised(1, "GHOST-1", "RPZ-27L", "restricted", 5, at) // zone version 3: never stored
	gone := storetest.Raised(1, "GHOST-2", "NOT-A-ZONE", "restricted", 6, at)
	w.Add(old)
	w.Add(gone)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id, source string
		zones      int
	}{{old.AlarmID, zoneCurrent, 1}, {gone.AlarmID, zoneNotFound, 0}} {
		resp, b := e.get("/v1/alarms/"+tt.id+"/report?format=geojson", e.viewer)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var fc struct {
			Features []struct {
				Properties map[string]any `json:"properties"`
			} `json:"features"`
			ZoneSource string  `json:"zone_source"`
			KeptFrom   *string `json:"track_kept_from"`
		}
		if err := json.Unmarshal(b, &fc); err != nil {
			t.Fatal(err)
		}
		zones, tracks := 0, 0
		for _, f := range fc.Features {
			switch f.Properties["kind"] {
			case "zone":
				zones++
			case "track", "track_point":
				tracks++
			}
		}
		if fc.ZoneSource != tt.source || zones != tt.zones || tracks != 0 || fc.KeptFrom != nil {
			t.Errorf("%s: zone_source %q, %d zone features, %d track features, kept from %v", tt.id, fc.ZoneSource, zones, tracks, fc.KeptFrom)
		}
		resp, b = e.get("/v1/alarms/"+tt.id+"/report", e.viewer)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "keeps no track of this drone") {
			t.Errorf("%s html: %d, says nothing of the missing track", tt.id, resp.StatusCode)
		}
	}
}

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{"=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx", "ok": "ok", "": ""} {
		if got := csvCell(in); got != want {
			t.Errorf("csvCell(%q) = %q, want %q", in, got, want)
		}
	}
}
