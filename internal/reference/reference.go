// Package reference is the independent reference the proofs compare the
// alerter with: a brute-force scan of every record against
// every zone, written apart from geofence/ and alerts/ — its own GeoJSON
// reading, point-in-polygon (even-odd over all rings), haversine, vertical
// and time checks, the raise/clear rule of docs/design.md, and its
// approaching rules with their own flat-frame geometry (approach.go). The proofs
// compare the alerter's output with it. It is deliberately simple and slow,
// and shares no code with the packages it checks.
package reference

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// Zone is one zone as the reference reads it.
type Zone struct {
	id                string
	def               string           // the feature's text: a changed zone has another
	category          string           // restricted when absent (geofence/doc.go): authorisations name categories
	polys             [][][][2]float64 // polygons, each rings of (lon, lat)
	circle            *[3]float64      // lon, lat, radius m
	floor, ceiling    *refLimit
	from, until       time.Time
	buffer            float64
	hasFrom, hasUntil bool
	// approach_before_s, the zone's own approaching horizon (s), when set.
	approachS   float64
	hasApproach bool
}

type refLimit struct {
	m   float64
	ref string
}

// LoadZones reads a GeoJSON zone file of the scenario's kind (Polygon,
// MultiPolygon, Point with radius_m; floor/ceiling, active window, clear
// buffer, approach_before_s) with its own JSON reading.
func LoadZones(path string) ([]Zone, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Features []json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("reference: %s: %w", path, err)
	}
	type feature struct {
		Properties map[string]any `json:"properties"`
		Geometry   struct {
			Type        string          `json:"type"`
			Coordinates json.RawMessage `json:"coordinates"`
		} `json:"geometry"`
	}
	var zs []Zone
	for _, fb := range raw.Features {
		var f feature
		if err := json.Unmarshal(fb, &f); err != nil {
			return nil, fmt.Errorf("reference: %s: %w", path, err)
		}
		pr := f.Properties
		id, ok := pr["id"].(string)
		if !ok {
			return nil, fmt.Errorf("reference: %s: a feature without a string id", path)
		}
		z := Zone{id: id, def: string(fb)}
		num := func(k string) (float64, bool) { v, ok := pr[k].(float64); return v, ok }
		str := func(k, def string) string {
			if v, ok := pr[k].(string); ok {
				return v
			}
			return def
		}
		z.category = str("category", "restricted")
		if v, ok := num("floor_m"); ok {
			z.floor = &refLimit{v, str("floor_ref", "AMSL")}
		}
		if v, ok := num("ceiling_m"); ok {
			z.ceiling = &refLimit{v, str("ceiling_ref", "AMSL")}
		}
		z.buffer, _ = num("clear_buffer_m")
		z.approachS, z.hasApproach = num("approach_before_s")
		if s := str("active_from", ""); s != "" {
			z.from, _ = time.Parse(time.RFC3339, s)
			z.hasFrom = true
		}
		if s := str("active_until", ""); s != "" {
			z.until, _ = time.Parse(time.RFC3339, s)
			z.hasUntil = true
		}
		switch f.Geometry.Type {
		case "Polygon":
			var p [][][2]float64
			if err := json.Unmarshal(f.Geometry.Coordinates, &p); err != nil {
				return nil, fmt.Errorf("reference: %s: zone %s: %w", path, id, err)
			}
			z.polys = [][][][2]float64{p}
		case "MultiPolygon":
			if err := json.Unmarshal(f.Geometry.Coordinates, &z.polys); err != nil {
				return nil, fmt.Errorf("reference: %s: zone %s: %w", path, id, err)
			}
		case "Point":
			var c [2]float64
			if err := json.Unmarshal(f.Geometry.Coordinates, &c); err != nil {
				return nil, fmt.Errorf("reference: %s: zone %s: %w", path, id, err)
			}
			r, _ := num("radius_m")
			z.circle = &[3]float64{c[0], c[1], r}
		default:
			return nil, fmt.Errorf("reference: %s: zone %s: geometry %s not supported", path, id, f.Geometry.Type)
		}
		zs = append(zs, z)
	}
	return zs, nil
}

