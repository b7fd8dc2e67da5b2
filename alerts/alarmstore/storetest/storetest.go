// Package storetest fills a partition's alarm index through the real batch
// script (dedup.Redis.Commit), for the tests and benchmarks of the alarm
// store and the API.
package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
)

// Writer commits raises and clears to the partitions of one store, keeping
// each partition's version.
type Writer struct {
	Store    *dedup.Redis
	versions map[int]int64
	events   map[int][]dedup.Event
}

// NewWriter returns a writer on s (partitions at dedup.NoVersion).
func NewWriter(s *dedup.Redis) *Writer {
	return &Writer{Store: s, versions: map[int]int64{}, events: map[int][]dedup.Event{}}
}

// Raised is a raised event of drone in zone at seq and ts on partition.
func Raised(partition int, drone, zone, category string, seq int64, ts time.Time) alerts.Event {
	id := alerts.AlarmID(drone, zone, seq)
	alt := 80.5
	return alerts.Event{EventID: id + ":" + alerts.Raised, AlarmID: id, Type: alerts.Raised, DroneID: drone,
		ZoneID: zone, ZoneName: "Zone " + zone, Category: category, Seq: seq, TS: ts.UTC(),
		Lat: 51.47, Lon: -0.49, AltM: &alt, AltRef: "agl", Partition: partition, Offset: seq, ZoneVersion: 3}
}

// ClearedOf is the clear of raised at seq and ts, for reason.
func ClearedOf(raised alerts.Event, seq int64, ts time.Time, reason string) alerts.Event {
	c := raised
	c.EventID, c.Type, c.Seq, c.TS, c.Reason, c.Offset = raised.AlarmID+":"+alerts.Cleared, alerts.Cleared, seq, ts.UTC(), reason, seq
	c.Lat += 0.01
	return c
}

// Add queues e for its partition's next Flush.
func (w *Writer) Add(e alerts.Event) {
	w.events[e.Partition] = append(w.events[e.Partition], dedup.Event{ID: e.EventID, JSON: e.AppendJSON(nil)})
}

// Flush commits the queued events, one batch per partition.
func (w *Writer) Flush(ctx context.Context) error {
	for p, es := range w.events {
		v, ok := w.versions[p]
		if !ok {
			v = dedup.NoVersion
		}
		b := dedup.Batch{Events: es, Applied: v + 1}
		if _, err := w.Store.Commit(ctx, p, v, b); err != nil {
			return fmt.Errorf("storetest: commit partition %d: %w", p, err)
		}
		w.versions[p] = b.Applied
	}
	clear(w.events)
	return nil
}
