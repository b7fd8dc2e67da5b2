package zonestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nofly-dev/nofly/geofence"
)

// ErrNoZones: a change leaves no zone, and empty sets are not allowed
// (--allow-empty-zones).
var ErrNoZones = errors.New("no zone loaded: nothing would raise an alarm")

// Validator checks zone documents the way the alerter loads them: its
// Loader's options and whether a set without zones is allowed.
type Validator struct {
	Loader     geofence.Loader
	AllowEmpty bool
}

// Normalize validates a zone document of any format (detected as --zones
// detects it) whole, and returns it as the store keeps it: a
// FeatureCollection object. GeoJSON and ED-318 documents keep every member
// but "version" (the store's integer version replaces it); an ED-269 list,
// in any of its layouts, becomes {"type":"FeatureCollection","features":
// [zones]}, which loads as ED-269 again. A problem is a
// *geofence.ValidationError naming the feature and field.
func (v Validator) Normalize(b []byte) (geofence.Format, json.RawMessage, *geofence.ZoneSet, error) {
	set, format, err := v.Loader.Parse(bytes.NewReader(b))
	if err != nil {
		return "", nil, nil, err
	}
	if len(set.Zones) == 0 && !v.AllowEmpty {
		return "", nil, set, fmt.Errorf("%s: %w", set.Report.Summary(), ErrNoZones)
	}
	if err := reservedIDs(set, format); err != nil {
		return "", nil, nil, err
	}
	var doc map[string]json.RawMessage
	switch format {
	case geofence.FormatGeoJSON, geofence.FormatED318:
		if err := json.Unmarshal(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), &doc); err != nil {
			return "", nil, nil, fmt.Errorf("zonestore: %w", err)
		}
		delete(doc, "version")
	case geofence.FormatED269:
		list, err := ed269List(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
		if err != nil {
			return "", nil, nil, err
		}
		doc = map[string]json.RawMessage{"type": json.RawMessage(`"FeatureCollection"`), "features": list}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return "", nil, nil, fmt.Errorf("zonestore: %w", err)
	}
	// The normalized document must load as the same zones.
	again, f2, err := v.Loader.Parse(bytes.NewReader(out))
	if err != nil || !sameZones(set, again) || (f2 != format && len(set.Zones) > 0) {
		return "", nil, nil, fmt.Errorf("zonestore: the %s document does not keep its zones as a FeatureCollection (%v)", format, err)
	}
	return format, out, set, nil
}

func sameZones(a, b *geofence.ZoneSet) bool {
	if len(a.Zones) != len(b.Zones) {
		return false
	}
	for i := range a.Zones {
		if a.Zones[i].ID != b.Zones[i].ID || a.Zones[i].Fingerprint != b.Zones[i].Fingerprint {
			return false
		}
	}
	return true
}

