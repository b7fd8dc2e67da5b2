// Package dashboard is the operators' web page that cmd/alerter serves at
// /: a map of the zones, the drones and their tracks, and the alarms with
// their acknowledgement, on the alert API (package api). Every asset is in
// the binary (embed.FS) and the page asks nothing of any other origin: a
// control room without internet sees the same page. The Content-Security-
// Policy on every answer (default-src 'self') makes a browser refuse
// anything else.
//
// The third-party files under web/vendor (Leaflet, topojson-client and
// Natural Earth land outlines from world-atlas) come from pinned npm
// packages through scripts/vendor-dashboard.sh, which checks each tarball's
// SHA-256; TestVendoredAssets checks the embedded copies against the sums it
// wrote.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
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

// Handler serves the dashboard: GET or HEAD of / and of its files. The API
// routes are not its: the caller mounts it beside them.
func Handler() http.Handler {
	fsrv := http.FileServerFS(Web())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
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
