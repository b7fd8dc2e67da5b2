package geofence

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paulmach/orb"
)

// fc wraps features into a FeatureCollection.
func fc(features ...string) string {
	return `{"type":"FeatureCollection","features":[` + strings.Join(features, ",") + `]}`
}

const okSquare = `{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]},"properties":{"id":"OK"}}`

func feature(geom, props string) string {
	return `{"type":"Feature","geometry":` + geom + `,"properties":` + props + `}`
}

const sq = `{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}`

// TestGeoJSONValidation: one row per rule; each names the feature (the
// second, counted from 1), id and field, and the set is rejected whole (the
// valid first feature does not load on its own).
func TestGeoJSONValidation(t *testing.T) {
	cases := []struct {
		name, feature, field, msg string
	}{
		{"ring too short", feature(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]", "at least 4 positions"},
		{"degenerate ring", feature(`{"type":"Polygon","coordinates":[[[0,0],[0,0],[0,0],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]", "degenerate"},
		{"collinear ring", feature(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[2,0],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]", "intersects itself"},
		{"ring not closed", feature(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}`, `{"id":"X"}`), "geometry.coordinates[0]", "not closed"},
		{"latitude out of range", feature(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,91],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0][2]", "latitude 91 out of range"},
		{"longitude out of range", feature(`{"type":"Point","coordinates":[181,0]}`, `{"id":"X","radius_m":10}`), "geometry.coordinates", "longitude 181 out of range"},
		{"position with one number", feature(`{"type":"Polygon","coordinates":[[[0,0],[1],[1,1],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0][1]", "2 or 3 numbers"},
		{"radius zero", feature(`{"type":"Point","coordinates":[0,0]}`, `{"id":"X","radius_m":0}`), "properties.radius_m", "must be a number > 0"},
		{"radius negative", feature(`{"type":"Point","coordinates":[0,0]}`, `{"id":"X","radius_m":-5}`), "properties.radius_m", "must be a number > 0"},
		{"radius missing", feature(`{"type":"Point","coordinates":[0,0]}`, `{"id":"X"}`), "properties.radius_m", "required"},
		{"radius on a polygon", feature(sq, `{"id":"X","radius_m":5}`), "properties.radius_m", "only allowed with a Point"},
		{"floor not below ceiling", feature(sq, `{"id":"X","floor_m":500,"ceiling_m":300}`), "properties.floor_m", "must be below properties.ceiling_m"},
		{"floor equal to ceiling", feature(sq, `{"id":"X","floor_m":300,"ceiling_m":300}`), "properties.floor_m", "must be below"},
		{"bad reference", feature(sq, `{"id":"X","floor_m":0,"floor_ref":"QNH"}`), "properties.floor_ref", "must be AMSL, AGL or WGS84"},
		{"self-intersecting ring", feature(`{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]",
			"ring intersects itself: in ring 0, the edge from position 0 to 1 crosses the edge from position 2 to 3 at (lon 0.5, lat 0.5)"},
		{"self-intersecting hole", feature(`{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[2,2],[2,1],[1,2],[1,1]]]}`, `{"id":"X"}`), "geometry.coordinates[1]",
			"in ring 1, the edge from position 0 to 1 crosses the edge from position 2 to 3 at (lon 1.5, lat 1.5)"},
		{"spike", feature(`{"type":"Polygon","coordinates":[[[0,0],[2,0],[1,0],[1,1],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]",
			"the edge from position 0 to 1 folds back onto the edge from position 1 to 2 at (lon 2, lat 0)"},
		{"touching ring", feature(`{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[2,0],[0,4],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]",
			"the edge from position 0 to 1 touches the edge from position 2 to 3 at (lon 2, lat 0)"},
		{"crossing with repeated positions", feature(`{"type":"Polygon","coordinates":[[[0,0],[0,0],[1,1],[1,0],[1,0],[0,1],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]",
			"the edge from position 1 to 2 crosses the edge from position 4 to 5 at (lon 0.5, lat 0.5)"},
		{"crossing across the antimeridian", feature(`{"type":"Polygon","coordinates":[[[179,0],[-179,1],[-179,0],[179,1],[179,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]",
			"crosses the edge from position 2 to 3 at (lon -180, lat 0.5)"},
		{"missing id", feature(sq, `{"name":"no id"}`), "properties.id", "required"},
		{"duplicate id", feature(sq, `{"id":"OK"}`), "properties.id", "duplicate id, first used by feature 1"},
		{"unknown category", feature(sq, `{"id":"X","category":"forbidden"}`), "properties.category", `not "forbidden"`},
		{"bad active_from", feature(sq, `{"id":"X","active_from":"tomorrow"}`), "properties.active_from", "RFC 3339"},
		{"empty time window", feature(sq, `{"id":"X","active_from":"2026-01-02T00:00:00Z","active_until":"2026-01-01T00:00:00Z"}`), "properties.active_from", "must be before"},
		{"negative buffer", feature(sq, `{"id":"X","clear_buffer_m":-1}`), "properties.clear_buffer_m", ">= 0"},
		{"string not a number", feature(sq, `{"id":"X","ceiling_m":"120 m"}`), "properties.ceiling_m", "must be a number"},
		{"string NaN", feature(sq, `{"id":"X","ceiling_m":"NaN"}`), "properties.ceiling_m", "must be a number"},
		{"unknown property, strict", feature(sq, `{"id":"X","celing_m":120}`), "properties.celing_m", "unknown property"},
		{"alias and ours", feature(sq, `{"id":"X","ceiling_m":120,"upper_limit":100}`), "properties.upper_limit", "which one holds"},
		{"alias without reference", feature(sq, `{"id":"X","upper_limit":120}`), "properties.upper_limit", "has no vertical reference"},
		{"time without offset", feature(sq, `{"id":"X","active_from":"2026-12-02T10:00:00"}`), "properties.active_from", "has no UTC offset"},
		{"no geometry", feature(`null`, `{"id":"X"}`), "geometry", "required"},
		{"line string", feature(`{"type":"LineString","coordinates":[[0,0],[1,1]]}`, `{"id":"X"}`), "geometry.type", "must be Polygon, MultiPolygon or Point"},
		{"multipolygon ring", feature(`{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,1],[0,0]]],[[[5,5],[6,5],[5,5]]]]}`, `{"id":"X"}`), "geometry.coordinates[1][0]", "at least 4"},
		{"winds twice", feature(`{"type":"Polygon","coordinates":[[[0,80],[90,80],[180,80],[-90,80],[0,81],[90,81],[180,81],[-90,81],[0,80]]]}`, `{"id":"X"}`), "geometry.coordinates[0]", "more than once"},
		{"two poles", feature(`{"type":"Polygon","coordinates":[[[0,0],[120,0],[-120,0],[0,0]]]}`, `{"id":"X"}`), "geometry.coordinates[0]", "cannot tell which pole"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, _, err := Loader{Strict: true}.Parse(strings.NewReader(fc(okSquare, c.feature)))
			if set != nil || err == nil {
				t.Fatalf("loaded %d zones, want the whole set rejected", len(set.Zones))
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v is not a *ValidationError", err, err)
			}
			for _, p := range ve.Problems {
				if p.Feature == 2 && p.Field == c.field && strings.Contains(p.Msg, c.msg) {
					return
				}
			}
			t.Fatalf("no problem at feature 2, field %s, containing %q; got:\n%v", c.field, c.msg, err)
		})
	}
}

func TestErrorNamesFileFeatureAndField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zones.geojson")
	src := fc(okSquare, feature(sq, `{"id":"A"}`), feature(sq, `{"id":"B"}`),
		feature(sq, `{"id":"EGLL-CTR","floor_m":500,"ceiling_m":300}`), feature(`{"type":"Point","coordinates":[0,0]}`, `{"id":"C","radius_m":-1}`))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	if err == nil {
		t.Fatal("loaded")
	}
	// The path as given (not its base name), features counted from 1 as
	// telemetry lines are.
	lines := strings.Split(err.Error(), "\n")
	want0 := path + `: feature 4 (id "EGLL-CTR"): properties.floor_m: must be below properties.ceiling_m`
	if len(lines) != 2 || !strings.HasPrefix(lines[0], want0) || !strings.HasPrefix(lines[1], path+`: feature 5 (id "C"): properties.radius_m:`) {
		t.Fatalf("error:\n%v\nwant two problems, the first starting %q", err, want0)
	}
}

func TestFileLevelErrors(t *testing.T) {
	for name, src := range map[string]string{
		"not JSON":              `{"type":"FeatureCollection",`,
		"not a collection":      `{"type":"Feature"}`,
		"features not an array": `{"type":"FeatureCollection","features":{}}`,
		"feature not an object": `{"type":"FeatureCollection","features":[42]}`,
		"no features member":    `{"type":"FeatureCollection","feature":[]}`,
	} {
		if set, err := ParseGeoJSON(strings.NewReader(src)); err == nil || set != nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, %v", name, set, err)
		}
	}
	set, err := ParseGeoJSON(strings.NewReader(`{"type":"FeatureCollection","features":[]}`))
	if err != nil || len(set.Zones) != 0 {
		t.Errorf("empty collection: %v, %v", set, err)
	}
}

// TestValidateInCode: zones built in code get the same rules, including
// the ones JSON cannot express (NaN, infinities).
func TestValidateInCode(t *testing.T) {
	sqr := orb.MultiPolygon{{{{0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 0}}}}
	nan := math.NaN()
	cases := []struct {
		name  string
		z     Zone
		field string
	}{
		{"NaN vertex", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Area: orb.MultiPolygon{{{{0, 0}, {nan, 0}, {1, 1}, {0, 0}}}}}}}, "Volumes[0].Area[0][0][1]"},
		{"Inf radius", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Circle: &Circle{RadiusM: math.Inf(1)}}}}, "Volumes[0].Circle.RadiusM"},
		{"NaN centre", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Circle: &Circle{Center: orb.Point{0, nan}, RadiusM: 1}}}}, "Volumes[0].Circle.Center"},
		{"NaN floor", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Area: sqr, Floor: &Limit{M: nan}}}}, "Volumes[0].Floor"},
		{"NaN buffer", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Area: sqr}}, ClearBufferM: nan}, "ClearBufferM"},
		{"no volume", Zone{ID: "a", Category: Restricted}, "geometry"},
		{"circle and area", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Area: sqr, Circle: &Circle{RadiusM: 1}}}}, "Volumes[0].Circle.RadiusM"},
		{"bad weekly", Zone{ID: "a", Category: Restricted, Volumes: []Volume{{Area: sqr}}, Windows: []Window{{Weekly: []WeeklyInterval{{5, 5}}}}}, "applicability[0]"},
	}
	for _, c := range cases {
		z := c.z
		set := &ZoneSet{Zones: []*Zone{&z}}
		err := set.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if ve.Problems[0].Field != c.field {
			t.Errorf("%s: %v, want field %s", c.name, err, c.field)
		}
		if _, err := NewIndex(set); err == nil {
			t.Errorf("%s: NewIndex accepted it", c.name)
		}
	}
	dup := &ZoneSet{Zones: []*Zone{{ID: "a", Category: Restricted, Volumes: []Volume{{Area: sqr}}}, {ID: "a", Category: Warning, Volumes: []Volume{{Area: sqr}}}}}
	if err := dup.Validate(); err == nil || !strings.Contains(err.Error(), "duplicate id") {
		t.Errorf("duplicate ids: %v", err)
	}
}

