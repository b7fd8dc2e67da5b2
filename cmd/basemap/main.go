// Command basemap makes a small PMTiles base map (--map-pmtiles) from an
// OpenStreetMap .osm.pbf extract: roads with their names and classes,
// runways and taxiways with their designators, water, parks and woods,
// aerodromes, buildings and place names, in the Protomaps basemap layers
// dashboard/web/basemap.js paints, for the ways and nodes inside --bbox.
//
//	go run ./cmd/basemap --pbf delaware-latest.osm.pbf --bbox=-75.66,39.64,-75.55,39.71 --out testdata/basemap/ilg.pmtiles
//
// Without --pbf it reads the Delaware extract github.com/paulmach/osm ships
// as test data (from the Go module cache: `go mod download` fetches it),
// which is how testdata/basemap/ilg.pmtiles was made. OpenStreetMap data is
// under the ODbL: the archive credits "© OpenStreetMap contributors".
// Areas are closed ways only (multipolygon relations are left out: a
// lake or park drawn as a relation is missing); it is a demo's map, not a
// replacement for a Protomaps extract. With cgo, paulmach/osm inflates
// blocks with the system zlib (zlib.h must be there); CGO_ENABLED=0 builds
// it on Go's own.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
	"github.com/paulmach/orb/maptile"
	"github.com/paulmach/osm"
	"github.com/paulmach/osm/osmpbf"

	"github.com/nofly-dev/nofly/internal/basemapgen"
	"github.com/nofly-dev/nofly/internal/pmtiles"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "basemap:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("basemap", flag.ContinueOnError)
	pbf := fs.String("pbf", "", "OpenStreetMap .osm.pbf extract (default: paulmach/osm's Delaware test extract from the module cache)")
	bboxS := fs.String("bbox", "-75.66,39.64,-75.55,39.71", "west,south,east,north of the map (degrees)")
	out := fs.String("out", "testdata/basemap/ilg.pmtiles", "archive to write")
	minZ := fs.Int("min-zoom", 10, "lowest zoom")
	maxZ := fs.Int("max-zoom", 15, "highest zoom (the page over-zooms past it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bbox, err := parseBBox(*bboxS)
	if err != nil {
		return fmt.Errorf("--bbox: %w", err)
	}
	if *minZ < 0 || *maxZ > 16 || *minZ > *maxZ {
		return fmt.Errorf("--min-zoom %d, --max-zoom %d: want 0 ≤ min ≤ max ≤ 16", *minZ, *maxZ)
	}
	if *pbf == "" {
		if *pbf, err = moduleExtract(); err != nil {
			return err
		}
	}
	features, err := read(ctx, *pbf, bbox)
	if err != nil {
		return err
	}
	tiles, err := basemapgen.VectorTiles(features, maptile.Zoom(*minZ), maptile.Zoom(*maxZ))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	c := bbox.Center()
	err = pmtiles.Write(&buf, pmtiles.Archive{TileType: pmtiles.TileMVT, TileCompression: pmtiles.CompressionGzip,
		Bounds: [4]float64{bbox.Min[0], bbox.Min[1], bbox.Max[0], bbox.Max[1]}, Center: [2]float64{c[0], c[1]}, CenterZoom: 13,
		Metadata: map[string]any{"name": "nofly demo base map", "attribution": "© OpenStreetMap contributors",
			"description": "made by cmd/basemap from " + filepath.Base(*pbf),
			"vector_layers": []map[string]any{{"id": "earth"}, {"id": "water"}, {"id": "landuse"}, {"id": "buildings"},
				{"id": "roads"}, {"id": "places"}, {"id": "pois"}}},
		Tiles: tiles})
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	slog.Info("base map written", "out", *out, "features", len(features), "tiles", len(tiles), "bytes", buf.Len())
	return nil
}

func parseBBox(s string) (orb.Bound, error) {
	p := strings.Split(s, ",")
	if len(p) != 4 {
		return orb.Bound{}, fmt.Errorf("%q: want west,south,east,north", s)
	}
	var v [4]float64
	for i := range p {
		f, err := strconv.ParseFloat(strings.TrimSpace(p[i]), 64)
		if err != nil {
			return orb.Bound{}, fmt.Errorf("%q: %w", s, err)
		}
		v[i] = f
	}
	if v[0] >= v[2] || v[1] >= v[3] {
		return orb.Bound{}, fmt.Errorf("%q: west must be below east, south below north", s)
	}
	return orb.Bound{Min: orb.Point{v[0], v[1]}, Max: orb.Point{v[2], v[3]}}, nil
}

// moduleExtract is the Delaware extract in paulmach/osm's module.
func moduleExtract() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/paulmach/osm").Output()
	if err != nil {
		return "", fmt.Errorf("go mod download github.com/paulmach/osm: %w", err)
	}
	i := bytes.Index(out, []byte(`"Dir": "`))
	if i < 0 {
		return "", fmt.Errorf("go mod download: no Dir in %s", out)
	}
	dir := string(out[i+8:])
	dir = dir[:strings.IndexByte(dir, '"')]
	return filepath.Join(dir, "testdata", "delaware-latest.osm.pbf"), nil
}

