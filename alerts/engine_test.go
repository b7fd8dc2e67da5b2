package alerts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/telemetry"
)

func rec(off int64, p telemetry.Position) alerts.Record {
	return alerts.Record{Offset: off, Value: p.AppendJSON(nil)}
}

func drone(id string, seq int64, lon float64) telemetry.Position {
	p := pos(seq, lon, 0.005, nil)
	p.DroneID = id
	return p
}

func TestEngineApply(t *testing.T) {
	ix := index(t, zonesJSON)
	e, err := alerts.NewEngine(4, dedup.Snapshot{Applied: dedup.NoVersion})
	if err != nil {
		t.Fatal(err)
	}
	out := e.Apply(ix, []alerts.Record{
		rec(10, drone("A", 1, 0.005)), // raise
		rec(13, drone("B", 1, 0.5)),   // offsets need not be contiguous
		rec(14, drone("A", 2, 0.02)),  // clear, same batch, in order
		rec(15, drone("A", 2, 0.005)), // duplicate seq: nothing
		{Offset: 16, Value: []byte(`{"drone_id":"A"}`)},
		rec(12, drone("A", 3, 0.005)), // offset not above the previous: skipped
		rec(20, drone("A", 1, 0.005)), // stale: nothing
	})
	if out == nil {
		t.Fatal("nil outcome")
	}
	want := alerts.Stats{Records: 6, Applied: 3, Duplicates: 2, Invalid: 1, Skipped: 1, Raised: 1, Cleared: 1}
	if out.Stats != want {
		t.Errorf("stats = %+v, want %+v", out.Stats, want)
	}
	if got := summary(out.Events); got != "raised SQ 1; cleared SQ 2 exited" {
		t.Errorf("events = %q", got)
	}
	if out.Events[0].Partition != 4 || out.Events[0].Offset != 10 || out.Events[1].Offset != 14 {
		t.Errorf("partition/offset = %+v", out.Events)
	}
	if out.Expected != dedup.NoVersion || out.Batch.Applied != 20 || e.Applied() != 20 {
		t.Errorf("versions: expected %d applied %d engine %d", out.Expected, out.Batch.Applied, e.Applied())
	}
	if len(out.Batch.Drones) != 2 || len(out.Batch.Events) != 2 || out.Batch.Events[1].ID != out.Events[1].EventID {
		t.Errorf("batch = %+v", out.Batch)
	}
	if len(out.Bad) != 1 || out.Bad[0].Offset != 16 || !errors.Is(out.Bad[0].Err, telemetry.ErrInvalid) {
		t.Errorf("bad = %+v", out.Bad)
	}
	if again := e.Apply(ix, []alerts.Record{rec(20, drone("A", 9, 0.005)), rec(3, drone("A", 9, 0.005))}); again != nil {
		t.Errorf("records at or below the version produced %+v", again)
	}
}

// TestEngineRestartEquivalence: committing, reloading into a new engine and
// going on gives the same events as one engine going on; the persisted
// highest seq stops a stale record after the restart.
func TestEngineRestartEquivalence(t *testing.T) {
	ctx := context.Background()
	ix := index(t, zonesJSON)
	first := []alerts.Record{rec(0, drone("A", 5, 0.005)), rec(1, drone("B", 1, 0.5))}
	second := []alerts.Record{rec(2, drone("A", 4, 0.02)), rec(3, drone("B", 2, 0.005)), rec(4, drone("A", 6, 0.02))}

	one, _ := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	one.Apply(ix, first)
	straight := summary(one.Apply(ix, second).Events)

	store := dedup.NewMemory(0)
	e, _ := alerts.NewEngine(0, dedup.Snapshot{Applied: dedup.NoVersion})
	out := e.Apply(ix, first)
	if _, err := store.Commit(ctx, 0, out.Expected, out.Batch); err != nil {
		t.Fatal(err)
	}
	snap, err := store.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := alerts.NewEngine(0, snap)
	if err != nil {
		t.Fatal(err)
	}
	out2 := e2.Apply(ix, second)
	if got := summary(out2.Events); got != straight || got != "raised SQ 2; cleared SQ 6 exited" {
		t.Errorf("after restart %q, straight %q", got, straight)
	}
	if out2.Stats.Duplicates != 1 {
		t.Errorf("stale record after restart: %+v", out2.Stats)
	}
	// A second engine that loaded the same snapshot is fenced once the
	// first has committed.
	zombie, _ := alerts.NewEngine(0, snap)
	zout := zombie.Apply(ix, second)
	if _, err := store.Commit(ctx, 0, out2.Expected, out2.Batch); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(ctx, 0, zout.Expected, zout.Batch); !errors.Is(err, dedup.ErrFenced) {
		t.Errorf("zombie commit: %v, want ErrFenced", err)
	}
	entries, _ := store.Outbox(ctx, 0)
	if len(entries) != 3 {
		t.Errorf("outbox has %d entries, want 3", len(entries))
	}
}