func TestED269Validation(t *testing.T) {
	zone := func(restriction, geometry string) string {
		return `{"features":[{"identifier":"Z1","restriction":"` + restriction + `","geometry":[` + geometry + `]}]}`
	}
	circle := `{"uomDimensions":"M","lowerLimit":0,"lowerVerticalReference":"AGL","upperLimit":120,"upperVerticalReference":"AGL","horizontalProjection":{"type":"Circle","center":[7,46],"radius":500}}`
	cases := []struct{ name, src, field, msg string }{
		{"restriction", zone("FORBIDDEN", circle), "restriction", "must be PROHIBITED"},
		{"unit", zone("PROHIBITED", strings.Replace(circle, `"M"`, `"KM"`, 1)), "geometry[0].uomDimensions", "must be M, FT or FL"},
		{"reference", zone("PROHIBITED", strings.Replace(circle, `"lowerVerticalReference":"AGL"`, `"lowerVerticalReference":"QFE"`, 1)), "geometry[0].lowerVerticalReference", "must be AGL, AMSL, WGS84 or STD"},
		{"radius", zone("PROHIBITED", strings.Replace(circle, `"radius":500`, `"radius":-1`, 1)), "geometry[0].horizontalProjection.radius", "> 0"},
		{"floor above ceiling", zone("PROHIBITED", strings.Replace(circle, `"lowerLimit":0`, `"lowerLimit":200`, 1)), "geometry[0].lowerLimit", "must be below geometry[0].upperLimit"},
		{"projection", zone("PROHIBITED", `{"horizontalProjection":{"type":"Square"}}`), "geometry[0].horizontalProjection.type", "must be Polygon"},
		{"no projection", zone("PROHIBITED", `{"lowerLimit":0}`), "geometry[0].horizontalProjection", "required"},
		{"ring", zone("PROHIBITED", `{"horizontalProjection":{"type":"Polygon","coordinates":[[[7,46],[7.1,46],[7,46]]]}}`), "geometry[0].horizontalProjection.coordinates[0]", "at least 4"},
		{"day", `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","applicability":[{"schedule":[{"day":["FUNDAY"]}]}],"geometry":[` + circle + `]}]}`, "applicability[0].schedule[0].day", "MON..SUN"},
		{"time of day", `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","applicability":[{"schedule":[{"day":["MON"],"startTime":"25:00Z"}]}],"geometry":[` + circle + `]}]}`, "applicability[0].schedule[0].startTime", "time of day"},
		{"start date", `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","applicability":[{"startDateTime":"soon"}],"geometry":[` + circle + `]}]}`, "applicability[0].startDateTime", "RFC 3339"},
		{"duplicate", `{"features":[{"identifier":"Z1","restriction":"PROHIBITED","geometry":[` + circle + `]},{"identifier":"Z1","restriction":"PROHIBITED","geometry":[` + circle + `]}]}`, "identifier", "duplicate id"},
		{"no list", `{"title":"nothing"}`, "", "no zone list found"},
	}
	for _, c := range cases {
		set, err := ParseED269(strings.NewReader(c.src))
		var ve *ValidationError
		if set != nil || !errors.As(err, &ve) {
			t.Errorf("%s: %v %v", c.name, set, err)
			continue
		}
		found := false
		for _, p := range ve.Problems {
			found = found || (p.Field == c.field && strings.Contains(p.Msg, c.msg))
		}
		if !found {
			t.Errorf("%s: want %s: %q, got\n%v", c.name, c.field, c.msg, err)
		}
	}
}

