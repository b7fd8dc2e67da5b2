package alerts_test

import (
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestEngineEqualsReferenceWithOperators: the clock scenario with pilots
// (in the records' Kafka values, and as decoded positions for replay's
// Decide); every raised event — a position's and the clock's — carries the pilot
// as last reported up to the raise, as the reference remembers it on its
// own, in batches of several sizes. The scenario must hold raises whose
// own position brought a new pilot (an engine that took the pilot from
// the previous position would differ there) and raises at positions
// without one after one that had (an engine that forgot the last known
// would differ there).
func TestEngineEqualsReferenceWithOperators(t *testing.T) {
	const partitions = 4
	_, ix, refZones := scenarioZones(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	sc.Records = scenario.WithOperators(sc.Records)
	logs, refRecs, _ := clockLogs(sc, partitions, -1)
	want := reference.Run(reference.Input{Sets: [][]reference.Zone{refZones}, Recs: refRecs, Partitions: partitions})

	// What discriminates: the raises by kind of pilot knowledge.
	bySeq := map[string]map[int64]*telemetry.Position{}
	for i := range sc.Records {
		p := &sc.Records[i]
		if bySeq[p.DroneID] == nil {
			bySeq[p.DroneID] = map[int64]*telemetry.Position{}
		}
		bySeq[p.DroneID][p.Seq] = p
	}
	var newHere, keptFromBefore, clockRaises, none int
	for _, e := range want {
		if e.Type != "raised" {
			continue
		}
		p := bySeq[e.DroneID][e.Seq]
		switch {
		case e.Op == "":
			none++
		case p != nil && p.Operator != nil && e.Op == reference.OpKey(p.Operator.Lat, p.Operator.Lon, p.Operator.AltM, p.Operator.Type, p.TS):
			newHere++
		default:
			keptFromBefore++
		}
		if e.AlarmID != reference.AlarmID(e.DroneID, e.ZoneID, e.Seq, 0) {
			clockRaises++ // or after a reset: either way not a plain position's raise
		}
	}
	t.Logf("reference raises: pilot from the raising position %d, kept from an earlier one %d, none %d (clock or reset ids %d)",
		newHere, keptFromBefore, none, clockRaises)
	if newHere < 20 || keptFromBefore < 20 || none < 20 {
		t.Fatalf("the scenario does not tell a wrong pilot from a right one")
	}

	for _, batch := range []int{1, 70, 1000} {
		var got []reference.Event
		for q, recs := range logs {
			e, err := alerts.NewEngine(q, dedup.Snapshot{Applied: dedup.NoVersion, ZoneVersion: alerts.NoZoneVersion})
			if err != nil {
				t.Fatal(err)
			}
			if batch == 70 { // replay's path: decoded positions, nothing encoded
				pos := positioned(t, recs, sc)
				for from := 0; from < len(pos); from += batch {
					evs, _ := e.Decide(ix, pos[from:min(from+batch, len(pos))], nil)
					got = append(got, asReference(t, evs)...)
				}
				continue
			}
			// the consumer's: the records' Kafka values, pilots in them
			for from := 0; from < len(recs); from += batch {
				if out := e.Apply(ix, plain(recs[from:min(from+batch, len(recs))])); out != nil {
					got = append(got, asReference(t, out.Events)...)
				}
			}
		}
		d, err := reference.Compare(want, got)
		if err != nil {
			t.Fatal(err)
		}
		if !d.OK() {
			t.Errorf("batch %d: %v", batch, d)
		} else if batch == 1 {
			t.Logf("batch %d: %v", batch, d)
		}
	}
}

// positioned is a partition's log as Decide takes it: the positions
// themselves (their pilots included, whatever the Kafka encoding carries),
// ticks as ticks.
func positioned(t *testing.T, recs []indexed, sc *scenario.Scenario) []alerts.Positioned {
	t.Helper()
	// The scenario's records by their encoding without pilots: a log record
	// finds its position by its value.
	byValue := map[string]*telemetry.Position{}
	for i := range sc.Records {
		p := sc.Records[i]
		p.Operator = nil
		byValue[string(p.AppendJSON(nil))] = &sc.Records[i]
	}
	out := make([]alerts.Positioned, len(recs))
	for i, r := range recs {
		out[i] = alerts.Positioned{Offset: r.r.Offset, Time: r.r.Time}
		if _, ok := telemetry.ParseTick(r.r.Value); ok {
			out[i].Tick = true
			continue
		}
		p, err := telemetry.Decode(r.r.Value)
		if err != nil {
			t.Fatal(err)
		}
		q := p
		q.Operator = nil
		src, ok := byValue[string(q.AppendJSON(nil))]
		if !ok {
			t.Fatalf("record %s not in the scenario", r.r.Value)
		}
		out[i].Pos = *src
	}
	return out
}

// TestStepOperator: the raise carries the pilot of the raising position,
// a position without one keeps the last known, and the state says when it
// was reported.
func TestStepOperator(t *testing.T) {
	_, ix, _ := scenarioZones(t)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s := alerts.NewDroneState()
	out := func(seq int64, op *telemetry.Operator) telemetry.Position {
		return telemetry.Position{DroneID: "UAV-1", Seq: seq, TS: t0.Add(time.Duration(seq) * time.Second), Lat: 51.47, Lon: -0.52,
			AltM: telemetry.Float(80), Operator: op}
	}
	in := out
	pilotA := &telemetry.Operator{Lat: 51.465, Lon: -0.53, Type: telemetry.OperatorTakeoff}
	pilotB := &telemetry.Operator{Lat: 51.466, Lon: -0.531, AltM: telemetry.Float(30), Type: telemetry.OperatorLive}
	steps := []struct {
		p      telemetry.Position
		inside bool
		wantOp *telemetry.Operator
		wantTS int64 // seq of the position that reported it
	}{
		{out(1, nil), false, nil, 0},
		{out(2, pilotA), false, pilotA, 2},
		{out(3, nil), false, pilotA, 2},
		{in(4, pilotB), true, pilotB, 4},
		{in(5, nil), true, pilotB, 4},
	}
	_ = in
	for _, st := range steps {
		p := st.p
		if st.inside {
			p.Lon = -0.49 // inside the scenario's POLY
		}
		evs, _, ok := alerts.Step(&s, &p, ix, nil, nil)
		if !ok {
			t.Fatalf("seq %d not applied", p.Seq)
		}
		if st.wantOp == nil {
			if !s.Op.IsZero() {
				t.Errorf("seq %d: pilot %+v, want none", p.Seq, s.Op)
			}
		} else if s.Op.Lat != st.wantOp.Lat || s.Op.Type != st.wantOp.Type || !s.Op.TS.Equal(t0.Add(time.Duration(st.wantTS)*time.Second)) {
			t.Errorf("seq %d: pilot %+v, want %+v as of seq %d", p.Seq, s.Op, st.wantOp, st.wantTS)
		}
		for _, e := range evs {
			if e.Type != alerts.Raised {
				continue
			}
			if e.Operator == nil || e.Operator.Lat != pilotB.Lat || e.Operator.AltM == nil || *e.Operator.AltM != 30 || !e.Operator.TS.Equal(p.TS) {
				t.Errorf("raise at seq %d: operator %+v, want the raising position's", p.Seq, e.Operator)
			}
		}
	}
	back, err := alerts.DecodeDroneState(s.Encode())
	if err != nil || back.Op.Lat != pilotB.Lat || back.Op.Type != "live" || !back.Op.TS.Equal(s.Op.TS) {
		t.Errorf("stored state's pilot: %+v, %v", back.Op, err)
	}
}
