package benchcompare

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// The benchmark's zones are 2-D (no floor, ceiling or time window), because
// Tile38's fences are: polygons (concave), multipolygons whose parts have
// holes, and circles, over the area internal/scenario's drones fly in.
const (
	zoneCount  = 48
	minLat     = 51.40
	maxLat     = 51.54
	minLon     = -0.57
	maxLon     = -0.33
	mPerDegLat = 111_195.0
	// Tile38 measures circles on a sphere of 6,371 km, the geofence package
	// on one of orb.EarthRadius; a circle handed to Tile38 gets the radius
	// of the same angle, so both sides test the same circle.
	tile38EarthRadius = 6371e3
	noflyEarthRadius  = 6378137.0
)

// The scenario's drones aim at these points (internal/scenario's
// waypoints), so zones around them see traffic; the rest are spread over
// the area.
var busy = [][2]float64{ // lon, lat
	{-0.47, 51.47}, {-0.49, 51.49}, {-0.40, 51.445}, {-0.41, 51.435}, {-0.40, 51.50}, {-0.385, 51.51},
	{-0.52, 51.435}, {-0.44, 51.505}, {-0.365, 51.49}, {-0.445, 51.48}, {-0.54, 51.51}, {-0.43, 51.47},
}

// Zone is one zone of the benchmark, in the shape both sides take.
type Zone struct {
	ID       string
	Category string
	// Polygons, each a list of rings (the outer one first, then holes) of
	// [lon, lat] positions; empty for a circle.
	Polygons [][][][2]float64
	Multi    bool
	// Centre and radius of a circle (RadiusM > 0).
	Center  [2]float64
	RadiusM float64
}

// Zones returns the benchmark's 48 zones, the same for a seed: a third
// each polygons, multipolygons with holes, and circles.
func Zones(seed uint64) []Zone {
	rng := rand.New(rand.NewPCG(seed, 0x7a6f6e6573))
	zs := make([]Zone, 0, zoneCount)
	for i := range zoneCount {
		var c [2]float64
		if i%2 == 0 {
			w := busy[(i/2)%len(busy)]
			c = [2]float64{w[0] + (rng.Float64()-0.5)*0.02, w[1] + (rng.Float64()-0.5)*0.012}
		} else {
			c = [2]float64{minLon + rng.Float64()*(maxLon-minLon), minLat + rng.Float64()*(maxLat-minLat)}
		}
		r := 250 + rng.Float64()*650
		z := Zone{ID: fmt.Sprintf("Z%02d", i+1), Category: "restricted"}
		if i%4 == 3 {
			z.Category = "warning"
		}
		switch i % 3 {
		case 0:
			z.Polygons = [][][][2]float64{{star(rng, c, r, 0.5, 7+rng.IntN(6))}}
		case 1:
			z.Multi = true
			parts := 2 + rng.IntN(2)
			phi := rng.Float64() * 2 * math.Pi
			for j := range parts {
				a := phi + 2*math.Pi*float64(j)/float64(parts)
				pc := offset(c, 1.5*r*math.Cos(a), 1.5*r*math.Sin(a))
				pr := r * (0.6 + 0.4*rng.Float64())
				poly := [][][2]float64{star(rng, pc, pr, 0.7, 8+rng.IntN(5))}
				if j == 0 || rng.IntN(2) == 0 {
					poly = append(poly, reverse(star(rng, pc, pr*0.4, 0.5, 5+rng.IntN(3))))
				}
				z.Polygons = append(z.Polygons, poly)
			}
		default:
			z.Center, z.RadiusM = [2]float64{round6(c[0]), round6(c[1])}, math.Round(r)
		}
		zs = append(zs, z)
	}
	return zs
}

// star is a closed ring around c, counter-clockwise, of n vertices at
// increasing angles and radii in [minK·r, r]: star-shaped about c, so it
// never crosses itself, and concave where the radii vary.
func star(rng *rand.Rand, c [2]float64, r, minK float64, n int) [][2]float64 {
	ring := make([][2]float64, 0, n+1)
	for k := range n {
		th := 2 * math.Pi * (float64(k) + 0.6*rng.Float64()) / float64(n)
		rk := r * (minK + (1-minK)*rng.Float64())
		ring = append(ring, offset(c, rk*math.Cos(th), rk*math.Sin(th)))
	}
	return append(ring, ring[0])
}

// offset moves c by east and north metres.
func offset(c [2]float64, east, north float64) [2]float64 {
	return [2]float64{
		round6(c[0] + east/(mPerDegLat*math.Cos(c[1]*math.Pi/180))),
		round6(c[1] + north/mPerDegLat),
	}
}

func reverse(ring [][2]float64) [][2]float64 {
	out := make([][2]float64, len(ring))
	for i, p := range ring {
		out[len(ring)-1-i] = p
	}
	return out
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// geometry is the zone's GeoJSON geometry (a circle has none: it is a
// Point with a radius_m property for nofly and CIRCLE for Tile38).
func (z Zone) geometry() map[string]any {
	switch {
	case z.RadiusM > 0:
		return map[string]any{"type": "Point", "coordinates": z.Center}
	case z.Multi:
		return map[string]any{"type": "MultiPolygon", "coordinates": z.Polygons}
	default:
		return map[string]any{"type": "Polygon", "coordinates": z.Polygons[0]}
	}
}

// ZonesGeoJSON is the zone file the alerter and `alerter replay` load.
func ZonesGeoJSON(zs []Zone) ([]byte, error) {
	features := make([]map[string]any, 0, len(zs))
	for _, z := range zs {
		props := map[string]any{"id": z.ID, "name": "benchmark zone " + z.ID, "category": z.Category}
		if z.RadiusM > 0 {
			props["radius_m"] = z.RadiusM
		}
		features = append(features, map[string]any{"type": "Feature", "geometry": z.geometry(), "properties": props})
	}
	b, err := json.Marshal(map[string]any{"type": "FeatureCollection", "features": features})
	if err != nil {
		return nil, fmt.Errorf("benchcompare: encode zones: %w", err)
	}
	return b, nil
}

// SetChan is the Tile38 command that makes zone z a channel named
// channel, raising enter and exit events for the objects of key.
func (z Zone) SetChan(channel, key string) ([]string, error) {
	args := []string{"SETCHAN", channel, "WITHIN", key, "FENCE", "DETECT", "enter,exit"}
	if z.RadiusM > 0 {
		m := z.RadiusM * tile38EarthRadius / noflyEarthRadius
		return append(args, "CIRCLE", ftoa(z.Center[1]), ftoa(z.Center[0]), ftoa(m)), nil
	}
	g, err := json.Marshal(z.geometry())
	if err != nil {
		return nil, fmt.Errorf("benchcompare: encode zone %s: %w", z.ID, err)
	}
	return append(args, "OBJECT", string(g)), nil
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