// evenOdd: a ray cast to +lon, crossing every ring (holes included).
func evenOdd(rings [][][2]float64, lon, lat float64) bool {
	in := false
	for _, r := range rings {
		for i, j := 0, len(r)-1; i < len(r); j, i = i, i+1 {
			a, b := r[i], r[j]
			if (a[1] > lat) != (b[1] > lat) && lon < (b[0]-a[0])*(lat-a[1])/(b[1]-a[1])+a[0] {
				in = !in
			}
		}
	}
	return in
}

func haversineM(lon1, lat1, lon2, lat2 float64) float64 {
	const r = 6378137.0 // the sphere of the contract (WGS84 equatorial radius)
	rad := math.Pi / 180
	dLat, dLon := (lat2-lat1)*rad, (lon2-lon1)*rad
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * r * math.Asin(math.Sqrt(h))
}

// height returns the record's height in ref and whether it has one.
func refHeight(p *telemetry.Position, ref string) (float64, bool) {
	altRef := p.AltRef
	if altRef == "" {
		altRef = "AMSL"
	}
	if p.AltM != nil && altRef == ref {
		return *p.AltM, true
	}
	if ref == "AGL" && p.AGLM != nil {
		return *p.AGLM, true
	}
	return 0, false
}

// contains: horizontally within the zone grown by grow metres (grow only
// for circles: polygons in the scenario have no buffer), vertically within
// the limits widened by grow, active at ts.
func (z *Zone) contains(p *telemetry.Position, grow float64) bool {
	if z.hasFrom && p.TS.Before(z.from) || z.hasUntil && !p.TS.Before(z.until) {
		return false
	}
	if !z.heightsHold(p, grow) {
		return false
	}
	if z.circle != nil {
		return haversineM(p.Lon, p.Lat, z.circle[0], z.circle[1]) <= z.circle[2]+grow
	}
	if grow > 0 {
		panic("reference: clear buffers on polygons are not modelled")
	}
	for _, poly := range z.polys {
		if evenOdd(poly, p.Lon, p.Lat) {
			return true
		}
	}
	return false
}

// heightsHold: the record's heights within the zone's limits widened by
// grow; a height the record lacks in a limit's reference is taken to be
// within it.
func (z *Zone) heightsHold(p *telemetry.Position, grow float64) bool {
	if z.floor != nil {
		if h, ok := refHeight(p, z.floor.ref); ok && h < z.floor.m-grow {
			return false
		}
	}
	if z.ceiling != nil {
		if h, ok := refHeight(p, z.ceiling.ref); ok && h > z.ceiling.m+grow {
			return false
		}
	}
	return true
}

// Event is what the proofs compare. N is the count of a signal_lost,
// signal_regained, authorized or unauthorized event (its event id's last
// part), 0 for the others. Auth is the authorisation id a raised,
// authorized or unauthorized event carries and Reason an unauthorized
// event's (revoked, expired); both "" otherwise, so events without
// authorisation compare as they did before. For approaching and
// approach_ended events AlarmID is the approach id and Reason an
// approach_ended event's (turned_away, zone_removed, signal_lost).
//
// Op is a raised event's pilot position as known at the raise (OpKey of
// the last one the drone's positions reported; "" none or another type).
//
// ETA is an approaching event's predicted time to entry in seconds (-1:
// warned because near, eta_s null), 0 for every other event. Compare does
// not compare it (Identity drops it): a test may check it with a tolerance.
type Event struct {
	AlarmID, Type, DroneID, ZoneID string
	Seq                            int64
	N                              int
	Auth, Reason                   string
	Op                             string
	ETA                            float64
}

// OpKey is a pilot position as Event.Op compares it: latitude, longitude,
// altitude ("" unknown), type and the ts of the position that reported
// it, in UTC.
func OpKey(lat, lon float64, alt *float64, typ string, ts time.Time) string {
	a := ""
	if alt != nil {
		a = strconv.FormatFloat(*alt, 'g', -1, 64)
	}
	return strconv.FormatFloat(lat, 'g', -1, 64) + "," + strconv.FormatFloat(lon, 'g', -1, 64) + "," + a + "," + typ + "," +
		ts.UTC().Format(time.RFC3339Nano)
}

