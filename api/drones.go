package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/nofly-dev/nofly/alerts/dronestore"
)

// dronesAPI serves /v1/drones from the drone states and tracks the batch
// script keeps (alerts/dronestore): reading them costs the pipeline no
// write.
type dronesAPI struct {
	s  *Server
	st *dronestore.Store
}

// mountDrones adds the /v1/drones routes.
func (s *Server) mountDrones(r chi.Router) {
	st, err := dronestore.New(dronestore.Options{Redis: s.o.Redis, Prefix: s.o.Prefix, Topic: s.o.Topic,
		Partitions: s.o.Partitions, SignalLostAfter: s.o.SignalLostAfter})
	if err != nil {
		// New checked the same Options: unreachable.
		panic(err)
	}
	d := &dronesAPI{s: s, st: st}
	r.With(s.require(RoleViewer)).Get("/v1/drones", d.list)
	r.With(s.require(RoleViewer)).Get("/v1/drones/{drone_id}", d.get)
}

// droneList is GET /v1/drones's answer; NextCursor is null on the last page.
type droneList struct {
	Drones     []dronestore.Drone `json:"drones"`
	NextCursor *string            `json:"next_cursor"`
}

// badDroneParam answers 400 naming the query parameter.
func badDroneParam(w http.ResponseWriter, field, msg string) {
	writeError(w, http.StatusBadRequest, "bad_request", field+": "+msg, map[string]any{"field": field})
}

// bboxPattern is the description's pattern of bbox, compiled from it: the
// parser accepts exactly the strings it allows (with the ranges in it, a
// value such as 180.00000000000000001, which a float rounds to 180, is
// refused as the pattern refuses it), then checks what a pattern cannot
// say, each min not above its max (TestHostileBBoxPattern).
var bboxPattern = describedPattern("GET /v1/drones", "bbox")

// bboxMessage is what a bbox the pattern refuses is told.
const bboxMessage = "must be minLon,minLat,maxLon,maxLat: 4 plain decimal numbers (like -0.45), longitudes within [-180, 180], latitudes within [-90, 90]"

// parseBBox parses minLon,minLat,maxLon,maxLat.
func parseBBox(v string) (dronestore.BBox, error) {
	if !bboxPattern.MatchString(v) {
		return dronestore.BBox{}, errors.New(bboxMessage)
	}
	parts := strings.Split(v, ",")
	var f [4]float64
	for i, p := range parts {
		x, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return dronestore.BBox{}, errors.New(bboxMessage)
		}
		f[i] = x
	}
	b := dronestore.BBox{MinLon: f[0], MinLat: f[1], MaxLon: f[2], MaxLat: f[3]}
	return b, b.Check()
}

func (d *dronesAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f dronestore.Filter
	// param returns a parameter's value; an empty one is a 400.
	param := func(name string) (string, bool, bool) {
		if !q.Has(name) {
			return "", false, true
		}
		v := q.Get(name)
		if v == "" {
			badDroneParam(w, name, "empty")
			return "", false, false
		}
		return v, true, true
	}
	if v, ok, good := param("bbox"); !good {
		return
	} else if ok {
		b, err := parseBBox(v)
		if err != nil {
			badDroneParam(w, "bbox", err.Error())
			return
		}
		f.BBox = &b
	}
	if v, ok, good := param("active_since"); !good {
		return
	} else if ok {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			badDroneParam(w, "active_since", "not an RFC 3339 time")
			return
		}
		f.ActiveSince = t
	}
	if v, ok, good := param("limit"); !good {
		return
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > dronestore.MaxLimit {
			badDroneParam(w, "limit", "must be an integer from 1 to "+strconv.Itoa(dronestore.MaxLimit))
			return
		}
		f.Limit = n
	}
	if v, ok, good := param("cursor"); !good {
		return
	} else if ok {
		f.Cursor = v
	}
	ds, next, err := d.st.List(r.Context(), f)
	switch {
	case errors.Is(err, dronestore.ErrBadCursor):
		badDroneParam(w, "cursor", "not a cursor of this list")
		return
	case err != nil:
		d.internal(w, r, "list drones", err)
		return
	}
	out := droneList{Drones: ds}
	if out.Drones == nil {
		out.Drones = []dronestore.Drone{}
	}
	if next != "" {
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *dronesAPI) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "drone_id")
	dr, err := d.st.Get(r.Context(), id)
	switch {
	case errors.Is(err, dronestore.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no drone "+strconv.Quote(id), map[string]any{"drone_id": id})
	case err != nil:
		d.internal(w, r, "get drone", err)
	default:
		writeJSON(w, http.StatusOK, dr)
	}
}

func (d *dronesAPI) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	d.s.log.Error("api: "+what, "path", r.URL.Path, "error", err)
	writeError(w, http.StatusInternalServerError, "internal", what+": internal error", nil)
}