// read is the features of the extract inside bbox: nodes are kept only
// there (with a margin, so a way crossing the edge keeps its shape).
func read(ctx context.Context, path string, bbox orb.Bound) ([]basemapgen.Feature, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	margin := bbox.Pad(0.02)
	nodes := map[osm.NodeID]orb.Point{}
	var feats []basemapgen.Feature
	add := func(layer string, minZ maptile.Zoom, g orb.Geometry, props map[string]any) {
		gf := geojson.NewFeature(g)
		gf.Properties = props
		feats = append(feats, basemapgen.Feature{Layer: layer, MinZoom: minZ, MaxZoom: 16, Feature: gf})
	}
	// The land: the archive's background, so the tiles cover the bbox.
	add("earth", 0, orb.Polygon{orb.Ring{bbox.Min, {bbox.Max[0], bbox.Min[1]}, bbox.Max, {bbox.Min[0], bbox.Max[1]}, bbox.Min}}, map[string]any{"kind": "earth"})
	sc := osmpbf.New(ctx, f, 2)
	defer sc.Close()
	for sc.Scan() {
		switch o := sc.Object().(type) {
		case *osm.Node:
			p := orb.Point{o.Lon, o.Lat}
			if !margin.Contains(p) {
				continue
			}
			nodes[o.ID] = p
			if !bbox.Contains(p) {
				continue
			}
			name := o.Tags.Find("name")
			switch {
			case name != "" && o.Tags.Find("place") != "":
				add("places", 11, p, map[string]any{"kind": "locality", "kind_detail": o.Tags.Find("place"), "name": name})
			case name != "" && o.Tags.Find("aeroway") == "aerodrome":
				add("pois", 10, p, map[string]any{"kind": "aerodrome", "name": name})
			}
		case *osm.Way:
			if g, layer, minZ, props := way(o, nodes); g != nil {
				add(layer, minZ, g, props)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return feats, nil
}

// roadKinds are the Protomaps road kinds of OSM highway values (and the
// zoom each is first drawn at).
var roadKinds = map[string]struct {
	kind string
	minZ maptile.Zoom
}{
	"motorway": {"highway", 10}, "motorway_link": {"highway", 12}, "trunk": {"highway", 10}, "trunk_link": {"highway", 12},
	"primary": {"major_road", 10}, "primary_link": {"major_road", 12}, "secondary": {"major_road", 11}, "secondary_link": {"major_road", 13},
	"tertiary": {"major_road", 12}, "tertiary_link": {"major_road", 13},
	"residential": {"minor_road", 13}, "unclassified": {"minor_road", 13}, "service": {"minor_road", 14}, "living_street": {"minor_road", 13},
	"footway": {"path", 14}, "path": {"path", 14}, "cycleway": {"path", 14}, "track": {"path", 14}, "steps": {"path", 15}, "pedestrian": {"path", 14},
}

// landKinds are the landuse kinds of OSM tags.
var landKinds = map[string]string{
	"landuse=grass": "grass", "landuse=meadow": "meadow", "landuse=forest": "forest", "natural=wood": "wood", "leisure=park": "park",
	"leisure=golf_course": "golf_course", "landuse=cemetery": "cemetery", "landuse=recreation_ground": "recreation_ground",
	"landuse=farmland": "farmland", "natural=scrub": "scrub", "landuse=industrial": "industrial", "landuse=commercial": "commercial",
	"landuse=retail": "retail", "landuse=residential": "residential", "landuse=military": "military", "landuse=railway": "railway",
	"aeroway=aerodrome": "aerodrome",
}

// way is the feature of a way basemap.js draws, or nil.
func way(w *osm.Way, nodes map[osm.NodeID]orb.Point) (orb.Geometry, string, maptile.Zoom, map[string]any) {
	ls := make(orb.LineString, 0, len(w.Nodes))
	for _, n := range w.Nodes {
		if p, ok := nodes[n.ID]; ok {
			ls = append(ls, p)
		}
	}
	if len(ls) < 2 {
		return nil, "", 0, nil
	}
	closed := len(ls) == len(w.Nodes) && w.Nodes[0].ID == w.Nodes[len(w.Nodes)-1].ID && len(ls) >= 4
	area := func() orb.Geometry {
		if !closed {
			return nil
		}
		return orb.Polygon{orb.Ring(ls)}
	}
	t := w.Tags
	name, ref := t.Find("name"), t.Find("ref")
	switch a := t.Find("aeroway"); {
	case a == "runway" || a == "taxiway":
		return ls, "roads", map[string]maptile.Zoom{"runway": 10, "taxiway": 12}[a], map[string]any{"kind": "aeroway", "kind_detail": a, "ref": ref, "name": name}
	case a == "apron" && closed:
		return area(), "landuse", 12, map[string]any{"kind": "aerodrome", "kind_detail": "apron"}
	}
	if h := t.Find("highway"); h != "" {
		if rk, ok := roadKinds[h]; ok {
			return ls, "roads", rk.minZ, map[string]any{"kind": rk.kind, "kind_detail": h, "name": name, "ref": ref}
		}
		return nil, "", 0, nil
	}
	if t.Find("railway") == "rail" {
		return ls, "roads", 11, map[string]any{"kind": "rail", "kind_detail": "rail"}
	}
	if t.Find("building") != "" && closed {
		return area(), "buildings", 14, map[string]any{"kind": "building"}
	}
	if t.Find("natural") == "water" || t.Find("landuse") == "reservoir" || t.Find("landuse") == "basin" {
		if g := area(); g != nil {
			return g, "water", 10, map[string]any{"kind": "water", "name": name}
		}
	}
	if wv := t.Find("waterway"); wv == "river" || wv == "stream" || wv == "canal" {
		return ls, "water", map[string]maptile.Zoom{"river": 10, "canal": 11, "stream": 13}[wv], map[string]any{"kind": wv, "name": name}
	}
	for _, k := range []string{"aeroway", "landuse", "leisure", "natural"} {
		if kind, ok := landKinds[k+"="+t.Find(k)]; ok && closed {
			return area(), "landuse", 10, map[string]any{"kind": kind, "name": name}
		}
	}
	return nil, "", 0, nil
}
