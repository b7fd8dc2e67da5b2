package geofence

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// problemAt finds a problem of feature (counted from 1) at field whose
// message contains msg.
func problemAt(ps []Problem, feature int, field, msg string) bool {
	for _, p := range ps {
		if p.Feature == feature && p.Field == field && strings.Contains(p.Msg, msg) {
			return true
		}
	}
	return false
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T %v is not a *ValidationError", err, err)
	}
	return ve.Problems
}

const (
	ed269Circle = `{"uomDimensions":"M","lowerLimit":0,"lowerVerticalReference":"AGL","upperLimit":120,"upperVerticalReference":"AGL","horizontalProjection":{"type":"Circle","center":[7,46],"radius":500}}`
	ed318Circle = `{"type":"FeatureCollection","metadata":{},"features":[{"type":"Feature","properties":{"identifier":"Z1","type":"PROHIBITED"},` +
		`"geometry":{"type":"Point","coordinates":[7,46],"extent":{"subType":"Circle","radius":500},"layer":{"uom":"m","lower":0,"lowerReference":"AGL","upper":120,"upperReference":"AGL"}}}]}`
)

func ed269With(geometry string) string {
	return `{"features":[` + `{"identifier":"OK","restriction":"PROHIBITED","geometry":[` + ed269Circle + `]},` +
		`{"identifier":"Z1","restriction":"PROHIBITED","geometry":[` + geometry + `]}]}`
}

// TestMissingReferenceOrUnit: a limit whose vertical reference or unit is
// missing was read as AMSL metres without a word. By default it is refused,
// naming the feature (counted from 1, with its id) and the field; with
// Loader.Conservative it loads, with a warning at the same place, and reads
// as alarming at least where every possible reading alarms.
func TestMissingReferenceOrUnit(t *testing.T) {
	cases := []struct {
		name, src, field, msg string
		feature               int
		// heights inside the zone under the conservative reading, which
		// the old reading (AMSL metres) missed.
		alarm Heights
	}{
		{"ED-269 floor reference", ed269With(strings.Replace(ed269Circle, `"lowerVerticalReference":"AGL",`, ``, 1)),
			"geometry[0].lowerVerticalReference", "required with geometry[0].lowerLimit", 2, Heights{}.Set(AMSL, -10).Set(AGL, 60)},
		{"ED-269 ceiling reference", ed269With(strings.Replace(ed269Circle, `"upperVerticalReference":"AGL"`, `"upperVerticalReference":""`, 1)),
			"geometry[0].upperVerticalReference", "required with geometry[0].upperLimit", 2, Heights{}.Set(AMSL, 460).Set(AGL, 60)},
		{"ED-269 unit", ed269With(strings.Replace(ed269Circle, `"uomDimensions":"M",`, ``, 1)),
			"geometry[0].uomDimensions", "could be M, FT or FL", 2, Heights{}.Set(AGL, 3000)},
		{"ED-318 ceiling reference", strings.Replace(ed318Circle, `,"upperReference":"AGL"`, ``, 1),
			"geometry.layer.upperReference", "required with geometry.layer.upper", 1, Heights{}.Set(AMSL, 460).Set(AGL, 60)},
		{"ED-318 unit", strings.Replace(ed318Circle, `"uom":"m",`, ``, 1),
			"geometry.layer.uom", "could be m, ft or FL", 1, Heights{}.Set(AGL, 3000)},
		{"GeoJSON limit under Flight Blender's name", fc(okSquare, feature(`{"type":"Point","coordinates":[7,46]}`, `{"id":"Z1","radius_m":500,"upper_limit":120}`)),
			"properties.upper_limit", "has no vertical reference", 2, Heights{}.Set(AMSL, 460).Set(AGL, 60)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse(strings.NewReader(c.src))
			if err == nil {
				t.Fatal("loaded, want it refused")
			}
			if ps := problemsOf(t, err); !problemAt(ps, c.feature, c.field, c.msg) {
				t.Fatalf("no problem at feature %d, %s, containing %q:\n%v", c.feature, c.field, c.msg, err)
			}
			if !strings.Contains(err.Error(), `(id "Z1")`) {
				t.Errorf("error does not name the id: %v", err)
			}
			set, _, err := Loader{Conservative: true}.Parse(strings.NewReader(c.src))
			if err != nil {
				t.Fatalf("conservative load: %v", err)
			}
			if !problemAt(set.Report.Warnings, c.feature, c.field, "conservatively") {
				t.Errorf("no warning at feature %d, %s: %v", c.feature, c.field, set.Report.Warnings)
			}
			ix, err := NewIndex(set)
			if err != nil {
				t.Fatal(err)
			}
			p := Point{Lat: 46, Lon: 7, Heights: c.alarm}
			if got := "," + ids(ix.Query(p, nil)) + ","; !strings.Contains(got, ",Z1?,") && !strings.Contains(got, ",Z1,") {
				t.Errorf("at %+v: %q, want Z1", c.alarm, got)
			}
		})
	}
}

