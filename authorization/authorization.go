// Package authorization holds the flights an operator has authorised: a
// drone (or a family of drones by id prefix) allowed in some zones for a
// bounded time. An authorised drone inside an authorised zone still raises
// its alarm — the alarm carries the authorisation instead of paging — and
// when the authorisation ends while the drone is inside, the alarm pages.
//
// Everything here is a pure function of the authorisation and the time it
// is asked about, so the alerter can decide from the log's clock alone:
// exactly once, and a replay with the same history equal to live.
//
// Nothing is read in the permissive direction: an authorisation must name
// its drone (no bare "*"), its zones and both ends of its time; a field
// this package does not know is an error, not ignored.
package authorization

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/telemetry"
)

// Bounds of one authorisation. They keep a permit a permit: no open-ended
// or fleet-wide silence, and nothing a client can grow without bound.
const (
	// MaxDuration is the longest time an authorisation may cover.
	MaxDuration = 366 * 24 * time.Hour
	// MaxZones is the most zone ids (and the most categories) one may name.
	MaxZones = 256
	// MaxZoneIDLen is the longest zone id (the zone API's bound).
	MaxZoneIDLen = 256
	// MaxReasonLen and MaxReferenceLen bound the free texts, in bytes.
	MaxReasonLen    = 1000
	MaxReferenceLen = 128
	// MaxByLen bounds the creator's name (a token name).
	MaxByLen = 128
)

// ErrInvalid is wrapped by every validation error (a *FieldError).
var ErrInvalid = errors.New("invalid authorization")

// FieldError names the field of a request that is wrong and why: the API
// answers it as a 400 naming the field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Is makes every FieldError an ErrInvalid for errors.Is.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Zones is the scope of an authorisation: every zone, or the zones named by
// id and those of the named categories (a union).
type Zones struct {
	All        bool
	IDs        []string
	Categories []geofence.Category
}

