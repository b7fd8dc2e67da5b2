package reference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Auth is one authorisation as the reference reads it (docs/design.md,
// "Authorised flights"), written from the design text, not from package
// authorization.
type Auth struct {
	ID string
	// Drone is an exact drone id, or a prefix ending in "*".
	Drone string
	// AllZones, or the zones listed by id or by category.
	AllZones    bool
	ZoneIDs     []string
	Categories  []string
	From, Until time.Time
	Reference   string
	RevokedAt   time.Time // zero: not revoked
}

// End is when the authorisation stops covering: its until, or its
// revocation when earlier.
func (a *Auth) End() time.Time {
	if !a.RevokedAt.IsZero() && a.RevokedAt.Before(a.Until) {
		return a.RevokedAt
	}
	return a.Until
}

// Covers reports whether a covers drone in zone (of category) at t:
// From <= t < End.
func (a *Auth) Covers(drone, zone, category string, t time.Time) bool {
	if t.Before(a.From) || !t.Before(a.End()) {
		return false
	}
	if p, ok := strings.CutSuffix(a.Drone, "*"); ok {
		if !strings.HasPrefix(drone, p) {
			return false
		}
	} else if a.Drone != drone {
		return false
	}
	return a.AllZones || slices.Contains(a.ZoneIDs, zone) || slices.Contains(a.Categories, category)
}

// Covering is the authorisation of auths that covers drone in zone at t:
// of several, the one with the latest End, then the smallest ID; nil when
// none does.
func Covering(auths []Auth, drone, zone, category string, t time.Time) *Auth {
	var best *Auth
	for i := range auths {
		a := &auths[i]
		if !a.Covers(drone, zone, category, t) {
			continue
		}
		if best == nil || a.End().After(best.End()) || a.End().Equal(best.End()) && a.ID < best.ID {
			best = a
		}
	}
	return best
}

// authByID is the authorisation of auths with that id, nil when none.
func authByID(auths []Auth, id string) *Auth {
	for i := range auths {
		if auths[i].ID == id {
			return &auths[i]
		}
	}
	return nil
}

// ParseAuths reads a JSON array of authorisations in the API's shape:
// {"id","drone","zones":"all"|{"ids":[…],"categories":[…]},"from","until",
// "reason","reference","by","revoked_at","revoked_by"} (times RFC 3339,
// revoked_at optional; unknown fields ignored).
func ParseAuths(b []byte) ([]Auth, error) {
	var raw []struct {
		ID        string          `json:"id"`
		Drone     string          `json:"drone"`
		Zones     json.RawMessage `json:"zones"`
		From      string          `json:"from"`
		Until     string          `json:"until"`
		Reference string          `json:"reference"`
		RevokedAt *string         `json:"revoked_at"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("reference: authorisations: %w", err)
	}
	out := make([]Auth, 0, len(raw))
	for i, r := range raw {
		a := Auth{ID: r.ID, Drone: r.Drone, Reference: r.Reference}
		if a.ID == "" || a.Drone == "" {
			return nil, fmt.Errorf("reference: authorisation %d: id and drone are required", i)
		}
		var err error
		if a.From, err = time.Parse(time.RFC3339, r.From); err != nil {
			return nil, fmt.Errorf("reference: authorisation %s: from: %w", a.ID, err)
		}
		if a.Until, err = time.Parse(time.RFC3339, r.Until); err != nil {
			return nil, fmt.Errorf("reference: authorisation %s: until: %w", a.ID, err)
		}
		if r.RevokedAt != nil {
			if a.RevokedAt, err = time.Parse(time.RFC3339, *r.RevokedAt); err != nil {
				return nil, fmt.Errorf("reference: authorisation %s: revoked_at: %w", a.ID, err)
			}
		}
		switch z := bytes.TrimSpace(r.Zones); {
		case bytes.Equal(z, []byte(`"all"`)):
			a.AllZones = true
		case len(z) > 0 && z[0] == '{':
			var l struct {
				IDs        []string `json:"ids"`
				Categories []string `json:"categories"`
			}
			if err := json.Unmarshal(z, &l); err != nil {
				return nil, fmt.Errorf("reference: authorisation %s: zones: %w", a.ID, err)
			}
			a.ZoneIDs, a.Categories = l.IDs, l.Categories
		default:
			return nil, fmt.Errorf("reference: authorisation %s: zones must be \"all\" or {ids, categories}", a.ID)
		}
		out = append(out, a)
	}
	return out, nil
}
