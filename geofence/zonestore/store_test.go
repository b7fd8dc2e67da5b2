package zonestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/testenv"
)

func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	rc := testenv.RedisClient(t)
	o.Prefix = testenv.RedisPrefix(t, "zonestore")
	return New(rc, o)
}

const circle = `{"type":"Feature","geometry":{"type":"Point","coordinates":[7,46]},"properties":{"id":%q,"radius_m":500,"ceiling_m":120,"ceiling_ref":"AGL"}}`

func set(ids ...string) json.RawMessage {
	fs := make([]string, len(ids))
	for i, id := range ids {
		fs[i] = fmt.Sprintf(circle, id)
	}
	return json.RawMessage(`{"type":"FeatureCollection","features":[` + strings.Join(fs, ",") + `]}`)
}

// TestPutCAS: ten writers race on one version: exactly one wins, the
// others get a ConflictError naming the version that won; then each retries
// from what it read, and the versions end at 1 + 10, no change lost.
func TestPutCAS(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	if v, err := s.Version(ctx); err != nil || v != 0 {
		t.Fatalf("empty store: version %d, %v", v, err)
	}
	if _, err := s.Current(ctx); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty store: current %v, want ErrEmpty", err)
	}
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(ctx, 0, "geojson", set(fmt.Sprint("Z", i)), fmt.Sprint("w", i))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var ce *ConflictError
		switch {
		case err == nil:
			won++
		case errors.As(err, &ce):
			if ce.Current != 1 || ce.Expected != 0 {
				t.Errorf("conflict %+v, want current 1 expected 0", ce)
			}
		default:
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won version 1, want 1", won)
	}
	// Each writer retries on the version it reads until it lands.
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, err := s.Version(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				_, err = s.Put(ctx, v, "geojson", set(fmt.Sprint("R", i)), fmt.Sprint("r", i))
				var ce *ConflictError
				if errors.As(err, &ce) {
					continue
				}
				errs[i] = err
				return
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cur, err := s.Current(ctx)
	if err != nil || cur.Version != 1+n {
		t.Fatalf("current version %d (%v), want %d", cur.Version, err, 1+n)
	}
	h, err := s.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]bool{}
	for i, e := range h {
		if e.Version != int64(i+1) {
			t.Fatalf("history[%d] is version %d", i, e.Version)
		}
		by[e.By] = true
	}
	if len(h) != 1+n || len(by) != 1+n {
		t.Fatalf("history holds %d versions by %d writers, want %d", len(h), len(by), 1+n)
	}
	if string(h[n].Zones) != string(cur.Zones) {
		t.Errorf("the last history entry is not the current set")
	}
}

