package consume

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
)

// versioned returns the scenario's zones as zone store version v, without
// the zones named in drop.
func versioned(t *testing.T, v int64, drop ...string) *geofence.Index {
	t.Helper()
	all := scenarioZones(t)
	set := &geofence.ZoneSet{ZoneVersion: v}
	for _, z := range all.Zones() {
		keep := true
		for _, d := range drop {
			keep = keep && z.ID != d
		}
		if keep {
			set.Zones = append(set.Zones, z)
		}
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestReplaySwitches: with zone switches, a replay at any batch size equals
// one engine run that applies the records up to the switch with the first
// set and the rest with the second — byte for byte, partition, offsets
// (FirstOffset on) and zone_version included — and the switch shows.
func TestReplaySwitches(t *testing.T) {
	input, _ := scenarioInput(t, smallScenario(), 1)
	v1, v2 := versioned(t, 1), versioned(t, 2, "CIRC", "POLY")
	const part, first = 3, 100
	lines := bytes.Split(bytes.TrimSpace(input), []byte("\n"))
	at := int64(first + len(lines)/2) // the switch: records above it use v2
	var want bytes.Buffer
	eng, err := alerts.NewEngine(part, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	var before, after []alerts.Record
	for i, l := range lines {
		r := alerts.Record{Offset: int64(first + i), Value: l}
		if r.Offset > at {
			after = append(after, r)
		} else {
			before = append(before, r)
		}
	}
	n2 := 0
	for _, run := range []struct {
		zs   *geofence.Index
		recs []alerts.Record
	}{{v1, before}, {v2, after}} {
		out := eng.Apply(run.zs, run.recs)
		for _, e := range out.Batch.Events {
			want.Write(e.JSON)
			want.WriteByte('\n')
		}
		if run.zs == v2 {
			n2 = len(out.Events)
		}
	}
	if n2 == 0 || bytes.Count(want.Bytes(), []byte(`"zone_version":1`)) == 0 {
		t.Fatalf("the runs raise %d events after the switch: the test sees no switch", n2)
	}
	for _, batch := range []int{1, 7, 500, 100000} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			var got bytes.Buffer
			_, err := Replay(context.Background(), (*geofence.Index)(nil), bytes.NewReader(input), &got, ReplayOptions{
				Name: "switch", Batch: batch, Partition: part, FirstOffset: first,
				Switches: []ZoneSwitch{{After: -1, Zones: v1}, {After: at, Zones: v2}}})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("replay (%d bytes) differs from the engine's runs (%d bytes)", got.Len(), want.Len())
			}
		})
	}
	if _, err := Replay(context.Background(), v1, bytes.NewReader(input), &bytes.Buffer{}, ReplayOptions{Batch: 1,
		Switches: []ZoneSwitch{{After: 5, Zones: v1}, {After: 2, Zones: v2}}}); err == nil {
		t.Error("switches out of order accepted")
	}
}
