package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/authorization/authstore"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/redisreplica"
	"github.com/nofly-dev/nofly/internal/versionstore"
)

// Bounds of the authorisation routes.
const (
	// maxAuthorizationBody bounds POST /v1/authorizations's body: a
	// request at every bound of authorization (256 zone ids of 256 bytes,
	// 1000 bytes of reason), each byte JSON-escaped, fits.
	maxAuthorizationBody = 1 << 20
	// defaultAuthorizationsLimit and maxAuthorizationsLimit page
	// GET /v1/authorizations.
	defaultAuthorizationsLimit = 100
	maxAuthorizationsLimit     = 1000
)

// The states of an authorisation at the server's now (?state).
var authorizationStates = []string{"active", "upcoming", "ended"}

// authorizationsAPI serves /v1/authorizations from the authorisation store
// (authorization/authstore): versioned like zones, a change is the next
// version, made by compare-and-set against the version read (If-Match).
type authorizationsAPI struct {
	s     *Server
	store *authstore.Store
}

// mountAuthorizations adds the /v1/authorizations routes: reads need a
// viewer, creating and revoking an admin (an authorisation silences an
// alarm's page: as much as changing a zone).
func (s *Server) mountAuthorizations(r chi.Router) {
	a := &authorizationsAPI{s: s, store: authstore.New(s.o.Redis, authstore.Options{Prefix: s.o.Prefix,
		Retention: s.o.AlarmRetention, Now: s.o.Now, Replicas: s.o.Replicas})}
	r.With(s.require(RoleViewer)).Get("/v1/authorizations", a.list)
	r.With(s.require(RoleAdmin)).Post("/v1/authorizations", a.create)
	r.With(s.require(RoleViewer)).Get("/v1/authorizations/history", a.history)
	r.With(s.require(RoleViewer)).Get("/v1/authorizations/{authorization_id}", a.get)
	r.With(s.require(RoleAdmin)).Delete("/v1/authorizations/{authorization_id}", a.revoke)
}

// authorizationItem is an authorisation as the API answers it: with its
// state at the server's now.
type authorizationItem struct {
	authorization.Authorization
	State string `json:"state"`
}

func item(a authorization.Authorization, now time.Time) authorizationItem {
	return authorizationItem{Authorization: a, State: a.State(now)}
}

// authorizationList is GET /v1/authorizations's answer; NextCursor is null
// on the last page.
type authorizationList struct {
	Version        int64               `json:"version"`
	Authorizations []authorizationItem `json:"authorizations"`
	NextCursor     *string             `json:"next_cursor"`
}

// authorizationFilter is GET /v1/authorizations's parameters.
type authorizationFilter struct {
	states   []string // any of them; empty: every state
	drone    string   // the authorisations naming this drone (by id or prefix)
	zone     string   // whose scope is "all" or names this zone id
	category geofence.Category
	limit    int
	cursor   string // ids below it
}

func (f *authorizationFilter) match(a *authorization.Authorization, now time.Time) bool {
	return (len(f.states) == 0 || slices.Contains(f.states, a.State(now))) &&
		(f.drone == "" || a.MatchesDrone(f.drone)) &&
		(f.zone == "" || a.Zones.All || slices.Contains(a.Zones.IDs, f.zone)) &&
		(f.category == "" || a.Zones.All || slices.Contains(a.Zones.Categories, f.category))
}

