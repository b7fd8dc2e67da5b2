package authorization

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

const valid = `{"drone":"POLICE-1","zones":{"ids":["LHR-2","LHR-1"],"categories":["warning"]},` +
	`"from":"2026-12-06T08:00:00Z","until":"2026-12-06T12:00:00+01:00","reason":"runway inspection","reference":"PERMIT-7"}`

func TestParseRequest(t *testing.T) {
	r, err := ParseRequest([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if r.Drone != "POLICE-1" || r.Reason != "runway inspection" || r.Reference != "PERMIT-7" {
		t.Errorf("parsed %+v", r)
	}
	if !r.From.Equal(at("2026-12-06T08:00:00Z")) || !r.Until.Equal(at("2026-12-06T11:00:00Z")) || r.Until.Location() != time.UTC {
		t.Errorf("from %v until %v, want 08:00Z and 11:00Z in UTC", r.From, r.Until)
	}
	// Sorted: the stored scope does not depend on the order named.
	if got := strings.Join(r.Zones.IDs, ","); got != "LHR-1,LHR-2" || len(r.Zones.Categories) != 1 {
		t.Errorf("zones %+v", r.Zones)
	}
	all, err := ParseRequest([]byte(strings.Replace(valid, `{"ids":["LHR-2","LHR-1"],"categories":["warning"]}`, `"all"`, 1)))
	if err != nil || !all.Zones.All {
		t.Errorf(`"all": %+v, %v`, all.Zones, err)
	}
}

// TestParseRequestErrors: each wrong request is refused whole with the
// field named — nothing missing or unknown is read as a permission.
func TestParseRequestErrors(t *testing.T) {
	set := func(field, value string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(valid), &m); err != nil {
			panic(err)
		}
		if value == "" {
			delete(m, field)
		} else {
			m[field] = json.RawMessage(value)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name, body, field, contains string
	}{
		{"not JSON", `{"drone":`, "body", "malformed"},
		{"two objects", valid + `{}`, "body", "nothing after"},
		{"unknown field", set("pilot", `"x"`), "pilot", "unknown field"},
		{"by is the server's", set("by", `"someone-else"`), "by", "unknown field"},
		{"no drone", set("drone", ""), "drone", "required"},
		{"drone a number", set("drone", `7`), "drone", "JSON number"},
		{"bare star", set("drone", `"*"`), "drone", "every drone"},
		{"star inside", set("drone", `"PO*LICE"`), "drone", "only end"},
		{"drone with a space", set("drone", `"POLICE 1"`), "drone", "not a drone id"},
		{"drone too long", set("drone", `"`+strings.Repeat("A", 65)+`"`), "drone", "not a drone id"},
		{"no zones", set("zones", ""), "zones", "required"},
		{"zones some string", set("zones", `"everything"`), "zones", `"all"`},
		{"zones empty", set("zones", `{}`), "zones", "names no zone"},
		{"zones unknown key", set("zones", `{"names":["x"]}`), "zones.names", "unknown field"},
		{"empty zone id", set("zones", `{"ids":[""]}`), "zones.ids[0]", "not a zone id"},
		{"zone id with a newline", set("zones", `{"ids":["a","b\n"]}`), "zones.ids[1]", "control"},
		{"unknown category", set("zones", `{"categories":["prison"]}`), "zones.categories[0]", "not a category"},
		{"too many ids", set("zones", `{"ids":[`+strings.TrimSuffix(strings.Repeat(`"z",`, MaxZones+1), ",")+`]}`), "zones.ids", "more than"},
		{"no from", set("from", ""), "from", "required"},
		{"from without a zone", set("from", `"2026-12-06T08:00:00"`), "from", "RFC 3339"},
		{"no until", set("until", ""), "until", "open-ended"},
		{"until before from", set("until", `"2026-12-06T07:00:00Z"`), "until", "not after from"},
		{"until equal to from", set("until", `"2026-12-06T08:00:00Z"`), "until", "not after from"},
		{"over a year", set("until", `"2027-12-08T08:00:00Z"`), "until", "more than"},
		{"no reason", set("reason", ""), "reason", "required"},
		{"blank reason", set("reason", `"  "`), "reason", "required"},
		{"reference too long", set("reference", `"`+strings.Repeat("x", MaxReferenceLen+1)+`"`), "reference", "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tc.body))
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want a FieldError", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Msg, tc.contains) {
				t.Fatalf("%s: %s; want field %s, containing %q", fe.Field, fe.Msg, tc.field, tc.contains)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	r, err := ParseRequest([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.New("a1", "ops-desk")
	if err != nil {
		t.Fatal(err)
	}
	fleet, _ := ParseRequest([]byte(strings.Replace(valid, `"POLICE-1"`, `"POLICE-*"`, 1)))
	f, _ := fleet.New("a2", "ops-desk")
	in := at("2026-12-06T09:00:00Z")
	tests := []struct {
		name  string
		a     Authorization
		drone string
		zone  string
		cat   geofence.Category
		t     time.Time
		want  bool
	}{
		{"named zone, inside the time", a, "POLICE-1", "LHR-1", geofence.Restricted, in, true},
		{"zone of a named category", a, "POLICE-1", "OTHER", geofence.Warning, in, true},
		{"zone neither named nor of the category", a, "POLICE-1", "OTHER", geofence.Restricted, in, false},
		{"another drone", a, "POLICE-10", "LHR-1", geofence.Restricted, in, false},
		{"at from: covered", a, "POLICE-1", "LHR-1", geofence.Restricted, at("2026-12-06T08:00:00Z"), true},
		{"before from", a, "POLICE-1", "LHR-1", geofence.Restricted, at("2026-12-06T07:59:59Z"), false},
		{"at until: ended", a, "POLICE-1", "LHR-1", geofence.Restricted, at("2026-12-06T11:00:00Z"), false},
		{"prefix matches", f, "POLICE-10", "LHR-1", geofence.Restricted, in, true},
		{"prefix does not match", f, "POLIC", "LHR-1", geofence.Restricted, in, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Covers(tc.drone, tc.zone, tc.cat, tc.t); got != tc.want {
				t.Fatalf("Covers = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := r.New("a3", ""); err == nil {
		t.Error("an authorisation without its creator was made")
	}
}

func TestSetCoveringRevokeAndNextChange(t *testing.T) {
	mk := func(id, drone, from, until string) Authorization {
		return Authorization{ID: id, Drone: drone, Zones: Zones{All: true}, From: at(from), Until: at(until), Reason: "r", By: "b"}
	}
	s := NewSet(1, []Authorization{
		mk("b", "D1", "2026-12-06T08:00:00Z", "2026-12-06T10:00:00Z"),
		mk("a", "D1", "2026-12-06T09:00:00Z", "2026-12-06T12:00:00Z"),
		mk("c", "D*", "2026-12-06T08:00:00Z", "2026-12-06T12:00:00Z"),
	})
	// Several cover: the one that lasts longest, then the smallest id.
	if a, ok := s.Covering("D1", "z", geofence.Restricted, at("2026-12-06T09:30:00Z")); !ok || a.ID != "a" {
		t.Fatalf("covering = %+v, %v; want a (ends 12:00, id before c)", a, ok)
	}
	if a, ok := s.Covering("D1", "z", geofence.Restricted, at("2026-12-06T08:30:00Z")); !ok || a.ID != "c" {
		t.Fatalf("covering at 08:30 = %+v, want c (ends 12:00; b ends 10:00)", a)
	}
	next, ok := s.NextChange(at("2026-12-06T08:30:00Z"))
	if !ok || !next.Equal(at("2026-12-06T09:00:00Z")) {
		t.Fatalf("next change after 08:30 = %v, %v; want 09:00 (a starts)", next, ok)
	}
	if _, ok := s.NextChange(at("2026-12-06T12:00:00Z")); ok {
		t.Error("a change after every end")
	}

	r, ok := s.Revoke("a", at("2026-12-06T09:45:00Z"), "supervisor")
	if !ok || r.Version != 2 || s.Version != 1 {
		t.Fatalf("revoke: ok %v, versions %d (was %d)", ok, r.Version, s.Version)
	}
	if a, _ := s.Get("a"); a.RevokedAt != nil {
		t.Error("revoking changed the older version")
	}
	ra, _ := r.Get("a")
	if ra.RevokedBy != "supervisor" || !ra.End().Equal(at("2026-12-06T09:45:00Z")) || ra.State(at("2026-12-06T09:50:00Z")) != "ended" {
		t.Errorf("revoked: %+v, end %v", ra, ra.End())
	}
	if next, _ := r.NextChange(at("2026-12-06T09:30:00Z")); !next.Equal(at("2026-12-06T09:45:00Z")) {
		t.Errorf("next change after 09:30 = %v, want the revocation at 09:45", next)
	}
	if _, ok := r.Revoke("a", at("2026-12-06T09:50:00Z"), "x"); ok {
		t.Error("revoked twice")
	}
	if _, ok := r.Revoke("nope", at("2026-12-06T09:50:00Z"), "x"); ok {
		t.Error("revoked an unknown id")
	}
	if _, ok := r.Add(mk("a", "D2", "2026-12-06T08:00:00Z", "2026-12-06T09:00:00Z")); ok {
		t.Error("added a second authorisation with the same id")
	}
	added, ok := r.Add(mk("d", "D2", "2026-12-06T08:00:00Z", "2026-12-06T09:00:00Z"))
	if !ok || added.Version != 3 || len(added.All()) != 4 || len(r.All()) != 3 {
		t.Errorf("add: %v, version %d, %d authorisations (the old version %d)", ok, added.Version, len(added.All()), len(r.All()))
	}
	for _, st := range []struct{ t, want string }{{"2026-12-06T07:00:00Z", "upcoming"}, {"2026-12-06T08:30:00Z", "active"}, {"2026-12-06T09:00:00Z", "ended"}} {
		if a, _ := added.Get("d"); a.State(at(st.t)) != st.want {
			t.Errorf("state at %s = %s, want %s", st.t, a.State(at(st.t)), st.want)
		}
	}
}

func TestZonesJSON(t *testing.T) {
	for _, tc := range []struct {
		z    Zones
		want string
	}{
		{Zones{All: true}, `"all"`},
		{Zones{IDs: []string{"a"}}, `{"ids":["a"],"categories":[]}`},
	} {
		b, err := json.Marshal(tc.z)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s, %v; want %s", tc.z, b, err, tc.want)
		}
	}
}
