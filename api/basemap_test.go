package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/pmtiles"
)

// basemapServer is the API with bm as its base map, no tokens (anonymous
// admin, as on a loopback listener): the routes need no Redis.
func basemapServer(t *testing.T, bm Basemap) http.Handler {
	t.Helper()
	s, err := New(Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Topic: "t", Partitions: 1, Basemap: bm})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

func testArchive(t *testing.T) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	err := pmtiles.Write(&buf, pmtiles.Archive{TileType: pmtiles.TileMVT, TileCompression: pmtiles.CompressionGzip,
		Tiles: []pmtiles.Tile{{Z: 0, Data: []byte("zero")}, {Z: 1, X: 1, Y: 0, Data: []byte("one")}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "map.pmtiles")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, buf.Bytes()
}

func TestBasemapArchive(t *testing.T) {
	p, whole := testArchive(t)
	h := basemapServer(t, Basemap{PMTiles: p, Attribution: "© OpenStreetMap contributors"})
	do := func(hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/map/basemap.pmtiles", nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := do(map[string]string{"Range": "bytes=0-126"})
	etag := first.Header().Get("ETag")
	if first.Code != http.StatusPartialContent || first.Body.Len() != 127 || !bytes.Equal(first.Body.Bytes(), whole[:127]) {
		t.Fatalf("header range: %d, %d bytes", first.Code, first.Body.Len())
	}
	if cr := first.Header().Get("Content-Range"); cr != "bytes 0-126/"+itoa(len(whole)) {
		t.Errorf("Content-Range %q", cr)
	}
	if len(etag) < 4 || etag[0] != '"' || first.Header().Get("Content-Type") != "application/vnd.pmtiles" {
		t.Errorf("ETag %q, Content-Type %q", etag, first.Header().Get("Content-Type"))
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		code int
		body []byte
	}{
		{"whole", nil, http.StatusOK, whole},
		{"suffix", map[string]string{"Range": "bytes=-4"}, http.StatusPartialContent, whole[len(whole)-4:]},
		{"not modified", map[string]string{"If-None-Match": etag}, http.StatusNotModified, nil},
		{"if-range same", map[string]string{"Range": "bytes=1-2", "If-Range": etag}, http.StatusPartialContent, whole[1:3]},
		{"if-range other", map[string]string{"Range": "bytes=1-2", "If-Range": `"other"`}, http.StatusOK, whole},
		{"past the end", map[string]string{"Range": "bytes=100000-100010"}, http.StatusRequestedRangeNotSatisfiable, nil},
		{"several", map[string]string{"Range": "bytes=0-1,4-5"}, http.StatusRequestedRangeNotSatisfiable, nil},
	} {
		w := do(c.hdr)
		if w.Code != c.code || (c.body != nil && !bytes.Equal(w.Body.Bytes(), c.body)) {
			t.Errorf("%s: %d with %d bytes, want %d", c.name, w.Code, w.Body.Len(), c.code)
		}
	}
	// A replaced file is served at once, under another ETag.
	if err := os.WriteFile(p, append(whole, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := do(map[string]string{"If-None-Match": etag}); w.Code != http.StatusOK || w.Header().Get("ETag") == etag {
		t.Errorf("after replacing the file: %d, ETag %q (was %q)", w.Code, w.Header().Get("ETag"), etag)
	}
}

func TestBasemapDescription(t *testing.T) {
	p, _ := testArchive(t)
	for _, c := range []struct {
		name    string
		bm      Basemap
		want    map[string]any
		archive int
	}{
		{"coastline", Basemap{}, map[string]any{"kind": "coastline"}, http.StatusNotFound},
		{"tiles", Basemap{TilesURL: "https://tiles.example/{z}/{x}/{y}.png", Attribution: "© OSM"},
			map[string]any{"kind": "tiles", "url": "https://tiles.example/{z}/{x}/{y}.png", "attribution": "© OSM"}, http.StatusNotFound},
		{"pmtiles", Basemap{PMTiles: p, Attribution: "© OSM", Header: pmtiles.Header{MinZoom: 10, MaxZoom: 15}},
			map[string]any{"kind": "pmtiles", "url": "v1/map/basemap.pmtiles", "attribution": "© OSM", "min_zoom": 10.0, "max_zoom": 15.0}, http.StatusOK},
	} {
		h := basemapServer(t, c.bm)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/map/basemap", nil))
		var got map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %s", c.name, w.Code, w.Body)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", c.name, k, got[k], v)
			}
		}
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/map/basemap.pmtiles", nil))
		if w.Code != c.archive {
			b, _ := io.ReadAll(w.Body)
			t.Errorf("%s: archive %d %s, want %d", c.name, w.Code, b, c.archive)
		}
	}
}

// TestBasemapNeedsToken: with a token file, both routes are the viewer's.
func TestBasemapNeedsToken(t *testing.T) {
	p, _ := testArchive(t)
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ts := &Tokens{Tokens: []Token{{Name: "wall", Role: RoleViewer, Hash: HashToken(tok)}}}
	s, err := New(Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Topic: "t", Partitions: 1, Tokens: ts, Basemap: Basemap{PMTiles: p}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/map/basemap", "/v1/map/basemap.pmtiles"} {
		for _, auth := range []string{"", "Bearer " + tok} {
			r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
			if auth != "" {
				r.Header.Set("Authorization", auth)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			want := http.StatusOK
			if auth == "" {
				want = http.StatusUnauthorized
			}
			if w.Code != want {
				t.Errorf("%s with a token %v: %d, want %d", path, auth != "", w.Code, want)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
