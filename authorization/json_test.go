package authorization

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nofly-dev/nofly/geofence"
)

// TestAuthorizationJSONRoundTrip: what the store writes reads back as the
// same value, the scope's "all" and lists included; a scope no request
// could make is refused naming it.
func TestAuthorizationJSONRoundTrip(t *testing.T) {
	rev := at("2026-12-06T09:00:00Z")
	for _, a := range []Authorization{
		{ID: "a1", Drone: "POLICE-*", Zones: Zones{All: true}, From: at("2026-12-06T08:00:00Z"), Until: at("2026-12-06T12:00:00Z"),
			Reason: "inspection", Reference: "P-7", By: "ops"},
		{ID: "a2", Drone: "D1", Zones: Zones{IDs: []string{"LHR-1", "LHR-2"}, Categories: []geofence.Category{geofence.Warning}},
			From: at("2026-12-06T08:00:00Z"), Until: at("2026-12-06T12:00:00Z"), Reason: "film", By: "ops", RevokedAt: &rev, RevokedBy: "admin"},
	} {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var got Authorization
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("%s read back as %+v, want %+v", b, got, a)
		}
	}
	for _, bad := range []string{`"some"`, `{"ids":[]}`, `{"ids":["a"],"extra":1}`, `{"categories":["nope"]}`, `7`} {
		var z Zones
		if err := json.Unmarshal([]byte(bad), &z); err == nil {
			t.Errorf("zones %s read as %+v, want an error", bad, z)
		}
	}
}
