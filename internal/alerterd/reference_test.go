package alerterd

// The proofs' side of internal/reference, the independent reference (a
// brute-force scan written apart from geofence/ and alerts/): these wrap it
// for tests, failing the test where the reference returns an error.

import (
	"testing"

	ref "github.com/nofly-dev/nofly/internal/reference"
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
