package alerts_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
)

// An alarmed drone's track is sampled every second, the raise and the
// clear always, and its points are held (dedup.Batch.Held) from the raise
// on: an incident report needs the path from before entry to after exit.
func TestEngineHoldsAlarmedTracks(t *testing.T) {
	ix := index(t, zonesJSON)
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	// One position a second, each in its own batch: outside the square
	// (seq 1-4), inside (5-9), far outside (10-14).
	lonOf := func(seq int64) float64 {
		switch {
		case seq < 5:
			return -0.005
		case seq < 10:
			return 0.005
		}
		return -0.05
	}
	var got []string
	for seq := int64(1); seq <= 14; seq++ {
		p := pos(seq, lonOf(seq), 0.005, nil)
		r := alerts.Record{Offset: seq, Value: p.AppendJSON(nil), Time: p.TS}
		out := e.Apply(ix, []alerts.Record{r})
		if out == nil {
			t.Fatalf("seq %d: nil outcome", seq)
		}
		for _, ev := range out.Events {
			got = append(got, string(ev.Type))
		}
		if js, ok := out.Batch.Tracks["D1"]; ok {
			f, err := alerts.DecodeFix(js)
			if err != nil {
				t.Fatal(err)
			}
			mark := ""
			if out.Batch.Held["D1"] {
				mark = "h"
			}
			got = append(got, f.TS.Sub(t0).String()+mark)
		} else if out.Batch.Held["D1"] {
			t.Errorf("seq %d: held without a point", seq)
		}
	}
	const want = "1s raised 5sh 6sh 7sh 8sh 9sh cleared 10sh"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("events and track points:\n got %s\nwant %s", g, want)
	}
}

// Without an alarm or an approach the pace stays ten seconds and nothing is
// held.
func TestEngineNormalTrackNotHeld(t *testing.T) {
	ix := index(t, zonesJSON)
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for seq := int64(1); seq <= 25; seq++ {
		p := at("A", seq, float64(seq))
		out := e.Apply(ix, []alerts.Record{{Offset: seq, Value: p.AppendJSON(nil), Time: p.TS}})
		if len(out.Batch.Held) != 0 {
			t.Errorf("seq %d: held %v", seq, out.Batch.Held)
		}
		if _, ok := out.Batch.Tracks["A"]; ok {
			got = append(got, strconv.FormatInt(seq, 10))
		}
	}
	if g := strings.Join(got, " "); g != "1 11 21" {
		t.Errorf("sampled seqs %s, want 1 11 21", g)
	}
}
