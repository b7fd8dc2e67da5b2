package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
)

// loadOpenAPI parses the merged description with a real OpenAPI parser
// and validates it (schemas, references, examples).
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("the merged description does not parse: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the merged description is not valid OpenAPI: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	return doc
}

// TestOpenAPIRoutes: every route the router serves is an operation of the
// description, and the description names no operation the router lacks.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	s, err := New(Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Topic: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	err = chi.Walk(s.Handler().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	for r := range served {
		if !described[r] {
			t.Errorf("the router serves %q, which the description does not describe", r)
		}
	}
	for r := range described {
		if !served[r] {
			t.Errorf("the description describes %q, which the router does not serve", r)
		}
	}
	for _, r := range []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json"} {
		if !served[r] {
			t.Errorf("%s is not served", r)
		}
	}
}

// TestOpenAPIServed: /openapi.json is the merged document, with every
// fragment's paths.
func TestOpenAPIServed(t *testing.T) {
	s, err := New(Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Topic: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+testHost+"/openapi.json", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/healthz", "/v1/alarms", "/v1/events", "/v1/zones"} {
		if doc.Paths[p] == nil {
			t.Errorf("path %s missing from /openapi.json", p)
		}
	}
}

// TestMergeOpenAPIErrors: a path or component in two files, or a fragment
// with other top keys, is refused naming both files.
func TestMergeOpenAPIErrors(t *testing.T) {
	base := "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a: {get: {responses: {'200': {description: ok}}}}\ncomponents:\n  schemas:\n    Error: {type: object}\n"
	tests := []struct {
		name string
		frag string
		want string // "" = merges
	}{
		{"adds", "paths:\n  /b: {get: {responses: {'200': {description: ok}}}}\ncomponents:\n  schemas:\n    B: {type: string}\n", ""},
		{"path twice", "paths:\n  /a: {post: {responses: {'200': {description: ok}}}}\n", "path /a is in both base.yaml and openapi/x.yaml"},
		{"schema twice", "components:\n  schemas:\n    Error: {type: string}\n", "components.schemas.Error is in both base.yaml and openapi/x.yaml"},
		{"other top key", "info: {title: x}\n", `top key "info"`},
		{"other component", "components:\n  securitySchemes: {x: {type: http, scheme: basic}}\n", "components.securitySchemes"},
		{"bad yaml", "paths: [\n", "openapi/x.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := mergeOpenAPI(fstest.MapFS{"openapi/base.yaml": {Data: []byte(base)}, "openapi/x.yaml": {Data: []byte(tt.frag)}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want == "":
				if !strings.Contains(string(b), `"/b"`) || !strings.Contains(string(b), `"B"`) {
					t.Errorf("merged without the fragment: %s", b)
				}
			case err == nil || !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// testHost is the Host of the tests' requests made with httptest.NewRequest,
// whose example.com the Host check refuses.
const testHost = "127.0.0.1:9102"
