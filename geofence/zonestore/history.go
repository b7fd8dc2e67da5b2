package zonestore

import "context"

// A reader of the history one version at a time (GET /v1/zones/history
// streams it): memory bounded by one version, where History holds them
// all (up to MaxKeep sets of up to 32 MiB).

// HistoryVersions returns the versions kept, lowest first (without their
// sets).
func (s *Store) HistoryVersions(ctx context.Context) ([]int64, error) {
	return s.vs.HistoryVersions(ctx)
}

// HistoryEntry returns version v's Entry JSON as stored; ok is false when
// the history no longer holds it (trimmed).
func (s *Store) HistoryEntry(ctx context.Context, v int64) (entry string, ok bool, err error) {
	return s.vs.HistoryEntry(ctx, v)
}
