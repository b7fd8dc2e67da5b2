package geofence

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const zonesDir = "../testdata/zones"

func load(t *testing.T, rel string) *ZoneSet {
	t.Helper()
	set, err := LoadFile(filepath.Join(zonesDir, rel))
	if err != nil {
		t.Fatalf("LoadFile(%s): %v", rel, err)
	}
	return set
}

func zoneIDs(set *ZoneSet) []string {
	var s []string
	for _, z := range set.Zones {
		s = append(s, z.ID)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestEveryFixtureLoads: every valid file under testdata/zones imports and
// indexes; the invalid ED-318 example is rejected with a clear error.
func TestEveryFixtureLoads(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(zonesDir, "*.geojson"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(zonesDir, "*", "*.json"))
	files = append(files, more...)
	if len(files) < 9 {
		t.Fatalf("found only %d zone files", len(files))
	}
	for _, f := range files {
		base := filepath.Base(f)
		set, err := LoadFile(f)
		if strings.HasPrefix(base, "Invalid") {
			if err == nil {
				t.Errorf("%s: loaded, want rejection", base)
				continue
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(msg, base+": metadata.validFrom: must be a date-time string") {
				t.Errorf("%s: unclear error %q", base, msg)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", base, err)
			continue
		}
		if len(set.Zones) == 0 {
			t.Errorf("%s: no zones", base)
		}
		if _, err := NewIndex(set); err != nil {
			t.Errorf("%s: NewIndex: %v", base, err)
		}
	}
}

func TestDetect(t *testing.T) {
	cases := map[string]Format{
		"airports.geojson": FormatGeoJSON,
		"ed269/interuss_uas_standards_test_eurocae_ed269.json":   FormatED269,
		"ed269/nofly_uaszonelist_dailyperiod.json":               FormatED269,
		"ed269/nofly_eurocontrol_uas_zones.json":                 FormatED269,
		"ed269/interuss_monitoring_cis_source_sample_ed269.json": FormatED269,
		"ed318/Example_Collection.json":                          FormatED318,
		"ed318/Example_GeoZone_Circle.json":                      FormatED318,
		"ed318/interuss_monitoring_cis_source_sample_ed318.json": FormatED318,
	}
	for rel, want := range cases {
		b, err := os.ReadFile(filepath.Join(zonesDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Detect(b); err != nil || got != want {
			t.Errorf("Detect(%s) = %v, %v; want %v", rel, got, err, want)
		}
	}
}

func TestED269Interuss(t *testing.T) {
	set := load(t, "ed269/interuss_uas_standards_test_eurocae_ed269.json")
	want := []string{"Montreux Concert Area", "Flugplatz Reichenbach", "Lausanne Airport", "MONTREUX Wildlife Preserve", "Gantrisch Nature Park"}
	if got := zoneIDs(set); !slices.Equal(got, want) {
		t.Fatalf("zones %q, want %q (the NO_RESTRICTION Gantrisch duplicate skipped)", got, want)
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ix.Zone("Montreux Concert Area")
	v := m.Volumes[0]
	if m.Category != Restricted || m.Restriction != "PROHIBITED" || v.Circle == nil || v.Circle.RadiusM != 3000 ||
		*v.Floor != (Limit{0, AGL}) || *v.Ceiling != (Limit{6259, AMSL}) || m.Authority != "Local Canton" {
		t.Errorf("Montreux: %+v %+v %+v %+v", m, v.Circle, v.Floor, v.Ceiling)
	}
	g, _ := ix.Zone("Gantrisch Nature Park")
	if g.Category != Warning || g.Restriction != "REQ_AUTHORISATION" || math.Abs(g.Volumes[0].Ceiling.M-76.2) > 1e-9 {
		t.Errorf("Gantrisch: %+v, ceiling %+v (250 ft = 76.2 m)", g, g.Volumes[0].Ceiling)
	}
	if r, _ := ix.Zone("Flugplatz Reichenbach"); len(r.Volumes) != 3 {
		t.Errorf("Reichenbach: %d volumes, want 3 stacked rings", len(r.Volumes))
	}
	// Montreux: Saturday and Sunday 17:00–24:00 UTC, 2022-06-15 to 2023-06-15.
	montreux := func(ts string) Point {
		return Point{Lat: 46.430758, Lon: 6.913146, Time: utc(ts), Heights: Heights{}.Set(AGL, 50).Set(AMSL, 500)}
	}
	// The point is also in the (permanent) wildlife preserve.
	for ts, want := range map[string]string{
		"2022-07-02T18:00:00Z": "Montreux Concert Area,MONTREUX Wildlife Preserve", // Saturday evening
		"2022-07-03T23:59:30Z": "Montreux Concert Area,MONTREUX Wildlife Preserve", // Sunday, 23:59:59 means midnight
		"2022-07-01T18:00:00Z": "MONTREUX Wildlife Preserve",                       // Friday
		"2022-07-02T16:59:59Z": "MONTREUX Wildlife Preserve",                       // before 17:00
		"2023-07-01T18:00:00Z": "MONTREUX Wildlife Preserve",                       // after endDateTime
	} {
		if got := ids(ix.Query(montreux(ts), nil)); got != want {
			t.Errorf("Montreux at %s: %q, want %q", ts, got, want)
		}
	}
	// Reichenbach rings: 0–120 m AGL within 1 km, 50–120 within 2.5 km,
	// 100–120 within 3.5 km. 3 km east of the centre (46.612893, 7.67807):
	at := func(agl float64) Point {
		return Point{Lat: 46.612893, Lon: 7.67807 + 3000/(111319.49*math.Cos(46.612893*math.Pi/180)), Time: utc("2022-08-01T12:00:00Z"), Heights: Heights{}.Set(AGL, agl)}
	}
	if got := ids(ix.Query(at(110), nil)); got != "Flugplatz Reichenbach" {
		t.Errorf("Reichenbach ring 3 at 110 m AGL: %q", got)
	}
	if got := ids(ix.Query(at(80), nil)); got != "" {
		t.Errorf("Reichenbach ring 3 at 80 m AGL: %q, want nothing", got)
	}
}

func TestED269UASZoneListDailyPeriod(t *testing.T) {
	set := load(t, "ed269/nofly_uaszonelist_dailyperiod.json")
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ix.Zone("NOFLY-UZL-OLYMPIASTADION")
	if o.Volumes[0].Floor != nil || math.Abs(o.Volumes[0].Ceiling.M-304.8) > 1e-9 || o.Volumes[0].Ceiling.Ref != AGL {
		t.Errorf("Olympiastadion limits: floor %+v ceiling %+v (null floor, 1000 ft AGL)", o.Volumes[0].Floor, o.Volumes[0].Ceiling)
	}
	stadium := func(ts string) Point { return Point{Lat: 52.5147, Lon: 13.2395, Time: utc(ts)} }
	for ts, want := range map[string]bool{
		"2026-09-05T13:00:00Z":   true,  // Saturday 13:00Z
		"2026-09-05T19:00:00Z":   false, // end exclusive
		"2026-09-02T17:45:00Z":   true,  // Wednesday 18:45+01:00
		"2026-09-02T22:59:00Z":   true,  // Wednesday 23:59+01:00
		"2026-09-02T22:59:59.5Z": true,  // 23:59:59+01:00 is read as midnight +01:00
		"2026-09-02T23:01:00Z":   false, // after midnight +01:00
		"2026-09-03T18:00:00Z":   false, // Thursday
		"2027-06-05T14:00:00Z":   false, // a Saturday after endDateTime
	} {
		if got := len(ix.Query(stadium(ts), nil)) == 1; got != want {
			t.Errorf("Olympiastadion at %s: %v, want %v", ts, got, want)
		}
	}
	ber := func(ts string) Point {
		return Point{Lat: 52.3667, Lon: 13.5033, Time: utc(ts), Heights: Heights{}.Set(AMSL, 100)}
	}
	for ts, want := range map[string]bool{
		"2026-12-02T22:00:00Z": true, "2026-12-03T05:59:59Z": true, "2026-12-03T06:00:00Z": false, "2026-12-03T12:00:00Z": false,
	} {
		if got := len(ix.Query(ber(ts), nil)) == 1; got != want {
			t.Errorf("BER night at %s: %v, want %v", ts, got, want)
		}
	}
	b, _ := ix.Zone("NOFLY-UZL-BER-NIGHT")
	tg, _ := ix.Zone("NOFLY-UZL-TIERGARTEN")
	if b.Category != Warning || tg.Category != Warning || tg.Restriction != "CONDITIONAL" {
		t.Errorf("categories: %s %s %s", b.Category, tg.Category, tg.Restriction)
	}
	park := Point{Lat: 52.5120, Lon: 13.3400, Heights: Heights{}.Set(AGL, 20)}
	hole := Point{Lat: 52.5145, Lon: 13.3505, Heights: Heights{}.Set(AGL, 20)}
	if ids(ix.Query(park, nil)) != "NOFLY-UZL-TIERGARTEN" || ids(ix.Query(hole, nil)) != "" {
		t.Errorf("Tiergarten: park %q, hole %q", ids(ix.Query(park, nil)), ids(ix.Query(hole, nil)))
	}
}

func TestED269EurocontrolLayout(t *testing.T) {
	set := load(t, "ed269/nofly_eurocontrol_uas_zones.json")
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ix.Zone("NOFLY-EC-ATOMIUM")
	if a.Authority != "Belgian Civil Aviation Authority" || len(a.Windows) != 1 || len(a.Windows[0].Weekly) != 5 {
		t.Fatalf("Atomium: %+v", a)
	}
	atomium := func(ts string) Point {
		return Point{Lat: 50.8949, Lon: 4.3415, Time: utc(ts), Heights: Heights{}.Set(AGL, 30)}
	}
	if len(ix.Query(atomium("2026-12-02T10:00:00Z"), nil)) != 1 || len(ix.Query(atomium("2026-12-05T10:00:00Z"), nil)) != 0 {
		t.Error("Atomium: want active on a Wednesday at 10:00Z and not on a Saturday")
	}
	e, _ := ix.Zone("NOFLY-EC-EBAW")
	if len(e.Volumes) != 2 || e.Volumes[1].Ceiling.Ref != AMSL || math.Abs(e.Volumes[1].Ceiling.M-457.2) > 1e-9 {
		t.Errorf("EBAW volumes: %+v", e.Volumes)
	}
}

func TestED318(t *testing.T) {
	set := load(t, "ed318/Example_Collection.json")
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	z, _ := ix.Zone("NFZ6547")
	if len(z.Volumes) != 2 || *z.Volumes[0].Floor != (Limit{50, AGL}) || *z.Volumes[1].Ceiling != (Limit{50, AGL}) || z.Name != "LFPG-2" || z.Category != Warning {
		t.Fatalf("NFZ6547: %+v", z)
	}
	c, _ := ix.Zone("ABC1234")
	if c.Volumes[0].Circle == nil || c.Volumes[0].Circle.RadiusM != 3500 || c.Category != Restricted {
		t.Fatalf("ABC1234: %+v", c)
	}
	// NFZ6547 layer 2 (0–50 m AGL) inside the triangle, any day 16:00–17:00Z.
	p := Point{Lat: 49.024, Lon: 2.64, Time: utc("2019-03-05T16:30:00Z"), Heights: Heights{}.Set(AGL, 20)}
	if ids(ix.Query(p, nil)) != "NFZ6547" {
		t.Errorf("NFZ6547 layer 2: %q", ids(ix.Query(p, nil)))
	}
	p.Time = utc("2019-03-05T15:30:00Z")
	if ids(ix.Query(p, nil)) != "" {
		t.Errorf("NFZ6547 outside its schedule: %q", ids(ix.Query(p, nil)))
	}
	swiss := load(t, "ed318/interuss_monitoring_cis_source_sample_ed318.json")
	if got := zoneIDs(swiss); !slices.Equal(got, []string{"LSZB003", "BLns058", "LSTB002"}) {
		t.Errorf("Swiss sample: %q", got)
	}
}

func TestAirportsZoneSet(t *testing.T) {
	set := load(t, "airports.geojson")
	if set.Version != "nofly-airports-2026-12-02" {
		t.Errorf("version %q", set.Version)
	}
	airports, temporary, banded := map[string]bool{}, 0, 0
	for _, z := range set.Zones {
		if strings.HasSuffix(z.ID, "-ATZ") {
			airports[strings.TrimSuffix(z.ID, "-ATZ")] = true
		}
		if !z.ActiveFrom.IsZero() || !z.ActiveUntil.IsZero() {
			temporary++
		}
		if v := z.Volumes[0]; v.Floor != nil && v.Ceiling != nil && v.Floor.M > 0 {
			banded++
		}
	}
	if len(airports) < 20 || temporary < 3 || banded < 3 {
		t.Fatalf("%d airports, %d temporary, %d banded zones", len(airports), temporary, banded)
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	now := utc("2026-12-02T10:15:03Z")
	// docs/design.md's sample record: over Heathrow at 85 m AMSL.
	got := ids(ix.Query(Point{Lat: 51.4706, Lon: -0.4619, Time: now, Heights: Heights{}.Set(AMSL, 85)}, nil))
	if got != "EGLL-ATZ,EGLL-RPZ,EGLL-CTR-LOW?" {
		t.Errorf("Heathrow: %q", got)
	}
	wembley := Point{Lat: 51.5560, Lon: -0.2796, Heights: Heights{}.Set(AMSL, 100)}
	wembley.Time = utc("2026-12-05T15:00:00Z")
	if !strings.Contains(ids(ix.Query(wembley, nil)), "TFR-WEMBLEY-2026-12-05") {
		t.Errorf("Wembley on match day: %q", ids(ix.Query(wembley, nil)))
	}
	wembley.Time = utc("2026-12-06T15:00:00Z")
	if strings.Contains(ids(ix.Query(wembley, nil)), "TFR-WEMBLEY") {
		t.Error("Wembley the day after: still active")
	}
	for _, lon := range []float64{179.9, 180, -180, -179.9} {
		p := Point{Lat: -16.8, Lon: lon, Time: now, Heights: Heights{}.Set(AGL, 50)}
		if ids(ix.Query(p, nil)) != "FJ-TAVEUNI-PARK" {
			t.Errorf("Taveuni at lon %v: %q", lon, ids(ix.Query(p, nil)))
		}
	}
	// The TMA band is a ring around the CTR: 300–1500 m AMSL, not over the
	// centre.
	tma := Point{Lat: 51.4700 + 20000/111319.49, Lon: -0.4543, Time: now, Heights: Heights{}.Set(AMSL, 800)}
	if ids(ix.Query(tma, nil)) != "EGLL-TMA-BAND" {
		t.Errorf("EGLL TMA band: %q", ids(ix.Query(tma, nil)))
	}
	tma.Lat = 51.4700 + 10000/111319.49 // inside the hole: the CTR, below 120 m AGL only
	if ids(ix.Query(tma, nil)) != "EGLL-CTR-LOW?" {
		t.Errorf("EGLL TMA hole: %q", ids(ix.Query(tma, nil)))
	}
}

func TestED269FlightLevels(t *testing.T) {
	src := `{"features":[{"identifier":"TRA","restriction":"PROHIBITED","geometry":[{"uomDimensions":"FL","lowerLimit":null,"upperLimit":95,"upperVerticalReference":"STD","horizontalProjection":{"type":"Circle","center":[7,46],"radius":500}}]}]}`
	set, err := ParseED269(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if c := set.Zones[0].Volumes[0].Ceiling; c == nil || math.Abs(c.M-2895.6) > 1e-9 || c.Ref != AMSL {
		t.Fatalf("FL95 STD: %+v, want 2895.6 m AMSL", c)
	}
}