// TestHistoryTrim: versions older than the retention go, but the last
// MinKeep stay; MaxKeep caps the count whatever the age.
func TestHistoryTrim(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := newStore(t, Options{Retention: time.Hour, MinKeep: 3, MaxKeep: 5, Now: func() time.Time { return now }})
	ctx := context.Background()
	versions := func() []int64 {
		h, err := s.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var v []int64
		for _, e := range h {
			v = append(v, e.Version)
		}
		return v
	}
	for i := range 7 {
		if _, err := s.Put(ctx, int64(i), "geojson", set("A"), "t"); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(versions()); got != "[3 4 5 6 7]" {
		t.Errorf("after 7 recent versions: %s, want the last 5 (MaxKeep)", got)
	}
	now = now.Add(2 * time.Hour)
	if _, err := s.Put(ctx, 7, "geojson", set("A"), "t"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(versions()); got != "[6 7 8]" {
		t.Errorf("after the retention: %s, want the last 3 (MinKeep)", got)
	}
	// The one-at-a-time reader sees the same versions; a trimmed one is
	// not found, a kept one is the History's entry as stored.
	vs, err := s.HistoryVersions(ctx)
	if err != nil || fmt.Sprint(vs) != "[6 7 8]" {
		t.Errorf("HistoryVersions: %v %v, want [6 7 8]", vs, err)
	}
	if _, ok, err := s.HistoryEntry(ctx, 5); ok || err != nil {
		t.Errorf("HistoryEntry(5), trimmed: found %v, %v", ok, err)
	}
	e, ok, err := s.HistoryEntry(ctx, 8)
	if d, derr := decodeEntry([]byte(e)); !ok || err != nil || derr != nil || d.Version != 8 {
		t.Errorf("HistoryEntry(8): %q found %v, %v %v", e, ok, err, derr)
	}
}

// TestHistoryByteBound: past MaxBytes of kept entries the oldest versions
// go, whatever MinKeep and the retention keep, but never the one just
// made, even when it alone is larger than the bound (issue 29: versions of
// a national set are tens of MB each).
func TestHistoryByteBound(t *testing.T) {
	ids := func(n int, tag string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%04d", tag, i)
		}
		return out
	}
	small, big := set(ids(1, "s")...), set(ids(40, "b")...) // ~0.2 and ~7 KB entries
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	entry := func(z json.RawMessage) int64 { // as stored: versions 1-9 are one digit
		b, _ := json.Marshal(Entry{Version: 1, At: now, By: "t", Format: "geojson", Zones: z})
		return int64(len(b))
	}
	cases := []struct {
		name     string
		maxBytes int64
		puts     []json.RawMessage
		want     string // the versions kept
	}{
		{"under the bound: MinKeep and retention rule", 1 << 20, []json.RawMessage{big, big, big, big}, "[1 2 3 4]"},
		{"bytes trim below MinKeep", 3 * entry(big), []json.RawMessage{big, big, big, big, big}, "[3 4 5]"},
		{"oldest first, big or small", 2*entry(big) + 2*entry(small) + entry(small)/2, []json.RawMessage{big, small, big, small, big, small}, "[3 4 5 6]"},
		{"exactly at the bound", 2 * entry(big), []json.RawMessage{big, big, big}, "[2 3]"},
		{"a version larger than the bound is kept alone", entry(small), []json.RawMessage{small, big}, "[2]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Options{Retention: time.Hour, MinKeep: 32, MaxBytes: tc.maxBytes, Now: func() time.Time { return now }})
			ctx := context.Background()
			for i, z := range tc.puts {
				if _, err := s.Put(ctx, int64(i), "geojson", z, "t"); err != nil {
					t.Fatal(err)
				}
			}
			vs, err := s.HistoryVersions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(vs); got != tc.want {
				t.Errorf("kept %s, want %s (bound %d bytes)", got, tc.want, tc.maxBytes)
			}
			cur, err := s.Current(ctx)
			if err != nil || cur.Version != int64(len(tc.puts)) {
				t.Errorf("current: version %d, %v; want %d", cur.Version, err, len(tc.puts))
			}
		})
	}
}

