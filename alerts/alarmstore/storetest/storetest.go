// Package storetest fills a partition's alarm index through the real batch
// script (dedup.Redis.Commit), for the tests and benchmarks of the alarm
// store and the API.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// Writer commits raises and clears to the partitions of one store, keeping
// each partition's version.
type Writer struct {
	Store *dedup.Redis
	// Commit commits a batch (Store.Commit when nil): an upgrade test
	// gives an earlier release's script.
	Commit   func(ctx context.Context, partition int, expected int64, b dedup.Batch) (dedup.Result, error)
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
		commit := w.Commit
		if commit == nil {
			commit = w.Store.Commit
		}
		if _, err := commit(ctx, p, v, b); err != nil {
			return fmt.Errorf("storetest: commit partition %d: %w", p, err)
		}
		w.versions[p] = b.Applied
	}
	clear(w.events)
	return nil
}

// Found is an alarm as a brute-force read of a partition's alarms hash
// finds it, with no sorted set read.
type Found struct {
	Raised         alerts.Event
	Partition      int
	Cleared, Acked bool
}

// ReadAll reads every alarm of partitions 0..parts-1 (HGETALL of each
// alarms hash), newest raise first (ties by alarm id, descending): what a
// list must equal, filtered.
func ReadAll(ctx context.Context, rdb redis.UniversalClient, prefix, topic string, parts int) ([]Found, error) {
	var out []Found
	for p := 0; p < parts; p++ {
		h, err := rdb.HGetAll(ctx, redislayout.Of(prefix, topic, p).Alarms()).Result()
		if err != nil {
			return nil, fmt.Errorf("storetest: read the alarms of partition %d: %w", p, err)
		}
		for f, v := range h {
			id, ok := strings.CutSuffix(f, dedup.SuffixRaised)
			if !ok {
				continue
			}
			var e alerts.Event
			if err := json.Unmarshal([]byte(v), &e); err != nil {
				return nil, fmt.Errorf("storetest: partition %d: %s: %w", p, f, err)
			}
			_, cleared := h[id+dedup.SuffixCleared]
			_, acked := h[id+dedup.SuffixAcked]
			out = append(out, Found{Raised: e, Partition: p, Cleared: cleared, Acked: acked})
		}
	}
	slices.SortFunc(out, func(a, b Found) int {
		if c := b.Raised.TS.UnixMilli() - a.Raised.TS.UnixMilli(); c != 0 {
			return int(min(max(c, -1), 1))
		}
		return strings.Compare(b.Raised.AlarmID, a.Raised.AlarmID)
	})
	return out, nil
}

// Want is the ids of the alarms of all (ReadAll's) that f selects, in
// order: what List must page through for f.
func Want(all []Found, f alarmstore.Filter) []string {
	var ids []string
	for _, a := range all {
		e := a.Raised
		switch {
		case (f.State == "" || f.State == alarmstore.StateActive) && a.Cleared, f.State == alarmstore.StateCleared && !a.Cleared,
			f.Drone != "" && e.DroneID != f.Drone, f.Zone != "" && e.ZoneID != f.Zone,
			f.Category != "" && e.Category != f.Category, f.Acked != nil && *f.Acked != a.Acked,
			!f.Since.IsZero() && e.TS.UnixMilli() < f.Since.UnixMilli(),
			!f.Until.IsZero() && e.TS.UnixMilli() > f.Until.UnixMilli():
			continue
		}
		ids = append(ids, e.AlarmID)
	}
	return ids
}

// IndexProblems compares partition k's sorted sets of alarms, the whole
// ones and the secondary ones, with its alarms hash: every alarm must be in
// its state's set and in its state's set of its drone, zone and category,
// scored by its raise time, and no set may hold anything else. It returns
// each difference found (none: the index is right).
func IndexProblems(ctx context.Context, rdb redis.UniversalClient, k redislayout.Keys) ([]string, error) {
	h, err := rdb.HGetAll(ctx, k.Alarms()).Result()
	if err != nil {
		return nil, fmt.Errorf("storetest: %w", err)
	}
	want := map[string]map[string]float64{} // key → member → score
	put := func(key, id string, ms int64) {
		if want[key] == nil {
			want[key] = map[string]float64{}
		}
		want[key][id] = float64(ms)
	}
	for f, v := range h {
		id, ok := strings.CutSuffix(f, dedup.SuffixRaised)
		if !ok {
			continue
		}
		var e alerts.Event
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			return nil, fmt.Errorf("storetest: %s: %w", f, err)
		}
		ms := e.TS.UnixMilli()
		whole, by := k.AlarmsActive(), k.AlarmsActiveBy
		if _, c := h[id+dedup.SuffixCleared]; c {
			whole, by = k.AlarmsCleared(), k.AlarmsClearedBy
		}
		put(whole, id, ms)
		put(by(redislayout.ByDrone, e.DroneID), id, ms)
		put(by(redislayout.ByZone, e.ZoneID), id, ms)
		put(by(redislayout.ByCategory, e.Category), id, ms)
	}
	keys := []string{k.AlarmsActive(), k.AlarmsCleared()}
	for _, pat := range []string{k.AlarmsActive() + ":*", k.AlarmsCleared() + ":*"} {
		found, err := scan(ctx, rdb, glob(pat))
		if err != nil {
			return nil, err
		}
		keys = append(keys, found...)
	}
	for key := range want {
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	var problems []string
	for _, key := range keys {
		zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("storetest: %s: %w", key, err)
		}
		got := map[string]float64{}
		for _, z := range zs {
			got[z.Member.(string)] = z.Score
		}
		for id, ms := range want[key] {
			if g, ok := got[id]; !ok {
				problems = append(problems, key+": lacks "+id)
			} else if g != ms {
				problems = append(problems, key+": "+id+" scored "+strconv.FormatFloat(g, 'f', -1, 64)+", raised at "+strconv.FormatFloat(ms, 'f', -1, 64))
			}
		}
		for id := range got {
			if _, ok := want[key][id]; !ok {
				problems = append(problems, key+": holds "+id)
			}
		}
	}
	return problems, nil
}

func scan(ctx context.Context, rdb redis.UniversalClient, match string) ([]string, error) {
	var out []string
	var cur uint64
	for {
		ks, next, err := rdb.Scan(ctx, cur, match, 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("storetest: scan %s: %w", match, err)
		}
		out = append(out, ks...)
		if cur = next; cur == 0 {
			return out, nil
		}
	}
}

// glob escapes a key for a MATCH pattern, keeping a trailing "*".
func glob(pat string) string {
	base, star := strings.CutSuffix(pat, "*")
	var b strings.Builder
	for _, r := range base {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	if star {
		b.WriteByte('*')
	}
	return b.String()
}
