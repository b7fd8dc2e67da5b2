// Reading a decoded JSON tree (map[string]any, []any, float64, string):
// ED-269 and ED-318 files are decoded generically, not into structs,
// because authorities publish them in several layouts with loosely
// spelled keys. Both parsers, and format detection, walk the tree with
// these helpers, each naming the field path a problem is reported at.
// (treeNum and treeString, which also read limits, live in load.go.)

package geofence

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/paulmach/orb"
)

// decodeTree reads a whole zone file and decodes it into a generic JSON
// tree, which the ED-269 and ED-318 parsers and format detection walk.
func decodeTree(r io.Reader) ([]byte, any, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, nil, err
	}
	b = skipBOM(b)
	var root any
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, nil, fileProblem("", jsonMsg(err))
	}
	return b, root, nil
}

// obj is a decoded JSON object whose keys are matched loosely: case and
// underscores do not matter ("horizontal_projection" finds
// "horizontalProjection").
type obj map[string]any

func normKey(k string) string {
	return strings.ToLower(strings.ReplaceAll(k, "_", ""))
}

func (o obj) get(key string) (any, bool) {
	if v, ok := o[key]; ok {
		return v, v != nil
	}
	nk := normKey(key)
	for k, v := range o {
		if normKey(k) == nk {
			return v, v != nil
		}
	}
	return nil, false
}

func asObj(v any) (obj, bool) {
	m, ok := v.(map[string]any)
	return obj(m), ok
}

// asList returns v as a list; a single object is a list of one
// (EUROCONTROL's layout writes single objects where ED-269 has arrays).
func asList(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case nil:
		return nil
	}
	return []any{v}
}

// treeText reads a string, or the first text of an ED-318 style list of
// {text, lang}.
func treeText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		for _, e := range v {
			if s := treeText(e); s != "" {
				return s
			}
		}
	case map[string]any:
		if t, ok := obj(v).get("text"); ok {
			return treeText(t)
		}
		if t, ok := obj(v).get("name"); ok {
			return treeText(t)
		}
	}
	return ""
}

// jsonKind names the JSON kind of a tree value, for problem messages.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a string"
}

func treeTime(v any, end bool, field string, f *feat) time.Time {
	s, ok := v.(string)
	if !ok {
		f.add(field, "must be a date-time string")
		return time.Time{}
	}
	t, _ := dateTime(s, end, field, f)
	return t
}

func treePosition(v any, field string, add func(field, msg string)) (orb.Point, bool) {
	l, ok := v.([]any)
	if !ok {
		add(field, "a position must be an array [lon, lat]")
		return orb.Point{}, false
	}
	c := make([]float64, len(l))
	for i, e := range l {
		f, ok := e.(float64)
		if !ok {
			add(field, "a position must hold numbers")
			return orb.Point{}, false
		}
		c[i] = f
	}
	return position(c, field, add)
}

func treePolygon(v any, field string, add func(field, msg string)) (orb.Polygon, bool) {
	rings, ok := v.([]any)
	if !ok || len(rings) == 0 {
		add(field, "Polygon coordinates must be a non-empty array of rings")
		return nil, false
	}
	p := make(orb.Polygon, len(rings))
	for ri, rv := range rings {
		pts, ok := rv.([]any)
		if !ok {
			add(idx(field, ri), "a ring must be an array of positions")
			return nil, false
		}
		r := make(orb.Ring, len(pts))
		for pi, pv := range pts {
			pt, ok := treePosition(pv, idx(idx(field, ri), pi), add)
			if !ok {
				return nil, false
			}
			r[pi] = pt
		}
		p[ri] = r
	}
	return p, true
}
