// Package dashboard is the operators' web page that cmd/alerter serves at
// /: a map of the zones, the drones and their tracks, and the alarms with
// their acknowledgement, on the alert API (package api). Every asset is in
// the binary (embed.FS) and the page asks nothing of any other origin: a
// control room without internet sees the same page. The Content-Security-
// Policy on every answer (default-src 'self') makes a browser refuse
// anything else. The one exception is an operator's choice: --map-tiles
// admits its tile server's origin as an image source (CSPFor).
//
// The third-party files under web/vendor (Leaflet, topojson-client and
// Natural Earth land outlines from world-atlas) come from pinned npm
// packages through scripts/vendor-dashboard.sh, which checks each tarball's
// SHA-256; TestVendoredAssets checks the embedded copies against the sums it
// wrote.
package dashboard

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed web
var files embed.FS

// Web is the dashboard's files, index.html at the root.
func Web() fs.FS {
	sub, err := fs.Sub(files, "web")
	if err != nil {
		panic(err) // "web" is embedded above
	}
	return sub
}

// CSP is the Content-Security-Policy of every dashboard answer: nothing
// from another origin, no inline script or style, no framing.
const CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// CSPFor is CSP with tileOrigin (the origin of --map-tiles, as TileOrigin
// gives it) admitted as an image source, and nothing else: the base map's
// tiles are <img>s from there. "" is CSP.
func CSPFor(tileOrigin string) string {
	if tileOrigin == "" {
		return CSP
	}
	return strings.Replace(CSP, "img-src 'self' data:;", "img-src 'self' data: "+tileOrigin+";", 1)
}

// TileOrigin is the origin (scheme://host[:port]) of an XYZ tile template
// with {z}, {x} and {y}, for CSPFor; an error says what is wrong with it.
// The placeholders may stand only in the path and query: a template that
// varies its host would need more than one origin admitted.
func TileOrigin(template string) (string, error) {
	for _, p := range []string{"{z}", "{x}", "{y}"} {
		if !strings.Contains(template, p) {
			return "", fmt.Errorf("%q has no %s: an XYZ template needs {z}, {x} and {y}", template, p)
		}
	}
	u, err := url.Parse(strings.NewReplacer("{z}", "0", "{x}", "0", "{y}", "0").Replace(template))
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %w", template, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", fmt.Errorf("%q must be an http(s)://host/... URL without credentials", template)
	}
	_, rest, _ := strings.Cut(template, "://")
	host, _, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(host, "{}*?#") || strings.ContainsAny(template, "'; \"<>") {
		return "", fmt.Errorf("%q has a character a URL template does not: its host must be one origin", template)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Handler serves the dashboard: GET or HEAD of / and of its files. The API
// routes are not its: the caller mounts it beside them.
func Handler() http.Handler { return HandlerFor("") }

// HandlerFor is Handler with tileOrigin admitted as an image source
// (CSPFor): the dashboard of an alerter with --map-tiles.
func HandlerFor(tileOrigin string) http.Handler {
	fsrv := http.FileServerFS(Web())
	csp := CSPFor(tileOrigin)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard is read with GET", http.StatusMethodNotAllowed)
			return
		}
		// The vendored files never change under a version; the page's own
		// files change with the binary, so they are revalidated.
		if strings.HasPrefix(path.Clean(r.URL.Path), "/vendor/") {
			h.Set("Cache-Control", "public, max-age=86400")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		fsrv.ServeHTTP(w, r)
	})
}

// Files is the top-level entries of Web(), folders ending in "/": the
// paths a router sends to Handler.
func Files() []string {
	es, err := fs.ReadDir(Web(), ".")
	if err != nil {
		panic(err)
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	return out
}
