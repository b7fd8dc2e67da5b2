package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/paulmach/orb"
)

// The formats of a report (report.go): each tells the same story.

func fmtTS(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// geoJSON is the report as a FeatureCollection: the zone, the track as a
// LineString (its points' times in properties.times) and as Points, the
// raise, the clear and the pilot; the alarm, the window and the timeline
// as members of the collection.
func (st *story) geoJSON() ([]byte, error) {
	type feature struct {
		Type       string         `json:"type"`
		Geometry   map[string]any `json:"geometry"`
		Properties map[string]any `json:"properties"`
	}
	var fs []feature
	if st.Zone != nil {
		var mp orb.MultiPolygon = zoneRings(st.Zone)
		fs = append(fs, feature{"Feature", map[string]any{"type": "MultiPolygon", "coordinates": mp},
			map[string]any{"kind": "zone", "zone_id": st.Zone.ID, "name": st.Zone.Name, "category": string(st.Zone.Category),
				"zone_version": st.ZoneVersion, "zone_source": st.ZoneSource}})
	}
	if len(st.Track) > 0 {
		coords := make([][]float64, len(st.Track))
		times := make([]string, len(st.Track))
		for i, f := range st.Track {
			coords[i] = []float64{f.Lon, f.Lat}
			times[i] = fmtTS(f.TS)
		}
		fs = append(fs, feature{"Feature", map[string]any{"type": "LineString", "coordinates": coords},
			map[string]any{"kind": "track", "drone_id": st.Alarm.DroneID, "times": times}})
		for _, f := range st.Track {
			p := map[string]any{"kind": "track_point", "ts": fmtTS(f.TS)}
			if f.AltM != nil {
				p["alt_m"], p["alt_ref"] = *f.AltM, f.AltRef
			}
			fs = append(fs, feature{"Feature", map[string]any{"type": "Point", "coordinates": []float64{f.Lon, f.Lat}}, p})
		}
	}
	for _, e := range st.Timeline {
		if e.Lat == nil {
			continue
		}
		fs = append(fs, feature{"Feature", map[string]any{"type": "Point", "coordinates": []float64{*e.Lon, *e.Lat}},
			map[string]any{"kind": e.Kind, "ts": fmtTS(e.TS), "text": e.Text, "alt_m": e.AltM}})
	}
	for _, p := range []struct {
		kind string
		p    *storyPilot
	}{{"pilot", st.Pilot}, {"pilot_latest", st.PilotLatest}} {
		if p.p == nil {
			continue
		}
		fs = append(fs, feature{"Feature", map[string]any{"type": "Point", "coordinates": []float64{p.p.Lon, p.p.Lat}},
			map[string]any{"kind": p.kind, "type": p.p.Type, "ts": fmtTS(p.p.TS), "alt_m": p.p.AltM,
				"range_m": p.p.RangeM, "bearing_deg": p.p.BearingDeg}})
	}
	if fs == nil {
		fs = []feature{}
	}
	return json.Marshal(map[string]any{
		"type": "FeatureCollection", "features": fs,
		"alarm":           st.AlarmJSON,
		"window":          map[string]string{"from": fmtTS(st.From), "to": fmtTS(st.To)},
		"track_kept_from": keptFrom(st),
		"zone_version":    st.ZoneVersion, "zone_source": st.ZoneSource,
		"timeline":     st.Timeline,
		"generated_at": fmtTS(st.Generated),
	})
}

func keptFrom(st *story) *string {
	if st.KeptFrom.IsZero() {
		return nil
	}
	s := fmtTS(st.KeptFrom)
	return &s
}

// kml is the report as KML 2.2: the zone as polygons, the track as a
// gx:Track (time-stamped, for a time slider) and a LineString (for readers
// without the gx extension), the events and the pilot as time-stamped
// points, each with a style.
func (st *story) kml() ([]byte, error) {
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		_ = xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	ll := func(lon, lat float64, alt *float64) string {
		s := strconv.FormatFloat(lon, 'f', -1, 64) + "," + strconv.FormatFloat(lat, 'f', -1, 64)
		if alt != nil {
			s += "," + strconv.FormatFloat(*alt, 'f', -1, 64)
		}
		return s
	}
	al := &st.Alarm
	b.WriteString(xml.Header)
	b.WriteString(`<kml xmlns="http://www.opengis.net/kml/2.2" xmlns:gx="http://www.google.com/kml/ext/2.2">` + "\n<Document>\n")
	fmt.Fprintf(&b, "<name>%s</name>\n", esc("nofly alarm "+al.AlarmID))
	fmt.Fprintf(&b, "<description>%s</description>\n", esc(fmt.Sprintf("Drone %s in zone %s (%s, %s). Track from %s to %s. Generated %s, zone set version %d (%s).",
		al.DroneID, al.ZoneID, al.ZoneName, al.Category, fmtTS(st.From), fmtTS(st.To), fmtTS(st.Generated), st.ZoneVersion, st.ZoneSource)))
	for _, s := range []struct{ id, line, poly, icon string }{
		{"zone", "ff0000cc", "400000cc", ""}, {"track", "ffff7800", "", ""},
		{"raised", "", "", "ff0000ff"}, {"cleared", "", "", "ff00aa00"}, {"acked", "", "", "ff00aaff"},
		{"pilot", "", "", "ffcc6600"}, {"point", "", "", "ffff7800"},
	} {
		fmt.Fprintf(&b, `<Style id="%s">`, s.id)
		if s.line != "" {
			fmt.Fprintf(&b, "<LineStyle><color>%s</color><width>3</width></LineStyle>", s.line)
		}
		if s.poly != "" {
			fmt.Fprintf(&b, "<PolyStyle><color>%s</color></PolyStyle>", s.poly)
		}
		if s.icon != "" {
			fmt.Fprintf(&b, "<IconStyle><color>%s</color><scale>1.1</scale></IconStyle>", s.icon)
		}
		b.WriteString("</Style>\n")
	}
	if z := st.Zone; z != nil {
		fmt.Fprintf(&b, "<Placemark><name>%s</name><description>%s</description><styleUrl>#zone</styleUrl><MultiGeometry>",
			esc(z.Name+" ("+z.ID+")"), esc(fmt.Sprintf("%s zone, version %d (%s)", z.Category, st.ZoneVersion, st.ZoneSource)))
		for _, poly := range zoneRings(z) {
			b.WriteString("<Polygon>")
			for i, ring := range poly {
				tag := "outerBoundaryIs"
				if i > 0 {
					tag = "innerBoundaryIs"
				}
				fmt.Fprintf(&b, "<%s><LinearRing><coordinates>", tag)
				for j, p := range ring {
					if j > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(ll(p[0], p[1], nil))
				}
				fmt.Fprintf(&b, "</coordinates></LinearRing></%s>", tag)
			}
			b.WriteString("</Polygon>")
		}
		b.WriteString("</MultiGeometry></Placemark>\n")
	}
	if n := len(st.Track); n > 0 {
		fmt.Fprintf(&b, "<Placemark><name>%s</name><TimeSpan><begin>%s</begin><end>%s</end></TimeSpan><styleUrl>#track</styleUrl><gx:Track><altitudeMode>clampToGround</altitudeMode>",
			esc("Track of "+al.DroneID), fmtTS(st.Track[0].TS), fmtTS(st.Track[n-1].TS))
		for _, f := range st.Track {
			fmt.Fprintf(&b, "<when>%s</when>", fmtTS(f.TS))
		}
		for _, f := range st.Track {
			alt := 0.0
			if f.AltM != nil {
				alt = *f.AltM
			}
			fmt.Fprintf(&b, "<gx:coord>%s %s %s</gx:coord>", strconv.FormatFloat(f.Lon, 'f', -1, 64), strconv.FormatFloat(f.Lat, 'f', -1, 64), strconv.FormatFloat(alt, 'f', -1, 64))
		}
		b.WriteString("</gx:Track></Placemark>\n")
		fmt.Fprintf(&b, "<Placemark><name>%s</name><styleUrl>#track</styleUrl><LineString><tessellate>1</tessellate><coordinates>", esc("Path of "+al.DroneID))
		for i, f := range st.Track {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(ll(f.Lon, f.Lat, nil))
		}
		b.WriteString("</coordinates></LineString></Placemark>\n")
	}
	for _, e := range st.Timeline {
		if e.Lat == nil {
			continue
		}
		fmt.Fprintf(&b, "<Placemark><name>%s</name><description>%s</description><TimeStamp><when>%s</when></TimeStamp><styleUrl>#%s</styleUrl><Point><coordinates>%s</coordinates></Point></Placemark>\n",
			esc(e.Kind), esc(e.Text), fmtTS(e.TS), e.Kind, ll(*e.Lon, *e.Lat, nil))
	}
	for _, p := range []struct {
		name string
		p    *storyPilot
	}{{"Pilot at the raise", st.Pilot}, {"Pilot, latest", st.PilotLatest}} {
		if p.p == nil {
			continue
		}
		fmt.Fprintf(&b, "<Placemark><name>%s</name><description>%s</description><TimeStamp><when>%s</when></TimeStamp><styleUrl>#pilot</styleUrl><Point><coordinates>%s</coordinates></Point></Placemark>\n",
			esc(p.name), esc(pilotText(p.p)), fmtTS(p.p.TS), ll(p.p.Lon, p.p.Lat, nil))
	}
	b.WriteString("</Document>\n</kml>\n")
	return b.Bytes(), nil
}

func pilotText(p *storyPilot) string {
	s := "location type " + p.Type + ", reported " + fmtTS(p.TS)
	if p.RangeM != nil && p.BearingDeg != nil {
		s += fmt.Sprintf(", %.0f m at %.0f° from the drone", *p.RangeM, *p.BearingDeg)
	}
	return s
}

// csvCell makes a text cell safe to open in a spreadsheet: one starting
// with = + - @ (or a tab or carriage return) is a formula there, so it is
// prefixed with a quote (OWASP, CSV injection). The numbers the report
// writes itself are left as they are: a longitude of -0.45 is data.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// csv is the report as RFC 4180 CSV (CRLF, quoted where needed): one row
// per track point and per event, by time: ts, kind, lat, lon, alt_m,
// alt_ref, by (an ack's), note (an ack's note, or what happened).
func (st *story) csv() ([]byte, error) {
	type row struct {
		ts            time.Time
		kind          string
		lat, lon, alt *float64
		ref, by, note string
	}
	var rows []row
	for _, f := range st.Track {
		rows = append(rows, row{ts: f.TS, kind: "track", lat: ptr(f.Lat), lon: ptr(f.Lon), alt: f.AltM, ref: f.AltRef})
	}
	for _, e := range st.Timeline {
		note := e.Text
		if e.Kind == "acked" {
			note = e.Note // who is in by
		}
		rows = append(rows, row{ts: e.TS, kind: e.Kind, lat: e.Lat, lon: e.Lon, alt: e.AltM, by: e.By, note: note})
	}
	for _, p := range []struct {
		kind string
		p    *storyPilot
	}{{"pilot", st.Pilot}, {"pilot_latest", st.PilotLatest}} {
		if p.p != nil {
			rows = append(rows, row{ts: p.p.TS, kind: p.kind, lat: ptr(p.p.Lat), lon: ptr(p.p.Lon), alt: p.p.AltM, note: pilotText(p.p)})
		}
	}
	// Stable by time: a track point and the event at the same ts keep
	// track first.
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rows[j].ts.Before(rows[j-1].ts); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
	num := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.UseCRLF = true
	_ = w.Write([]string{"ts", "kind", "lat", "lon", "alt_m", "alt_ref", "by", "note"})
	for _, r := range rows {
		_ = w.Write([]string{fmtTS(r.ts), csvCell(r.kind), num(r.lat), num(r.lon), num(r.alt), csvCell(r.ref), csvCell(r.by), csvCell(r.note)})
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// reportCSS is the HTML report's one style sheet: A4, page breaks before
// the track's table, no page break inside a row.
const reportCSS = `
@page { size: A4; margin: 16mm 14mm; }
body { font: 10.5pt/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111; margin: 0 auto; max-width: 190mm; }
h1 { font-size: 16pt; margin: 0 0 2mm; }
h2 { font-size: 12pt; margin: 6mm 0 2mm; border-bottom: 1px solid #999; }
.meta { color: #444; font-size: 9pt; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 1mm 2mm; border-bottom: 1px solid #ddd; }
th { width: 38mm; color: #333; font-weight: 600; }
table.track td, table.track th { font-size: 8.5pt; width: auto; font-variant-numeric: tabular-nums; }
tr { break-inside: avoid; }
svg { box-sizing: border-box; width: 100%; height: auto; border: 1px solid #999; background: #f7f7f4; }
ol.timeline { padding-left: 6mm; }
ol.timeline li { margin: 1mm 0; }
.k { display: inline-block; min-width: 24mm; font-weight: 600; }
.note { white-space: pre-wrap; }
.legend span { margin-right: 5mm; }
.sw { display: inline-block; width: 10px; height: 10px; margin-right: 1.5mm; vertical-align: middle; }
.sw.z { background: #d33; } .sw.t { background: #0078ff; } .sw.r { background: #d00; } .sw.c { background: #0a0; } .sw.p { background: #06c; }
@media print { .sw { print-color-adjust: exact; -webkit-print-color-adjust: exact; } }
.pagebreak { break-before: page; }
@media print { body { max-width: none; } .noprint { display: none; } a { color: inherit; text-decoration: none; } }
`

// reportCSP is the HTML report's policy: nothing but its own style sheet
// (by hash) and inline images.
var reportCSP = func() string {
	h := sha256.Sum256([]byte(reportCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Incident report: alarm {{.A.AlarmID}}</title>
<style>{{.CSS}}</style></head>
<body>
<h1>Incident report: drone {{.A.DroneID}} in {{.ZoneLabel}}</h1>
<p class="meta">Alarm {{.A.AlarmID}} · generated {{.Generated}} by nofly · zone set version {{.ZoneVersion}} ({{.ZoneSourceText}})</p>
{{.Map}}
<p class="legend meta"><span><i class="sw z"></i>zone</span><span><i class="sw t"></i>track ({{.TrackN}} points)</span><span><i class="sw r"></i>raise</span><span><i class="sw c"></i>clear</span><span><i class="sw p"></i>pilot</span></p>
<h2>Timeline</h2>
<ol class="timeline">{{range .Timeline}}<li><span class="k">{{.TS}}</span> <b>{{.Kind}}</b>: {{.Text}}{{if .Note}}<div class="note">Note: {{.Note}}</div>{{end}}</li>{{end}}</ol>
<h2>Facts</h2>
<table>{{range .Facts}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>
<h2 class="pagebreak">Track</h2>
<p class="meta">{{.TrackNote}}</p>
<table class="track"><tr><th>time (UTC)</th><th>latitude</th><th>longitude</th><th>altitude</th></tr>
{{range .Track}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td><td>{{index . 2}}</td><td>{{index . 3}}</td></tr>
{{end}}</table>
</body></html>
`))

// html is the report as a print-ready page: the map of the zone and the
// track as inline SVG (no tile, no script, no request), the timeline, the
// facts and the track's points; the browser's "save as PDF" makes the PDF.
func (st *story) html() ([]byte, error) {
	al := &st.Alarm
	type tlLine struct{ TS, Kind, Text, Note string }
	var tl []tlLine
	for _, e := range st.Timeline {
		tl = append(tl, tlLine{e.TS.UTC().Format("2006-01-02 15:04:05Z"), e.Kind, e.Text, e.Note})
	}
	alt := func(v *float64, ref string) string {
		if v == nil {
			return "unknown"
		}
		return strconv.FormatFloat(*v, 'f', 1, 64) + " m " + ref
	}
	pos := func(lat, lon float64) string { return fmt.Sprintf("%.6f, %.6f", lat, lon) }
	facts := [][2]string{
		{"Alarm", al.AlarmID}, {"State", al.State}, {"Drone", al.DroneID},
		{"Zone", fmt.Sprintf("%s (%s), category %s", al.ZoneName, al.ZoneID, al.Category)},
		{"Raised", fmt.Sprintf("%s, seq %d, at %s, altitude %s", fmtTS(al.Raised.TS), al.Raised.Seq, pos(al.Raised.Lat, al.Raised.Lon), alt(al.Raised.AltM, al.Raised.AltRef))},
	}
	if c := al.Cleared; c != nil {
		facts = append(facts, [2]string{"Cleared", fmt.Sprintf("%s (%s), at %s", fmtTS(c.TS), c.Reason, pos(c.Lat, c.Lon))})
	} else {
		facts = append(facts, [2]string{"Cleared", "not cleared (active when generated)"})
	}
	if a := al.Ack; a != nil {
		facts = append(facts, [2]string{"Acknowledged", fmt.Sprintf("by %s at %s", a.By, fmtTS(a.At))})
		if a.Note != "" {
			facts = append(facts, [2]string{"Ack note", a.Note})
		}
	} else {
		facts = append(facts, [2]string{"Acknowledged", "no"})
	}
	if au := al.Authorization; au != nil {
		facts = append(facts, [2]string{"Authorisation", au.ID + " (" + au.Reference + ")"})
	}
	if al.SignalLostSince != nil {
		facts = append(facts, [2]string{"Signal lost", "last heard " + fmtTS(*al.SignalLostSince)})
	}
	for _, p := range []struct {
		name string
		p    *storyPilot
	}{{"Pilot at the raise", st.Pilot}, {"Pilot, latest", st.PilotLatest}} {
		if p.p != nil {
			facts = append(facts, [2]string{p.name, pos(p.p.Lat, p.p.Lon) + ", " + pilotText(p.p)})
		}
	}
	if st.Pilot == nil && st.PilotLatest == nil {
		facts = append(facts, [2]string{"Pilot", "not reported by the drone's feed"})
	}
	facts = append(facts, [2]string{"Track window", fmtTS(st.From) + " to " + fmtTS(st.To) +
		fmt.Sprintf(" (%g min before the raise to %g min after the clear)", ReportBefore.Minutes(), ReportAfter.Minutes())})
	var track [][4]string
	for _, f := range st.Track {
		track = append(track, [4]string{f.TS.UTC().Format("15:04:05.000"), strconv.FormatFloat(f.Lat, 'f', 6, 64),
			strconv.FormatFloat(f.Lon, 'f', 6, 64), alt(f.AltM, f.AltRef)})
	}
	note := fmt.Sprintf("%d points sampled by the alerter (every 10 s, every second while the alarm is active).", len(st.Track))
	if !st.KeptFrom.IsZero() && st.KeptFrom.After(st.From) {
		note += " The alerter's kept track starts at " + fmtTS(st.KeptFrom) + ", after the window's start."
	}
	if st.KeptFrom.IsZero() {
		note += " The alerter keeps no track of this drone any more (expired 24 h after its last point)."
	}
	label := al.ZoneName
	if label == "" {
		label = al.ZoneID
	}
	srcText := map[string]string{zoneAtRaise: "the version the alarm was raised with",
		zoneCurrent: "the current version: the one of the raise is no longer kept", zoneNotFound: "the zone is in no kept version"}[st.ZoneSource]
	var b bytes.Buffer
	err := reportTmpl.Execute(&b, map[string]any{
		"A": al, "CSS": template.CSS(reportCSS), "ZoneLabel": label, "Generated": fmtTS(st.Generated),
		"ZoneVersion": st.ZoneVersion, "ZoneSourceText": srcText, "Map": st.svg(), "TrackN": len(st.Track),
		"Timeline": tl, "Facts": facts, "Track": track, "TrackNote": note,
	})
	return b.Bytes(), err
}

// svg draws the zone, the track, the raise and clear and the pilot on a
// flat projection around them, with a scale bar and north up: a map that
// prints, with no tile and no request.
func (st *story) svg() template.HTML {
	const w, h, pad = 720.0, 360.0, 28.0
	var pts []orb.Point
	rings := zoneRings(st.Zone)
	for _, p := range rings {
		for _, r := range p {
			pts = append(pts, r...)
		}
	}
	for _, f := range st.Track {
		pts = append(pts, orb.Point{f.Lon, f.Lat})
	}
	for _, e := range st.Timeline {
		if e.Lat != nil {
			pts = append(pts, orb.Point{*e.Lon, *e.Lat})
		}
	}
	for _, p := range []*storyPilot{st.Pilot, st.PilotLatest} {
		if p != nil {
			pts = append(pts, orb.Point{p.Lon, p.Lat})
		}
	}
	if len(pts) == 0 {
		return ""
	}
	b := orb.MultiPoint(pts).Bound()
	midLat := (b.Min[1] + b.Max[1]) / 2
	kx := math.Cos(midLat * math.Pi / 180) // a degree of longitude, in degrees of latitude
	spanX, spanY := math.Max((b.Max[0]-b.Min[0])*kx, 1e-4), math.Max(b.Max[1]-b.Min[1], 1e-4)
	s := math.Min((w-2*pad)/spanX, (h-2*pad)/spanY)
	ox := pad + ((w-2*pad)-spanX*s)/2
	oy := pad + ((h-2*pad)-spanY*s)/2
	xy := func(lon, lat float64) (float64, float64) {
		return ox + (lon-b.Min[0])*kx*s, h - (oy + (lat-b.Min[1])*s)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" role="img" aria-label="map of the zone and the track">`, w, h)
	for _, poly := range rings {
		sb.WriteString(`<path fill="#d33" fill-opacity="0.18" stroke="#d33" stroke-width="1.5" fill-rule="evenodd" d="`)
		for _, r := range poly {
			for i, p := range r {
				x, y := xy(p[0], p[1])
				c := "L"
				if i == 0 {
					c = "M"
				}
				fmt.Fprintf(&sb, "%s%.1f %.1f", c, x, y)
			}
			sb.WriteString("Z")
		}
		sb.WriteString(`"/>`)
	}
	if len(st.Track) > 0 {
		sb.WriteString(`<polyline fill="none" stroke="#0078ff" stroke-width="2" stroke-linejoin="round" points="`)
		for _, f := range st.Track {
			x, y := xy(f.Lon, f.Lat)
			fmt.Fprintf(&sb, "%.1f,%.1f ", x, y)
		}
		sb.WriteString(`"/>`)
		for _, f := range st.Track {
			x, y := xy(f.Lon, f.Lat)
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="1.8" fill="#0078ff"/>`, x, y)
		}
	}
	if p := st.Pilot; p != nil {
		px, py := xy(p.Lon, p.Lat)
		rx, ry := xy(st.Alarm.Raised.Lon, st.Alarm.Raised.Lat)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#06c" stroke-width="1.2" stroke-dasharray="5 4"/>`, rx, ry, px, py)
	}
	for _, p := range []*storyPilot{st.Pilot, st.PilotLatest} {
		if p != nil {
			x, y := xy(p.Lon, p.Lat)
			fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="9" height="9" fill="#06c" stroke="#fff"/>`, x-4.5, y-4.5)
		}
	}
	for _, e := range st.Timeline {
		if e.Lat == nil {
			continue
		}
		x, y := xy(*e.Lon, *e.Lat)
		col := "#d00"
		if e.Kind == "cleared" {
			col = "#0a0"
		}
		fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="6" fill="%s" stroke="#fff" stroke-width="1.5"/><text x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`,
			x, y, col, x+8, y-8, col, e.Kind)
	}
	// Scale bar: the largest 1-2-5 length under a quarter of the width.
	mPerPx := 111195 / s
	target := (w / 4) * mPerPx
	step := math.Pow(10, math.Floor(math.Log10(target)))
	for _, m := range []float64{5, 2, 1} {
		if m*step <= target {
			step *= m
			break
		}
	}
	bar := step / mPerPx
	label := strconv.FormatFloat(step, 'f', -1, 64) + " m"
	if step >= 1000 {
		label = strconv.FormatFloat(step/1000, 'f', -1, 64) + " km"
	}
	fmt.Fprintf(&sb, `<g font-size="11" fill="#222"><rect x="14" y="%g" width="%.1f" height="4" fill="#222"/><text x="14" y="%g">%s</text>`, h-16, bar, h-22, label)
	fmt.Fprintf(&sb, `<text x="%g" y="22" text-anchor="middle" font-weight="600">N</text><path d="M%g 28 l-5 12 h10 z" fill="#222"/></g>`, w-20, w-20)
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // built above from numbers and fixed words only
}
