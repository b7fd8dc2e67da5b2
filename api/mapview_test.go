package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts/dronestore/dronetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

func TestMe(t *testing.T) {
	e := newAuthEnv(t, nil)
	for _, tt := range []struct {
		token         string
		code          int
		role          string
		canAck, canEd bool
	}{
		{"", 401, "", false, false},
		{testTokens["viewer"], 200, "viewer", false, false},
		{testTokens["operator"], 200, "operator", true, false},
		{testTokens["admin"], 200, "admin", true, true},
	} {
		a := e.do(t, "GET", "/v1/me", tt.token, "")
		if a.code != tt.code {
			t.Errorf("%s: %d, want %d", tt.role, a.code, tt.code)
			continue
		}
		if a.code != 200 {
			continue
		}
		var me struct {
			Name, Role   string
			CanAck       bool `json:"can_ack"`
			CanEditZones bool `json:"can_edit_zones"`
		}
		if err := json.Unmarshal([]byte(a.raw), &me); err != nil {
			t.Fatal(err)
		}
		if me.Role != tt.role || me.Name != tt.role+"-tok" || me.CanAck != tt.canAck || me.CanEditZones != tt.canEd {
			t.Errorf("%s: %+v", tt.role, me)
		}
	}
}

// TestMapZones: every stored format is drawn as one feature per volume
// with what the page shows, the ETag follows the zone version and
// If-None-Match gets 304.
func TestMapZones(t *testing.T) {
	srv, store, _ := zoneServer(t)
	empty := do(t, srv, "GET", "/v1/map/zones", "")
	if empty.status != 200 || empty.body["zone_version"] != float64(0) || len(empty.body["features"].([]any)) != 0 {
		t.Fatalf("empty store: %d %s", empty.status, empty.raw)
	}
	set := `{"type":"FeatureCollection","features":[
{"type":"Feature","geometry":{"type":"Point","coordinates":[7.5,46]},"properties":{"id":"C","name":"Circle","category":"warning","radius_m":500,"ceiling_m":120,"ceiling_ref":"AGL"}},
{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[7,46],[7.1,46],[7.1,46.1],[7,46.1],[7,46]],[[7.04,46.04],[7.06,46.04],[7.06,46.06],[7.04,46.06],[7.04,46.04]]]},
 "properties":{"id":"H","name":"Holed","category":"restricted","active_from":"2026-01-01T00:00:00Z","active_until":"2027-01-01T00:00:00Z"}}]}`
	if _, err := store.Put(context.Background(), 0, "geojson", json.RawMessage(set), "test"); err != nil {
		t.Fatal(err)
	}
	a := do(t, srv, "GET", "/v1/map/zones", "")
	if a.status != 200 || a.header.Get("ETag") != `"1"` || a.header.Get("Content-Type") != "application/geo+json" {
		t.Fatalf("GET: %d %v %s", a.status, a.header, a.raw)
	}
	var fc struct {
		ZoneVersion int64 `json:"zone_version"`
		Zones       int
		Features    []drawnFeature
	}
	if err := json.Unmarshal([]byte(a.raw), &fc); err != nil {
		t.Fatal(err)
	}
	if fc.ZoneVersion != 1 || fc.Zones != 2 || len(fc.Features) != 2 {
		t.Fatalf("drawing: %s", a.raw)
	}
	byID := map[string]drawnFeature{}
	for _, f := range fc.Features {
		byID[f.Properties.ZoneID] = f
	}
	c, h := byID["C"], byID["H"]
	if c.Geometry["type"] != "Point" || c.Properties.RadiusM == nil || *c.Properties.RadiusM != 500 ||
		c.Properties.Ceiling == nil || c.Properties.Ceiling.M != 120 || c.Properties.Ceiling.Ref != "AGL" || c.Properties.Category != "warning" {
		t.Errorf("circle: %+v", c)
	}
	rings, _ := h.Geometry["coordinates"].([]any)
	if h.Geometry["type"] != "MultiPolygon" || len(rings) != 1 || len(rings[0].([]any)) != 2 ||
		h.Properties.ActiveFrom == nil || h.Properties.ActiveUntil == nil || h.Properties.Name != "Holed" {
		t.Errorf("polygon with a hole: %+v", h)
	}
	if nm := do(t, srv, "GET", "/v1/map/zones", "", "If-None-Match", `"1"`); nm.status != 304 || nm.header.Get("ETag") != `"1"` {
		t.Errorf("If-None-Match the version: %d", nm.status)
	}
	if _, err := store.Put(context.Background(), 1, "geojson", json.RawMessage(collection(feature("X", 8))), "test"); err != nil {
		t.Fatal(err)
	}
	if nm := do(t, srv, "GET", "/v1/map/zones", "", "If-None-Match", `"1"`); nm.status != 200 || nm.header.Get("ETag") != `"2"` || !strings.Contains(nm.raw, `"zone_id":"X"`) {
		t.Errorf("after a change: %d %s", nm.status, nm.raw)
	}
}

