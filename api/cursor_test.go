package api

import (
	"encoding/base64"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestCursorRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    cursor
	}{
		{"one partition at start", cursor{{}}},
		{"one partition", cursor{{1764806400123, 7}}},
		{"twelve partitions", cursor{{1764806400123, 0}, {1764806400001, 3}, {0, 0}, {1764806499999, 1},
			{1764806400123, 0}, {1764806400123, 0}, {1, 1}, {1764806400123, 9}, {2, 0}, {1764806400124, 0}, {0, 0}, {1764806400123, 2}}},
		{"extremes", cursor{{math.MaxUint64, math.MaxUint64}, {0, 0}, {math.MaxUint64, 0}}},
		{"many partitions", make(cursor, 300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.c.String()
			if strings.ContainsAny(s, "+/=\n") {
				t.Errorf("encoded %q is not unpadded base64url", s)
			}
			got, err := decodeCursor(s)
			if err != nil {
				t.Fatalf("decode %q: %v", s, err)
			}
			if !reflect.DeepEqual(got, tt.c) {
				t.Errorf("decode(encode(%v)) = %v", tt.c, got)
			}
		})
	}
	// Twelve partitions of one Redis clock stay short.
	c := make(cursor, 12)
	for i := range c {
		c[i] = streamID{1764806400000 + uint64(i*37), uint64(i % 3)}
	}
	if s := c.String(); len(s) > 48 {
		t.Errorf("12-partition cursor %q is %d characters, want ≤ 48", s, len(s))
	}
}

func TestDecodeCursorRejects(t *testing.T) {
	enc := func(b ...byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	good := cursor{{5, 1}, {6, 0}}.String()
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"not base64url", "a+b/"},
		{"padding", good + "=="},
		{"stream id instead", "1764806400123-0"},
		{"no bytes", enc()},
		{"wrong version", enc(2, 1, 0, 0)},
		{"zero partitions", enc(1, 0)},
		{"partition count overflow", enc(1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"too many partitions", enc(1, 0x81, 0x80, 0x04)},
		{"truncated ms", enc(1, 2, 5, 1)},
		{"truncated seq", enc(1, 1, 5)},
		{"unterminated varint", enc(1, 1, 0x80)},
		{"trailing bytes", enc(1, 1, 5, 1, 0)},
		{"too long", strings.Repeat("A", 4*maxCursorPartitions+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := decodeCursor(tt.in)
			if !errors.Is(err, errCursor) {
				t.Fatalf("decodeCursor(%q) = %v, %v; want an errCursor", tt.in, c, err)
			}
		})
	}
}

func TestParseStreamID(t *testing.T) {
	tests := []struct {
		in   string
		want streamID
		ok   bool
	}{
		{"0-0", streamID{}, true},
		{"1764806400123-7", streamID{1764806400123, 7}, true},
		{"15", streamID{15, 0}, true},
		{"18446744073709551615-18446744073709551615", streamID{math.MaxUint64, math.MaxUint64}, true},
		{"", streamID{}, false},
		{"-1", streamID{}, false},
		{"1-x", streamID{}, false},
		{"1-2-3", streamID{}, false},
	}
	for _, tt := range tests {
		got, err := parseStreamID(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("parseStreamID(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != tt.want.String() {
			t.Errorf("String() = %q", got.String())
		}
	}
	if !(streamID{1, 5}).less(streamID{2, 0}) || !(streamID{2, 0}).less(streamID{2, 1}) || (streamID{2, 1}).less(streamID{2, 1}) {
		t.Error("less is not the stream order")
	}
}