// TestLargeVersionsStaged: a version over 1 MiB is written in pieces and
// stored once under its own key, current and the history referring to it;
// it reads back whole through Current, History and HistoryEntry; trimming
// deletes its key; a lost race leaves no staging key behind.
func TestLargeVersionsStaged(t *testing.T) {
	ids := make([]string, 12000) // ~2.2 MB: three pieces
	for i := range ids {
		ids[i] = fmt.Sprintf("big-%05d", i)
	}
	big := set(ids...)
	s := newStore(t, Options{Retention: time.Hour, MinKeep: 1, MaxKeep: 2})
	rc := testenv.RedisClient(t)
	ctx := context.Background()
	k := s.Keys()
	for v := range int64(3) {
		if _, err := s.Put(ctx, v, "geojson", big, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if cur, err := rc.Get(ctx, k.Current()).Result(); err != nil || cur != "@"+k.Tag()+":entry:3" {
		t.Errorf("current holds %.60q (%v), want a reference to %s:entry:3", cur, err, k.Tag())
	}
	cur, err := s.Current(ctx)
	if err != nil || cur.Version != 3 || !bytes.Equal(cur.Zones, big) {
		t.Fatalf("Current: version %d, %d bytes of zones, %v; want 3 and the set as stored", cur.Version, len(cur.Zones), err)
	}
	h, err := s.History(ctx)
	if err != nil || len(h) != 2 || h[0].Version != 2 || !bytes.Equal(h[1].Zones, big) {
		t.Fatalf("History: %d versions, %v; want 2 and 3 whole", len(h), err)
	}
	if e, ok, err := s.HistoryEntry(ctx, 2); !ok || err != nil || !strings.Contains(e, `"version":2`) {
		t.Errorf("HistoryEntry(2): %.60q %v %v", e, ok, err)
	}
	for v, want := range map[int64]int64{1: 0, 2: 1, 3: 1} {
		if n, err := rc.Exists(ctx, k.Entry(v)).Result(); err != nil || n != want {
			t.Errorf("%s exists: %d (%v), want %d (version 1 trimmed by MaxKeep)", k.Entry(v), n, err, want)
		}
	}
	var ce *ConflictError
	if _, err := s.Put(ctx, 1, "geojson", big, "t"); !errors.As(err, &ce) {
		t.Fatalf("a stale Put: %v, want a ConflictError", err)
	}
	if left, err := rc.Keys(ctx, k.Staging("*")).Result(); err != nil || len(left) != 0 {
		t.Errorf("staging keys left: %v %v", left, err)
	}
}

// TestNormalize: every format --zones reads is stored as a FeatureCollection
// that loads as the same zones; a bad document is refused naming feature
// and field; an empty set only when allowed.
func TestNormalize(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "testdata", "zones")
	files := []struct {
		path   string
		format geofence.Format
	}{
		{"airports.geojson", geofence.FormatGeoJSON},
		{"ed269/nofly_eurocontrol_uas_zones.json", geofence.FormatED269},
		{"ed269/nofly_uaszonelist_dailyperiod.json", geofence.FormatED269},
		{"ed318/Example_Collection.json", geofence.FormatED318},
	}
	v := Validator{Loader: geofence.Loader{Conservative: true}}
	for _, f := range files {
		t.Run(f.path, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, f.path))
			if err != nil {
				t.Fatal(err)
			}
			format, doc, set, err := v.Normalize(b)
			if err != nil {
				t.Fatal(err)
			}
			if format != f.format {
				t.Errorf("format %s, want %s", format, f.format)
			}
			var fc struct {
				Type     string            `json:"type"`
				Features []json.RawMessage `json:"features"`
			}
			if err := json.Unmarshal(doc, &fc); err != nil || fc.Type != "FeatureCollection" {
				t.Fatalf("stored %s, %v: not a FeatureCollection", doc[:min(80, len(doc))], err)
			}
			ix, _, err := v.Index(Entry{Version: 9, Zones: doc})
			if err != nil {
				t.Fatal(err)
			}
			if ix.ZoneVersion() != 9 || len(ix.Zones()) != len(set.Zones) {
				t.Errorf("index version %d, %d zones; want 9, %d", ix.ZoneVersion(), len(ix.Zones()), len(set.Zones))
			}
		})
	}
	bad := []struct{ name, doc, want string }{
		{"bad floor", `{"type":"FeatureCollection","features":[` + fmt.Sprintf(circle, "A") + `,{"type":"Feature","geometry":{"type":"Point","coordinates":[7,46]},"properties":{"id":"B","radius_m":500,"floor_m":"x"}}]}`,
			`feature 2 (id "B"): properties.floor_m`},
		{"empty", `{"type":"FeatureCollection","features":[]}`, "no zone loaded"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := Validator{}.Normalize([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %s", err, c.want)
			}
		})
	}
	if _, _, _, err := (Validator{AllowEmpty: true}).Normalize([]byte(bad[1].doc)); err != nil {
		t.Errorf("empty set allowed: %v", err)
	}
}

// TestFeatureEdits: replace in place, append, delete, by any format's id.
func TestFeatureEdits(t *testing.T) {
	doc := set("A", "B")
	got, err := WithFeature(doc, "B", json.RawMessage(fmt.Sprintf(circle, "B2")))
	if err != nil {
		t.Fatal(err)
	}
	got, err = WithFeature(got, "C", json.RawMessage(fmt.Sprintf(circle, "C")))
	if err != nil {
		t.Fatal(err)
	}
	got, had, err := WithoutFeature(got, "A")
	if err != nil || !had {
		t.Fatalf("delete A: %v %v", had, err)
	}
	fs, err := Features(got)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range fs {
		ids = append(ids, FeatureID(f))
	}
	if fmt.Sprint(ids) != "[B2 C]" {
		t.Errorf("ids %v, want [B2 C]", ids)
	}
	for raw, want := range map[string]string{
		`{"identifier":"E269"}`:                                 "E269",
		`{"type":"Feature","properties":{"identifier":"E318"}}`: "E318",
		`{"type":"Feature","id":"F","properties":{}}`:           "F",
	} {
		if got := FeatureID(json.RawMessage(raw)); got != want {
			t.Errorf("FeatureID(%s) = %q, want %q", raw, got, want)
		}
	}
}
