package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/httpserve"
)

// maxHistoryLimit is the most versions ?limit may ask for: the most the
// store keeps (zonestore's MaxKeep default).
const maxHistoryLimit = 1024

// historyQuery is GET /v1/zones/history's parameters.
type historyQuery struct {
	after int64 // versions above it
	limit int   // at most this many; 0: every one
	zones bool  // with each version's set
}

func parseHistoryQuery(r *http.Request) (historyQuery, *paramError) {
	q := r.URL.Query()
	hq := historyQuery{zones: true}
	if v, ok, perr := singleParam(q, "after"); perr != nil {
		return hq, perr
	} else if ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return hq, &paramError{"after", "must be a zone set version (an integer, 0 or more)"}
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
	if v, ok, perr := singleParam(q, "zones"); perr != nil {
		return hq, perr
	} else if ok {
		b, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return hq, &paramError{"zones", "must be true or false"}
		}
		hq.zones = b
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
// versions streamed one at a time from the store, so a request holds one
// version's set (up to 32 MiB), never all of them (issue 26: 30 readers of
// 8 versions of a 2,000-zone set took the alerter to 3.7 GB). Without
// parameters it is every version kept, as `alerter replay --zone-history`
// reads it; ?after and ?limit page it by version (next_after says where
// the next page starts), ?zones=false leaves the sets out. The answer is
// paced (httpserve.Paced, as limits.go's paceAnswers has it already): a
// client that stops reading is dropped, one that reads is not cut by the
// write timeout. A store error after the first byte aborts the answer,
// never ends it as if complete.
func (z *zonesAPI) history(w http.ResponseWriter, r *http.Request) {
	hq, perr := parseHistoryQuery(r)
	if perr != nil {
		zoneError(w, http.StatusBadRequest, "bad_request", perr.Error(), map[string]any{"field": perr.field})
		return
	}
	ctx := r.Context()
	// The switches first: a version they name is then in the history read
	// after them, unless trimmed.
	sw, err := zonestore.ReadSwitches(ctx, z.s.o.Redis, z.s.o.Prefix, z.s.o.Topic, z.s.o.Partitions)
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	vs, err := z.store.HistoryVersions(ctx)
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	cur, err := z.store.Version(ctx)
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
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
		Topic      string                        `json:"topic"`
		Partitions int                           `json:"partitions"`
		Current    int64                         `json:"current_version"`
		Switches   map[string][]zonestore.Switch `json:"switches"`
	}{z.s.o.Topic, z.s.o.Partitions, cur, sw})
	if err != nil {
		zoneError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
		return
	}
	w.Header().Set("ETag", etag(cur))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	pw := httpserve.Paced(w, r)
	abort := func(err error) {
		if ctx.Err() == nil {
			z.s.log.Error("zones: history read failed mid-answer; aborting it", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	// head without its closing brace, then the versions.
	if _, err := pw.Write(append(head[:len(head)-1], `,"versions":[`...)); err != nil {
		return // the client went away (or read too slowly)
	}
	first := true
	for _, v := range page {
		e, ok, err := z.store.HistoryEntry(ctx, v)
		if err != nil {
			abort(err)
		}
		if !ok {
			continue // trimmed since HistoryVersions
		}
		if !hq.zones {
			var m versionMeta
			if err := json.Unmarshal([]byte(e), &m); err != nil {
				abort(fmt.Errorf("zone history version %d: %w", v, err))
			}
			b, _ := json.Marshal(m)
			e = string(b)
		}
		// Otherwise the entry goes out as stored: the store's put script
		// writes only encoding/json's encoding of a zonestore.Entry.
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