func parseAuthorizationFilter(r *http.Request) (authorizationFilter, *paramError) {
	q := r.URL.Query()
	f := authorizationFilter{limit: defaultAuthorizationsLimit}
	// vet held each string parameter to its described pattern; what is
	// read here is what a pattern cannot say.
	for _, p := range []struct {
		name string
		set  func(string) *paramError
	}{
		{"state", func(v string) *paramError {
			for st := range strings.SplitSeq(v, ",") {
				if !slices.Contains(authorizationStates, st) {
					return &paramError{"state", "must be active, upcoming or ended, or several of them comma-separated"}
				}
				f.states = append(f.states, st)
			}
			return nil
		}},
		{"drone", func(v string) *paramError { f.drone = v; return nil }},
		{"zone", func(v string) *paramError { f.zone = v; return nil }},
		{"category", func(v string) *paramError {
			if c := geofence.Category(v); c != geofence.Restricted && c != geofence.Warning {
				return &paramError{"category", "must be restricted or warning"}
			}
			f.category = geofence.Category(v)
			return nil
		}},
		{"limit", func(v string) *paramError {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxAuthorizationsLimit {
				return &paramError{"limit", fmt.Sprintf("must be an integer from 1 to %d", maxAuthorizationsLimit)}
			}
			f.limit = n
			return nil
		}},
		{"cursor", func(v string) *paramError { f.cursor = v; return nil }},
	} {
		v, ok, perr := singleParam(q, p.name)
		if perr == nil && ok && v == "" {
			perr = &paramError{p.name, "empty"}
		}
		if perr == nil && ok {
			perr = p.set(v)
		}
		if perr != nil {
			return f, perr
		}
	}
	return f, nil
}

// list is GET /v1/authorizations: newest first (by id, which sorts by
// creation), filtered, a page at a time; the ETag is the set's version.
func (a *authorizationsAPI) list(w http.ResponseWriter, r *http.Request) {
	f, perr := parseAuthorizationFilter(r)
	if perr != nil {
		writeError(w, http.StatusBadRequest, "bad_request", perr.Error(), map[string]any{"field": perr.field})
		return
	}
	set, err := a.store.Set(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "read the authorizations: "+err.Error(), nil)
		return
	}
	now := a.store.Now()
	out := authorizationList{Version: set.Version, Authorizations: []authorizationItem{}}
	all := set.All()
	for i := len(all) - 1; i >= 0; i-- {
		au := &all[i]
		if (f.cursor != "" && au.ID >= f.cursor) || !f.match(au, now) {
			continue
		}
		if len(out.Authorizations) == f.limit {
			next := out.Authorizations[f.limit-1].ID
			out.NextCursor = &next
			break
		}
		out.Authorizations = append(out.Authorizations, item(*au, now))
	}
	w.Header().Set("ETag", etag(set.Version))
	writeJSON(w, http.StatusOK, out)
}

// get is GET /v1/authorizations/{authorization_id}; the ETag is the set's
// version.
func (a *authorizationsAPI) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "authorization_id")
	set, err := a.store.Set(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "read the authorizations: "+err.Error(), nil)
		return
	}
	au, ok := set.Get(id)
	if !ok {
		notFoundAuthorization(w, id, set.Version)
		return
	}
	w.Header().Set("ETag", etag(set.Version))
	writeJSON(w, http.StatusOK, item(au, a.store.Now()))
}

func notFoundAuthorization(w http.ResponseWriter, id string, version int64) {
	writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no authorization %q in version %d", id, version),
		map[string]any{"authorization_id": id, "version": version})
}

// create is POST /v1/authorizations: the body (authorization.Request) is
// parsed whole, 400 naming the first wrong field, before If-Match is
// looked at; by is the caller's token name. 201 with the authorisation,
// the new version as ETag and its Location.
func (a *authorizationsAPI) create(w http.ResponseWriter, r *http.Request) {
	b, aerr := readAuthorizationBody(r)
	if aerr != nil {
		writeError(w, aerr.status, aerr.code, aerr.msg, aerr.details)
		return
	}
	req, err := authorization.ParseRequest(b)
	if err != nil {
		invalidAuthorization(w, err)
		return
	}
	base := a.s.auditEntry(r, audit.ActionAuthorizationCreate, "", http.StatusCreated)
	a.change(w, r, http.StatusCreated, func(ctx context.Context, cur *authorization.Set) (authstore.Entry, authorization.Authorization, *apiError) {
		au, err := req.New(authstore.NewID(a.store.Now(), cur), callerName(ctx))
		if err != nil {
			var fe *authorization.FieldError
			if errors.As(err, &fe) {
				return authstore.Entry{}, au, &apiError{http.StatusBadRequest, "invalid_authorization", fe.Error(), map[string]any{"field": fe.Field}}
			}
			return authstore.Entry{}, au, &apiError{http.StatusInternalServerError, "internal", err.Error(), nil}
		}
		ctx = audit.WithChange(ctx, withDetail(base, au.ID, au), a.s.auditLog().Retention(), a.s.o.Now)
		e, err := a.store.Create(ctx, cur, au)
		return e, au, storeError(err)
	})
}

