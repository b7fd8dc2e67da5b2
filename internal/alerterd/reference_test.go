package alerterd

// The proofs' side of internal/reference, the independent reference (a
// brute-force scan written apart from geofence/ and alerts/): these wrap it
// for tests, failing the test where the reference returns an error.

import (
	"testing"

	ref "github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

type refEvent = ref.Event

type refZone = ref.Zone

func loadRefZones(t testing.TB, path string) []refZone {
	t.Helper()
	zs, err := ref.LoadZones(path)
	if err != nil {
		t.Fatal(err)
	}
	return zs
}

// reference runs the reference over the records in order.
func reference(zones []refZone, recs []telemetry.Position) []refEvent {
	return ref.Events(zones, recs)
}

func referenceReloaded(sets [][]refZone, switchAt []int, recs []telemetry.Position) []refEvent {
	return ref.EventsReloaded(sets, switchAt, recs)
}

// referenceAt runs the reference over the scenario as the live topic holds
// it: partitions partitions, each record at its receive time (the Kafka
// timestamp produceAt gives it), the log's clock per partition.
func referenceAt(zones []refZone, sc *scenario.Scenario, partitions int) []refEvent {
	return referenceReloadedAt([][]refZone{zones}, nil, sc, partitions)
}

// referenceReloadedAt is referenceAt with zone-set reloads at switchAt.
func referenceReloadedAt(sets [][]refZone, switchAt []int, sc *scenario.Scenario, partitions int) []refEvent {
	recs := make([]ref.Rec, len(sc.Records))
	for i := range sc.Records {
		recs[i] = ref.Rec{Pos: sc.Records[i], At: sc.Received[i]}
	}
	return ref.Run(ref.Input{Sets: sets, SwitchAt: switchAt, Recs: recs, Partitions: partitions, Approach: defaultApproach()})
}

// defaultApproach is the alerter's default approaching warnings
// (DefaultConfig) as the reference takes them: the proofs hold the
// approaching events to the reference like every other.
func defaultApproach() ref.ApproachSettings {
	c := DefaultConfig()
	a := c.approach()
	return ref.ApproachSettings{Before: a.Before, BufferM: a.BufferM}
}

// compareEvents reports missing, unexpected and duplicate events of got
// against want.
func compareEvents(t testing.TB, label string, want, got []refEvent) {
	t.Helper()
	d, err := ref.Compare(want, got)
	if err != nil {
		t.Fatal(err)
	}
	if !d.OK() {
		t.Errorf("%s: %v", label, d)
		return
	}
	t.Logf("%s: %v", label, d)
}

func eventsFromNDJSON(t testing.TB, lines [][]byte) []refEvent {
	t.Helper()
	es, err := ref.ParseEvents(lines)
	if err != nil {
		t.Fatal(err)
	}
	return es
}
