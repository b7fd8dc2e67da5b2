package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestZoneSearch: GET /v1/map/zones/search finds zones by id or name, best
// first, bounded, with each zone's bbox over all its volumes; a new version
// is searched once it is in force; bad parameters are 400s naming them.
func TestZoneSearch(t *testing.T) {
	srv, store, _ := zoneServer(t)
	set := `{"type":"FeatureCollection","features":[
{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[-0.50,51.46],[-0.42,51.46],[-0.42,51.48],[-0.50,51.48],[-0.50,51.46]]]},"properties":{"id":"EGLL-RPZ","name":"Heathrow runway protection zone","category":"restricted"}},
{"type":"Feature","geometry":{"type":"Point","coordinates":[-0.45,51.47]},"properties":{"id":"EGLL-FRZ","name":"Heathrow FRZ","category":"restricted","radius_m":5000}},
{"type":"Feature","geometry":{"type":"Point","coordinates":[-0.3,51.5]},"properties":{"id":"PARK-1","name":"Near Heathrow park","category":"warning","radius_m":300}},
{"type":"Feature","geometry":{"type":"Point","coordinates":[-0.2,51.5]},"properties":{"id":"X-HEATH","name":"Common","category":"warning","radius_m":300}},
{"type":"Feature","geometry":{"type":"Point","coordinates":[2.55,49.0]},"properties":{"id":"LFPG","name":"Paris CDG","category":"restricted","radius_m":5000}}]}`
	if _, err := store.Put(context.Background(), 0, "geojson", json.RawMessage(set), "test"); err != nil {
		t.Fatal(err)
	}
	type res struct {
		ZoneVersion int64       `json:"zone_version"`
		Zones       []ZoneMatch `json:"zones"`
		More        bool        `json:"more"`
	}
	search := func(q string) (answer, res) {
		a := do(t, srv, "GET", "/v1/map/zones/search?"+q, "")
		var r res
		if a.status == 200 {
			if err := json.Unmarshal([]byte(a.raw), &r); err != nil {
				t.Fatalf("%s: %v", a.raw, err)
			}
		}
		return a, r
	}
	ids := func(r res) string {
		var s []string
		for _, z := range r.Zones {
			s = append(s, z.ZoneID)
		}
		return strings.Join(s, ",")
	}
	for _, tt := range []struct {
		q, want string
		more    bool
	}{
		// Exact id; then names starting with it, restricted and shorter
		// first; then a word of a name; then anywhere (an id's tail).
		{"q=egll-rpz", "EGLL-RPZ", false},
		{"q=Heathrow", "EGLL-FRZ,EGLL-RPZ,PARK-1", false},
		{"q=HEATH", "EGLL-FRZ,EGLL-RPZ,PARK-1,X-HEATH", false},
		{"q=heath&limit=2", "EGLL-FRZ,EGLL-RPZ", true},
		{"q=paris+cdg", "LFPG", false},
		{"q=cdg", "LFPG", false},
		{"q=" + url.QueryEscape("runway protection"), "EGLL-RPZ", false},
		{"q=nothing-like-it", "", false},
	} {
		a, r := search(tt.q)
		if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", tt.q, a.status, a.raw)
		}
		if got := ids(r); got != tt.want || r.More != tt.more || r.ZoneVersion != 1 {
			t.Errorf("%s: %q more %v v%d, want %q more %v v1", tt.q, got, r.More, r.ZoneVersion, tt.want, tt.more)
		}
		if r.Zones == nil {
			t.Errorf("%s: zones null, want []", tt.q)
		}
	}
	// The bbox: the polygon's own bound; a circle's, its radius around it.
	_, r := search("q=EGLL")
	for _, z := range r.Zones {
		switch z.ZoneID {
		case "EGLL-RPZ":
			if z.BBox != [4]float64{-0.50, 51.46, -0.42, 51.48} || z.Name != "Heathrow runway protection zone" || z.Category != "restricted" {
				t.Errorf("RPZ: %+v", z)
			}
		case "EGLL-FRZ":
			// 5 km: 0.045° of latitude, 0.072° of longitude at 51.47°N.
			if d := z.BBox[3] - z.BBox[1]; d < 0.089 || d > 0.092 {
				t.Errorf("FRZ latitude span %v, want about 0.09", d)
			}
			if d := z.BBox[2] - z.BBox[0]; d < 0.142 || d > 0.147 {
				t.Errorf("FRZ longitude span %v, want about 0.144", d)
			}
		}
	}
	// A new version is what is searched, once indexed.
	if _, err := store.Put(context.Background(), 1, "geojson", json.RawMessage(collection(feature("NEWZONE", 7.1))), "test"); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		_, r := search("q=newzone")
		if ids(r) == "NEWZONE" && r.ZoneVersion == 2 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("after a change: %+v", r)
		}
	}
	if _, r := search("q=heathrow"); len(r.Zones) != 0 {
		t.Errorf("the old version's zones still found: %+v", r)
	}
	for _, q := range []string{"", "q=", "limit=5", "q=a&limit=0", "q=a&limit=51", "q=a&limit=x", "q=a&q=b",
		"q=" + strings.Repeat("a", 101), "q=%01"} {
		a, _ := search(q)
		field := "q"
		if strings.Contains(q, "limit=") && !strings.HasPrefix(q, "limit") {
			field = "limit"
		}
		if a.status != 400 || !strings.Contains(a.raw, fmt.Sprintf(`"field":%q`, field)) {
			t.Errorf("%q: %d %s, want 400 naming %s", q, a.status, a.raw, field)
		}
	}
}

// BenchmarkZoneSearch: a search of 100,000 zones (the view benchmark's
// set), a common word (every facility-map cell matches) and a rare one.
func BenchmarkZoneSearch(b *testing.B) {
	vi := newViewIndex(1, parseViewSet(b, genViewZones(1, 100_000)))
	zs := &zoneSearch{}
	zs.entriesOf(vi)
	for _, q := range []string{"facility", "polygon 4711"} {
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				if r := zs.find(vi, q, 10); len(r.Zones) == 0 {
					b.Fatal("no match")
				}
			}
		})
	}
}
