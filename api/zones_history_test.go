package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestZoneHistoryPages: without parameters every version with its set (as
// replay reads it); ?after and ?limit page by version with next_after;
// ?zones=false leaves the sets out; bad parameters are 400 naming them.
func TestZoneHistoryPages(t *testing.T) {
	srv, store, _ := zoneServer(t)
	ctx := context.Background()
	for v := range 5 {
		if _, err := store.Put(ctx, int64(v), "geojson", json.RawMessage(collection(feature(fmt.Sprint("Z", v), 7))), "test"); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Current   int64                         `json:"current_version"`
		Versions  []map[string]json.RawMessage  `json:"versions"`
		Switches  map[string][]zonestore.Switch `json:"switches"`
		NextAfter *int64                        `json:"next_after"`
	}
	for _, tt := range []struct {
		query    string
		versions string
		next     int64 // -1: none
		zones    bool
	}{
		{"", "1,2,3,4,5", -1, true},
		{"?limit=2", "1,2", 2, true},
		{"?after=2&limit=2", "3,4", 4, true},
		{"?after=4&limit=2", "5", -1, true},
		{"?after=5", "", -1, true},
		{"?zones=false", "1,2,3,4,5", -1, false},
		{"?zones=true&limit=1024", "1,2,3,4,5", -1, true},
	} {
		a := do(t, srv, "GET", "/v1/zones/history"+tt.query, "")
		var p page
		if a.status != 200 || json.Unmarshal([]byte(a.raw), &p) != nil {
			t.Fatalf("%s: %d %s", tt.query, a.status, a.raw)
		}
		var vs []string
		for _, v := range p.Versions {
			vs = append(vs, string(v["version"]))
			if _, has := v["zones"]; has != tt.zones {
				t.Errorf("%s: version %s has zones %v, want %v", tt.query, v["version"], has, tt.zones)
			}
			if len(v["by"]) == 0 || len(v["at"]) == 0 || len(v["format"]) == 0 {
				t.Errorf("%s: version %s lacks by, at or format", tt.query, v["version"])
			}
		}
		next := int64(-1)
		if p.NextAfter != nil {
			next = *p.NextAfter
		}
		if strings.Join(vs, ",") != tt.versions || next != tt.next || p.Current != 5 || len(p.Switches) != 2 {
			t.Errorf("%s: versions %v next_after %d current %d switches %v; want %s, %d", tt.query, vs, next, p.Current, p.Switches, tt.versions, tt.next)
		}
	}
	// The whole answer decodes as the History replay reads.
	var h zonestore.History
	if a := do(t, srv, "GET", "/v1/zones/history", ""); json.Unmarshal([]byte(a.raw), &h) != nil || len(h.Versions) != 5 || len(h.Versions[4].Zones) == 0 {
		t.Fatalf("as zonestore.History: %+v", h)
	}
	for _, q := range []struct{ query, field string }{
		{"?limit=0", "limit"}, {"?limit=1025", "limit"}, {"?limit=x", "limit"}, {"?limit=1&limit=2", "limit"},
		{"?after=-1", "after"}, {"?after=v", "after"}, {"?zones=no", "zones"}, {"?zones=1", "zones"},
	} {
		a := do(t, srv, "GET", "/v1/zones/history"+q.query, "")
		if d, _ := a.body["details"].(map[string]any); a.status != 400 || d["field"] != q.field {
			t.Errorf("%s: %d %s, want 400 naming %s", q.query, a.status, a.raw, q.field)
		}
	}
}

// bigZoneSet is a GeoJSON set of n polygon zones of 64 vertices each
// (about 2 KB a zone), named by version so each version differs.
func bigZoneSet(n, version int) string {
	var b strings.Builder
	b.WriteString(`{"type":"FeatureCollection","features":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		lon, lat := -10+float64(i%100)*0.2, 40+float64(i/100)*0.2
		b.WriteString(`{"type":"Feature","properties":{"id":"Z` + fmt.Sprint(i) + `","name":"zone ` + fmt.Sprint(i, " v", version) +
			`","category":"restricted","ceiling_m":120,"ceiling_ref":"AGL"},"geometry":{"type":"Polygon","coordinates":[[`)
		for k := 0; k <= 64; k++ {
			a := 2 * math.Pi * float64(k%64) / 64
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "[%.6f,%.6f]", lon+0.05*math.Cos(a), lat+0.05*math.Sin(a))
		}
		b.WriteString(`]]}}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// heapSampler samples the Go heap every few milliseconds until stopped:
// the peak of the live heap as of each GC (/gc/heap/live:bytes) and of
// every heap object, garbage included (/memory/classes/heap/objects:bytes).
type heapSampler struct {
	stop         chan struct{}
	done         chan struct{}
	live, inHeap uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			h.live = max(h.live, s[0].Value.Uint64())
			h.inHeap = max(h.inHeap, s[1].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) peaks() (live, inHeap uint64) {
	close(h.stop)
	<-h.done
	return h.live, h.inHeap
}

// historyMemoryBound is the most the live heap may grow while clients
// read the history of a set of setSize bytes at once, however many
// clients and versions (docs/operations.md, "Limits"): a version in
// flight in each of the DefaultMaxBulkRequests slots, up to 4 copies of
// it each (the Redis reply, its check, the socket's buffers), and 16 MB
// for the rest; not readers × versions.
func historyMemoryBound(setSize int) int64 { return int64(DefaultMaxBulkRequests*4*setSize + 16<<20) }

// TestHostileZoneHistoryMemoryBound: 30 concurrent GET /v1/zones/history
// of 8 versions of a 2,000-zone set (the attack, with a viewer
// token) all answer the whole history, and the live heap of the process —
// server and clients — grows by less than historyMemoryBound meanwhile.
func TestHostileZoneHistoryMemoryBound(t *testing.T) {
	const versions, zones, readers = 8, 2000, 30
	var prefix string
	e := newAuthEnv(t, func(o *Options) { prefix = o.Prefix })
	store := zonestore.New(testenv.RedisClient(t), zonestore.Options{Prefix: prefix})
	ctx := context.Background()
	var setSize int
	for v := range versions {
		set := bigZoneSet(zones, v+1)
		setSize = len(set)
		if _, err := store.Put(ctx, int64(v), "geojson", json.RawMessage(set), "test"); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpserve.NewServer(e.h, httpserve.DefaultLimits(), nil)
	srv.Start()
	defer srv.Close()
	var busy atomic.Int64
	// get reads the history as a client that obeys 503 busy's Retry-After.
	get := func() (int, int64, [32]byte, error) {
		for {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/zones/history", nil)
			req.Header.Set("Authorization", "Bearer "+testTokens["viewer"])
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, 0, [32]byte{}, err
			}
			h := sha256.New()
			n, err := io.Copy(h, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "" {
				busy.Add(1)
				time.Sleep(time.Second) // Retry-After: 1
				continue
			}
			return res.StatusCode, n, [32]byte(h.Sum(nil)), err
		}
	}
	// One read alone: what every reader must get, and that it is whole.
	a := e.do(t, "GET", "/v1/zones/history?zones=false", testTokens["viewer"], "")
	var h zonestore.History
	if a.code != 200 || json.Unmarshal([]byte(a.raw), &h) != nil || len(h.Versions) != versions {
		t.Fatalf("the history: %d, %d versions", a.code, len(h.Versions))
	}
	code, size, sum, err := get()
	if err != nil || code != 200 {
		t.Fatalf("one read: %d %v", code, err)
	}

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	hs := sampleHeap()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, n, s, err := get()
			if err == nil && (c != 200 || n != size || s != sum) {
				err = fmt.Errorf("reader %d: status %d, %d bytes (want %d), same answer %v", i, c, n, size, s == sum)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	live, inHeap := hs.peaks()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	grew, bound := int64(live)-int64(base.HeapAlloc), historyMemoryBound(setSize)
	t.Logf("%d readers of %d versions of %d zones (%.1f MB a set, %.1f MB an answer): all answered whole in %v (%d times 503 busy first); "+
		"live heap peak %.1f MB (%.1f MB over the %.1f MB before), heap objects peak %.1f MB; bound %.1f MB",
		readers, versions, zones, float64(setSize)/1e6, float64(size)/1e6, took.Round(time.Millisecond), busy.Load(),
		float64(live)/1e6, float64(grew)/1e6, float64(base.HeapAlloc)/1e6, float64(inHeap)/1e6, float64(bound)/1e6)
	if grew > bound {
		t.Fatalf("the live heap grew by %.1f MB, more than the bound of %.1f MB", float64(grew)/1e6, float64(bound)/1e6)
	}
}
