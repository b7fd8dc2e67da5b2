package alerts_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

// track is a drone's fixes, one a second: positions in metres east and
// north of (0, 0) (the SQ zone spans 0–0.01° both ways, about 1.1 km),
// with GNSS noise as receivers have it (and internal/fleet models it): an
// error of sigma metres per axis that wanders (first-order, 30 s time
// constant), plus 0.3 m of jitter from fix to fix.
func track(id string, base time.Time, sigma float64, seed uint64, path func(s float64) (e, n float64), secs int) []alerts.Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	const m = 6378137 * math.Pi / 180
	phi := math.Exp(-1.0 / 30)
	ne, nn := sigma*rng.NormFloat64(), sigma*rng.NormFloat64()
	var recs []alerts.Record
	for s := 0; s < secs; s++ {
		e, n := path(float64(s))
		ne = phi*ne + sigma*math.Sqrt(1-phi*phi)*rng.NormFloat64()
		nn = phi*nn + sigma*math.Sqrt(1-phi*phi)*rng.NormFloat64()
		jitter := 0.0
		if sigma > 0 {
			jitter = 0.3
		}
		e += ne + jitter*rng.NormFloat64()
		n += nn + jitter*rng.NormFloat64()
		p := telemetry.Position{DroneID: id, Seq: int64(s + 1), TS: base.Add(time.Duration(s) * time.Second), Lat: n / m, Lon: e / m}
		recs = append(recs, alerts.Record{Offset: int64(s), Time: p.TS, Value: p.AppendJSON(nil)})
	}
	return recs
}

func runApproach(t *testing.T, recs []alerts.Record, a alerts.ApproachSettings) []alerts.Event {
	t.Helper()
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
	if err != nil {
		t.Fatal(err)
	}
	e.SetApproach(a)
	return e.Apply(index(t, zonesJSON), recs).Events
}

func approachSummary(evs []alerts.Event, base time.Time) string {
	var parts []string
	for _, e := range evs {
		s := fmt.Sprintf("@%g %s %s", e.TS.Sub(base).Seconds(), e.Type, e.ZoneID)
		if e.Reason != "" {
			s += " " + e.Reason
		}
		if e.EtaS != nil {
			s += fmt.Sprintf(" eta=%.0f", *e.EtaS)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func TestApproachingWarnings(t *testing.T) {
	base := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	on := alerts.ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}, BufferM: 50}
	const side = 0.01 * 6378137 * math.Pi / 180 // SQ's side, metres
	tests := []struct {
		name  string
		path  func(s float64) (e, n float64)
		secs  int
		sigma float64
		want  string
	}{
		{"straight in at 10 m/s from 600 m: warned about 30 s ahead, then raised",
			func(s float64) (float64, float64) { return -600 + 10*s, side / 2 }, 70, 0,
			"@32 approaching SQ eta=28; @60 raised SQ"}, // 30.0 s at @30 is not within 30 s by a hair; two fixes confirm
		{"straight in with 3 m of noise: one warning all the same",
			func(s float64) (float64, float64) { return -600 + 10*s, side / 2 }, 70, 3,
			"@32 approaching SQ eta=27; @60 raised SQ"},
		{"turns away at 150 m: the episode ends 10 s after it left the hold band",
			func(s float64) (float64, float64) {
				if s <= 45 {
					return -600 + 10*s, side / 2
				}
				return -150 - 10*(s-45), side / 2
			}, 100, 0,
			"@32 approaching SQ eta=28; @57 approach_ended SQ turned_away"}, // the hold band (45 s, 75 m) left at @47
		{"passes parallel 200 m off the edge: never warned",
			func(s float64) (float64, float64) { return -200, -300 + 10*s }, 170, 3, ""},
		{"hovers 30 m off the edge with noise: never warned",
			func(s float64) (float64, float64) { return -30, side / 2 }, 300, 3, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := approachSummary(runApproach(t, track("A", base, tc.sigma, 1, tc.path, tc.secs), on), base)
			if got != tc.want {
				t.Errorf("events:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestApproachFlapsAlongTheEdge: a drone flying along a zone's edge, 20 to
// 70 m outside it, with 4 m of GNSS noise, for 20 passes of different
// noise: at most one warning per pass, and every warning ended once.
func TestApproachFlapsAlongTheEdge(t *testing.T) {
	base := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	on := alerts.ApproachSettings{Before: map[string]time.Duration{"*": 30 * time.Second}, BufferM: 50}
	const side = 0.01 * 6378137 * math.Pi / 180
	for _, off := range []float64{20, 45, 70} {
		worst, total := 0, 0
		for seed := uint64(1); seed <= 20; seed++ {
			path := func(s float64) (float64, float64) { return -off, -100 + 8*s } // north along the west edge
			evs := runApproach(t, track("EDGE", base, 4, seed, path, int(math.Round((side+200)/8))), on)
			n, ended := 0, 0
			for _, e := range evs {
				switch e.Type {
				case alerts.Approaching:
					n++
				case alerts.ApproachEnded:
					ended++
				case alerts.Raised:
					t.Fatalf("%g m off the edge, seed %d: raised (%s)", off, seed, approachSummary(evs, base))
				}
			}
			if ended > n || n-ended > 1 {
				t.Errorf("%g m off, seed %d: %d warnings, %d ended: %s", off, seed, n, ended, approachSummary(evs, base))
			}
			worst, total = max(worst, n), total+n
		}
		t.Logf("%g m off the edge: %d warnings over 20 passes, at most %d in one", off, total, worst)
		if worst > 1 {
			t.Errorf("%g m off the edge: %d warnings in one pass: it flaps", off, worst)
		}
	}
}
