package dedup_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

type trackZoneReader interface {
	Track(ctx context.Context, partition int, drone string) ([][]byte, error)
	ZoneSwitches(ctx context.Context, partition int) ([]dedup.ZoneSwitch, error)
}

// TestTracksAndZoneSwitches is the contract of Batch.Tracks and
// Batch.ZoneVersion, against both stores.
func TestTracksAndZoneSwitches(t *testing.T) {
	ctx := context.Background()
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			r := s.(trackZoneReader)
			version := dedup.NoVersion
			commit := func(b dedup.Batch) {
				t.Helper()
				b.Applied = version + 10
				if _, err := s.Commit(ctx, 2, version, b); err != nil {
					t.Fatal(err)
				}
				version = b.Applied
			}
			// 60 points of A, one of B every other batch: A keeps the last 50.
			for i := 0; i < 60; i++ {
				b := dedup.Batch{Tracks: map[string][]byte{"A": []byte(strconv.Itoa(i))}}
				if i%2 == 0 {
					b.Tracks["B"] = []byte("b" + strconv.Itoa(i))
				}
				commit(b)
			}
			tests := []struct {
				drone string
				want  []string
			}{
				{"A", seq("", 10, 60)},
				{"B", evens("b", 0, 60)},
				{"C", nil},
			}
			for _, tt := range tests {
				got, err := r.Track(ctx, 2, tt.drone)
				if err != nil {
					t.Fatal(err)
				}
				if gs := strs(got); !slices.Equal(gs, tt.want) {
					t.Errorf("track %s = %q, want %q", tt.drone, gs, tt.want)
				}
			}
			if got, _ := r.Track(ctx, 1, "A"); len(got) != 0 {
				t.Errorf("partition 1 has a track of A: %q", got)
			}

			// Zone versions: 0 is ignored; a switch is recorded when it differs.
			start := version
			commit(dedup.Batch{ZoneVersion: 0})
			commit(dedup.Batch{ZoneVersion: 3})
			at3 := version - 10
			commit(dedup.Batch{ZoneVersion: 3})
			commit(dedup.Batch{ZoneVersion: 0})
			commit(dedup.Batch{ZoneVersion: 4})
			at4 := version - 10
			commit(dedup.Batch{ZoneVersion: 3})
			at3b := version - 10
			got, err := r.ZoneSwitches(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			want := []dedup.ZoneSwitch{{Version: 3, After: at3}, {Version: 4, After: at4}, {Version: 3, After: at3b}}
			if !slices.Equal(got, want) || at3 != start+10 {
				t.Errorf("zone switches = %v, want %v", got, want)
			}
			if got, _ := r.ZoneSwitches(ctx, 1); len(got) != 0 {
				t.Errorf("partition 1 switches = %v", got)
			}
		})
	}
}

func TestRedisTrackExpiresAndFirstSwitch(t *testing.T) {
	ctx := context.Background()
	c := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "dedup")
	s, err := dedup.NewRedis(c, dedup.RedisOptions{Prefix: prefix, Topic: "t", TrackTTL: 90 * time.Minute, TrackLen: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 5; i++ {
		if _, err := s.Commit(ctx, 0, i-1, dedup.Batch{Applied: i, ZoneVersion: 7, Tracks: map[string][]byte{"D": []byte(strconv.FormatInt(i, 10))}}); err != nil {
			t.Fatal(err)
		}
	}
	k := redislayout.Of(prefix, "t", 0)
	if got := c.LRange(ctx, k.Track("D"), 0, -1).Val(); !slices.Equal(got, []string{"2", "3", "4"}) {
		t.Errorf("track = %q, want the last 3", got)
	}
	if pttl := c.PTTL(ctx, k.Track("D")).Val(); pttl <= 89*time.Minute || pttl > 90*time.Minute {
		t.Errorf("track PTTL = %v, want 90m", pttl)
	}
	if got := c.LRange(ctx, k.ZoneSwitches(), 0, -1).Val(); !slices.Equal(got, []string{"7 -1"}) {
		t.Errorf("zone switches = %q, want [\"7 -1\"]", got)
	}
	if got := c.Get(ctx, k.ZoneVersion()).Val(); got != "7" {
		t.Errorf("zonever = %q", got)
	}
}

func TestParseZoneSwitch(t *testing.T) {
	tests := []struct {
		in   string
		want dedup.ZoneSwitch
		ok   bool
	}{
		{"3 -1", dedup.ZoneSwitch{Version: 3, After: -1}, true},
		{"12 400", dedup.ZoneSwitch{Version: 12, After: 400}, true},
		{"12", dedup.ZoneSwitch{}, false},
		{"x 1", dedup.ZoneSwitch{}, false},
		{"1 y", dedup.ZoneSwitch{}, false},
	}
	for _, tt := range tests {
		got, err := dedup.ParseZoneSwitch(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseZoneSwitch(%q) = %v, %v", tt.in, got, err)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func strs(bs [][]byte) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return out
}

func seq(p string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, p+strconv.Itoa(i))
	}
	return out
}

func evens(p string, from, to int) []string {
	var out []string
	for i := from; i < to; i += 2 {
		out = append(out, fmt.Sprint(p, i))
	}
	return out
}
