package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// maxAckBody bounds an ack's body: a note of MaxNote bytes fits even
// with every byte JSON-escaped (\u00XX); beyond it the answer is 413.
const maxAckBody = 8 << 10

// errNotObject refuses an ack body that is JSON but not an object.
var errNotObject = errors.New("not a JSON object")

// alarmsAPI serves /v1/alarms from the alarm index (alerts/alarmstore).
type alarmsAPI struct {
	s    *Server
	st   *alarmstore.Store
	acks *prometheus.CounterVec
}

// The results counted by nofly_api_acks_total.
const (
	ackAcked   = "acked"
	ackAlready = "already_acked"
	ackUnknown = "not_found"
	ackBad     = "bad_request"
	ackError   = "error"
)

// mountAlarms adds the /v1/alarms routes.
func (s *Server) mountAlarms(r chi.Router) {
	st, err := alarmstore.New(alarmstore.Options{Redis: s.o.Redis, Prefix: s.o.Prefix, Topic: s.o.Topic,
		Partitions: s.o.Partitions, Now: s.o.Now, Replicas: s.o.Replicas, Log: s.log})
	if err != nil {
		// New checked the same Options: unreachable.
		panic(err)
	}
	a := &alarmsAPI{s: s, st: st, acks: registerCounter(s.o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nofly_api_acks_total",
		Help: "Alarm acknowledgements through the API, by result (acked, already_acked, not_found, bad_request, error).",
	}, []string{"result"}))}
	for _, res := range []string{ackAcked, ackAlready, ackUnknown, ackBad, ackError} {
		a.acks.WithLabelValues(res)
	}
	r.With(s.alarmsRole(RoleViewer)).Get("/v1/alarms", a.list)
	r.With(s.alarmsRole(RoleViewer)).Get("/v1/alarms/{alarm_id}", a.get)
	r.With(s.alarmsRole(RoleOperator)).Post("/v1/alarms/{alarm_id}/ack", a.ack)
	a.mountReport(r)
}

// alarmsRole is the role check of an alarms route. TODO(H1): s.require
// once api/auth.go is committed.
func (s *Server) alarmsRole(role Role) func(http.Handler) http.Handler { return s.require(role) }

// registerCounter registers c on reg (nil: not registered), or returns the
// counter already registered under its name (a second Handler on the same
// registry).
func registerCounter(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return prev
			}
		}
	}
	return c
}

// alarmList is GET /v1/alarms's answer; NextCursor is null on the last page.
type alarmList struct {
	Alarms     []alarmstore.Alarm `json:"alarms"`
	NextCursor *string            `json:"next_cursor"`
}

// badParam answers 400 naming the query parameter.
func badParam(w http.ResponseWriter, field, msg string) {
	alarmError(w, http.StatusBadRequest, "bad_request", field+": "+msg, map[string]any{"field": field})
}

func (a *alarmsAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f alarmstore.Filter
	// present returns a parameter's value, answering 400 for an empty one.
	present := func(name string) (string, bool, bool) {
		if !q.Has(name) {
			return "", false, true
		}
		v := q.Get(name)
		if v == "" {
			badParam(w, name, "empty")
			return "", false, false
		}
		return v, true, true
	}
	v, ok, good := present("state")
	if !good {
		return
	}
	if ok {
		switch v {
		case alarmstore.StateActive, alarmstore.StateCleared, alarmstore.StateAll:
			f.State = v
		default:
			badParam(w, "state", "must be active, cleared or all")
			return
		}
	}
	for _, p := range []struct {
		name string
		dst  **bool
	}{{"acked", &f.Acked}, {"authorized", &f.Authorized}} {
		if v, ok, good = present(p.name); !good {
			return
		} else if ok {
			if v != "true" && v != "false" {
				badParam(w, p.name, "must be true or false")
				return
			}
			b := v == "true"
			*p.dst = &b
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"drone", &f.Drone}, {"zone", &f.Zone}, {"category", &f.Category}} {
		if v, ok, good = present(p.name); !good {
			return
		} else if ok {
			*p.dst = v
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v, ok, good = present(p.name); !good {
			return
		} else if ok {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				badParam(w, p.name, "not an RFC 3339 time")
				return
			}
			*p.dst = t
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		badParam(w, "until", "before since")
		return
	}
	if v, ok, good = present("limit"); !good {
		return
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > alarmstore.MaxLimit {
			badParam(w, "limit", "must be an integer from 1 to "+strconv.Itoa(alarmstore.MaxLimit))
			return
		}
		f.Limit = n
	}
	if v, ok, good = present("cursor"); !good {
		return
	} else if ok {
		f.Cursor = v
	}
	as, next, err := a.st.List(r.Context(), f)
	switch {
	case errors.Is(err, alarmstore.ErrBadCursor):
		badParam(w, "cursor", "not a cursor of this list")
		return
	case err != nil:
		a.internal(w, r, "list alarms", err)
		return
	}
	if err := a.st.Pilots(r.Context(), as); err != nil {
		a.internal(w, r, "list alarms", err)
		return
	}
	out := alarmList{Alarms: as}
	if out.Alarms == nil {
		out.Alarms = []alarmstore.Alarm{}
	}
	if next != "" {
		out.NextCursor = &next
	}
	alarmJSON(w, http.StatusOK, out)
}

func (a *alarmsAPI) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "alarm_id")
	al, err := a.st.Get(r.Context(), id)
	switch {
	case errors.Is(err, alarmstore.ErrNotFound):
		notFound(w, id)
	case err != nil:
		a.internal(w, r, "get alarm", err)
	default:
		as := []alarmstore.Alarm{al}
		if err := a.st.Pilots(r.Context(), as); err != nil {
			a.internal(w, r, "get alarm", err)
			return
		}
		alarmJSON(w, http.StatusOK, as[0])
	}
}

