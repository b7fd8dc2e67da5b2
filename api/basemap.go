package api

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/internal/pmtiles"
)

// Basemap is what the dashboard draws under the zones (--map-tiles,
// --map-pmtiles, --map-attribution); zero: the coastline only.
type Basemap struct {
	// TilesURL is an XYZ raster template, http(s) with {z}, {x} and {y}:
	// the browser fetches it from that origin (the dashboard's CSP admits
	// exactly its origin in img-src).
	TilesURL string
	// PMTiles is a local PMTiles v3 archive of vector tiles, served at
	// GET /v1/map/basemap.pmtiles with range requests; Header is its
	// header as read at start.
	PMTiles string
	Header  pmtiles.Header
	// Attribution is shown in the map's corner (plain text).
	Attribution string
}

// basemapPath is where the archive is served; the page reads it with its
// token, as every /v1 route.
const basemapPath = "/v1/map/basemap.pmtiles"

// mountBasemap serves the base map's description and the PMTiles archive,
// both to the viewer role: the page draws them for whoever may see the map.
func (s *Server) mountBasemap(r chi.Router) {
	r.With(s.require(RoleViewer)).Get("/v1/map/basemap", s.basemap)
	r.With(s.require(RoleViewer)).Get(basemapPath, s.basemapArchive)
}

// basemap is GET /v1/map/basemap: what the page should draw under the
// zones.
func (s *Server) basemap(w http.ResponseWriter, r *http.Request) {
	b := s.o.Basemap
	switch {
	case b.PMTiles != "":
		h := b.Header
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "pmtiles", "url": strings.TrimPrefix(basemapPath, "/"), "attribution": b.Attribution,
			"min_zoom": h.MinZoom, "max_zoom": h.MaxZoom, "bounds": h.Bounds[:],
			"center": []float64{h.Center[0], h.Center[1], float64(h.CenterZoom)},
		})
	case b.TilesURL != "":
		writeJSON(w, http.StatusOK, map[string]any{"kind": "tiles", "url": b.TilesURL, "attribution": b.Attribution})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"kind": "coastline"})
	}
}

// basemapArchive is GET /v1/map/basemap.pmtiles: the archive with single
// range requests (206, 416 past its end or for several ranges at once),
// a strong ETag of its size and modification time (If-None-Match: 304,
// If-Range), read from the file at each request so a replaced file is
// served at once, under a new ETag.
func (s *Server) basemapArchive(w http.ResponseWriter, r *http.Request) {
	p := s.o.Basemap.PMTiles
	if p == "" {
		writeError(w, http.StatusNotFound, "not_found", "this alerter serves no base map archive (--map-pmtiles)", nil)
		return
	}
	if strings.Contains(r.Header.Get("Range"), ",") {
		// One range at a time: a multipart answer has nothing a PMTiles
		// reader asks for, and is not described.
		w.Header().Set("Content-Range", "bytes */*")
		writeError(w, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", "ask one range at a time",
			map[string]any{"field": "Range"})
		return
	}
	f, err := os.Open(p)
	if err != nil {
		s.log.Error("base map archive", "map_pmtiles", p, "err", err)
		writeError(w, http.StatusServiceUnavailable, "basemap_unavailable", "the base map archive cannot be read", nil)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		s.log.Error("base map archive", "map_pmtiles", p, "err", err)
		writeError(w, http.StatusServiceUnavailable, "basemap_unavailable", "the base map archive cannot be read", nil)
		return
	}
	h := w.Header()
	h.Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.Size(), fi.ModTime().UnixNano()))
	h.Set("Content-Type", "application/vnd.pmtiles")
	h.Set("Cache-Control", "private, no-cache")
	h.Set("Accept-Ranges", "bytes")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}
