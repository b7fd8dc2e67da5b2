package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func zoneServer(t *testing.T) (*httptest.Server, *zonestore.Store, Options) {
	t.Helper()
	o := Options{Redis: testenv.RedisClient(t), Prefix: testenv.RedisPrefix(t, "zonesapi"), Topic: "telemetry.positions", Partitions: 2}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, zonestore.New(o.Redis, zonestore.Options{Prefix: o.Prefix}), o
}

const zoneFeature = `{"type":"Feature","geometry":{"type":"Point","coordinates":[%v,46]},"properties":{"id":%q,"radius_m":500,"ceiling_m":120,"ceiling_ref":"AGL"}}`

func feature(id string, lon float64) string { return fmt.Sprintf(zoneFeature, lon, id) }

func collection(fs ...string) string {
	return `{"type":"FeatureCollection","features":[` + strings.Join(fs, ",") + `]}`
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(t *testing.T, srv *httptest.Server, method, path, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // a hdr may say otherwise
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(b)}
	_ = json.Unmarshal(b, &a.body)
	return a
}

// TestZonesAPI walks the zone routes in order on one store: each step's
// status, ETag and answer, the set it leaves, and that a refused change
// (400, 404, 412) leaves the set and its version as they were.
func TestZonesAPI(t *testing.T) {
	srv, store, _ := zoneServer(t)
	ed269, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "testdata/zones/ed269/nofly_eurocontrol_uas_zones.json"))
	if err != nil {
		t.Fatal(err)
	}
	badFloor := strings.Replace(feature("B", 7.1), `"radius_m":500`, `"radius_m":500,"floor_m":"low"`, 1)
	steps := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		etag                     string   // ETag wanted ("" = none checked)
		has                      []string // strings the raw answer must hold
		field                    string   // details.field of an error
		allow                    string   // a 405's Allow
		version                  int64    // the store's version after the step
		ids                      string   // the zone ids after the step
	}{
		{name: "empty store", method: "GET", path: "/v1/zones", status: 200, etag: `"0"`, has: []string{`"version":0`, `"features":[]`}, ids: "[]"},
		{name: "unknown zone", method: "GET", path: "/v1/zones/A", status: 404, field: "", ids: "[]"},
		{name: "put a set", method: "PUT", path: "/v1/zones", body: collection(feature("A", 7), feature("B", 7.1)), hdr: []string{"If-Match", "0"},
			status: 200, etag: `"1"`, has: []string{`"version":1`, `"previous_version":0`, `"added":["A","B"]`}, version: 1, ids: "[A B]"},
		{name: "list", method: "GET", path: "/v1/zones", status: 200, etag: `"1"`, has: []string{`"version":1`, `"type":"FeatureCollection"`}, version: 1, ids: "[A B]"},
		{name: "get one", method: "GET", path: "/v1/zones/B", status: 200, etag: `"1"`, has: []string{`"id":"B"`, `"type":"Feature"`}, version: 1, ids: "[A B]"},
		{name: "stale If-Match", method: "PUT", path: "/v1/zones/C", body: feature("C", 7.2), hdr: []string{"If-Match", "0"},
			status: 412, etag: `"1"`, has: []string{`"code":"version_mismatch"`, `"current_version":1`}, version: 1, ids: "[A B]"},
		{name: "bad If-Match", method: "PUT", path: "/v1/zones/C", body: feature("C", 7.2), hdr: []string{"If-Match", "one"},
			status: 400, field: "If-Match", version: 1, ids: "[A B]"},
		{name: "bad feature names feature and field", method: "PUT", path: "/v1/zones/B", body: badFloor, hdr: []string{"If-Match", `"1"`},
			status: 400, field: "properties.floor_m", has: []string{`feature 2 (id \"B\"): properties.floor_m`, `"feature":2`}, version: 1, ids: "[A B]"},
		{name: "id differs from the path", method: "PUT", path: "/v1/zones/C", body: feature("D", 7.2), status: 400, field: "properties.id", version: 1, ids: "[A B]"},
		{name: "feature too large", method: "PUT", path: "/v1/zones/C", body: strings.Repeat(" ", maxFeatureBody) + feature("C", 7.2), status: 413, field: "body", version: 1, ids: "[A B]"},
		{name: "not a feature", method: "PUT", path: "/v1/zones/C", body: `[1]`, status: 400, field: "body", version: 1, ids: "[A B]"},
		{name: "add one, id from the path", method: "PUT", path: "/v1/zones/C", body: strings.Replace(feature("C", 7.2), `"id":"C",`, ``, 1), hdr: []string{"If-Match", "1"},
			status: 200, etag: `"2"`, has: []string{`"added":["C"]`}, version: 2, ids: "[A B C]"},
		{name: "change one in place", method: "PUT", path: "/v1/zones/A", body: feature("A", 7.05), status: 200, etag: `"3"`, has: []string{`"changed":["A"]`}, version: 3, ids: "[A B C]"},
		{name: "delete unknown", method: "DELETE", path: "/v1/zones/Z", status: 404, version: 3, ids: "[A B C]"},
		{name: "delete", method: "DELETE", path: "/v1/zones/B", hdr: []string{"If-Match", "3"}, status: 200, etag: `"4"`, has: []string{`"removed":["B"]`}, version: 4, ids: "[A C]"},
		{name: "a bad set is refused whole", method: "PUT", path: "/v1/zones", body: collection(feature("X", 7), badFloor), status: 400, field: "properties.floor_m", version: 4, ids: "[A C]"},
		{name: "duplicate ids refused", method: "PUT", path: "/v1/zones", body: collection(feature("X", 7), feature("X", 7.1)), status: 400, field: "properties.id", version: 4, ids: "[A C]"},
		{name: "no zone left refused", method: "PUT", path: "/v1/zones", body: collection(), status: 400, field: "features", version: 4, ids: "[A C]"},
		{name: "not JSON", method: "PUT", path: "/v1/zones", body: `{"type":`, status: 400, version: 4, ids: "[A C]"},
		{name: "an ED-269 set", method: "PUT", path: "/v1/zones", body: string(ed269), hdr: []string{"If-Match", "4"}, status: 200, etag: `"5"`, has: []string{`"format":"ed269"`}, version: 5},
		{name: "ED-269 served as a FeatureCollection", method: "GET", path: "/v1/zones", status: 200, etag: `"5"`, has: []string{`"type":"FeatureCollection"`, `"version":5`, `"identifier"`}, version: 5},
		{name: "not JSON, stale If-Match", method: "PUT", path: "/v1/zones", body: `{"type":`, hdr: []string{"If-Match", "0"}, status: 400, field: "body", version: 5},
		{name: "a string set, stale If-Match", method: "PUT", path: "/v1/zones", body: `"zones"`, hdr: []string{"If-Match", "0"}, status: 400, field: "body", version: 5},
		{name: "an array set, stale If-Match", method: "PUT", path: "/v1/zones", body: `[null, null]`, hdr: []string{"If-Match", "0"}, status: 412, version: 5},
		{name: "an array feature, stale If-Match", method: "PUT", path: "/v1/zones/X", body: `[null, null]`, hdr: []string{"If-Match", "0"}, status: 400, field: "body", version: 5},
		{name: "no body, stale If-Match", method: "PUT", path: "/v1/zones", hdr: []string{"If-Match", "0"}, status: 400, field: "body", version: 5},
		{name: "blank feature body", method: "PUT", path: "/v1/zones/X", body: " \n", status: 400, field: "body", version: 5},
		{name: "empty If-Match", method: "PUT", path: "/v1/zones/X", body: feature("X", 7.3), hdr: []string{"If-Match", ""}, status: 400, field: "If-Match", version: 5},
		{name: "bad weak If-Match", method: "DELETE", path: "/v1/zones/X", hdr: []string{"If-Match", `W/"xj\Syox"`}, status: 400, field: "If-Match", version: 5},
		{name: "If-Match past int64", method: "DELETE", path: "/v1/zones/X", hdr: []string{"If-Match", "99999999999999999999"}, status: 400, field: "If-Match", version: 5},
		{name: "no zone history to put", method: "PUT", path: "/v1/zones/history", body: strings.Replace(feature("C", 7.2), `"id":"C",`, ``, 1),
			status: 405, allow: "GET", version: 5},
		{name: "no zone history to delete", method: "DELETE", path: "/v1/zones/history", status: 405, allow: "GET", version: 5},
		{name: "history", method: "GET", path: "/v1/zones/history", status: 200, etag: `"5"`,
			has: []string{`"current_version":5`, `"topic":"telemetry.positions"`, `"switches":{"0":[],"1":[]}`, `"by":"anonymous"`}, version: 5},
	}
	for _, st := range steps {
		a := do(t, srv, st.method, st.path, st.body, st.hdr...)
		if a.status != st.status {
			t.Fatalf("%s: status %d, want %d: %s", st.name, a.status, st.status, a.raw)
		}
		if st.allow != "" && a.header.Get("Allow") != st.allow {
			t.Errorf("%s: Allow %q, want %q", st.name, a.header.Get("Allow"), st.allow)
		}
		if st.etag != "" && a.header.Get("ETag") != st.etag {
			t.Errorf("%s: ETag %q, want %q", st.name, a.header.Get("ETag"), st.etag)
		}
		for _, h := range st.has {
			if !strings.Contains(a.raw, h) {
				t.Errorf("%s: answer does not hold %s: %s", st.name, h, a.raw)
			}
		}
		if st.status >= 400 {
			d, _ := a.body["details"].(map[string]any)
			if a.body["error"] == nil || a.body["code"] == nil || d == nil {
				t.Errorf("%s: error body %s, want error, code and details", st.name, a.raw)
			}
			if st.field != "" && d["field"] != st.field {
				t.Errorf("%s: details.field %v, want %s: %s", st.name, d["field"], st.field, a.raw)
			}
		}
		v, err := store.Version(context.Background())
		if err != nil || v != st.version {
			t.Errorf("%s: store at version %d (%v), want %d", st.name, v, err, st.version)
		}
		if st.ids != "" {
			var ids []string
			if e, err := store.Current(context.Background()); err == nil {
				fs, _ := zonestore.Features(e.Zones)
				for _, f := range fs {
					ids = append(ids, zonestore.FeatureID(f))
				}
			}
			if got := fmt.Sprint(ids); got != st.ids && !(st.ids == "[]" && ids == nil) {
				t.Errorf("%s: zones %s, want %s", st.name, got, st.ids)
			}
		}
	}
}

