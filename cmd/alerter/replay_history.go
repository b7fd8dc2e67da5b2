package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
)

// historySwitches reads a zone history file (GET /v1/zones/history's
// answer) and returns partition's switches with each version's index,
// loaded with v (the zone options replay was given, which should be
// serve's). Without a zone file (haveZones false), the partition's first
// switch must cover its first record (after_offset below 0): a record
// evaluated live before any switch had no store version.
func historySwitches(path string, partition int, v zonestore.Validator, haveZones bool, log *slog.Logger) ([]consume.ZoneSwitch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("zone history: %w", err)
	}
	var h zonestore.History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: zone history %s: %v", ErrInput, path, err)
	}
	if h.Partitions > 0 && partition >= h.Partitions {
		return nil, fmt.Errorf("%w: --partition %d, but the history's topic %s has %d partitions", ErrConfig, partition, h.Topic, h.Partitions)
	}
	sw := h.Switches[strconv.Itoa(partition)]
	if len(sw) == 0 {
		if !haveZones {
			return nil, fmt.Errorf("%w: zone history %s: partition %d has no zone switch (nothing committed with a stored zone set); give --zones", ErrInput, path, partition)
		}
		return nil, nil
	}
	if !haveZones && sw[0].AfterOffset >= 0 {
		return nil, fmt.Errorf("%w: zone history %s: partition %d's records up to offset %d were evaluated before its first zone switch; give --zones with the set they used", ErrInput, path, partition, sw[0].AfterOffset)
	}
	byVersion := make(map[int64]zonestore.Entry, len(h.Versions))
	for _, e := range h.Versions {
		byVersion[e.Version] = e
	}
	indexes := map[int64]*geofence.Index{}
	out := make([]consume.ZoneSwitch, 0, len(sw))
	for _, s := range sw {
		ix, ok := indexes[s.Version]
		if !ok {
			e, found := byVersion[s.Version]
			if !found {
				return nil, fmt.Errorf("%w: zone history %s: partition %d switched to zone version %d after offset %d, which the history no longer holds (kept: the alarm retention, at least the last 32)",
					ErrInput, path, partition, s.Version, s.AfterOffset)
			}
			var rep geofence.LoadReport
			ix, rep, err = v.Index(e)
			if err != nil {
				return nil, fmt.Errorf("zone history %s: %w", path, err)
			}
			logZoneReport(log, "zone version loaded", rep, ix.Version())
			indexes[s.Version] = ix
		}
		out = append(out, consume.ZoneSwitch{After: s.AfterOffset, Zones: ix})
	}
	log.Info("zone history", "partition", partition, "switches", len(out), "versions", len(indexes))
	return out, nil
}
