// Package dronetest flies drones through the real engine and batch script
// (alerts.Engine, dedup.Redis.Commit), for the tests of the drone store and
// the API: the states and tracks they read are the ones the alerter writes.
package dronetest

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// Zones is the scenario's zone set (testdata/scenarios/zones.geojson):
// POLY, "Runway complex", restricted, covers lon -0.50..-0.48, lat
// 51.46..51.50 among others.
func Zones() (*geofence.Index, error) {
	set, err := geofence.LoadFile(filepath.Join(testenv.RepoRoot(), scenario.ZonesFile))
	if err != nil {
		return nil, err
	}
	return geofence.NewIndex(set)
}

// Inside and Outside are positions inside POLY only and outside every zone.
const (
	InsideLat, InsideLon   = 51.47, -0.49
	OutsideLat, OutsideLon = 51.30, -0.80
)

// Pos is drone's position at seq, ts, lat, lon and 80 m AGL.
func Pos(drone string, seq int64, ts time.Time, lat, lon float64) telemetry.Position {
	return telemetry.Position{DroneID: drone, Seq: seq, TS: ts, Lat: lat, Lon: lon, AltM: telemetry.Float(80), AltRef: telemetry.RefAGL}
}

// Fly applies ps as one batch of partition's records through a new engine
// loaded from the store (as the alerter does after an assignment) and
// commits it with the batch script. It returns the batch's events.
func Fly(ctx context.Context, s *dedup.Redis, zs alerts.Zones, partition int, ps ...telemetry.Position) ([]alerts.Event, error) {
	snap, err := s.Load(ctx, partition)
	if err != nil {
		return nil, err
	}
	e, err := alerts.NewEngine(partition, snap)
	if err != nil {
		return nil, err
	}
	recs := make([]alerts.Record, len(ps))
	for i := range ps {
		recs[i] = alerts.Record{Offset: snap.Applied + 1 + int64(i), Value: ps[i].AppendJSON(nil)}
	}
	out := e.Apply(zs, recs)
	if out == nil {
		return nil, nil
	}
	if _, err := s.Commit(ctx, partition, out.Expected, out.Batch); err != nil {
		return nil, fmt.Errorf("dronetest: commit partition %d: %w", partition, err)
	}
	return out.Events, nil
}

// Legacy commits drone states as an alerter before states kept their
// position wrote them (e.g. {"seq":7}), through the batch script.
func Legacy(ctx context.Context, s *dedup.Redis, partition int, states map[string]string) error {
	snap, err := s.Load(ctx, partition)
	if err != nil {
		return err
	}
	b := dedup.Batch{Drones: map[string][]byte{}, Applied: snap.Applied + 1}
	for id, st := range states {
		b.Drones[id] = []byte(st)
		if _, known := snap.Drones[id]; !known {
			b.New = append(b.New, id) // as the engine names a drone new to the partition
		}
	}
	if _, err := s.Commit(ctx, partition, snap.Applied, b); err != nil {
		return fmt.Errorf("dronetest: commit partition %d: %w", partition, err)
	}
	return nil
}

// FlyRecords is Fly with records already built: positions and ticks, each
// with its Kafka timestamp (the log's clock), at the offsets after the
// partition's version.
func FlyRecords(ctx context.Context, s *dedup.Redis, zs alerts.Zones, partition int, recs []alerts.Record) ([]alerts.Event, error) {
	snap, err := s.Load(ctx, partition)
	if err != nil {
		return nil, err
	}
	e, err := alerts.NewEngine(partition, snap)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i].Offset = snap.Applied + 1 + int64(i)
	}
	out := e.Apply(zs, recs)
	if out == nil {
		return nil, nil
	}
	if _, err := s.Commit(ctx, partition, out.Expected, out.Batch); err != nil {
		return nil, fmt.Errorf("dronetest: commit partition %d: %w", partition, err)
	}
	return out.Events, nil
}
