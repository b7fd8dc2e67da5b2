package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/gchold"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// Body limit of a one-feature change (a whole set's is the route's,
// Options.BodyLimits), and how often a change retries.
const (
	maxFeatureBody  = 1 << 20
	putConflictTrys = 100 // a change without If-Match retries a lost race this often
)

// zonesAPI serves /v1/zones from the zone store (geofence/zonestore).
type zonesAPI struct {
	s     *Server
	store *zonestore.Store
	v     zonestore.Validator

	mu   sync.Mutex
	last zoneIDs // the version this instance stored last
	// validating lets one change validate at a time: a set's validation
	// holds ~12 times its size in heap (1 GiB for an 83 MB ED-269 set), so
	// two at once would double the instance's peak for no gain (the
	// changes are stored one after the other anyway).
	validating sync.Mutex
}

// zoneIDs are a version's zone ids and fingerprints, in the set's order:
// what a change's answer is diffed against. The version this instance
// stored last is kept, so a change after it does not parse the whole set
// again (a 100,000-zone set takes seconds to parse).
type zoneIDs struct {
	version int64
	at      time.Time // with the version: a store emptied and seeded again reuses versions
	ids     []string
	fp      map[string]string
}

func idsOf(e zonestore.Entry, set *geofence.ZoneSet) zoneIDs {
	z := zoneIDs{version: e.Version, at: e.At, ids: make([]string, len(set.Zones)), fp: make(map[string]string, len(set.Zones))}
	for i, zn := range set.Zones {
		z.ids[i], z.fp[zn.ID] = zn.ID, zn.Fingerprint
	}
	return z
}

// idsAt returns version e's ids: the kept ones when they are e's, else
// parsed from e (an empty store is version 0 with no zones); ok is false
// when e does not load here.
func (z *zonesAPI) idsAt(e zonestore.Entry) (zoneIDs, bool) {
	z.mu.Lock()
	last := z.last
	z.mu.Unlock()
	if last.fp != nil && last.version == e.Version && last.at.Equal(e.At) {
		return last, true
	}
	if e.Version == 0 {
		return zoneIDs{}, true
	}
	var set *geofence.ZoneSet
	var err error
	gchold.Do(gchold.Budget(len(e.Zones)), func() { set, _, err = z.v.Loader.Parse(bytes.NewReader(e.Zones)) })
	if err != nil {
		return zoneIDs{}, false
	}
	return idsOf(e, set), true
}

// diffIDs is geofence.Diff by ids and fingerprints: added and changed in
// cur's order, removed in old's.
func diffIDs(old, cur zoneIDs) geofence.Changes {
	var ch geofence.Changes
	for _, id := range cur.ids {
		switch fp, ok := old.fp[id]; {
		case !ok:
			ch.Added = append(ch.Added, id)
		case fp != cur.fp[id]:
			ch.Changed = append(ch.Changed, id)
		}
	}
	for _, id := range old.ids {
		if _, ok := cur.fp[id]; !ok {
			ch.Removed = append(ch.Removed, id)
		}
	}
	return ch
}

// mountZones adds the /v1/zones routes: reads need a viewer, changes an
// admin. Every change is validated whole with the alerter's zone options
// and written all-or-nothing as the next integer version.
func (s *Server) mountZones(r chi.Router) {
	z := &zonesAPI{s: s, v: s.o.ZoneValidator,
		store: zonestore.New(s.o.Redis, zonestore.Options{Prefix: s.o.Prefix, Retention: s.o.AlarmRetention, MaxBytes: s.o.ZoneHistoryMaxBytes,
			Now: s.o.Now, Replicas: s.o.Replicas})}
	r.With(s.zoneRole(RoleViewer)).Get("/v1/zones", z.list)
	r.With(s.zoneRole(RoleAdmin)).Put("/v1/zones", z.putSet)
	r.With(s.zoneRole(RoleViewer)).Get("/v1/zones/history", z.history)
	r.With(s.zoneRole(RoleViewer)).Get("/v1/zones/{id}", z.get)
	// PUT and DELETE of /v1/zones/history are 405 (Allow: GET), not zone
	// changes: the path is the history's (vet, in params.go).
	r.With(s.zoneRole(RoleAdmin)).Put("/v1/zones/{id}", z.putFeature)
	r.With(s.zoneRole(RoleAdmin)).Delete("/v1/zones/{id}", z.delete)
}

// zoneRole is the role check of a zone route (H1's require once it lands).
func (s *Server) zoneRole(role Role) func(http.Handler) http.Handler { return s.require(role) }

