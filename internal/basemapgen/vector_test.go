package basemapgen

import (
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"
)

// TestVectorTiles: a feature goes into every tile it touches at the zooms
// it is drawn at and no other, clipped to the tile, with its properties.
func TestVectorTiles(t *testing.T) {
	road := geojson.NewFeature(orb.LineString{{-0.5, 51.45}, {-0.4, 51.47}})
	road.Properties = map[string]any{"kind": "major_road", "name": "Bath Road"}
	lake := geojson.NewFeature(orb.Polygon{{{-0.48, 51.44}, {-0.47, 51.44}, {-0.47, 51.445}, {-0.48, 51.445}, {-0.48, 51.44}}})
	lake.Properties = map[string]any{"kind": "water"}
	tiles, err := VectorTiles([]Feature{
		{Layer: "roads", MinZoom: 10, MaxZoom: 12, Feature: road},
		{Layer: "water", MinZoom: 12, MaxZoom: 12, Feature: lake},
	}, 10, 12)
	if err != nil {
		t.Fatal(err)
	}
	perZoom := map[uint8]int{}
	sawLake := false
	for _, tl := range tiles {
		perZoom[tl.Z]++
		layers, err := mvt.UnmarshalGzipped(tl.Data)
		if err != nil {
			t.Fatalf("tile %d/%d/%d: %v", tl.Z, tl.X, tl.Y, err)
		}
		for _, l := range layers {
			if l.Name == "water" {
				sawLake = true
				if tl.Z != 12 {
					t.Errorf("water at zoom %d, drawn only at 12", tl.Z)
				}
			}
			for _, f := range l.Features {
				b := f.Geometry.Bound()
				if b.Min[0] < -64 || b.Min[1] < -64 || b.Max[0] > 4096+64 || b.Max[1] > 4096+64 {
					t.Errorf("%s in tile %d/%d/%d not clipped: %v", l.Name, tl.Z, tl.X, tl.Y, b)
				}
			}
			if l.Name == "roads" && (len(l.Features) != 1 || l.Features[0].Properties["name"] != "Bath Road") {
				t.Errorf("roads in %d/%d/%d: %+v", tl.Z, tl.X, tl.Y, l.Features)
			}
		}
	}
	// The road's box is one tile at zooms 10 and 11 and 2×2 at 12, where
	// the corner it does not cross clips empty and is left out (the lake
	// is inside the road's tiles).
	if want := map[uint8]int{10: 1, 11: 1, 12: 3}; len(perZoom) != 3 || perZoom[10] != want[10] || perZoom[11] != want[11] || perZoom[12] != want[12] {
		t.Errorf("tiles per zoom %v, want %v", perZoom, want)
	}
	if !sawLake {
		t.Error("the lake is in no tile")
	}
}