// TestConservativeUnit: a limit without its unit reads as the lowest floor
// and the highest ceiling it could mean in any of M, FT and FL.
func TestConservativeUnit(t *testing.T) {
	src := `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","geometry":[{"lowerLimit":50,"lowerVerticalReference":"AMSL","upperLimit":120,"upperVerticalReference":"AMSL",` +
		`"horizontalProjection":{"type":"Circle","center":[7,46],"radius":500}},{"lowerLimit":-20,"lowerVerticalReference":"AMSL","upperLimit":-10,"upperVerticalReference":"AMSL","horizontalProjection":{"type":"Circle","center":[8,46],"radius":500}}]}]}`
	set, _, err := Loader{Conservative: true}.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	v := set.Zones[0].Volumes
	for i, want := range [][2]float64{{50 * 0.3048, 120 * 30.48}, {-20 * 30.48, -10 * 0.3048}} {
		if math.Abs(v[i].Floor.M-want[0]) > 1e-9 || math.Abs(v[i].Ceiling.M-want[1]) > 1e-9 {
			t.Errorf("volume %d: floor %v ceiling %v, want %v", i, v[i].Floor.M, v[i].Ceiling.M, want)
		}
	}
}

// TestUnknownReferenceLimit checks the conservative vertical test against
// its definition: a limit in an unknown reference is met iff it would be
// met were it in some reference (AMSL, WGS84 or AGL) under the ordinary
// test, where an unknown height counts as met.
func TestUnknownReferenceLimit(t *testing.T) {
	heights := []Heights{
		{}, Heights{}.Set(AMSL, 50), Heights{}.Set(AMSL, 50).Set(WGS84, 100).Set(AGL, 10),
		Heights{}.Set(AMSL, 500).Set(WGS84, 550).Set(AGL, 300), Heights{}.Set(AMSL, -5).Set(WGS84, 40).Set(AGL, 0),
	}
	for _, h := range heights {
		for _, m := range []float64{0, 45, 120} {
			for _, isFloor := range []bool{true, false} {
				want := false
				for _, r := range []Ref{AMSL, WGS84, AGL} {
					v, known := h.Get(r)
					want = want || !known || (isFloor && v >= m) || (!isFloor && v <= m)
				}
				if got, _ := limitMet(RefUnknown, m, &h, isFloor, 0); got != want {
					t.Errorf("%+v, limit %v (floor %v): %v, want %v", h, m, isFloor, got, want)
				}
			}
		}
	}
}