func notFound(w http.ResponseWriter, id string) {
	alarmError(w, http.StatusNotFound, "not_found", "no alarm "+strconv.Quote(id), map[string]any{"alarm_id": id})
}

// ackAnswer is the ack's answer: the alarm and whether it was acked before.
type ackAnswer struct {
	alarmstore.Alarm
	AlreadyAcked bool `json:"already_acked"`
}

func (a *alarmsAPI) ack(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "alarm_id")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAckBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			a.acks.WithLabelValues(ackBad).Inc()
			alarmError(w, http.StatusRequestEntityTooLarge, "too_large", "the body is over "+strconv.Itoa(maxAckBody)+" bytes",
				map[string]any{"limit": maxAckBody})
			return
		}
		a.acks.WithLabelValues(ackBad).Inc()
		alarmError(w, http.StatusBadRequest, "bad_request", "read the body: "+err.Error(), map[string]any{"field": "body"})
		return
	}
	var in struct {
		Note *string `json:"note"`
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 {
		// An object only: json.Unmarshal takes null for an empty struct.
		err := errNotObject
		if trimmed[0] == '{' {
			err = json.Unmarshal(trimmed, &in)
		}
		if err != nil {
			field := "body"
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "note" {
				field = "note"
			}
			a.acks.WithLabelValues(ackBad).Inc()
			alarmError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON object with an optional string note",
				map[string]any{"field": field})
			return
		}
	}
	note := ""
	if in.Note != nil {
		note = *in.Note
	}
	if len(note) > alarmstore.MaxNote {
		a.acks.WithLabelValues(ackBad).Inc()
		alarmError(w, http.StatusBadRequest, "bad_request", "note: over "+strconv.Itoa(alarmstore.MaxNote)+" bytes",
			map[string]any{"field": "note", "limit": alarmstore.MaxNote})
		return
	}
	by := "anonymous"
	if c, ok := CallerFrom(r.Context()); ok && c.Name != "" {
		by = c.Name
	}
	// The ack script writes the entry with the ack, once: a retry that
	// finds the alarm acked writes neither.
	var detail any
	if note != "" {
		detail = map[string]string{"note": note}
	}
	ctx := a.s.auditChange(r, audit.ActionAck, id, http.StatusOK, detail)
	al, already, err := a.st.Ack(ctx, id, by, note)
	switch {
	case errors.Is(err, alarmstore.ErrNotFound):
		a.acks.WithLabelValues(ackUnknown).Inc()
		notFound(w, id)
		return
	case errors.Is(err, redisreplica.ErrNotReplicated):
		a.acks.WithLabelValues(ackError).Inc()
		a.s.log.Warn("api: ack not confirmed on the Redis replicas", "alarm_id", id, "error", err)
		w.Header().Set("Retry-After", "1")
		alarmError(w, http.StatusServiceUnavailable, "not_replicated",
			"the ack is recorded on the Redis primary but not yet on enough replicas (--redis-min-replicas); retry: an ack is idempotent", nil)
		return
	case err != nil:
		a.acks.WithLabelValues(ackError).Inc()
		a.internal(w, r, "ack alarm", err)
		return
	}
	if already {
		a.acks.WithLabelValues(ackAlready).Inc()
	} else {
		a.acks.WithLabelValues(ackAcked).Inc()
		a.s.log.Info("alarm acked", "alarm_id", id, "by", by, "partition", al.Partition)
	}
	alarmJSON(w, http.StatusOK, ackAnswer{Alarm: al, AlreadyAcked: already})
}

func (a *alarmsAPI) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	a.s.log.Error("api: "+what, "path", r.URL.Path, "error", err)
	alarmError(w, http.StatusInternalServerError, "internal", what+": internal error", nil)
}

// alarmJSON and alarmError write JSON answers and the shared error body
// {"error", "code", "details"} (to become H1's writeJSON/writeError once
// api/errors.go lands).
func alarmJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode the answer","code":"internal","details":{}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func alarmError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	alarmJSON(w, status, map[string]any{"error": msg, "code": code, "details": details})
}
