package fleet

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestFleetIsDeterministicAndCrossesAirports(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	fly := func() (recs int, nearest map[string]float64, lastSeq map[string]int64) {
		f := New(8, 42, start, 0)
		rng := rand.New(rand.NewPCG(42, 99))
		nearest = map[string]float64{}
		lastSeq = map[string]int64{}
		for range 1500 {
			for _, p := range f.Step(rng, 0.05) {
				recs++
				if p.Seq < lastSeq[p.DroneID] {
					t.Fatalf("%s: seq went back from %d to %d", p.DroneID, lastSeq[p.DroneID], p.Seq)
				}
				lastSeq[p.DroneID] = p.Seq
				for _, ap := range Airports {
					d := math.Hypot(p.Lat-ap.Lat, (p.Lon-ap.Lon)*math.Cos(ap.Lat*math.Pi/180)) * 111_320
					if v, ok := nearest[p.DroneID]; !ok || d < v {
						nearest[p.DroneID] = d
					}
				}
			}
		}
		return recs, nearest, lastSeq
	}
	n1, near, seqs := fly()
	n2, _, _ := fly()
	if n1 != n2 {
		t.Fatalf("same seed gave %d and %d records", n1, n2)
	}
	if n1 <= 8*1500 {
		t.Fatalf("no duplicates were sent: %d records", n1)
	}
	for id, d := range near {
		if d > 500 {
			t.Errorf("%s never came within 500 m of an airport (closest %.0f m)", id, d)
		}
		if seqs[id] != 1500 {
			t.Errorf("%s: last seq %d, want 1500", id, seqs[id])
		}
	}
}
