package geofence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Format is a zone file format.
type Format string

const (
	FormatGeoJSON Format = "geojson" // DESIGN.md's GeoJSON FeatureCollection
	FormatED269   Format = "ed269"   // EUROCAE ED-269 JSON, any layout
	FormatED318   Format = "ed318"   // EUROCAE ED-318 GeoJSON
)

// Detect tells the format of a zone file from its content:
//   - a JSON array, or an object with UASZoneList, uas_zones (or another
//     ED-269 wrapper), or whose features are not GeoJSON Features: ED-269;
//   - a FeatureCollection with ED-318 markers (metadata, properties.
//     identifier, geometry layer or extent): ED-318;
//   - any other FeatureCollection: GeoJSON.
func Detect(b []byte) (Format, error) {
	var root any
	if err := json.Unmarshal(b, &root); err != nil {
		return "", fileProblem("", jsonMsg(err))
	}
	return detectTree(root)
}

func detectTree(root any) (Format, error) {
	if _, ok := root.([]any); ok {
		return FormatED269, nil
	}
	o, ok := asObj(root)
	if !ok {
		return "", fileProblem("", "a zone file is a JSON object or array")
	}
	for _, k := range []string{"UASZoneList", "uas_zones", "UASZones"} {
		if _, ok := o.get(k); ok {
			return FormatED269, nil
		}
	}
	fv, _ := o.get("features")
	features, _ := fv.([]any)
	t, _ := o.get("type")
	if t != "FeatureCollection" {
		if _, ok := o.get("identifier"); ok || features != nil {
			return FormatED269, nil
		}
		return "", fileProblem("type", "not a FeatureCollection, nor an ED-269 zone list")
	}
	if _, ok := o.get("metadata"); ok {
		return FormatED318, nil
	}
	for _, f := range features {
		fo, ok := asObj(f)
		if !ok {
			continue
		}
		if _, ok := fo.get("properties"); !ok {
			if _, ok := fo.get("identifier"); ok {
				return FormatED269, nil
			}
			continue
		}
		pv, _ := fo.get("properties")
		p, _ := asObj(pv)
		if _, ok := p.get("identifier"); ok {
			return FormatED318, nil
		}
		gv, _ := fo.get("geometry")
		if g, ok := asObj(gv); ok {
			if _, ok := g.get("layer"); ok {
				return FormatED318, nil
			}
			if _, ok := g.get("extent"); ok {
				return FormatED318, nil
			}
		}
		return FormatGeoJSON, nil
	}
	return FormatGeoJSON, nil
}

// Parse reads a zone file in any supported format, detected from its
// content.
func Parse(r io.Reader) (*ZoneSet, Format, error) {
	b, root, err := decodeTree(r)
	if err != nil {
		return nil, "", err
	}
	f, err := detectTree(root)
	if err != nil {
		return nil, "", err
	}
	var set *ZoneSet
	switch f {
	case FormatGeoJSON:
		set, err = parseGeoJSON(b)
	case FormatED269:
		set, err = parseED269Tree(root)
	case FormatED318:
		set, err = parseED318Tree(root)
	}
	return set, f, err
}

// LoadFile reads a zone file in any supported format. Problems name the
// file (by its base name).
func LoadFile(path string) (*ZoneSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	set, _, err := Parse(bytes.NewReader(b))
	if err != nil {
		if ve, ok := err.(*ValidationError); ok {
			ve.setFile(filepath.Base(path))
			return nil, ve
		}
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return set, nil
}
