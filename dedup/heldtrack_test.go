package dedup_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/nofly-dev/nofly/dedup"
)

// TestHeldTracks: a held track (Batch.Held) keeps DefaultHeldTrackLen
// points, the others DefaultTrackLen, and a track no longer held is
// trimmed back at its next point; against both stores.
func TestHeldTracks(t *testing.T) {
	ctx := context.Background()
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			r := s.(trackZoneReader)
			version := dedup.NoVersion
			commit := func(b dedup.Batch) {
				t.Helper()
				b.Applied = version + 1
				if _, err := s.Commit(ctx, 0, version, b); err != nil {
					t.Fatal(err)
				}
				version = b.Applied
			}
			n := dedup.DefaultHeldTrackLen + 10
			for i := 0; i < n; i++ {
				commit(dedup.Batch{Tracks: map[string][]byte{"H": []byte(strconv.Itoa(i)), "N": []byte(strconv.Itoa(i))},
					Held: map[string]bool{"H": true}})
			}
			check := func(drone string, want, last int) {
				t.Helper()
				got, err := r.Track(ctx, 0, drone)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != want || string(got[0]) != strconv.Itoa(last-want+1) || string(got[want-1]) != strconv.Itoa(last) {
					t.Errorf("%s: %d points from %s to %s, want %d to %d", drone, len(got), got[0], got[len(got)-1], last-want+1, last)
				}
			}
			check("H", dedup.DefaultHeldTrackLen, n-1)
			check("N", dedup.DefaultTrackLen, n-1)
			commit(dedup.Batch{Tracks: map[string][]byte{"H": []byte(strconv.Itoa(n))}})
			check("H", dedup.DefaultTrackLen, n)
		})
	}
}
