package zonestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A reader of the history one version at a time (GET /v1/zones/history
// streams it): memory bounded by one version, where History holds them
// all (up to MaxKeep sets of up to 32 MiB).

// HistoryVersions returns the versions kept, lowest first (without their
// sets).
func (s *Store) HistoryVersions(ctx context.Context) ([]int64, error) {
	vs, err := s.rdb.ZRange(ctx, s.keys.Times(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("zonestore: read history: %w", err)
	}
	out := make([]int64, 0, len(vs))
	for _, v := range vs {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("zonestore: history version %q: %w", v, err)
		}
		out = append(out, n)
	}
	// The sorted set orders by time; a clock that went back would order
	// differently from the versions, which replay needs.
	slices.Sort(out)
	return out, nil
}

// HistoryEntry returns version v's Entry JSON as stored; ok is false when
// the history no longer holds it (trimmed).
func (s *Store) HistoryEntry(ctx context.Context, v int64) (entry string, ok bool, err error) {
	b, err := s.rdb.HGet(ctx, s.keys.History(), strconv.FormatInt(v, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("zonestore: read history version %d: %w", v, err)
	}
	return b, true, nil
}
