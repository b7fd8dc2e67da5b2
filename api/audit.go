package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/httpguard"
)

// auditLog is the server's audit log: Options.Audit, or one on the
// server's Redis kept audit.DefaultRetention (tests).
func (s *Server) auditLog() *audit.Log {
	if s.o.Audit != nil {
		return s.o.Audit
	}
	prefix := s.o.Prefix
	if prefix == "" {
		prefix = dedup.DefaultPrefix
	}
	return audit.NewLog(s.o.Redis, audit.Sources(prefix, s.o.Topic, s.o.Partitions), audit.DefaultRetention, s.o.Now)
}

// mountAudit adds GET /v1/audit, for admins.
func (s *Server) mountAudit(r chi.Router) {
	r.With(s.require(RoleAdmin)).Get("/v1/audit", s.listAudit)
}

// auditEntry is the entry of r's action on target as its caller, answered
// status: who, role, how signed in, from where.
func (s *Server) auditEntry(r *http.Request, action, target string, status int) audit.Entry {
	c, ok := CallerFrom(r.Context())
	if !ok {
		c = anonymous
	}
	via := c.Via
	if via == "" {
		via = audit.ViaNone
	}
	e := audit.Entry{Who: c.Name, Role: c.Role.String(), Via: via, Action: action, Target: target,
		Request: r.Method + " " + httpguard.Clip(r.URL.Path, 200), Outcome: audit.OutcomeOK, Status: status}
	if a, _ := s.web.Client(r); a.IsValid() {
		e.Client = a.String()
	}
	return e
}

// auditChange returns r's context carrying the entry of its change, for
// the store's script to write with the change (audit.WithChange).
func (s *Server) auditChange(r *http.Request, action, target string, status int, detail any) context.Context {
	e := s.auditEntry(r, action, target, status)
	if detail != nil {
		e.Detail, _ = json.Marshal(detail)
	}
	return audit.WithChange(r.Context(), e, s.auditLog().Retention(), s.o.Now)
}

// auditDenied records a refused request: every write, and any read of the
// audit trail, a role does not allow (reads of the rest are not audited:
// a viewer's dashboard would fill the trail).
func (s *Server) auditDenied(r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if r.URL.Path != "/v1/audit" {
			return
		}
	}
	e := s.auditEntry(r, audit.ActionRequest, "", http.StatusForbidden)
	e.Outcome = audit.OutcomeDenied
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	if err := s.auditLog().Record(ctx, e); err != nil {
		s.log.Error("api: audit a refused request", "error", err, "path", r.URL.Path)
	}
}

// AuditRecorder is the server's audit log as a Recorder, for what is
// audited outside a request (a token-file reload).
func (s *Server) AuditRecorder() audit.Recorder { return s.auditLog() }

// auditPage is GET /v1/audit's answer.
type auditPage struct {
	Entries    []audit.Entry `json:"entries"`
	NextCursor *string       `json:"next_cursor"`
}

// listAudit is GET /v1/audit: entries newest first, filtered by who,
// action, target, outcome, since and until, a page of limit (at most
// audit.MaxLimit) with a cursor to the next.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f audit.Filter
	for _, p := range []struct {
		name string
		dst  *string
	}{{"who", &f.Who}, {"action", &f.Action}, {"target", &f.Target}, {"outcome", &f.Outcome}, {"cursor", &f.Cursor}} {
		if !q.Has(p.name) {
			continue
		}
		v := q.Get(p.name)
		if v == "" || utf8.RuneCountInString(v) > audit.MaxField {
			badParam(w, p.name, "must be 1-"+strconv.Itoa(audit.MaxField)+" characters")
			return
		}
		*p.dst = v
	}
	if f.Action != "" && !slices.Contains(audit.Actions, f.Action) {
		badParam(w, "action", "not an audited action")
		return
	}
	switch f.Outcome {
	case "", audit.OutcomeOK, audit.OutcomeDenied, audit.OutcomeFailed:
	default:
		badParam(w, "outcome", "must be ok, denied or failed")
		return
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if !q.Has(p.name) {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, q.Get(p.name))
		if err != nil {
			badParam(w, p.name, "not an RFC 3339 time")
			return
		}
		*p.dst = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		badParam(w, "until", "before since")
		return
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > audit.MaxLimit {
			badParam(w, "limit", "must be an integer from 1 to "+strconv.Itoa(audit.MaxLimit))
			return
		}
		f.Limit = n
	}
	es, next, err := s.auditLog().List(r.Context(), f)
	switch {
	case errors.Is(err, audit.ErrBadCursor):
		badParam(w, "cursor", "not a cursor of this list")
		return
	case err != nil:
		s.log.Error("api: list audit", "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "list audit: internal error", nil)
		return
	}
	out := auditPage{Entries: es}
	if next != "" {
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
}