// ed269List finds the zone list of an ED-269 document in the layouts
// geofence reads.
func ed269List(b []byte) (json.RawMessage, error) {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '[' {
		return t, nil
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(t, &o); err != nil {
		return nil, fmt.Errorf("zonestore: %w", err)
	}
	for _, k := range []string{"features", "UASZoneList", "uas_zones", "UASZones", "zones"} {
		if l, ok := o[k]; ok {
			return l, nil
		}
	}
	return json.RawMessage("[" + string(t) + "]"), nil // a single zone
}

// Index loads a stored version's zones with the validator's options and
// builds their index, whose ZoneVersion is the entry's version.
func (v Validator) Index(e Entry) (*geofence.Index, geofence.LoadReport, error) {
	set, _, err := v.Loader.Parse(bytes.NewReader(e.Zones))
	if err != nil {
		return nil, geofence.LoadReport{}, fmt.Errorf("zone store version %d: %w", e.Version, err)
	}
	if len(set.Zones) == 0 && !v.AllowEmpty {
		return nil, set.Report, fmt.Errorf("zone store version %d: %s: %w", e.Version, set.Report.Summary(), ErrNoZones)
	}
	set.ZoneVersion = e.Version
	ix, err := geofence.NewIndex(set)
	if err != nil {
		return nil, set.Report, fmt.Errorf("zone store version %d: %w", e.Version, err)
	}
	return ix, set.Report, nil
}

// collection is a FeatureCollection's features, the other members kept.
type collection struct {
	members  map[string]json.RawMessage
	features []json.RawMessage
}

func parseCollection(doc json.RawMessage) (*collection, error) {
	c := &collection{}
	if err := json.Unmarshal(doc, &c.members); err != nil {
		return nil, fmt.Errorf("zonestore: stored document: %w", err)
	}
	if f, ok := c.members["features"]; ok {
		if err := json.Unmarshal(f, &c.features); err != nil {
			return nil, fmt.Errorf("zonestore: stored document's features: %w", err)
		}
	}
	return c, nil
}

func (c *collection) encode() (json.RawMessage, error) {
	f, err := json.Marshal(c.features)
	if err != nil {
		return nil, err
	}
	if c.features == nil {
		f = json.RawMessage("[]")
	}
	c.members["features"] = f
	return json.Marshal(c.members)
}

// FeatureID is a feature's zone id: properties.id (GeoJSON),
// properties.identifier (ED-318), identifier (ED-269) or the Feature's id,
// the first that is a string.
func FeatureID(f json.RawMessage) string {
	var o struct {
		ID         any `json:"id"`
		Identifier any `json:"identifier"`
		Properties struct {
			ID         any `json:"id"`
			Identifier any `json:"identifier"`
		} `json:"properties"`
	}
	if json.Unmarshal(f, &o) != nil {
		return ""
	}
	for _, v := range []any{o.Properties.ID, o.Properties.Identifier, o.Identifier, o.ID} {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// Features returns the document's features in order.
func Features(doc json.RawMessage) ([]json.RawMessage, error) {
	c, err := parseCollection(doc)
	if err != nil {
		return nil, err
	}
	return c.features, nil
}

// Feature returns the feature of zone id.
func Feature(doc json.RawMessage, id string) (json.RawMessage, bool, error) {
	c, err := parseCollection(doc)
	if err != nil {
		return nil, false, err
	}
	for _, f := range c.features {
		if FeatureID(f) == id {
			return f, true, nil
		}
	}
	return nil, false, nil
}

// WithFeature returns doc with the feature of zone id replaced by f, in
// its place, or f appended when no feature has that id.
func WithFeature(doc json.RawMessage, id string, f json.RawMessage) (json.RawMessage, error) {
	c, err := parseCollection(doc)
	if err != nil {
		return nil, err
	}
	replaced := false
	for i, g := range c.features {
		if FeatureID(g) == id {
			c.features[i], replaced = f, true
			break
		}
	}
	if !replaced {
		c.features = append(c.features, f)
	}
	return c.encode()
}

// WithoutFeature returns doc without the feature of zone id, and whether
// it had one.
func WithoutFeature(doc json.RawMessage, id string) (json.RawMessage, bool, error) {
	c, err := parseCollection(doc)
	if err != nil {
		return nil, false, err
	}
	for i, g := range c.features {
		if FeatureID(g) == id {
			c.features = append(c.features[:i], c.features[i+1:]...)
			out, err := c.encode()
			return out, true, err
		}
	}
	return doc, false, nil
}

// WithVersion returns the document with a top-level "version" member: what
// GET /v1/zones answers.
func WithVersion(doc json.RawMessage, version int64) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("zonestore: stored document: %w", err)
	}
	v, _ := json.Marshal(version)
	m["version"] = v
	return json.Marshal(m)
}

// ReservedID is the zone id no stored set may hold: the alert API's GET
// /v1/zones/history is the zone history, so a zone of that id could not
// be read at /v1/zones/{id}.
const ReservedID = "history"

// reservedIDs refuses a set holding a zone of the ReservedID, naming it.
func reservedIDs(set *geofence.ZoneSet, format geofence.Format) error {
	field := "properties.id"
	switch format {
	case geofence.FormatED318:
		field = "properties.identifier"
	case geofence.FormatED269:
		field = "identifier"
	}
	for _, z := range set.Zones {
		if z.ID == ReservedID {
			return &geofence.ValidationError{Problems: []geofence.Problem{{ID: z.ID, Field: field,
				Msg: fmt.Sprintf("%q is reserved: GET /v1/zones/%s is the zone history, so no zone may have that id", ReservedID, ReservedID)}}}
		}
	}
	return nil
}