// revoke is DELETE /v1/authorizations/{authorization_id}: the
// authorisation ends at the server's now and is kept (revoked_at,
// revoked_by); 404 unknown, 409 already ended.
func (a *authorizationsAPI) revoke(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "authorization_id")
	base := a.s.auditEntry(r, audit.ActionAuthorizationRevoke, id, http.StatusOK)
	a.change(w, r, http.StatusOK, func(ctx context.Context, cur *authorization.Set) (authstore.Entry, authorization.Authorization, *apiError) {
		e, au, err := a.store.Revoke(audit.WithChange(ctx, base, a.s.auditLog().Retention(), a.s.o.Now), cur, id, callerName(ctx))
		switch {
		case errors.Is(err, authstore.ErrNotFound):
			return e, au, &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("no authorization %q in version %d", id, cur.Version),
				map[string]any{"authorization_id": id, "version": cur.Version}}
		case errors.Is(err, authstore.ErrEnded):
			return e, au, &apiError{http.StatusConflict, "already_ended",
				fmt.Sprintf("authorization %q ended at %s; it is kept as it is", id, au.End().Format(time.RFC3339Nano)),
				map[string]any{"authorization_id": id, "ended_at": au.End(), "revoked_at": au.RevokedAt}}
		}
		return e, au, storeError(err)
	})
}

// errRetry marks a change to make again on the set read afresh: another
// change won the race, or the new id was taken.
var errRetry = &apiError{}

// storeError is the answer to a store error other than a conflict (nil:
// none; errRetry: a conflict or a taken id, to try again).
func storeError(err error) *apiError {
	var ce *versionstore.ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce), errors.Is(err, authstore.ErrDuplicate):
		return errRetry
	case errors.Is(err, authstore.ErrFull):
		return &apiError{http.StatusConflict, "authorizations_full", err.Error() + ": revoke some, or wait until ended ones are pruned", nil}
	case errors.Is(err, redisreplica.ErrNotReplicated):
		return &apiError{http.StatusServiceUnavailable, "not_replicated",
			"the change is stored on the Redis primary but not yet on enough replicas (--redis-min-replicas): GET /v1/authorizations shows whether it holds", nil}
	}
	return &apiError{http.StatusInternalServerError, "internal", err.Error(), nil}
}

// change runs edit against the current set until it lands: against
// If-Match when given (412 when it is not the current version, or stops
// being so before the write), else against the version read, retried when
// another change wins the race (409 after putConflictTrys lost races).
func (a *authorizationsAPI) change(w http.ResponseWriter, r *http.Request, status int,
	edit func(context.Context, *authorization.Set) (authstore.Entry, authorization.Authorization, *apiError)) {
	want, ok := ifMatch(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_request", "If-Match must be an authorization set version (an integer, as the ETag gives it)",
			map[string]any{"field": "If-Match"})
		return
	}
	ctx := r.Context()
	for try := 0; ; try++ {
		cur, err := a.store.Set(ctx)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "read the authorizations: "+err.Error(), nil)
			return
		}
		if want >= 0 && cur.Version != want {
			authPrecondition(w, want, cur.Version)
			return
		}
		e, au, aerr := edit(ctx, cur)
		if aerr == errRetry {
			switch {
			case want >= 0:
				v, err := a.store.Version(ctx)
				if err != nil {
					v = cur.Version + 1 // at least that: another change won
				}
				authPrecondition(w, want, v)
				return
			case try+1 >= putConflictTrys:
				writeError(w, http.StatusConflict, "version_conflict",
					fmt.Sprintf("the authorization set changed under this change %d times in a row: try again", putConflictTrys), nil)
				return
			}
			continue
		}
		if aerr != nil {
			if aerr.status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			writeError(w, aerr.status, aerr.code, aerr.msg, aerr.details)
			return
		}
		now := a.store.Now()
		a.s.log.Info("authorizations changed", "authorization_version", e.Version, "action", e.Action, "authorization_id", e.AuthorizationID,
			"by", e.By, "drone", au.Drone, "from", au.From, "until", au.Until, "revoked_at", au.RevokedAt)
		w.Header().Set("ETag", etag(e.Version))
		w.Header().Set("Location", "/v1/authorizations/"+au.ID)
		writeJSON(w, status, item(au, now))
		return
	}
}

