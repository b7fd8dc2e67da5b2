package geofence

import (
	"math"
	"strings"
	"testing"
)

func TestDistanceM(t *testing.T) {
	set, _, err := Parse(strings.NewReader(`{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"SQ","category":"restricted","floor_m":100},"geometry":{"type":"Polygon","coordinates":[[[0,0],[0.01,0],[0.01,0.01],[0,0.01],[0,0]]]}},
{"type":"Feature","properties":{"id":"C","category":"restricted","radius_m":200},"geometry":{"type":"Point","coordinates":[1,0]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	m := earthRadius * math.Pi / 180 // metres per degree
	tests := []struct {
		zone     string
		lat, lon float64
		want     float64 // metres; -1: unknown zone
	}{
		{"SQ", 0.005, 0.005, 0},          // inside (the floor does not count)
		{"SQ", 0.005, 0.011, 0.001 * m},  // east of the square
		{"SQ", -0.002, 0.005, 0.002 * m}, // south
		{"C", 0, 1, 0},
		{"C", 0, 1.01, 0.01*m - 200},
		{"nope", 0, 0, -1},
	}
	for _, tc := range tests {
		d, ok := ix.DistanceM(tc.zone, Point{Lat: tc.lat, Lon: tc.lon})
		if tc.want < 0 {
			if ok {
				t.Errorf("%s: known, want unknown", tc.zone)
			}
			continue
		}
		if !ok || math.Abs(d-tc.want) > 0.5 {
			t.Errorf("%s at %v,%v: %v %v, want %v", tc.zone, tc.lat, tc.lon, d, ok, tc.want)
		}
	}
}