func etag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// current returns the current entry; an empty store is version 0 with no
// zones.
func (z *zonesAPI) current(ctx context.Context) (zonestore.Entry, error) {
	e, err := z.store.Current(ctx)
	if errors.Is(err, zonestore.ErrEmpty) {
		return zonestore.Entry{Format: string(geofence.FormatGeoJSON), Zones: json.RawMessage(`{"type":"FeatureCollection","features":[]}`)}, nil
	}
	return e, err
}

func (z *zonesAPI) list(w http.ResponseWriter, r *http.Request) {
	e, err := z.current(r.Context())
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", "read the zone set: "+err.Error(), nil)
		return
	}
	doc, err := zonestore.WithVersion(e.Zones, e.Version)
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	w.Header().Set("ETag", etag(e.Version))
	w.Header().Set("Content-Type", "application/geo+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}

func (z *zonesAPI) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	e, err := z.current(r.Context())
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", "read the zone set: "+err.Error(), nil)
		return
	}
	f, ok, err := zonestore.Feature(e.Zones, id)
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	if !ok {
		zoneError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no zone %q in version %d", id, e.Version), map[string]any{"id": id, "version": e.Version})
		return
	}
	w.Header().Set("ETag", etag(e.Version))
	w.Header().Set("Content-Type", "application/geo+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f)
}

// ZoneChange is the answer to a zone change.
type ZoneChange struct {
	Version         int64              `json:"version"`
	PreviousVersion int64              `json:"previous_version"`
	Format          string             `json:"format"`
	Zones           int                `json:"zones"`
	Added           []string           `json:"added"`
	Removed         []string           `json:"removed"`
	Changed         []string           `json:"changed"`
	Warnings        []geofence.Problem `json:"warnings"`
}

// ifMatchSyntax is the If-Match the description allows: a version, bare,
// quoted or weak (5, "5", W/"5"), of at most 18 digits so that it fits an
// int64.
var ifMatchSyntax = regexp.MustCompile(`^(?:W/)?(?:"([0-9]{1,18})"|([0-9]{1,18}))$`)

// ifMatch reads If-Match: a version, quoted or not (ETag); absent is -1.
// An empty or repeated one is not a version.
func ifMatch(r *http.Request) (int64, bool) {
	vs, ok := r.Header["If-Match"]
	if !ok {
		return -1, true
	}
	if len(vs) != 1 {
		return 0, false
	}
	m := ifMatchSyntax.FindStringSubmatch(strings.TrimSpace(vs[0]))
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseInt(m[1]+m[2], 10, 64)
	return v, err == nil
}

// change applies edit to the current set and stores the result as the next
// version: against If-Match when given (412 when it is not current), else
// against the version read, retried when another change wins the race.
func (z *zonesAPI) change(w http.ResponseWriter, r *http.Request, edit func(e zonestore.Entry) ([]byte, *apiError)) {
	want, ok := ifMatch(r)
	if !ok {
		zoneError(w, http.StatusBadRequest, "bad_request", "If-Match must be a zone set version (an integer, as the ETag gives it)", map[string]any{"field": "If-Match"})
		return
	}
	ctx := r.Context()
	for try := 0; ; try++ {
		cur, err := z.current(ctx)
		if err != nil {
			zoneError(w, http.StatusInternalServerError, "internal", "read the zone set: "+err.Error(), nil)
			return
		}
		if want >= 0 && cur.Version != want {
			precondition(w, want, cur.Version)
			return
		}
		doc, aerr := edit(cur)
		if aerr != nil {
			zoneError(w, aerr.status, aerr.code, aerr.msg, aerr.details)
			return
		}
		z.validating.Lock()
		var format geofence.Format
		var norm json.RawMessage
		var set *geofence.ZoneSet
		// The collector held off while the set parses (gchold): its assists
		// would otherwise stall the partitions' batches of this process.
		gchold.Do(gchold.Budget(len(doc)), func() { format, norm, set, err = z.v.Normalize(doc) })
		z.validating.Unlock()
		if pw, ok := w.(*httpserve.PacedWriter); ok {
			pw.Restart() // the answer's write time starts after the validation, not when the set began to arrive
		}
		if err != nil {
			invalidZones(w, err)
			return
		}
		e, err := z.store.Put(ctx, cur.Version, string(format), norm, callerName(ctx))
		var ce *zonestore.ConflictError
		if errors.As(err, &ce) {
			if want >= 0 || try+1 >= putConflictTrys {
				precondition(w, cur.Version, ce.Current)
				return
			}
			continue
		}
		if errors.Is(err, redisreplica.ErrNotReplicated) {
			w.Header().Set("Retry-After", "1")
			zoneError(w, http.StatusServiceUnavailable, "not_replicated",
				fmt.Sprintf("zone set version %d is stored on the Redis primary but not yet on enough replicas (--redis-min-replicas): GET /v1/zones shows whether it holds", cur.Version+1), nil)
			return
		}
		if err != nil {
			zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
			return
		}
		ans := ZoneChange{Version: e.Version, PreviousVersion: cur.Version, Format: e.Format, Zones: len(set.Zones),
			Warnings: set.Report.Warnings}
		now := idsOf(e, set)
		if old, ok := z.idsAt(cur); ok {
			ch := diffIDs(old, now)
			ans.Added, ans.Removed, ans.Changed = ch.Added, ch.Removed, ch.Changed
		}
		z.mu.Lock()
		z.last = now
		z.mu.Unlock()
		for _, l := range []*[]string{&ans.Added, &ans.Removed, &ans.Changed} {
			if *l == nil {
				*l = []string{}
			}
		}
		if ans.Warnings == nil {
			ans.Warnings = []geofence.Problem{}
		}
		// Counts, not the ids: a national set's change would be a line of
		// megabytes (the answer lists them).
		z.s.log.Info("zones changed", "version", e.Version, "by", e.By, "format", e.Format, "zones", ans.Zones,
			"added", len(ans.Added), "removed", len(ans.Removed), "changed", len(ans.Changed))
		w.Header().Set("ETag", etag(e.Version))
		zoneJSON(w, http.StatusOK, ans)
		return
	}
}

