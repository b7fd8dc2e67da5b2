package alerterd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

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
func historySwitches(ctx context.Context, path string, partition int, v zonestore.Validator, haveZones bool, token string, log *slog.Logger) ([]consume.ZoneSwitch, error) {
	b, err := readHistory(ctx, path, token)
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
				return nil, fmt.Errorf("%w: zone history %s: partition %d switched to zone version %d after offset %d, which the history no longer holds (kept: the alarm retention, at least the last 32, at most --zone-history-max-bytes of them); replay this range with --zones and the file of version %[4]d",
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

// readHistory reads the zone history from a file, or from an alerter's
// API when path is an http(s) URL (GET /v1/zones/history, with token as
// the bearer token when set).
func readHistory(ctx context.Context, path, token string) ([]byte, error) {
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		return os.ReadFile(path)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, res.Status, bytes.TrimSpace(b))
	}
	return b, nil
}