func TestED318Validation(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(zonesDir, "ed318/Example_GeoZone_Circle.json"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	cases := []struct{ name, src, field string }{
		{"no extent", strings.Replace(good, `"extent"`, `"extend"`, 1), "geometry.extent"},
		{"bad uom", strings.Replace(good, `"uom": "m"`, `"uom": "furlong"`, 1), "geometry.layer.uom"},
		{"bad type", strings.Replace(good, `"type": "PROHIBITED"`, `"type": "MAYBE"`, 1), "properties.type"},
		{"layer inverted", strings.Replace(good, `"lower": 50`, `"lower": 500`, 1), "geometry.layer.lower"},
		{"issued", strings.Replace(good, `"issued": "2018-12-01T15:59:59Z"`, `"issued": "yesterday"`, 1), "metadata.issued"},
	}
	for _, c := range cases {
		if c.src == good {
			t.Fatalf("%s: replacement did not apply", c.name)
		}
		set, err := ParseED318(strings.NewReader(c.src))
		var ve *ValidationError
		if set != nil || !errors.As(err, &ve) {
			t.Errorf("%s: %v %v", c.name, set, err)
			continue
		}
		found := false
		for _, p := range ve.Problems {
			found = found || p.Field == c.field
		}
		if !found {
			t.Errorf("%s: want a problem at %s, got\n%v", c.name, c.field, err)
		}
	}
}

// TestSelfIntersectionLargeRings exercises the sweep used for rings of more
// than 64 edges.
func TestSelfIntersectionLargeRings(t *testing.T) {
	circle := func(n int) orb.Ring {
		r := make(orb.Ring, 0, n+1)
		for i := 0; i < n; i++ {
			a := 2 * math.Pi * float64(i) / float64(n)
			r = append(r, orb.Point{math.Cos(a), math.Sin(a)})
		}
		return append(r, r[0])
	}
	good := circle(200)
	if ringSelfIntersects(good) {
		t.Fatal("a 200-gon intersects itself")
	}
	bad := circle(200)
	bad[50], bad[150] = bad[150], bad[50] // two chords across the middle
	if !ringSelfIntersects(bad) {
		t.Fatal("a twisted 200-gon does not intersect itself")
	}
	touch := circle(200)
	touch[100] = touch[10] // a vertex touching another: not simple
	if !ringSelfIntersects(touch) {
		t.Fatal("a 200-gon touching itself at a vertex passes")
	}
}