// TestZonesConcurrentChanges: changes without If-Match racing each other
// all land, each as its own version (retried on the race); with If-Match
// on the same version exactly one lands, the others get 412.
func TestZonesConcurrentChanges(t *testing.T) {
	srv, store, _ := zoneServer(t)
	if a := do(t, srv, "PUT", "/v1/zones", collection(feature("A", 7))); a.status != 200 {
		t.Fatal(a.raw)
	}
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = do(t, srv, "PUT", fmt.Sprintf("/v1/zones/Z%d", i), feature(fmt.Sprint("Z", i), 7+float64(i)/100)).status
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("change %d without If-Match: %d", i, s)
		}
	}
	v, _ := store.Version(context.Background())
	e, _ := store.Current(context.Background())
	fs, _ := zonestore.Features(e.Zones)
	if v != 1+n || len(fs) != 1+n {
		t.Fatalf("version %d with %d zones, want %d and %d: a change was lost", v, len(fs), 1+n, 1+n)
	}
	won := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = do(t, srv, "DELETE", fmt.Sprintf("/v1/zones/Z%d", i), "", "If-Match", fmt.Sprint(v)).status
		}()
	}
	wg.Wait()
	for _, s := range statuses {
		switch s {
		case 200:
			won++
		case 412:
		default:
			t.Errorf("status %d, want 200 or 412", s)
		}
	}
	if won != 1 {
		t.Errorf("%d deletes on If-Match %d landed, want 1", won, v)
	}
}

