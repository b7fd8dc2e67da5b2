package geofence

import (
	"strings"
	"testing"
	"time"
)

const squareZone = `{"type":"FeatureCollection","features":[
 {"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]},
  "properties":{"id":"SQ","name":"square","category":"restricted","floor_m":0,"ceiling_m":120,"floor_ref":"AGL","ceiling_ref":"AGL","clear_buffer_m":50}},
 {"type":"Feature","geometry":{"type":"Point","coordinates":[10,10]},
  "properties":{"id":"CI","category":"warning","radius_m":1000,"active_from":"2026-01-01T00:00:00Z","active_until":"2026-02-01T00:00:00Z"}}]}`

func mustIndex(t testing.TB, src string) *Index {
	t.Helper()
	set, err := ParseGeoJSON(strings.NewReader(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatalf("index: %v", err)
	}
	return ix
}

func ids(hits []Hit) string {
	var s []string
	for _, h := range hits {
		id := h.Zone.ID
		if h.HeightAssumed {
			id += "?"
		}
		s = append(s, id)
	}
	return strings.Join(s, ",")
}

func TestQueryBasics(t *testing.T) {
	ix := mustIndex(t, squareZone)
	jan := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	agl := func(v float64) Heights { return Heights{}.Set(AGL, v) }
	cases := []struct {
		name string
		p    Point
		want string
	}{
		{"inside, AGL known", Point{Lat: 0.5, Lon: 0.5, Heights: agl(100)}, "SQ"},
		{"inside, ceiling inclusive", Point{Lat: 0.5, Lon: 0.5, Heights: agl(120)}, "SQ"},
		{"above ceiling", Point{Lat: 0.5, Lon: 0.5, Heights: agl(120.5)}, ""},
		{"below floor", Point{Lat: 0.5, Lon: 0.5, Heights: agl(-1)}, ""},
		{"no AGL: assumed", Point{Lat: 0.5, Lon: 0.5, Heights: Heights{}.Set(AMSL, 5000)}, "SQ?"},
		{"outside", Point{Lat: 1.5, Lon: 0.5}, ""},
		{"circle active", Point{Lat: 10, Lon: 10.005, Time: jan}, "CI"},
		{"circle until exclusive", Point{Lat: 10, Lon: 10.005, Time: feb}, ""},
		{"circle outside radius", Point{Lat: 10, Lon: 10.02, Time: jan}, ""},
	}
	for _, c := range cases {
		if got := ids(ix.Query(c.p, nil)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