// TestMapPositions: the first frame has every recent drone; later frames
// only those that moved, one update per drone per tick however many
// positions came between; each names the zone version.
func TestMapPositions(t *testing.T) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t, "api-map")
	rdb := testenv.RedisClient(t)
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := dronetest.Zones()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	fly := func(p int, ps ...telemetry.Position) {
		t.Helper()
		if _, err := dronetest.Fly(ctx, ds, zs, p, ps...); err != nil {
			t.Fatal(err)
		}
	}
	fly(0, dronetest.Pos("A", 1, now.Add(-time.Second), dronetest.OutsideLat, dronetest.OutsideLon))
	fly(1, dronetest.Pos("B", 1, now.Add(-time.Second), dronetest.InsideLat, dronetest.InsideLon))
	fly(0, dronetest.Pos("OLD", 1, now.Add(-10*time.Minute), dronetest.OutsideLat, dronetest.OutsideLon))

	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"/v1/map/positions", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(res.Body)
	next := func() posFrame {
		t.Helper()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var f posFrame
				if err := json.Unmarshal([]byte(data), &f); err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
	}
	ids := func(f posFrame) []string {
		var out []string
		for _, d := range f.Drones {
			out = append(out, d.DroneID)
		}
		return out
	}
	first := next()
	if !first.Full || strings.Join(ids(first), ",") != "A,B" {
		t.Fatalf("first frame: full %v, drones %v; want full with A and B (not OLD)", first.Full, ids(first))
	}
	for _, d := range first.Drones {
		if d.DroneID == "B" && (len(d.Alarms) != 1 || d.Alarms[0].ZoneID == "") {
			t.Errorf("B is in a zone: alarms %+v", d.Alarms)
		}
	}
	// Ten positions of A within one tick: one update, the last.
	for i := range 10 {
		fly(0, dronetest.Pos("A", int64(2+i), now.Add(time.Duration(i)*50*time.Millisecond), dronetest.OutsideLat, dronetest.OutsideLon+float64(i)*1e-4))
	}
	f := next()
	if f.Full || strings.Join(ids(f), ",") != "A" || f.Drones[0].Lon != dronetest.OutsideLon+9e-4 {
		t.Fatalf("after A moved: full %v, %+v; want A once at its last position", f.Full, f.Drones)
	}
	if f.ZoneVersion != 0 {
		t.Errorf("zone_version %d, want 0 (empty store)", f.ZoneVersion)
	}
	if _, err := zonestore.New(rdb, zonestore.Options{Prefix: prefix}).Put(ctx, 0, "geojson", json.RawMessage(collection(feature("X", 8))), "test"); err != nil {
		t.Fatal(err)
	}
	// Nothing moves: the next frame comes for the new zone version, empty.
	f = next()
	if f.ZoneVersion != 1 || len(f.Drones) != 0 {
		t.Errorf("after a zone change: version %d, drones %v; want 1 and none", f.ZoneVersion, ids(f))
	}
}
