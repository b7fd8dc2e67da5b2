package api

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"sync"

	"go.yaml.in/yaml/v4"
)

// openapiFS is the description: base.yaml (info, security, the Error
// schema and common responses, the operational routes) and one fragment
// per route group (alarms.yaml, events.yaml, ...), each with top keys
// paths and components.
//
//go:embed openapi/*.yaml
var openapiFS embed.FS

// OpenAPI returns the merged OpenAPI 3.1 document as JSON: base.yaml with
// every other fragment's paths and components added. A path, or a
// component of one kind and name, in two files is an error.
func OpenAPI() ([]byte, error) {
	openapiOnce.Do(func() { openapiDoc, openapiErr = mergeOpenAPI(openapiFS) })
	return openapiDoc, openapiErr
}

var (
	openapiOnce sync.Once
	openapiDoc  []byte
	openapiErr  error
)

// componentKinds are the components a fragment may add.
var componentKinds = []string{"schemas", "responses", "parameters", "headers", "examples", "requestBodies"}

func mergeOpenAPI(fsys fs.FS) ([]byte, error) {
	names, err := fs.Glob(fsys, "openapi/*.yaml")
	if err != nil {
		return nil, err
	}
	base, err := readYAML(fsys, "openapi/base.yaml")
	if err != nil {
		return nil, err
	}
	paths := mapAt(base, "paths")
	comps := mapAt(base, "components")
	// Where each path and component came from, for the duplicate error.
	from := map[string]string{}
	note := func(key, file string) error {
		if prev, ok := from[key]; ok {
			return fmt.Errorf("openapi: %s is in both %s and %s", key, prev, file)
		}
		from[key] = file
		return nil
	}
	for p := range paths {
		_ = note("path "+p, "base.yaml")
	}
	for _, k := range componentKinds {
		for n := range mapAt(comps, k) {
			_ = note("components."+k+"."+n, "base.yaml")
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "openapi/base.yaml" {
			continue
		}
		frag, err := readYAML(fsys, name)
		if err != nil {
			return nil, err
		}
		for k := range frag {
			if k != "paths" && k != "components" {
				return nil, fmt.Errorf("openapi: %s: top key %q (a fragment has only paths and components)", name, k)
			}
		}
		for p, item := range mapAt(frag, "paths") {
			if err := note("path "+p, name); err != nil {
				return nil, err
			}
			paths[p] = item
		}
		fc := mapAt(frag, "components")
		for k := range fc {
			if !slices.Contains(componentKinds, k) {
				return nil, fmt.Errorf("openapi: %s: components.%s (a fragment may add %v)", name, k, componentKinds)
			}
		}
		for _, k := range componentKinds {
			src := mapAt(fc, k)
			if len(src) == 0 {
				continue
			}
			dst := mapAt(comps, k)
			for n, v := range src {
				if err := note("components."+k+"."+n, name); err != nil {
					return nil, err
				}
				dst[n] = v
			}
			comps[k] = dst
		}
	}
	base["paths"] = paths
	base["components"] = comps
	b, err := json.MarshalIndent(base, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return append(b, '\n'), nil
}

func readYAML(fsys fs.FS, name string) (map[string]any, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("openapi: %s: %w", name, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// mapAt returns m[key] as a map, a new one when absent.
func mapAt(m map[string]any, key string) map[string]any {
	if v, ok := m[key].(map[string]any); ok {
		return v
	}
	return map[string]any{}
}

// serveOpenAPI answers /openapi.json.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.openapi)
}
