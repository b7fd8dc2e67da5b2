package alerts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

func TestStepKeepsLastPosition(t *testing.T) {
	ix := index(t, zonesJSON)
	s := alerts.NewDroneState()
	p := pos(5, 0.5, 0.25, telemetry.Float(120))
	p.AltRef = telemetry.RefAGL
	if _, _, ok := alerts.Step(&s, &p, ix, nil, nil); !ok {
		t.Fatal("not applied")
	}
	want := alerts.Fix{TS: p.TS, Lat: 0.25, Lon: 0.5, AltM: p.AltM, AltRef: telemetry.RefAGL}
	if s.Pos != want {
		t.Errorf("pos = %+v, want %+v", s.Pos, want)
	}
	// A duplicate changes nothing, its position included.
	dup := pos(5, 0.7, 0.7, nil)
	if _, _, ok := alerts.Step(&s, &dup, ix, nil, nil); ok || s.Pos != want {
		t.Errorf("duplicate: ok %v, pos %+v", ok, s.Pos)
	}
	// Without alt_m: no alt, no ref.
	q := pos(6, 0.6, 0.3, nil)
	alerts.Step(&s, &q, ix, nil, nil)
	if s.Pos.AltM != nil || s.Pos.AltRef != "" || s.Pos.Lon != 0.6 || !s.Pos.TS.Equal(q.TS) {
		t.Errorf("pos = %+v", s.Pos)
	}
	// An alt_m without alt_ref is AMSL, as events say.
	r := pos(7, 0.6, 0.3, telemetry.Float(10))
	alerts.Step(&s, &r, ix, nil, nil)
	if s.Pos.AltRef != telemetry.RefAMSL {
		t.Errorf("ref = %q", s.Pos.AltRef)
	}
}

// at is drone id's record with seq at ts t0+sec seconds, outside every zone.
func at(id string, seq int64, sec float64) telemetry.Position {
	return telemetry.Position{DroneID: id, Seq: seq, TS: t0.Add(time.Duration(sec * float64(time.Second))), Lat: 0.5, Lon: 0.5 + float64(seq)/1000}
}

// tracks renders a batch's track points as "drone@seconds" sorted by drone.
func tracks(t *testing.T, b dedup.Batch) string {
	t.Helper()
	var parts []string
	for _, id := range []string{"A", "B", "C"} {
		js, ok := b.Tracks[id]
		if !ok {
			continue
		}
		f, err := alerts.DecodeFix(js)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, id+"@"+f.TS.Sub(t0).String())
	}
	if len(parts) != len(b.Tracks) {
		t.Errorf("tracks of unexpected drones: %v", b.Tracks)
	}
	return strings.Join(parts, " ")
}

func TestEngineSamplesTracks(t *testing.T) {
	ix := index(t, zonesJSON)
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	apply := func(e *alerts.Engine, ps ...telemetry.Position) dedup.Batch {
		t.Helper()
		var recs []alerts.Record
		for _, p := range ps {
			off++
			recs = append(recs, rec(off, p))
		}
		out := e.Apply(ix, recs)
		if out == nil {
			t.Fatal("nil outcome")
		}
		return out.Batch
	}
	steps := []struct {
		name string
		recs []telemetry.Position
		want string
	}{
		{"first position always", []telemetry.Position{at("A", 1, 0), at("B", 1, 3)}, "A@0s B@3s"},
		{"within the interval", []telemetry.Position{at("A", 2, 5), at("B", 2, 12.999)}, ""},
		{"ten seconds on", []telemetry.Position{at("A", 3, 10), at("B", 3, 13)}, "A@10s B@13s"},
		{"one per batch: the latest", []telemetry.Position{at("A", 4, 20), at("A", 5, 25), at("A", 6, 30), at("A", 7, 35)}, "A@30s"},
		{"duplicates sample nothing", []telemetry.Position{at("A", 7, 35), at("B", 3, 13)}, ""},
		// A drone's records are ordered by ts, then seq: a ts back before
		// the last applied one is stale, whatever its seq.
		{"stale: ts back before the last, seq higher", []telemetry.Position{at("A", 8, 1)}, ""},
		{"and on from there", []telemetry.Position{at("A", 9, 40), at("A", 10, 46)}, "A@40s"},
	}
	var last dedup.Batch
	for _, st := range steps {
		if st.name == "duplicates sample nothing" || strings.HasPrefix(st.name, "stale") {
			var recs []alerts.Record
			for _, p := range st.recs {
				off++
				recs = append(recs, rec(off, p))
			}
			out := e.Apply(ix, recs)
			if out == nil || len(out.Batch.Tracks) != 0 || out.Stats.Duplicates != len(recs) {
				t.Errorf("%s: %+v", st.name, out)
			}
			continue
		}
		last = apply(e, st.recs...)
		if got := tracks(t, last); got != st.want {
			t.Errorf("%s: tracks %q, want %q", st.name, got, st.want)
		}
	}

	// The state carries the last position and the last sample's ts.
	s, err := alerts.DecodeDroneState(last.Drones["A"])
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq != 10 || !s.Pos.TS.Equal(t0.Add(46*time.Second)) || s.TrackMS != t0.Add(40*time.Second).UnixMilli() {
		t.Errorf("stored state of A: %s", last.Drones["A"])
	}

	// A new engine on the stored states (a restart, a partition move) goes
	// on at the same pace: no point before ten seconds after the last one.
	snap := dedup.Snapshot{Applied: off, Drones: map[string][]byte{"A": last.Drones["A"]}}
	e2, err := alerts.NewEngine(0, snap)
	if err != nil {
		t.Fatal(err)
	}
	if got := tracks(t, apply(e2, at("A", 11, 49))); got != "" {
		t.Errorf("after restart, 9s on: %q", got)
	}
	if got := tracks(t, apply(e2, at("A", 12, 50))); got != "A@50s" {
		t.Errorf("after restart, 10s on: %q", got)
	}
	// A state of before positions were kept samples its next position.
	e3, err := alerts.NewEngine(0, dedup.Snapshot{Applied: off, Drones: map[string][]byte{"C": []byte(`{"seq":4}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tracks(t, apply(e3, at("C", 5, 50))); got != "C@50s" {
		t.Errorf("old state: %q", got)
	}
}

func TestEngineTracksOff(t *testing.T) {
	ix := index(t, zonesJSON)
	e, err := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	e.SetTrackInterval(0)
	out := e.Apply(ix, []alerts.Record{rec(1, at("A", 1, 0)), rec(2, at("A", 2, 60))})
	if out.Batch.Tracks != nil {
		t.Errorf("tracks = %v", out.Batch.Tracks)
	}
	if got := string(out.Batch.Drones["A"]); strings.Contains(got, `"tk"`) || !strings.Contains(got, `"pos":{"ts":"2026-12-02T10:31:00Z"`) {
		t.Errorf("state = %s", got)
	}
	st, _ := e.Drone("A")
	if st.Pos.Lon != at("A", 2, 60).Lon {
		t.Errorf("Drone(A).Pos = %+v", st.Pos)
	}
}