// TestNumericStrings: InterUSS's Swiss ED-269 sample writes "lowerLimit":
// "0" and was refused whole; numbers written as strings now load with a
// warning naming the field, in every format.
func TestNumericStrings(t *testing.T) {
	set := load(t, "ed269/interuss_monitoring_cis_source_sample_ed269.json")
	z := set.Zones[0]
	if z.ID != "LSXX" || z.Category != Warning || *z.Volumes[0].Floor != (Limit{0, AGL}) || z.Volumes[0].Ceiling != nil || len(z.Windows) != 0 {
		t.Fatalf("LSXX: %+v, volume %+v", z, z.Volumes[0])
	}
	if !problemAt(set.Report.Warnings, 1, "geometry[0].lowerLimit", `a number written as a string ("0")`) {
		t.Errorf("warnings %v", set.Report.Warnings)
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(ix.Query(Point{Lat: 46.2155, Lon: 6.1685, Heights: Heights{}.Set(AGL, 30)}, nil)); got != "LSXX" {
		t.Errorf("inside LSXX: %q", got)
	}
	for name, c := range map[string]struct{ src, field string }{
		"GeoJSON": {fc(feature(`{"type":"Point","coordinates":[7,46]}`, `{"id":"Z1","radius_m":"500","ceiling_m":" 120.5 "}`)), "properties.ceiling_m"},
		"ED-318":  {strings.Replace(ed318Circle, `"upper":120`, `"upper":"120.5"`, 1), "geometry.layer.upper"},
		"ED-269":  {ed269With(strings.Replace(ed269Circle, `"upperLimit":120`, `"upperLimit":"120.5"`, 1)), "geometry[0].upperLimit"},
	} {
		set, _, err := Parse(strings.NewReader(c.src))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		last := set.Zones[len(set.Zones)-1]
		if last.Volumes[0].Ceiling.M != 120.5 || last.Volumes[0].Circle.RadiusM != 500 {
			t.Errorf("%s: %+v %+v", name, last.Volumes[0].Ceiling, last.Volumes[0].Circle)
		}
		if !problemAt(set.Report.Warnings, len(set.Zones), c.field, "a number written as a string") {
			t.Errorf("%s: warnings %v", name, set.Report.Warnings)
		}
	}
}

// TestBOM: a UTF-8 byte order mark gave "invalid character 'ï'".
func TestBOM(t *testing.T) {
	for _, rel := range []string{"airports.geojson", "ed269/nofly_uaszonelist_dailyperiod.json", "ed318/Example_GeoZone_Circle.json"} {
		b, err := os.ReadFile(filepath.Join(zonesDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), filepath.Base(rel))
		if err := os.WriteFile(path, append([]byte("\xef\xbb\xbf"), b...), 0o644); err != nil {
			t.Fatal(err)
		}
		want := load(t, rel)
		set, err := LoadFile(path)
		if err != nil || len(set.Zones) != len(want.Zones) || set.Version != want.Version {
			t.Errorf("%s with a BOM: %v", rel, err)
		}
		if f, err := Detect(append([]byte("\xef\xbb\xbf"), b...)); err != nil || f != want.Report.Format {
			t.Errorf("Detect(%s with a BOM) = %v, %v", rel, f, err)
		}
	}
}

// TestUnknownProperties: a GeoJSON property we do not know was ignored
// silently; it is now a warning naming feature and key, and an error when
// strict.
func TestUnknownProperties(t *testing.T) {
	src := fc(okSquare, feature(sq, `{"id":"X","celing_m":120,"floor_ref":"AGL","floor_m":0}`))
	set, _, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Report.Warnings) != 1 || !problemAt(set.Report.Warnings, 2, "properties.celing_m", "unknown property") {
		t.Errorf("warnings %v", set.Report.Warnings)
	}
	_, _, err = Loader{Strict: true}.Parse(strings.NewReader(src))
	if err == nil || !problemAt(problemsOf(t, err), 2, "properties.celing_m", "unknown property") {
		t.Errorf("strict: %v", err)
	}
}