// TestIfMatch: the If-Match forms the description allows (a version, bare,
// quoted or weak, of at most 18 digits) and nothing else.
func TestIfMatch(t *testing.T) {
	tests := []struct {
		h    string
		want int64
		ok   bool
	}{
		{"", -1, true},
		{"5", 5, true},
		{`"5"`, 5, true},
		{`W/"5"`, 5, true},
		{"W/5", 5, true},
		{" 7 ", 7, true},
		{"999999999999999999", 999999999999999999, true},
		{"9999999999999999999", 0, false},
		{`"5`, 0, false},
		{`""5""`, 0, false},
		{"+5", 0, false},
		{"-0", 0, false},
		{"five", 0, false},
		{`W/"xj\Syox"`, 0, false},
		{"*", 0, false},
		{"present, empty", 0, false},
		{`"1", "2"`, 0, false},
		{"repeated", 0, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("PUT", "/v1/zones", nil)
		switch tt.h {
		case "":
		case "present, empty":
			r.Header["If-Match"] = []string{""}
		case "repeated":
			r.Header["If-Match"] = []string{"1", "1"}
		default:
			r.Header.Set("If-Match", tt.h)
		}
		got, ok := ifMatch(r)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("If-Match %q = %d, %v, want %d, %v", tt.h, got, ok, tt.want, tt.ok)
		}
	}
}

