package alerterd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/authorization"
	"github.com/nofly-dev/nofly/authorization/authstore"
)

// authHistorySwitches reads an authorisation history (GET
// /v1/authorizations/history's answer, a file or that URL) and returns
// partition's switches with each version's set. The records before a
// partition's first switch were decided with no authorisation (version 0:
// a switch is recorded only for a stored version), so no set is needed for
// them.
func authHistorySwitches(ctx context.Context, path string, partition int, token string, log *slog.Logger) ([]consume.AuthSwitch, error) {
	b, err := readHistory(ctx, path, token)
	if err != nil {
		return nil, fmt.Errorf("authorisation history: %w", err)
	}
	var h authstore.History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: authorisation history %s: %v", ErrInput, path, err)
	}
	if h.Partitions > 0 && partition >= h.Partitions {
		return nil, fmt.Errorf("%w: --partition %d, but the authorisation history's topic %s has %d partitions", ErrConfig, partition, h.Topic, h.Partitions)
	}
	sets := make(map[int64]*authorization.Set, len(h.Versions))
	for i := range h.Versions {
		sets[h.Versions[i].Version] = h.Versions[i].Set()
	}
	sw := h.Switches[strconv.Itoa(partition)]
	out := make([]consume.AuthSwitch, 0, len(sw))
	for _, s := range sw {
		set, ok := sets[s.Version]
		if !ok {
			return nil, fmt.Errorf("%w: authorisation history %s: partition %d switched to authorisation version %d after offset %d, which the history no longer holds (kept: the alarm retention, at least the last 32)",
				ErrInput, path, partition, s.Version, s.AfterOffset)
		}
		out = append(out, consume.AuthSwitch{After: s.AfterOffset, Set: set})
	}
	log.Info("authorisation history", "partition", partition, "switches", len(out), "versions", len(sets))
	return out, nil
}
