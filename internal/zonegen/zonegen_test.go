package zonegen

import (
	"bytes"
	"math"
	"testing"

	"github.com/nofly-dev/nofly/geofence"
)

// TestSetsLoad: each generator's set loads whole with the API's strict
// loader, in its format, with exactly the zones asked for and no warning;
// the same seed gives the same bytes and another seed others; the shapes
// are what the generator promises.
func TestSetsLoad(t *testing.T) {
	cases := []struct {
		name   string
		gen    func(seed uint64, n int) *Set
		n      int
		format geofence.Format
		check  func(t *testing.T, set *geofence.ZoneSet)
	}{
		{"faa grid", FAAGrid, 2000, geofence.FormatGeoJSON, checkGrid},
		{"faa grid, one cell", FAAGrid, 1, geofence.FormatGeoJSON, nil},
		{"ed269", ED269, 2000, geofence.FormatED269, checkED269},
		{"ed269, one zone", ED269, 1, geofence.FormatED269, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.gen(7, tc.n)
			if s.Zones != tc.n || s.Format != string(tc.format) || len(s.Sites) == 0 {
				t.Fatalf("set: %d zones, format %q, %d sites; want %d zones, %q", s.Zones, s.Format, len(s.Sites), tc.n, tc.format)
			}
			if again := tc.gen(7, tc.n); !bytes.Equal(again.Doc, s.Doc) {
				t.Error("the same seed gave different documents")
			}
			if other := tc.gen(8, tc.n); bytes.Equal(other.Doc, s.Doc) {
				t.Error("seeds 7 and 8 gave the same document")
			}
			set, format, err := geofence.Loader{Strict: true}.Parse(bytes.NewReader(s.Doc))
			if err != nil {
				t.Fatal(err)
			}
			if format != tc.format || len(set.Zones) != tc.n || len(set.Report.Warnings) > 0 {
				t.Fatalf("loaded as %s: %d zones, warnings %v; want %s, %d zones, none", format, len(set.Zones), set.Report.Warnings, tc.format, tc.n)
			}
			if _, err := geofence.NewIndex(set); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, set)
			}
			for _, p := range s.Positions(1, 100) {
				if math.IsNaN(p[0]) || p[1] < -90 || p[1] > 90 {
					t.Fatalf("position %v", p)
				}
			}
		})
	}
}

// checkGrid: every cell a 30"×30" square with a facility-map floor (0 to
// 400 ft AGL) and no ceiling, and all six values present.
func checkGrid(t *testing.T, set *geofence.ZoneSet) {
	floors := map[float64]int{}
	for _, z := range set.Zones {
		v := z.Volumes[0]
		b := v.Area.Bound()
		if w, h := b.Max[0]-b.Min[0], b.Max[1]-b.Min[1]; math.Abs(w-cell) > 2e-6 || math.Abs(h-cell) > 2e-6 || len(v.Area[0][0]) != 5 {
			t.Fatalf("zone %s: %g×%g° with %d positions, want a 30\" square", z.ID, w, h, len(v.Area[0][0]))
		}
		if v.Ceiling != nil {
			t.Fatalf("zone %s has a ceiling", z.ID)
		}
		ft := 0.0
		if v.Floor != nil {
			if v.Floor.Ref != geofence.AGL {
				t.Fatalf("zone %s: floor %v, want AGL", z.ID, v.Floor)
			}
			ft = math.Round(v.Floor.M / ftToM)
		}
		floors[ft]++
	}
	for _, ft := range []float64{0, 50, 100, 200, 300, 400} {
		if floors[ft] == 0 {
			t.Errorf("no cell at %g ft (%v)", ft, floors)
		}
	}
}

// checkED269: circles and polygons both, limits in both units' values,
// some zones with windows and most without.
func checkED269(t *testing.T, set *geofence.ZoneSet) {
	var circles, polys, windowed int
	for _, z := range set.Zones {
		if z.Volumes[0].Circle != nil {
			circles++
		} else {
			polys++
		}
		if len(z.Windows) > 0 {
			windowed++
		}
	}
	n := len(set.Zones)
	if circles < n/4 || polys < n/4 || windowed < n/20 || windowed > n/4 {
		t.Errorf("%d circles, %d polygons, %d with windows of %d zones", circles, polys, windowed, n)
	}
}