// TestIfMatchAsDescribed: the description's If-Match pattern allows
// exactly what the server reads as a version, on every zone change.
func TestIfMatchAsDescribed(t *testing.T) {
	values := []string{"5", `"5"`, `W/"5"`, "W/5", "0", "999999999999999999", "9999999999999999999",
		`"5`, `""5""`, "+5", "-0", "five", `W/"xj\Syox"`, "*", `"1", "2"`, "", "5 6"}
	for _, op := range [][2]string{{"PUT", "/v1/zones"}, {"PUT", "/v1/zones/{id}"}, {"DELETE", "/v1/zones/{id}"}} {
		schema := described(t, op[0], op[1], "header", "If-Match")
		for _, v := range values {
			r := httptest.NewRequest(op[0], "/v1/zones", nil)
			r.Header["If-Match"] = []string{v}
			_, ok := ifMatch(r)
			if desc := conforms(t, schema, v, false); desc != ok {
				t.Errorf("%s %s: If-Match %q: the description allows it: %v, the server: %v", op[0], op[1], v, desc, ok)
			}
		}
	}
}

// TestZoneSetBodyAsDescribed: the zone set bodies the server takes (an
// ED-269 list may be a bare array) are ones the description allows, and
// the shapes it refuses before loading are ones it does not.
func TestZoneSetBodyAsDescribed(t *testing.T) {
	srv, _, _ := zoneServer(t)
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "testdata/zones/ed269/nofly_eurocontrol_uas_zones.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ed269 struct {
		UASZones json.RawMessage `json:"uas_zones"`
	}
	if err := json.Unmarshal(b, &ed269); err != nil {
		t.Fatal(err)
	}
	schema := described(t, "PUT", "/v1/zones", "body", "")
	tests := []struct {
		name, body string
		status     int
	}{
		{"GeoJSON", collection(feature("A", 7)), 200},
		{"ED-269 object", string(b), 200},
		{"ED-269 array", string(ed269.UASZones), 200},
		{"a string", `"zones"`, 400},
		{"a number", `5`, 400},
		{"null", `null`, 400},
	}
	for _, tt := range tests {
		a := do(t, srv, "PUT", "/v1/zones", tt.body)
		if a.status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, a.status, a.raw, tt.status)
		}
		if desc := conforms(t, schema, tt.body, true); desc != (tt.status == 200) {
			t.Errorf("%s: the description allows it: %v, want %v", tt.name, desc, tt.status == 200)
		}
	}
}

// TestZoneSetBodyLimit (issue 29): PUT /v1/zones takes bodies up to its
// own limit (--api-zone-set-max-bytes, default 128 MiB, so a national set
// gets through); past it the 413 names the limit in bytes and MiB and the
// flag, whether the client announced its length or not.
func TestZoneSetBodyLimit(t *testing.T) {
	o := Options{Redis: testenv.RedisClient(t), Prefix: testenv.RedisPrefix(t, "zonelimit"), Topic: "telemetry.positions", Partitions: 2,
		BodyLimits: map[string]int64{"PUT /v1/zones": 64 << 10}}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := New(Options{Redis: o.Redis, Topic: "t", Partitions: 1}); d.o.BodyLimits["PUT /v1/zones"] != 128<<20 {
		t.Errorf("default zone set limit %d, want 128 MiB", d.o.BodyLimits["PUT /v1/zones"])
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	fs := make([]string, 0, 600)
	for i := range cap(fs) {
		fs = append(fs, feature(fmt.Sprintf("Z%04d", i), 7+float64(i)/1000))
	}
	over := collection(fs...) // ~100 KB
	under := collection(fs[:100]...)
	tests := []struct {
		name    string
		body    string
		chunked bool // no Content-Length: the limit holds on reading
		status  int
	}{
		{"under the limit", under, false, 200},
		{"over, length announced", over, false, 413},
		{"over, chunked", over, true, 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length from net/http
			}
			req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/zones", body)
			req.Header.Set("Content-Type", "application/geo+json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("%d, want %d: %.300s", res.StatusCode, tc.status, b)
			}
			if tc.status == 413 {
				for _, want := range []string{"65536 bytes", "0.0625 MiB", "--api-zone-set-max-bytes", `"limit":65536`, `"code":"too_large"`} {
					if !strings.Contains(string(b), want) {
						t.Errorf("413 %s does not say %q", b, want)
					}
				}
			}
		})
	}
}