func callerName(ctx context.Context) string {
	if c, ok := CallerFrom(ctx); ok && c.Name != "" {
		return c.Name
	}
	return "unauthenticated"
}

func precondition(w http.ResponseWriter, ifMatch, current int64) {
	w.Header().Set("ETag", etag(current))
	zoneError(w, http.StatusPreconditionFailed, "version_mismatch",
		fmt.Sprintf("the zone set is at version %d, not %d: read it again and apply the change to it", current, ifMatch),
		map[string]any{"if_match": ifMatch, "current_version": current})
}

// invalidZones answers a change that does not load: 400 naming the first
// problem's feature and field, every problem listed.
func invalidZones(w http.ResponseWriter, err error) {
	var ve *geofence.ValidationError
	switch {
	case errors.As(err, &ve) && len(ve.Problems) > 0:
		p := ve.Problems[0]
		d := map[string]any{"field": p.Field, "problems": ve.Problems}
		if p.Feature > 0 {
			d["feature"] = p.Feature
		}
		if p.ID != "" {
			d["id"] = p.ID
		}
		msg := p.String()
		if n := len(ve.Problems); n > 1 {
			msg += fmt.Sprintf(" (and %d more problems)", n-1)
		}
		zoneError(w, http.StatusBadRequest, "invalid_zones", msg, d)
	case errors.Is(err, zonestore.ErrNoZones):
		zoneError(w, http.StatusBadRequest, "invalid_zones", err.Error()+" (the alerter runs with --allow-empty-zones off)", map[string]any{"field": "features"})
	default:
		zoneError(w, http.StatusBadRequest, "invalid_zones", err.Error(), map[string]any{"field": "body"})
	}
}

type apiError struct {
	status  int
	code    string
	msg     string
	details map[string]any
}

// readBody reads a request body of at most limit bytes; an empty one is
// refused (a change needs its zones), before If-Match is looked at.
func readBody(r *http.Request, route string, limit int64) ([]byte, *apiError) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) { // the route's limit, met before ours (a body without a length)
		return nil, &apiError{http.StatusRequestEntityTooLarge, "too_large", tooLarge(route, mbe.Limit), map[string]any{"field": "body", "limit": mbe.Limit}}
	}
	if err != nil {
		return nil, &apiError{http.StatusBadRequest, "bad_request", "read the body: " + err.Error(), map[string]any{"field": "body"}}
	}
	if int64(len(b)) > limit {
		return nil, &apiError{http.StatusRequestEntityTooLarge, "too_large", tooLarge(route, limit), map[string]any{"field": "body", "limit": limit}}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &apiError{http.StatusBadRequest, "bad_request", "body: required (the zones, as JSON)", map[string]any{"field": "body"}}
	}
	if aerr := zoneText(b); aerr != nil {
		return nil, aerr
	}
	return b, nil
}

// jsonShape refuses, before If-Match is looked at, a body that is not
// JSON or whose top value is not of one of the kinds ('{' object, '['
// array) the route takes: the description's 400, not a 412 for a body
// that could never apply.
func jsonShape(b []byte, kinds, what string) *apiError {
	t := bytes.TrimSpace(b)
	if !json.Valid(t) || !strings.ContainsRune(kinds, rune(t[0])) {
		return &apiError{http.StatusBadRequest, "bad_request", "body: must be " + what, map[string]any{"field": "body"}}
	}
	return nil
}

