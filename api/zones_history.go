package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/versionstore"
)

// maxHistoryLimit is the most versions ?limit may ask for: the most the
// store keeps (zonestore's MaxKeep default).
const maxHistoryLimit = 1024

// historyQuery is a history route's parameters (GET /v1/zones/history,
// GET /v1/authorizations/history).
type historyQuery struct {
	after int64 // versions above it
	limit int   // at most this many; 0: every one
	whole bool  // each version with its set (?zones, ?authorizations)
}

// parseHistoryQuery reads after, limit and the parameter named list
// (false: each version without its set).
func parseHistoryQuery(r *http.Request, list string) (historyQuery, *paramError) {
	q := r.URL.Query()
	hq := historyQuery{whole: true}
	if v, ok, perr := singleParam(q, "after"); perr != nil {
		return hq, perr
	} else if ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return hq, &paramError{"after", "must be a version (an integer, 0 or more)"}
		}
		hq.after = n
	}
	if v, ok, perr := singleParam(q, "limit"); perr != nil {
		return hq, perr
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryLimit {
			return hq, &paramError{"limit", fmt.Sprintf("must be an integer from 1 to %d", maxHistoryLimit)}
		}
		hq.limit = n
	}
	if v, ok, perr := singleParam(q, list); perr != nil {
		return hq, perr
	} else if ok {
		b, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return hq, &paramError{list, "must be true or false"}
		}
		hq.whole = b
	}
	return hq, nil
}

// versionMeta is a version without its set (?zones=false).
type versionMeta struct {
	Version int64     `json:"version"`
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	Format  string    `json:"format"`
}

// history is GET /v1/zones/history: zonestore.History's fields, its
// versions streamed one at a time from the store (streamHistory).
func (z *zonesAPI) history(w http.ResponseWriter, r *http.Request) {
	z.s.streamHistory(w, r, versionHistory{
		what: "zones", list: "zones",
		switches: func(ctx context.Context) (map[string][]versionstore.Switch, error) {
			return zonestore.ReadSwitches(ctx, z.s.o.Redis, z.s.o.Prefix, z.s.o.Topic, z.s.o.Partitions)
		},
		versions: z.store.HistoryVersions, entry: z.store.HistoryEntry, current: z.store.Version,
		meta: func(e string) (any, error) {
			var m versionMeta
			err := json.Unmarshal([]byte(e), &m)
			return m, err
		},
	})
}

// versionHistory is a versioned store's history as a history route
// answers it.
type versionHistory struct {
	what     string // the store, in the log
	list     string // the parameter that leaves each version's set out
	switches func(context.Context) (map[string][]versionstore.Switch, error)
	versions func(context.Context) ([]int64, error)
	entry    func(context.Context, int64) (string, bool, error)
	current  func(context.Context) (int64, error)
	meta     func(entry string) (any, error) // a version without its set
}

// streamHistory answers a history route: the topic, the partition count,
// the current version, every partition's switches, then the versions
// streamed one at a time, so a request holds one version's set (up to
// 32 MiB), never all of them (issue 26: 30 readers of 8 versions of a
// 2,000-zone set took the alerter to 3.7 GB). Without parameters it is
// every version kept, as `alerter replay --zone-history` (and
// --authorization-history) reads it; ?after and ?limit page it by version
// (next_after says where the next page starts), ?<list>=false leaves the
// sets out. The answer is paced (httpserve.Paced, as limits.go's
// paceAnswers has it already): a client that stops reading is dropped,
// one that reads is not cut by the write timeout. A store error after the
// first byte aborts the answer, never ends it as if complete.
func (s *Server) streamHistory(w http.ResponseWriter, r *http.Request, h versionHistory) {
	hq, perr := parseHistoryQuery(r, h.list)
	if perr != nil {
		writeError(w, http.StatusBadRequest, "bad_request", perr.Error(), map[string]any{"field": perr.field})
		return
	}
	ctx := r.Context()
	// The switches first: a version they name is then in the history read
	// after them, unless trimmed.
	sw, err := h.switches(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	vs, err := h.versions(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	cur, err := h.current(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	page := vs[:0:0]
	for _, v := range vs {
		if v > hq.after {
			page = append(page, v)
		}
	}
	var nextAfter int64 = -1
	if hq.limit > 0 && len(page) > hq.limit {
		page = page[:hq.limit]
		nextAfter = page[len(page)-1]
	}
	head, err := json.Marshal(struct {
		Topic      string                           `json:"topic"`
		Partitions int                              `json:"partitions"`
		Current    int64                            `json:"current_version"`
		Switches   map[string][]versionstore.Switch `json:"switches"`
	}{s.o.Topic, s.o.Partitions, cur, sw})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	w.Header().Set("ETag", etag(cur))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	pw := httpserve.Paced(w, r)
	abort := func(err error) {
		if ctx.Err() == nil {
			s.log.Error(h.what+": history read failed mid-answer; aborting it", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	// head without its closing brace, then the versions.
	if _, err := pw.Write(append(head[:len(head)-1], `,"versions":[`...)); err != nil {
		return // the client went away (or read too slowly)
	}
	first := true
	for _, v := range page {
		e, ok, err := h.entry(ctx, v)
		if err != nil {
			abort(err)
		}
		if !ok {
			continue // trimmed since the versions were read
		}
		if !hq.whole {
			m, err := h.meta(e)
			if err != nil {
				abort(fmt.Errorf("%s history version %d: %w", h.what, v, err))
			}
			b, _ := json.Marshal(m)
			e = string(b)
		}
		// Otherwise the entry goes out as stored: the stores write only
		// encoding/json's encoding of their Entry.
		if !first {
			if _, err := io.WriteString(pw, ","); err != nil {
				return
			}
		}
		first = false
		if _, err := io.WriteString(pw, e); err != nil {
			return
		}
	}
	tail := "]"
	if nextAfter >= 0 {
		tail += `,"next_after":` + strconv.FormatInt(nextAfter, 10)
	}
	_, _ = io.WriteString(pw, tail+"}\n")
}