// Identity is the event without ETA: what Compare compares.
func (e Event) Identity() Event {
	e.ETA = 0
	return e
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %s %s/%s@%d", e.AlarmID[:min(8, len(e.AlarmID))], e.Type, e.DroneID, e.ZoneID, e.Seq)
	if e.N > 0 {
		s += fmt.Sprintf("#%d", e.N)
	}
	if e.Auth != "" {
		s += " auth=" + e.Auth
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Type == "approaching" {
		s += fmt.Sprintf(" eta=%.1fs", e.ETA)
	}
	if e.Op != "" {
		s += " op=" + e.Op
	}
	return s
}

// AlarmID is the contract's alarm id: the first 16 bytes of
// SHA-256(drone NUL zone NUL seq), hex; for a raise after the drone's seq
// went back r > 0 times, of SHA-256(drone NUL zone NUL seq NUL r).
func AlarmID(drone, zone string, seq int64, resets int) string {
	in := drone + "\x00" + zone + "\x00" + strconv.FormatInt(seq, 10)
	if resets > 0 {
		in += "\x00" + strconv.Itoa(resets)
	}
	return hashHex(in)
}

// hashHex is the first 16 bytes of SHA-256 of s, in hex.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// last is where a drone's order stands: the ts and seq of its last applied
// record, and how often its seq went back.
type last struct {
	ts     time.Time
	seq    int64
	resets int
}

// newer is the contract's order of one drone's records: a record is
// applied when its ts is later than the last applied one's, or its ts is
// the same and its seq higher; anything else is a duplicate or stale.
func (l last) newer(p *telemetry.Position) bool {
	if c := p.TS.Compare(l.ts); c != 0 {
		return c > 0
	}
	return p.Seq > l.seq
}

// Events runs docs/design.md's alarm semantics over the records in order,
// as one partition without the log's clock (no receive times: nothing is
// decided by time).
func Events(zones []Zone, recs []telemetry.Position) []Event {
	return EventsReloaded([][]Zone{zones}, nil, recs)
}

// EventsReloaded is Events with zone-set reloads: records from
// switchAt[i] on are judged against sets[i+1]. At the first record after a
// switch every drone's alarms of removed or changed zones clear, and the
// zones that now hold its last position raise.
func EventsReloaded(sets [][]Zone, switchAt []int, recs []telemetry.Position) []Event {
	rs := make([]Rec, len(recs))
	for i := range recs {
		rs[i] = Rec{Pos: recs[i]}
	}
	return Run(Input{Sets: sets, SwitchAt: switchAt, Recs: rs, Partitions: 1})
}

// Diff is got compared with want as sets of Events (alarm_id, type,
// drone_id, zone_id, seq, n, authorisation, reason, a raise's pilot:
// their Identity); the
// lists hold at most 10 each, sorted.
type Diff struct {
	Got, Want                     int
	Missing, Extra, Duplicated    []Event
	NMissing, NExtra, NDuplicated int
}

// OK reports whether got equals want: nothing missing, extra or doubled.
func (d Diff) OK() bool { return d.NMissing+d.NExtra+d.NDuplicated == 0 }

func (d Diff) String() string {
	if d.OK() {
		return fmt.Sprintf("%d events equal the reference (0 missing, 0 duplicate)", d.Got)
	}
	return fmt.Sprintf("%d events, reference %d: %d missing %v, %d unexpected %v, %d duplicated %v",
		d.Got, d.Want, d.NMissing, d.Missing, d.NExtra, d.Extra, d.NDuplicated, d.Duplicated)
}

// ErrReferenceDuplicate: the reference itself produced an event twice (a
// bug of the reference or of its input).
var ErrReferenceDuplicate = errors.New("reference: duplicate event")

// Compare compares got with want.
func Compare(want, got []Event) (Diff, error) {
	wantSet := map[Event]bool{}
	for _, e := range want {
		if wantSet[e.Identity()] {
			return Diff{}, fmt.Errorf("%w: %v", ErrReferenceDuplicate, e)
		}
		wantSet[e.Identity()] = true
	}
	gotN := map[Event]int{}
	var dups, extra []Event
	for _, e := range got {
		gotN[e.Identity()]++
		if gotN[e.Identity()] == 2 {
			dups = append(dups, e)
		}
		if !wantSet[e.Identity()] && gotN[e.Identity()] == 1 {
			extra = append(extra, e)
		}
	}
	var missing []Event
	for _, e := range want {
		if gotN[e.Identity()] == 0 {
			missing = append(missing, e)
		}
	}
	first := func(es []Event) []Event {
		sort.Slice(es, func(i, j int) bool { return es[i].String() < es[j].String() })
		if len(es) > 10 {
			es = es[:10]
		}
		return es
	}
	return Diff{Got: len(got), Want: len(want),
		NMissing: len(missing), NExtra: len(extra), NDuplicated: len(dups),
		Missing: first(missing), Extra: first(extra), Duplicated: first(dups)}, nil
}

// ParseEvents reads NDJSON alarm events (the outbox's, alerts.events',
// replay's); an event whose event_id is not alarm_id:type (alarm_id:type:n
// for signal_lost, signal_regained, authorized, unauthorized) is an error.
// Acked events (an operator's, through the HTTP API) are skipped: the
// reference decides raises and clears from the telemetry alone. Auth is
// read only where the reference sets it (raised, authorized,
// unauthorized), Reason only for unauthorized and approach_ended: cleared
// events' reasons are not compared. An approaching event's eta_s is read
// into ETA (null: -1).
func ParseEvents(lines [][]byte) ([]Event, error) {
	out := make([]Event, 0, len(lines))
	for _, l := range lines {
		var e struct {
			EventID string   `json:"event_id"`
			AlarmID string   `json:"alarm_id"`
			Type    string   `json:"type"`
			DroneID string   `json:"drone_id"`
			ZoneID  string   `json:"zone_id"`
			Seq     int64    `json:"seq"`
			Reason  string   `json:"reason"`
			ETA     *float64 `json:"eta_s"`
			Auth    *struct {
				ID string `json:"id"`
			} `json:"authorization"`
			Op *struct {
				Lat  float64   `json:"lat"`
				Lon  float64   `json:"lon"`
				AltM *float64  `json:"alt_m"`
				Type string    `json:"type"`
				TS   time.Time `json:"ts"`
			} `json:"operator"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			return nil, fmt.Errorf("reference: event %s: %w", strings.TrimSpace(string(l)), err)
		}
		ev := Event{AlarmID: e.AlarmID, Type: e.Type, DroneID: e.DroneID, ZoneID: e.ZoneID, Seq: e.Seq}
		switch e.Type {
		case "raised", "authorized", "unauthorized":
			if e.Auth != nil {
				ev.Auth = e.Auth.ID
			}
		}
		if e.Type == "raised" && e.Op != nil {
			ev.Op = OpKey(e.Op.Lat, e.Op.Lon, e.Op.AltM, e.Op.Type, e.Op.TS)
		}
		switch e.Type {
		case "unauthorized", "approach_ended":
			ev.Reason = e.Reason
		case "approaching":
			ev.ETA = -1
			if e.ETA != nil {
				ev.ETA = *e.ETA
			}
		}
		switch e.Type {
		case "acked":
			continue
		case "signal_lost", "signal_regained", "authorized", "unauthorized":
			var ok bool
			if ev.N, ok = signalN(e.EventID); !ok || e.EventID != e.AlarmID+":"+e.Type+":"+strconv.Itoa(ev.N) {
				return nil, fmt.Errorf("reference: event_id %q is not alarm_id:type:n", e.EventID)
			}
		default:
			if e.EventID != e.AlarmID+":"+e.Type {
				return nil, fmt.Errorf("reference: event_id %q is not alarm_id:type", e.EventID)
			}
		}
		out = append(out, ev)
	}
	return out, nil
}
