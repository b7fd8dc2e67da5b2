package api

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// streamID is a Redis stream entry id, <ms>-<seq>. The zero value is
// "0-0", before every entry.
type streamID struct{ ms, seq uint64 }

// parseStreamID parses "<ms>-<seq>" (a bare "<ms>" is <ms>-0).
func parseStreamID(s string) (streamID, error) {
	a, b, found := strings.Cut(s, "-")
	ms, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return streamID{}, fmt.Errorf("stream id %q: %w", s, err)
	}
	var seq uint64
	if found {
		if seq, err = strconv.ParseUint(b, 10, 64); err != nil {
			return streamID{}, fmt.Errorf("stream id %q: %w", s, err)
		}
	}
	return streamID{ms, seq}, nil
}

func (id streamID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

// next is the smallest id after id; prev the largest before it (0-0 stays).
func (id streamID) next() streamID {
	if id.seq == math.MaxUint64 {
		return streamID{id.ms + 1, 0}
	}
	return streamID{id.ms, id.seq + 1}
}

func (id streamID) prev() streamID {
	switch {
	case id.seq > 0:
		return streamID{id.ms, id.seq - 1}
	case id.ms > 0:
		return streamID{id.ms - 1, math.MaxUint64}
	}
	return id
}

func (id streamID) less(o streamID) bool {
	return id.ms < o.ms || (id.ms == o.ms && id.seq < o.seq)
}

// cursor is a position in the event sequence: for every partition p, the
// id of the last entry of p's outbox consumed at that point (0-0: none).
// Resuming after it reads, for each partition, the entries with a larger
// id: whichever instance serves it, however the partitions were
// interleaved before, nothing is skipped and nothing repeated.
type cursor []streamID

// cursorVersion is the first byte of an encoded cursor.
const cursorVersion = 1

// maxCursorPartitions bounds what decode accepts (a topic has far fewer).
const maxCursorPartitions = 1 << 16

// errCursor is the class of every decode error.
var errCursor = errors.New("malformed cursor")

// appendEncoded appends the cursor's opaque form: base64url (no padding) of
// version, partition count, then per partition the id's milliseconds (the
// first as is, the others as a zigzag difference from the previous
// partition's, small since they share Redis's clock) and its sequence, all
// varints.
func (c cursor) appendEncoded(dst []byte) []byte {
	var raw [16 + 20*64]byte
	b := raw[:0]
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, uint64(len(c)))
	var prev uint64
	for i, id := range c {
		if i == 0 {
			b = binary.AppendUvarint(b, id.ms)
		} else {
			b = binary.AppendVarint(b, int64(id.ms-prev))
		}
		prev = id.ms
		b = binary.AppendUvarint(b, id.seq)
	}
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

func (c cursor) String() string { return string(c.appendEncoded(nil)) }

// decodeCursor parses an encoded cursor; every error wraps errCursor.
func decodeCursor(s string) (cursor, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty", errCursor)
	}
	if len(s) > 4*maxCursorPartitions {
		return nil, fmt.Errorf("%w: too long", errCursor)
	}
	// Only the alphabet, as the description's pattern says: the decoder
	// would skip a \r or \n.
	if strings.IndexFunc(s, notBase64URL) >= 0 {
		return nil, fmt.Errorf("%w: not base64url", errCursor)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", errCursor)
	}
	if len(b) == 0 || b[0] != cursorVersion {
		return nil, fmt.Errorf("%w: unknown version", errCursor)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > maxCursorPartitions {
		return nil, fmt.Errorf("%w: bad partition count", errCursor)
	}
	b = b[k:]
	c := make(cursor, n)
	var prev uint64
	for i := range c {
		var ms uint64
		if i == 0 {
			ms, k = binary.Uvarint(b)
		} else {
			var d int64
			d, k = binary.Varint(b)
			ms = prev + uint64(d) // modulo 2^64, as encoded
		}
		if k <= 0 {
			return nil, fmt.Errorf("%w: truncated at partition %d", errCursor, i)
		}
		b = b[k:]
		seq, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: truncated at partition %d", errCursor, i)
		}
		b = b[k:]
		c[i] = streamID{ms, seq}
		prev = ms
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errCursor)
	}
	return c, nil
}

// notBase64URL reports whether r is outside base64url's alphabet.
func notBase64URL(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}