// MarshalJSON writes "all" or {"ids": [...], "categories": [...]}.
func (z Zones) MarshalJSON() ([]byte, error) {
	if z.All {
		return []byte(`"all"`), nil
	}
	return json.Marshal(struct {
		IDs        []string            `json:"ids"`
		Categories []geofence.Category `json:"categories"`
	}{nonNil(z.IDs), nonNil(z.Categories)})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Covers reports whether the scope includes a zone of that id and category.
func (z *Zones) Covers(zoneID string, cat geofence.Category) bool {
	return z.All || slices.Contains(z.IDs, zoneID) || slices.Contains(z.Categories, cat)
}

// Authorization is one authorised flight.
type Authorization struct {
	ID string `json:"id"`
	// Drone is a drone id, or a prefix ending in '*' that every drone id
	// starting with it matches.
	Drone     string    `json:"drone"`
	Zones     Zones     `json:"zones"`
	From      time.Time `json:"from"`
	Until     time.Time `json:"until"`
	Reason    string    `json:"reason"`
	Reference string    `json:"reference"`
	By        string    `json:"by"`
	// RevokedAt is when it was revoked (DELETE), if it was: it ends then.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
}

// End is when the authorisation stops covering: Until, or the revocation
// if that came first.
func (a *Authorization) End() time.Time {
	if a.RevokedAt != nil && a.RevokedAt.Before(a.Until) {
		return *a.RevokedAt
	}
	return a.Until
}

// MatchesDrone reports whether the authorisation names that drone.
func (a *Authorization) MatchesDrone(id string) bool {
	if p, ok := strings.CutSuffix(a.Drone, "*"); ok {
		return strings.HasPrefix(id, p)
	}
	return id == a.Drone
}

// Covers reports whether the authorisation covers the drone in the zone at
// t: From <= t < End().
func (a *Authorization) Covers(drone, zoneID string, cat geofence.Category, t time.Time) bool {
	return !t.Before(a.From) && t.Before(a.End()) && a.MatchesDrone(drone) && a.Zones.Covers(zoneID, cat)
}

// State is where an authorisation stands at a time: upcoming, active or
// ended (its time passed, or revoked).
func (a *Authorization) State(t time.Time) string {
	switch {
	case t.Before(a.From) && t.Before(a.End()):
		return "upcoming"
	case t.Before(a.End()):
		return "active"
	default:
		return "ended"
	}
}

// Request is the body of POST /v1/authorizations: everything but the id,
// the creator (the caller's token name) and the revocation, which the
// server sets.
type Request struct {
	Drone     string
	Zones     Zones
	From      time.Time
	Until     time.Time
	Reason    string
	Reference string
}

// ParseRequest decodes and validates a request body whole: unknown fields,
// a missing field and a wrong value are each a *FieldError naming the
// field (the first found, in the order of the fields above).
func ParseRequest(body []byte) (Request, error) {
	var w struct {
		Drone     *string          `json:"drone"`
		Zones     *json.RawMessage `json:"zones"`
		From      *string          `json:"from"`
		Until     *string          `json:"until"`
		Reason    *string          `json:"reason"`
		Reference *string          `json:"reference"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Request{}, decodeError(err)
	}
	if dec.More() {
		return Request{}, &FieldError{"body", "one JSON object, nothing after it"}
	}
	var r Request
	var err error
	if w.Drone == nil {
		return r, &FieldError{"drone", "required: a drone id, or an id prefix ending in '*'"}
	}
	r.Drone = *w.Drone
	if w.Zones == nil {
		return r, &FieldError{"zones", `required: "all", or {"ids": [...], "categories": [...]}`}
	}
	if r.Zones, err = parseZones(*w.Zones); err != nil {
		return r, err
	}
	if r.From, err = parseTime("from", w.From); err != nil {
		return r, err
	}
	if r.Until, err = parseTime("until", w.Until); err != nil {
		return r, err
	}
	if w.Reason == nil {
		return r, &FieldError{"reason", "required: why the flight is authorised"}
	}
	r.Reason = *w.Reason
	if w.Reference != nil {
		r.Reference = *w.Reference
	}
	return r, r.Validate()
}

// Validate checks a request's values (ParseRequest calls it).
func (r *Request) Validate() error {
	if err := checkDrone(r.Drone); err != nil {
		return err
	}
	if err := checkZones(&r.Zones); err != nil {
		return err
	}
	switch {
	case r.From.IsZero():
		return &FieldError{"from", "required"}
	case r.Until.IsZero():
		return &FieldError{"until", "required: no authorisation is open-ended"}
	case !r.Until.After(r.From):
		return &FieldError{"until", fmt.Sprintf("%s is not after from (%s)", r.Until.Format(time.RFC3339), r.From.Format(time.RFC3339))}
	case r.Until.Sub(r.From) > MaxDuration:
		return &FieldError{"until", fmt.Sprintf("covers %v, more than the %v an authorisation may", r.Until.Sub(r.From).Round(time.Hour), MaxDuration)}
	}
	if err := checkText("reason", r.Reason, MaxReasonLen, true); err != nil {
		return err
	}
	return checkText("reference", r.Reference, MaxReferenceLen, false)
}

// New makes the authorisation of a valid request.
func (r *Request) New(id, by string) (Authorization, error) {
	if err := r.Validate(); err != nil {
		return Authorization{}, err
	}
	if err := checkText("by", by, MaxByLen, true); err != nil {
		return Authorization{}, err
	}
	return Authorization{ID: id, Drone: r.Drone, Zones: r.Zones, From: r.From.UTC(), Until: r.Until.UTC(),
		Reason: r.Reason, Reference: r.Reference, By: by}, nil
}

func checkDrone(s string) error {
	id, prefix := strings.CutSuffix(s, "*")
	switch {
	case s == "":
		return &FieldError{"drone", "required: a drone id, or an id prefix ending in '*'"}
	case prefix && id == "":
		return &FieldError{"drone", "a bare '*' would authorise every drone; name a drone or an id prefix"}
	case strings.Contains(id, "*"):
		return &FieldError{"drone", "'*' may only end a prefix"}
	case !telemetry.ValidDroneID(id):
		return &FieldError{"drone", fmt.Sprintf("%q is not a drone id (1-%d of A-Z a-z 0-9 . _ : -)", s, telemetry.MaxDroneIDLen)}
	}
	return nil
}

func parseZones(raw json.RawMessage) (Zones, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "all" {
			return Zones{}, &FieldError{"zones", fmt.Sprintf(`%q: the one string allowed is "all"; otherwise {"ids": [...], "categories": [...]}`, s)}
		}
		return Zones{All: true}, nil
	}
	var o struct {
		IDs        []string `json:"ids"`
		Categories []string `json:"categories"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		var fe *FieldError
		if errors.As(decodeError(err), &fe) && fe.Field != "body" {
			return Zones{}, &FieldError{"zones." + fe.Field, fe.Msg}
		}
		return Zones{}, &FieldError{"zones", `must be "all" or {"ids": [...], "categories": [...]}`}
	}
	z := Zones{IDs: o.IDs}
	for _, c := range o.Categories {
		z.Categories = append(z.Categories, geofence.Category(c))
	}
	return z, nil
}

func checkZones(z *Zones) error {
	if z.All {
		if len(z.IDs) > 0 || len(z.Categories) > 0 {
			return &FieldError{"zones", `"all" names no ids or categories`}
		}
		return nil
	}
	if len(z.IDs) == 0 && len(z.Categories) == 0 {
		return &FieldError{"zones", `names no zone: give ids, categories, or "all"`}
	}
	if len(z.IDs) > MaxZones {
		return &FieldError{"zones.ids", fmt.Sprintf("%d ids, more than %d", len(z.IDs), MaxZones)}
	}
	for i, id := range z.IDs {
		if id == "" || len(id) > MaxZoneIDLen || !utf8.ValidString(id) || strings.ContainsFunc(id, isControl) {
			return &FieldError{fmt.Sprintf("zones.ids[%d]", i), fmt.Sprintf("not a zone id (1-%d bytes of UTF-8, no control characters)", MaxZoneIDLen)}
		}
	}
	if len(z.Categories) > MaxZones {
		return &FieldError{"zones.categories", fmt.Sprintf("%d categories, more than %d", len(z.Categories), MaxZones)}
	}
	for i, c := range z.Categories {
		if c != geofence.Restricted && c != geofence.Warning {
			return &FieldError{fmt.Sprintf("zones.categories[%d]", i), fmt.Sprintf("%q is not a category (%s or %s)", c, geofence.Restricted, geofence.Warning)}
		}
	}
	// Sorted and without repeats: equal scopes are equal values, and the
	// stored form does not depend on the order they were named in.
	sort.Strings(z.IDs)
	z.IDs = slices.Compact(z.IDs)
	slices.Sort(z.Categories)
	z.Categories = slices.Compact(z.Categories)
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func parseTime(field string, s *string) (time.Time, error) {
	if s == nil || *s == "" {
		if field == "until" {
			return time.Time{}, &FieldError{field, "required (RFC 3339): no authorisation is open-ended"}
		}
		return time.Time{}, &FieldError{field, "required (RFC 3339)"}
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, &FieldError{field, fmt.Sprintf("%q is not an RFC 3339 time with a time zone", *s)}
	}
	return t.UTC(), nil
}

func checkText(field, s string, maxLen int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return &FieldError{field, "required"}
	case len(s) > maxLen:
		return &FieldError{field, fmt.Sprintf("%d bytes, more than %d", len(s), maxLen)}
	case !utf8.ValidString(s):
		return &FieldError{field, "not valid UTF-8"}
	}
	return nil
}

// decodeError turns a JSON decoding error into a FieldError naming the
// field where it can.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &FieldError{te.Field, fmt.Sprintf("must not be JSON %s", te.Value)}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &FieldError{strings.Trim(f, `"`), "unknown field"}
	}
	return &FieldError{"body", "malformed JSON: " + err.Error()}
}
