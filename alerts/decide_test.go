package alerts_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestDecideMatchesApply: Decide (replay's path, positions decoded by the
// caller, nothing encoded) decides the same events — byte for byte once
// encoded — and the same counts and drone states as Apply over the same
// records, batch by batch: scenario traffic (duplicates, stale re-sends)
// with offsets that repeat and go back, in batches of several sizes.
func TestDecideMatchesApply(t *testing.T) {
	set, err := geofence.LoadFile(filepath.Join("..", scenario.ZonesFile))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	cfg := scenario.DefaultConfig()
	cfg.Drones, cfg.Positions = 30, 200
	ps := scenario.Generate(cfg).Records
	// Every 97th record is fetched twice and every 211th goes back an
	// offset: both are skipped by both paths.
	var offs []int64
	var off int64
	for i := range ps {
		off++
		switch {
		case i%211 == 210:
			off -= 2
		case i%97 == 96:
			offs = append(offs, off)
		}
		offs = append(offs, off)
	}
	for _, batch := range []int{1, 7, 500} {
		apply, _ := alerts.NewEngine(3, dedup.Snapshot{Applied: dedup.NoVersion})
		decide, _ := alerts.NewEngine(3, dedup.Snapshot{Applied: dedup.NoVersion})
		var events []alerts.Event
		var wantStats, gotStats alerts.Stats
		var wantJSON, gotJSON []byte
		for from := 0; from < len(offs); from += batch {
			to := min(from+batch, len(offs))
			var recs []alerts.Record
			var pos []alerts.Positioned
			for k := from; k < to; k++ {
				p := ps[min(k, len(ps)-1)]
				recs = append(recs, alerts.Record{Offset: offs[k], Value: p.AppendJSON(nil)})
				dp, err := telemetry.Decode(recs[len(recs)-1].Value)
				if err != nil {
					t.Fatal(err)
				}
				pos = append(pos, alerts.Positioned{Offset: offs[k], Pos: dp})
			}
			if out := apply.Apply(ix, recs); out != nil {
				wantStats.Add(out.Stats)
				for _, e := range out.Batch.Events {
					wantJSON = append(append(wantJSON, e.JSON...), '\n')
				}
			} else {
				wantStats.Skipped += len(recs) // nil: every record was at or below the version
			}
			var st alerts.Stats
			events, st = decide.Decide(ix, pos, events[:0])
			gotStats.Add(st)
			for i := range events {
				gotJSON = append(events[i].AppendJSON(gotJSON), '\n')
			}
			if apply.Applied() != decide.Applied() {
				t.Fatalf("batch %d: applied %d by Apply, %d by Decide", batch, apply.Applied(), decide.Applied())
			}
		}
		if gotStats != wantStats {
			t.Errorf("batch %d: Decide counted %+v, Apply %+v", batch, gotStats, wantStats)
		}
		if wantStats.Raised == 0 || wantStats.Cleared == 0 || wantStats.Skipped == 0 || wantStats.Duplicates == 0 {
			t.Fatalf("batch %d: the traffic exercised too little: %+v", batch, wantStats)
		}
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("batch %d: Decide's events differ from Apply's:\n%.2000s\nwant\n%.2000s", batch, gotJSON, wantJSON)
		}
		for d := 0; d < cfg.Drones; d++ {
			id := ps[d].DroneID
			a, _ := apply.Drone(id)
			b, _ := decide.Drone(id)
			a.TrackMS = 0 // track sampling is Apply's alone: it decides nothing
			if !bytes.Equal(a.Encode(), b.Encode()) {
				t.Errorf("batch %d: drone %s state %s by Decide, %s by Apply", batch, id, b.Encode(), a.Encode())
			}
		}
	}
}