func (z *zonesAPI) putSet(w http.ResponseWriter, r *http.Request) {
	b, aerr := readBody(r, "PUT /v1/zones", z.s.o.BodyLimits["PUT /v1/zones"])
	if aerr == nil {
		aerr = jsonShape(b, "{[", "a zone set: a JSON object (GeoJSON, ED-318 or ED-269) or array (ED-269)")
	}
	if aerr != nil {
		zoneError(w, aerr.status, aerr.code, aerr.msg, aerr.details)
		return
	}
	r = r.WithContext(z.s.auditChange(r, audit.ActionZonesPut, "", http.StatusOK, nil))
	z.change(w, r, func(zonestore.Entry) ([]byte, *apiError) { return b, nil })
}

// idKey is where a feature of a stored set's format carries its zone id.
func idKey(format string) (outer, key string) {
	switch geofence.Format(format) {
	case geofence.FormatED318:
		return "properties", "identifier"
	case geofence.FormatED269:
		return "", "identifier"
	}
	return "properties", "id"
}

func (z *zonesAPI) putFeature(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	b, aerr := readBody(r, "PUT /v1/zones/{id}", maxFeatureBody)
	if aerr == nil {
		aerr = jsonShape(b, "{", "one zone feature (a JSON object, a GeoJSON Feature for a GeoJSON or ED-318 set)")
	}
	if aerr != nil {
		zoneError(w, aerr.status, aerr.code, aerr.msg, aerr.details)
		return
	}
	r = r.WithContext(z.s.auditChange(r, audit.ActionZonePut, id, http.StatusOK, nil))
	z.change(w, r, func(e zonestore.Entry) ([]byte, *apiError) {
		f, aerr := featureWithID(b, id, e.Format)
		if aerr != nil {
			return nil, aerr
		}
		doc, err := zonestore.WithFeature(e.Zones, id, f)
		if err != nil {
			return nil, &apiError{http.StatusInternalServerError, "internal", err.Error(), nil}
		}
		return doc, nil
	})
}

// featureWithID checks that the body is one feature whose zone id, if it
// has one, is the path's, and gives it the path's id when it has none.
func featureWithID(b []byte, id, format string) (json.RawMessage, *apiError) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil || m == nil {
		return nil, &apiError{http.StatusBadRequest, "bad_request", "the body must be one zone feature (a JSON object, a GeoJSON Feature for a GeoJSON or ED-318 set)", map[string]any{"field": "body"}}
	}
	outer, key := idKey(format)
	field := key
	if outer != "" {
		field = outer + "." + key
	}
	if got := zonestore.FeatureID(b); got != "" {
		if got != id {
			return nil, &apiError{http.StatusBadRequest, "bad_request", fmt.Sprintf("%s: the feature's id %q is not the path's %q", field, got, id), map[string]any{"field": field}}
		}
		return json.RawMessage(b), nil
	}
	q, _ := json.Marshal(id)
	if outer == "" {
		m[key] = q
	} else {
		var p map[string]json.RawMessage
		if raw, ok := m[outer]; ok && json.Unmarshal(raw, &p) != nil {
			return nil, &apiError{http.StatusBadRequest, "bad_request", outer + ": must be an object", map[string]any{"field": outer}}
		}
		if p == nil {
			p = map[string]json.RawMessage{}
		}
		p[key] = q
		pb, _ := json.Marshal(p)
		m[outer] = pb
	}
	out, _ := json.Marshal(m)
	return out, nil
}

func (z *zonesAPI) delete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	r = r.WithContext(z.s.auditChange(r, audit.ActionZoneDelete, id, http.StatusOK, nil))
	z.change(w, r, func(e zonestore.Entry) ([]byte, *apiError) {
		doc, had, err := zonestore.WithoutFeature(e.Zones, id)
		if err != nil {
			return nil, &apiError{http.StatusInternalServerError, "internal", err.Error(), nil}
		}
		if !had {
			return nil, &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("no zone %q in version %d", id, e.Version), map[string]any{"id": id, "version": e.Version}}
		}
		return doc, nil
	})
}

// zoneJSON and zoneError write JSON answers and the shared error body
// {"error", "code", "details"} (H1's writeJSON/writeError once they land).
func zoneJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode the answer","code":"internal","details":{}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func zoneError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	zoneJSON(w, status, map[string]any{"error": msg, "code": code, "details": details})
}
