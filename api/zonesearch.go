package api

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paulmach/orb"
)

// GET /v1/map/zones/search?q=: the dashboard's search box finds a zone by
// id or name without the page holding the set (a national set is 30 MB;
// the page holds only its view's zones). The answer is a few names and
// bounds, read from the view index of the version in force, so a search
// costs no parse; the lowercased names are built once per version.

const (
	// zoneSearchDefault and zoneSearchMax bound an answer's matches.
	zoneSearchDefault = 10
	zoneSearchMax     = 50
)

// zoneSearch holds the search entries of the view index last searched.
type zoneSearch struct {
	m       *mapAPI
	mu      sync.Mutex
	vi      *viewIndex
	entries []zoneSearchEntry
}

// zoneSearchEntry is one zone: its volumes' bounds united.
type zoneSearchEntry struct {
	id, name, category string
	lid, lname         string // lowercased, for matching
	bound              orb.Bound
}

// ZoneMatch is one zone of a search answer.
type ZoneMatch struct {
	ZoneID   string `json:"zone_id"`
	Name     string `json:"name"`
	Category string `json:"category"`
	// BBox is minLon,minLat,maxLon,maxLat of the zone's volumes (a zone
	// across the antimeridian: every longitude).
	BBox [4]float64 `json:"bbox"`
}

// zoneSearchAnswer is the route's answer.
type zoneSearchAnswer struct {
	ZoneVersion int64       `json:"zone_version"`
	Zones       []ZoneMatch `json:"zones"`
	// More: more zones matched than were given.
	More bool `json:"more"`
}

// entriesOf returns vi's entries, built on the first search of vi.
func (zs *zoneSearch) entriesOf(vi *viewIndex) []zoneSearchEntry {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if zs.vi == vi {
		return zs.entries
	}
	at := map[string]int{}
	var out []zoneSearchEntry
	for _, f := range vi.feats {
		z := f.zone
		if i, ok := at[z.ID]; ok {
			out[i].bound = out[i].bound.Union(f.bound)
			continue
		}
		at[z.ID] = len(out)
		out = append(out, zoneSearchEntry{id: z.ID, name: z.Name, category: string(z.Category),
			lid: strings.ToLower(z.ID), lname: strings.ToLower(z.Name), bound: f.bound})
	}
	zs.vi, zs.entries = vi, out
	return out
}

// rank is how well e matches q (lowercased): 0 an exact id or name, 1 an
// id or name that starts with it, 2 a word of the name that does, 3 it
// anywhere in the id or name; -1 no match.
func (e *zoneSearchEntry) rank(q string) int {
	switch {
	case e.lid == q || e.lname == q:
		return 0
	case strings.HasPrefix(e.lid, q) || strings.HasPrefix(e.lname, q):
		return 1
	case strings.Contains(e.lname, " "+q):
		return 2
	case strings.Contains(e.lid, q) || strings.Contains(e.lname, q):
		return 3
	}
	return -1
}

func (zs *zoneSearch) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qs := r.URL.Query()
	q := qs.Get("q")
	if q == "" {
		badDroneParam(w, "q", "required: a zone id or name, or part of one")
		return
	}
	limit := zoneSearchDefault
	if qs.Has("limit") {
		n, err := strconv.Atoi(qs.Get("limit"))
		if err != nil || n < 1 || n > zoneSearchMax {
			badDroneParam(w, "limit", "must be an integer from 1 to "+strconv.Itoa(zoneSearchMax))
			return
		}
		limit = n
	}
	v, err := zs.m.zones.Version(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "read the zone set version: "+err.Error(), nil)
		return
	}
	vi, err := zs.m.viewIndexOf(ctx, v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	writeJSON(w, http.StatusOK, zs.find(vi, q, limit))
}

// catOrder puts restricted zones before warning ones.
func catOrder(c string) int {
	if c == "restricted" {
		return 0
	}
	return 1
}

// find is the answer for q over vi: a scan of its zones, 5 ms at 100,000
// (BenchmarkZoneSearch; 17 ms with both of a 2-core machine's cores busy).
func (zs *zoneSearch) find(vi *viewIndex, q string, limit int) zoneSearchAnswer {
	lq := strings.ToLower(q)
	type hit struct {
		e    *zoneSearchEntry
		rank int
	}
	// The best first; among equals, restricted zones, then the shorter
	// name (the zone itself before "its approach"), then by id.
	less := func(a, b hit) bool {
		return cmp.Or(cmp.Compare(a.rank, b.rank),
			cmp.Compare(catOrder(a.e.category), catOrder(b.e.category)),
			cmp.Compare(len(a.e.name), len(b.e.name)),
			strings.Compare(a.e.id, b.e.id)) < 0
	}
	// The best limit kept in order as they come, not every match sorted
	// (a common word matches most of a set).
	hits := make([]hit, 0, limit+1)
	matched := 0
	entries := zs.entriesOf(vi)
	for i := range entries {
		k := entries[i].rank(lq)
		if k < 0 {
			continue
		}
		matched++
		h := hit{&entries[i], k}
		if len(hits) == limit && !less(h, hits[limit-1]) {
			continue
		}
		j, _ := slices.BinarySearchFunc(hits, h, func(a, b hit) int {
			if less(a, b) {
				return -1
			}
			return 1
		})
		hits = slices.Insert(hits, j, h)
		if len(hits) > limit {
			hits = hits[:limit]
		}
	}
	out := zoneSearchAnswer{ZoneVersion: vi.version, Zones: []ZoneMatch{}, More: matched > limit}
	for _, h := range hits {
		b := h.e.bound
		out.Zones = append(out.Zones, ZoneMatch{ZoneID: h.e.id, Name: h.e.name, Category: h.e.category,
			BBox: [4]float64{b.Min[0], b.Min[1], b.Max[0], b.Max[1]}})
	}
	return out
}