func authPrecondition(w http.ResponseWriter, ifMatch, current int64) {
	w.Header().Set("ETag", etag(current))
	writeError(w, http.StatusPreconditionFailed, "version_mismatch",
		fmt.Sprintf("the authorization set is at version %d, not %d: read it again and make the change on it", current, ifMatch),
		map[string]any{"if_match": ifMatch, "current_version": current})
}

// readAuthorizationBody reads a create's body: at most
// maxAuthorizationBody bytes (413), present and valid UTF-8 (400: a JSON
// decoder would silently replace a bad byte, storing text the client did
// not send).
func readAuthorizationBody(r *http.Request) ([]byte, *apiError) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxAuthorizationBody+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || len(b) > maxAuthorizationBody:
		return nil, &apiError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is larger than %d bytes", maxAuthorizationBody),
			map[string]any{"field": "body", "limit": maxAuthorizationBody}}
	case err != nil:
		return nil, &apiError{http.StatusBadRequest, "bad_request", "read the body: " + err.Error(), map[string]any{"field": "body"}}
	case len(strings.TrimSpace(string(b))) == 0:
		return nil, &apiError{http.StatusBadRequest, "invalid_authorization", "body: required (the authorization, as a JSON object)", map[string]any{"field": "body"}}
	case !utf8.Valid(b):
		return nil, &apiError{http.StatusBadRequest, "invalid_authorization", "body: not valid UTF-8", map[string]any{"field": "body"}}
	}
	return b, nil
}

// invalidAuthorization answers a request that does not parse or validate:
// 400 naming the field.
func invalidAuthorization(w http.ResponseWriter, err error) {
	field := "body"
	var fe *authorization.FieldError
	if errors.As(err, &fe) {
		field = fe.Field
	}
	writeError(w, http.StatusBadRequest, "invalid_authorization", err.Error(), map[string]any{"field": field})
}

// authVersionMeta is a version without its set
// (?authorizations=false).
type authVersionMeta struct {
	Version         int64     `json:"version"`
	At              time.Time `json:"at"`
	By              string    `json:"by"`
	Action          string    `json:"action"`
	AuthorizationID string    `json:"authorization_id"`
}

// history is GET /v1/authorizations/history: authstore.History's fields,
// streamed a version at a time as the zone history is.
func (a *authorizationsAPI) history(w http.ResponseWriter, r *http.Request) {
	a.s.streamHistory(w, r, versionHistory{
		what: "authorizations", list: "authorizations",
		switches: func(ctx context.Context) (map[string][]versionstore.Switch, error) {
			return authstore.ReadSwitches(ctx, a.s.o.Redis, a.s.o.Prefix, a.s.o.Topic, a.s.o.Partitions)
		},
		versions: a.store.HistoryVersions, entry: a.store.HistoryEntry, current: a.store.Version,
		meta: func(e string) (any, error) {
			var m authVersionMeta
			err := json.Unmarshal([]byte(e), &m)
			return m, err
		},
	})
}

// withDetail is e on target with detail's JSON (the authorisation made).
func withDetail(e audit.Entry, target string, detail any) audit.Entry {
	e.Target = target
	e.Detail, _ = json.Marshal(detail)
	return e
}
