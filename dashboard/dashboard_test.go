package dashboard

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestVendoredAssets: every vendored file is embedded with the SHA-256
// scripts/vendor-dashboard.sh recorded from the pinned, checked tarballs,
// and nothing unrecorded is there.
func TestVendoredAssets(t *testing.T) {
	web := Web()
	sums, err := fs.ReadFile(web, "vendor/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(sums)))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not \"<sum>  <file>\"", sc.Text())
		}
		want[name] = sum
	}
	for _, lic := range []string{"leaflet/LICENSE", "topojson-client/LICENSE", "world-atlas/LICENSE"} {
		if _, ok := want[lic]; !ok {
			t.Errorf("%s is not vendored: a vendored package keeps its licence", lic)
		}
	}
	err = fs.WalkDir(web, "vendor", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "vendor/SHA256SUMS" {
			return err
		}
		name := strings.TrimPrefix(p, "vendor/")
		b, err := fs.ReadFile(web, p)
		if err != nil {
			return err
		}
		got := sha256.Sum256(b)
		switch w, ok := want[name]; {
		case !ok:
			t.Errorf("%s is embedded but not in SHA256SUMS (vendor it with scripts/vendor-dashboard.sh)", p)
		case hex.EncodeToString(got[:]) != w:
			t.Errorf("%s: SHA-256 %x, SHA256SUMS says %s: the vendored file was changed", p, got, w)
		}
		delete(want, name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		t.Errorf("SHA256SUMS lists %s, which is not embedded", name)
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	tests := []struct {
		method, path string
		status       int
		ctype        string
		cache        string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", "no-cache"},
		{"GET", "/app.js", 200, "text/javascript; charset=utf-8", "no-cache"},
		{"GET", "/app.css", 200, "text/css; charset=utf-8", "no-cache"},
		{"GET", "/vendor/leaflet/leaflet.js", 200, "text/javascript; charset=utf-8", "public, max-age=86400"},
		{"HEAD", "/vendor/world-atlas/land-50m.json", 200, "application/json", "public, max-age=86400"},
		{"GET", "/nope.js", 404, "", ""},
		{"POST", "/", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if got := res.Header.Get("Content-Security-Policy"); got != CSP {
				t.Errorf("CSP %q, want %q", got, CSP)
			}
			if tt.ctype != "" && res.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", res.Header.Get("Content-Type"), tt.ctype)
			}
			if tt.cache != "" && res.Header.Get("Cache-Control") != tt.cache {
				t.Errorf("Cache-Control %q, want %q", res.Header.Get("Cache-Control"), tt.cache)
			}
		})
	}
}

// TestTileOrigin: --map-tiles admits exactly its origin as an image
// source; a template that is not one http(s) origin is refused.
func TestTileOrigin(t *testing.T) {
	for _, c := range []struct {
		template, origin, err string
	}{
		{"https://tile.example/{z}/{x}/{y}.png", "https://tile.example", ""},
		{"http://10.0.0.5:8080/osm/{z}/{x}/{y}.png?key=abc", "http://10.0.0.5:8080", ""},
		{"https://tile.example/{z}/{x}.png", "", "no {y}"},
		{"ftp://tile.example/{z}/{x}/{y}.png", "", "http(s)"},
		{"https://user:pw@tile.example/{z}/{x}/{y}.png", "", "without credentials"},
		{"https://{z}.tile.example/{x}/{y}.png", "", "one origin"},
		{"https://tile.example/{z}/{x}/{y}.png; script-src *", "", "one origin"},
		{"/tiles/{z}/{x}/{y}.png", "", "http(s)"},
	} {
		o, err := TileOrigin(c.template)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.template, err, c.err)
			}
			continue
		}
		if err != nil || o != c.origin {
			t.Errorf("%s: %q %v, want %q", c.template, o, err, c.origin)
		}
	}
	csp := CSPFor("https://tile.example")
	if want := "default-src 'self'; img-src 'self' data: https://tile.example; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"; csp != want {
		t.Errorf("CSPFor: %q, want %q", csp, want)
	}
	if CSPFor("") != CSP {
		t.Error("CSPFor(\"\") is not CSP")
	}
	res := httptest.NewRecorder()
	HandlerFor("https://tile.example").ServeHTTP(res, httptest.NewRequest("GET", "/", nil))
	if res.Header().Get("Content-Security-Policy") != csp {
		t.Errorf("HandlerFor's CSP %q", res.Header().Get("Content-Security-Policy"))
	}
}
