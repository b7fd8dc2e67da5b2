package geofence

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// addZoneFiles seeds a fuzz target with the zone files of testdata (the
// checked-in corpus under testdata/fuzz/<target> holds smaller seeds).
func addZoneFiles(f *testing.F, patterns ...string) {
	for _, pat := range patterns {
		files, _ := filepath.Glob(filepath.Join(zonesDir, pat))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err == nil && len(b) < 64<<10 {
				f.Add(b)
			}
		}
	}
}

// exercise checks what must hold of any parse: an error is a
// *ValidationError, a set that loads also indexes, and queries on it do
// not panic.
func exercise(t *testing.T, set *ZoneSet, err error) {
	if err != nil {
		var ve *ValidationError
		if set != nil || !errors.As(err, &ve) || len(ve.Problems) == 0 {
			t.Fatalf("bad failure: set %v, error %T %v", set, err, err)
		}
		_ = ve.Error()
		return
	}
	ix, err := NewIndex(set)
	if err != nil {
		t.Fatalf("parsed but does not index: %v", err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	dst := make([]Hit, 0, 8)
	for _, z := range set.Zones {
		for _, v := range z.Volumes {
			var lon, lat float64
			if v.Circle != nil {
				lon, lat = v.Circle.Center[0], v.Circle.Center[1]
			} else if len(v.Area) > 0 && len(v.Area[0]) > 0 && len(v.Area[0][0]) > 0 {
				lon, lat = v.Area[0][0][0][0], v.Area[0][0][0][1]
			}
			for _, d := range []float64{0, 1e-4, -1e-3, 0.5} {
				p := Point{Lat: lat + d, Lon: lon - d, Time: now, Heights: Heights{}.Set(AGL, 10)}
				dst = ix.Query(p, dst)
				ix.StillInside(z.ID, p)
			}
		}
	}
}

func FuzzParseGeoJSON(f *testing.F) {
	f.Add([]byte(squareZone))
	addZoneFiles(f, "*.geojson")
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := ParseGeoJSON(bytes.NewReader(b))
		exercise(t, set, err)
	})
}

func FuzzParseED269(f *testing.F) {
	addZoneFiles(f, "ed269/*.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := ParseED269(bytes.NewReader(b))
		exercise(t, set, err)
	})
}

func FuzzParseED318(f *testing.F) {
	addZoneFiles(f, "ed318/*.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := ParseED318(bytes.NewReader(b))
		exercise(t, set, err)
	})
}

// FuzzParse goes through format detection, as LoadFile does.
func FuzzParse(f *testing.F) {
	f.Add([]byte(squareZone))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, _, err := Parse(bytes.NewReader(b))
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %T %v", err, err)
		}
		if err == nil {
			exercise(t, set, nil)
		}
	})
}