// TestFlightBlenderSamples: Flight Blender's geofences (upper_limit,
// lower_limit, start_time, end_time, no id) loaded as zones from the ground
// to the sky, always active. Their names are mapped; their limits have no
// reference and their times no offset, so they are refused by default and
// load conservatively.
func TestFlightBlenderSamples(t *testing.T) {
	path := filepath.Join(zonesDir, "flightblender/postman_set_geo_fence.geojson")
	_, err := LoadFile(path)
	if err == nil {
		t.Fatal("loaded without references")
	}
	ps := problemsOf(t, err)
	if !problemAt(ps, 1, "properties.upper_limit", "no vertical reference") || !problemAt(ps, 1, "properties.lower_limit", "no vertical reference") ||
		!strings.HasPrefix(err.Error(), path+`: feature 1 (id "Main GF"): properties.`) {
		t.Fatalf("error:\n%v", err)
	}
	set, err := Loader{Conservative: true}.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	z := set.Zones[0]
	if z.ID != "Main GF" || *z.Volumes[0].Floor != (Limit{100, RefUnknown}) || *z.Volumes[0].Ceiling != (Limit{500, RefUnknown}) {
		t.Fatalf("zone %+v, volume %+v %+v", z, z.Volumes[0].Floor, z.Volumes[0].Ceiling)
	}
	for _, w := range []string{"properties.id", "properties.upper_limit", "properties.lower_limit"} {
		if !problemAt(set.Report.Warnings, 1, w, "") {
			t.Errorf("no warning at %s: %v", w, set.Report.Warnings)
		}
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	at := func(h Heights) string { return ids(ix.Query(Point{Lat: -1.97, Lon: 30.15, Heights: h}, nil)) }
	for _, c := range []struct {
		h    Heights
		want string
	}{
		{Heights{}.Set(AMSL, 300), "Main GF?"},                                 // AGL unknown: might be the reference
		{Heights{}.Set(AMSL, 50).Set(WGS84, 60).Set(AGL, 40), ""},              // below 100 in every reference
		{Heights{}.Set(AMSL, 1600).Set(WGS84, 1620).Set(AGL, 200), "Main GF?"}, // within 100–500 AGL
		{Heights{}.Set(AMSL, 1600).Set(WGS84, 1620).Set(AGL, 600), ""},         // above 500 in every reference
	} {
		if got := at(c.h); got != c.want {
			t.Errorf("at %+v: %q, want %q", c.h, got, c.want)
		}
	}

	timed := filepath.Join(zonesDir, "flightblender/test_set_geo_fence_with_start_end_time.geojson")
	_, err = LoadFile(timed)
	if err == nil || !problemAt(problemsOf(t, err), 1, "properties.start_time", "has no UTC offset") {
		t.Fatalf("times without offset: %v", err)
	}
	set, err = Loader{Conservative: true}.LoadFile(timed)
	if err != nil {
		t.Fatal(err)
	}
	z = set.Zones[0]
	if z.ID != "Geofence 1" || !z.ActiveFrom.Equal(utc("2023-03-07T02:48:41Z")) || !z.ActiveUntil.Equal(utc("2027-03-08T04:48:41Z")) {
		t.Errorf("zone %s active %v – %v, want the widest period the local times can mean", z.ID, z.ActiveFrom, z.ActiveUntil)
	}
}

// TestTimeOfDayWithoutOffset: an ED-269 schedule time without Z or an
// offset is refused, or read conservatively as every hour it could mean.
func TestTimeOfDayWithoutOffset(t *testing.T) {
	src := `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","applicability":[{"schedule":[{"day":["MON"],"startTime":"10:00","endTime":"12:00"}]}],"geometry":[` + ed269Circle + `]}]}`
	_, _, err := Parse(strings.NewReader(src))
	if err == nil || !problemAt(problemsOf(t, err), 1, "applicability[0].schedule[0].startTime", "has no UTC offset") {
		t.Fatalf("refusal: %v", err)
	}
	set, _, err := Loader{Conservative: true}.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	// Monday 10:00–12:00 at any offset: Sunday 20:00Z to Tuesday 00:00Z.
	if w := set.Zones[0].Windows[0].Weekly; len(w) != 2 || w[0] != (WeeklyInterval{6*86400 + 20*3600, week}) || w[1] != (WeeklyInterval{0, 86400}) {
		t.Errorf("weekly %v", w)
	}
}

// TestLoadReport: every load says how many zones it loaded and dropped, by
// reason, and warns when none remain or when every window of a zone has
// passed (such a zone is kept: a replay of past telemetry needs it).
func TestLoadReport(t *testing.T) {
	set, err := Loader{Now: utc("2026-12-02T10:00:00Z")}.LoadFile(filepath.Join(zonesDir, "ed269/interuss_uas_standards_test_eurocae_ed269.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := set.Report
	if r.Zones != 5 || len(r.Dropped) != 1 || r.Dropped[0] != (Drop{Feature: 5, ID: "Gantrisch Nature Park", Reason: DropNoRestriction}) || r.Format != FormatED269 {
		t.Errorf("report %+v", r)
	}
	if !problemAt(r.Warnings, 1, "applicability", "every active window of the zone has passed") || len(r.Warnings) != 2 {
		t.Errorf("warnings %v", r.Warnings)
	}
	want := "../testdata/zones/ed269/interuss_uas_standards_test_eurocae_ed269.json (ed269): 5 zones loaded, 1 dropped (NO_RESTRICTION 1), 2 warnings"
	if r.Summary() != want {
		t.Errorf("summary %q, want %q", r.Summary(), want)
	}
	if _, ok := findZone(set, "Montreux Concert Area"); !ok {
		t.Error("a zone whose windows have passed was dropped")
	}
	early, _ := Loader{Now: utc("2022-01-01T00:00:00Z")}.LoadFile(filepath.Join(zonesDir, "ed269/interuss_uas_standards_test_eurocae_ed269.json"))
	if len(early.Report.Warnings) != 0 {
		t.Errorf("warnings before the windows end: %v", early.Report.Warnings)
	}

	past := fc(feature(sq, `{"id":"TFR","active_until":"2026-01-01T00:00:00Z"}`))
	set, _, err = Loader{Now: utc("2026-12-02T10:00:00Z")}.Parse(strings.NewReader(past))
	if err != nil || len(set.Zones) != 1 || !problemAt(set.Report.Warnings, 1, "properties.active_until", "has passed (the last ended 2026-01-01T00:00:00Z)") {
		t.Errorf("past GeoJSON zone: %v %+v", err, set.Report)
	}

	for name, src := range map[string]string{
		"empty collection":    `{"type":"FeatureCollection","features":[]}`,
		"only NO_RESTRICTION": `{"features":[{"identifier":"N","restriction":"NO_RESTRICTION","geometry":[` + ed269Circle + `]}]}`,
	} {
		set, _, err := Parse(strings.NewReader(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if set.Report.Zones != 0 || !problemAt(set.Report.Warnings, 0, "", "no zone loaded") {
			t.Errorf("%s: %+v", name, set.Report)
		}
	}
}

func findZone(set *ZoneSet, id string) (*Zone, bool) {
	for _, z := range set.Zones {
		if z.ID == id {
			return z, true
		}
	}
	return nil, false
}

// TestAliasWithReference: a Flight Blender limit given a reference loads
// by default, in that reference; W84 (ASTM's and InterUSS's name) is WGS84.
func TestAliasWithReference(t *testing.T) {
	src := fc(feature(sq, `{"name":"FB","upper_limit":120,"ceiling_ref":"W84","lower_limit":"10","floor_ref":"AGL","start_time":"2026-12-02T10:00:00+01:00"}`))
	set, _, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	z := set.Zones[0]
	if z.ID != "FB" || *z.Volumes[0].Ceiling != (Limit{120, WGS84}) || *z.Volumes[0].Floor != (Limit{10, AGL}) || !z.ActiveFrom.Equal(utc("2026-12-02T09:00:00Z")) {
		t.Errorf("zone %+v: %+v %+v", z, z.Volumes[0].Floor, z.Volumes[0].Ceiling)
	}
	if !problemAt(set.Report.Warnings, 1, "properties.lower_limit", "a number written as a string") {
		t.Errorf("warnings %v", set.Report.Warnings)
	}
}
