package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The rules the server takes from its own description (api/openapi/*.yaml),
// so that what it refuses and what the description says cannot drift
// apart: the request body's media types of each write, and, of each
// parameter in the path or the query, its type, pattern and length bounds.
// api/params.go applies them to every /v1 request.

// routeRules are one operation's ("METHOD /pattern") described rules.
type routeRules struct {
	// bodyTypes are the media types of the request body; empty: the
	// operation takes none.
	bodyTypes []string
	path      map[string]*paramRule
	query     map[string]*paramRule
}

// paramRule is a parameter's described schema, as far as the server checks
// it generically: strings by length (in characters, as JSON Schema counts)
// and pattern. Other types are the handlers' to parse.
type paramRule struct {
	name     string
	typ      string
	minLen   int // -1: none
	maxLen   int // -1: none
	pattern  *regexp.Regexp
	patternS string
}

// describedRules reads the merged description (OpenAPI's JSON) into the
// rules of every operation. A pattern Go cannot compile is an error: the
// server would not check what the description says.
func describedRules(doc []byte) (map[string]*routeRules, error) {
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]json.RawMessage `json:"parameters"`
			Schemas    map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("api: the description: %w", err)
	}
	out := map[string]*routeRules{}
	for path, item := range d.Paths {
		var shared []describedParam
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				return nil, fmt.Errorf("api: %s parameters: %w", path, err)
			}
		}
		for method, raw := range item {
			m := strings.ToUpper(method)
			if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}, m) {
				continue
			}
			var op struct {
				Parameters  []describedParam `json:"parameters"`
				RequestBody *struct {
					Content map[string]json.RawMessage `json:"content"`
				} `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("api: %s %s: %w", m, path, err)
			}
			rr := &routeRules{path: map[string]*paramRule{}, query: map[string]*paramRule{}}
			if op.RequestBody != nil {
				for t := range op.RequestBody.Content {
					rr.bodyTypes = append(rr.bodyTypes, t)
				}
				slices.Sort(rr.bodyTypes)
			}
			// Operation parameters override the path item's (OpenAPI).
			for _, ps := range [][]describedParam{shared, op.Parameters} {
				for _, p := range ps {
					if p.Ref != "" {
						name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/")
						if !ok || d.Components.Parameters[name] == nil {
							return nil, fmt.Errorf("api: %s %s: parameter $ref %s", m, path, p.Ref)
						}
						if err := json.Unmarshal(d.Components.Parameters[name], &p); err != nil {
							return nil, err
						}
					}
					if ref := p.Schema.Ref; ref != "" {
						name, ok := strings.CutPrefix(ref, "#/components/schemas/")
						if !ok || d.Components.Schemas[name] == nil {
							return nil, fmt.Errorf("api: %s %s: parameter %s: schema $ref %s", m, path, p.Name, ref)
						}
						if err := json.Unmarshal(d.Components.Schemas[name], &p.Schema); err != nil {
							return nil, err
						}
					}
					rule, err := p.rule()
					if err != nil {
						return nil, fmt.Errorf("api: %s %s: %w", m, path, err)
					}
					switch p.In {
					case "path":
						rr.path[p.Name] = rule
					case "query":
						rr.query[p.Name] = rule
					}
				}
			}
			out[m+" "+path] = rr
		}
	}
	return out, nil
}

// describedParam is a parameter object as the description writes it.
type describedParam struct {
	Ref    string `json:"$ref"`
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Ref       string `json:"$ref"`
		Type      any    `json:"type"`
		Pattern   string `json:"pattern"`
		MinLength *int   `json:"minLength"`
		MaxLength *int   `json:"maxLength"`
	} `json:"schema"`
}

func (p describedParam) rule() (*paramRule, error) {
	r := &paramRule{name: p.Name, minLen: -1, maxLen: -1}
	if t, ok := p.Schema.Type.(string); ok {
		r.typ = t
	}
	if p.Schema.MinLength != nil {
		r.minLen = *p.Schema.MinLength
	}
	if p.Schema.MaxLength != nil {
		r.maxLen = *p.Schema.MaxLength
	}
	if p.Schema.Pattern != "" {
		re, err := regexp.Compile(p.Schema.Pattern)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: pattern %q: %w", p.Name, p.Schema.Pattern, err)
		}
		r.pattern, r.patternS = re, p.Schema.Pattern
	}
	return r, nil
}

// describedPattern is the pattern the description gives a parameter of an
// operation (for a parser that must accept exactly what it allows); it
// panics when there is none, which TestOpenAPIRoutes would show at once.
func describedPattern(op, param string) *regexp.Regexp {
	doc, err := OpenAPI()
	if err != nil {
		panic(err)
	}
	rules, err := describedRules(doc)
	if err != nil {
		panic(err)
	}
	rr := rules[op]
	if rr == nil {
		panic("api: " + op + " is not described")
	}
	for _, m := range []map[string]*paramRule{rr.query, rr.path} {
		if p := m[param]; p != nil && p.pattern != nil {
			return p.pattern
		}
	}
	panic("api: " + op + " describes no pattern for " + param)
}
