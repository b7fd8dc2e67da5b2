// Package basemapgen makes the vector tiles of a base map archive
// (internal/pmtiles): cmd/basemap's OpenStreetMap extract and the archives
// tests draw. It is apart from pmtiles so the alerter, which only reads
// archive headers, links no tile encoder.
package basemapgen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"
	"github.com/paulmach/orb/simplify"

	"github.com/nofly-dev/nofly/internal/pmtiles"
)

// Feature is one feature of a vector archive: its layer, the zooms it is
// drawn at and the GeoJSON feature (WGS 84).
type Feature struct {
	Layer            string
	MinZoom, MaxZoom maptile.Zoom
	*geojson.Feature
}

// VectorTiles cuts features into Mapbox Vector Tiles (gzipped, extent
// 4096, clipped with a buffer so lines and fills join across tile edges),
// one tile for every z/x/y from minZ to maxZ that some feature touches.
func VectorTiles(features []Feature, minZ, maxZ maptile.Zoom) ([]pmtiles.Tile, error) {
	var out []pmtiles.Tile
	for z := minZ; z <= maxZ; z++ {
		// Which features each tile holds, from each feature's bound.
		byTile := map[maptile.Tile][]int{}
		for i, f := range features {
			if z < f.MinZoom || z > f.MaxZoom || f.Geometry == nil {
				continue
			}
			b := f.Geometry.Bound()
			lo, hi := maptile.At(orb.Point{b.Min[0], b.Max[1]}, z), maptile.At(orb.Point{b.Max[0], b.Min[1]}, z)
			if int(hi.X-lo.X+1)*int(hi.Y-lo.Y+1) > 1<<16 {
				return nil, fmt.Errorf("pmtiles: a %s feature covers %d×%d tiles at zoom %d: too large for this writer",
					f.Layer, hi.X-lo.X+1, hi.Y-lo.Y+1, z)
			}
			for x := lo.X; x <= hi.X; x++ {
				for y := lo.Y; y <= hi.Y; y++ {
					t := maptile.New(x, y, z)
					byTile[t] = append(byTile[t], i)
				}
			}
		}
		keys := slices.SortedFunc(maps.Keys(byTile), func(a, b maptile.Tile) int {
			return cmp.Compare(pmtiles.TileID(uint8(a.Z), a.X, a.Y), pmtiles.TileID(uint8(b.Z), b.X, b.Y))
		})
		for _, t := range keys {
			data, err := encodeTile(t, features, byTile[t])
			if err != nil {
				return nil, err
			}
			if data != nil {
				out = append(out, pmtiles.Tile{Z: uint8(t.Z), X: t.X, Y: t.Y, Data: data})
			}
		}
	}
	return out, nil
}

// encodeTile is tile t of features[idx], nil when clipping left nothing.
func encodeTile(t maptile.Tile, features []Feature, idx []int) ([]byte, error) {
	fcs := map[string]*geojson.FeatureCollection{}
	for _, i := range idx {
		f := features[i]
		fc := fcs[f.Layer]
		if fc == nil {
			fc = geojson.NewFeatureCollection()
			fcs[f.Layer] = fc
		}
		g := geojson.NewFeature(orb.Clone(f.Geometry))
		g.Properties = f.Properties
		fc.Append(g)
	}
	// Layers in name order: the same features make the same bytes, so a
	// regenerated archive is the committed one.
	var layers mvt.Layers
	for _, name := range slices.Sorted(maps.Keys(fcs)) {
		layers = append(layers, mvt.NewLayer(name, fcs[name]))
	}
	layers.ProjectToTile(t)
	// 64 units of 4096 past each edge: a stroke's width, so no seam shows.
	layers.Clip(orb.Bound{Min: orb.Point{-64, -64}, Max: orb.Point{4096 + 64, 4096 + 64}})
	layers.Simplify(simplify.DouglasPeucker(1.0))
	layers.RemoveEmpty(1.0, 1.0)
	n := 0
	for _, l := range layers {
		n += len(l.Features)
	}
	if n == 0 {
		return nil, nil
	}
	b, err := mvt.MarshalGzipped(layers)
	if err != nil {
		return nil, fmt.Errorf("pmtiles: tile %d/%d/%d: %w", t.Z, t.X, t.Y, err)
	}
	return b, nil
}
