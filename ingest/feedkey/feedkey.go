// Package feedkey holds the keys of the feeds allowed to write telemetry:
// the key file (one feed per line, the SHA-256 of its key, never the key),
// the constant-time lookup of a presented key, each feed's drone-id prefixes
// and rate, and the making of a fresh key.
//
// The file, one feed per line, fields separated by blanks, '#' starts a
// comment:
//
//	# name      key hash            options
//	ogn-relay   sha256:<64 hex>     prefixes=OGN-,FLR- rate=200/s
//	fleet-a     sha256:<64 hex>     prefixes=UAV-A- rate=1000/s burst=5000
//	lab         sha256:<64 hex>
//
// The fields:
//   - name: 1-64 of [A-Za-z0-9._-], unique in the file; it is what logs and
//     metrics show of the feed.
//   - sha256:<hex>: the SHA-256 of the key as sent in "Authorization: Bearer
//     <key>", 64 lowercase or uppercase hex digits; unique in the file.
//   - prefixes=P1,P2: the feed may write only drone ids starting with one of
//     them (case-sensitive). Without it the feed may write any drone id.
//   - rate=N/s (or /m, /h): records the feed may write per second (minute,
//     hour), N a positive integer. Without it the feed is not limited.
//   - burst=B: records the feed may write at once (a token bucket of B,
//     refilled at the rate); default N, the records of one period. A
//     request of more than B records can never pass.
//
// Every error names the file and line. Make an entry with NewKey and
// Feed.Line (cmd/ingest: "ingest feed-key --name NAME").
package feedkey

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Feed is one line of the key file.
type Feed struct {
	Name string
	// Hash is the SHA-256 of the key.
	Hash [sha256.Size]byte
	// Prefixes the feed's drone ids must start with; empty: any drone id.
	Prefixes []string
	// Rate is the records the feed may write per Per; 0: unlimited.
	Rate int
	Per  time.Duration
	// Burst is the records the feed may write at once; 0 when Rate is 0.
	Burst int
}

// Allows reports whether the feed may write droneID.
func (f *Feed) Allows(droneID string) bool {
	if len(f.Prefixes) == 0 {
		return true
	}
	for _, p := range f.Prefixes {
		if strings.HasPrefix(droneID, p) {
			return true
		}
	}
	return false
}

// PerSecond is the feed's rate in records per second; 0: unlimited.
func (f *Feed) PerSecond() float64 {
	if f.Rate == 0 {
		return 0
	}
	return float64(f.Rate) / f.Per.Seconds()
}

// RateString is the rate as written in the file ("200/s"), "" when unlimited.
func (f *Feed) RateString() string {
	if f.Rate == 0 {
		return ""
	}
	return strconv.Itoa(f.Rate) + "/" + unitOf[f.Per]
}

// Line is the feed's line in the key file.
func (f *Feed) Line() string {
	var b strings.Builder
	b.WriteString(f.Name)
	b.WriteString(" sha256:")
	b.WriteString(hex.EncodeToString(f.Hash[:]))
	if len(f.Prefixes) > 0 {
		b.WriteString(" prefixes=")
		b.WriteString(strings.Join(f.Prefixes, ","))
	}
	if f.Rate > 0 {
		b.WriteString(" rate=")
		b.WriteString(f.RateString())
		if f.Burst != f.Rate {
			b.WriteString(" burst=")
			b.WriteString(strconv.Itoa(f.Burst))
		}
	}
	return b.String()
}

// Set is the feeds of a key file.
type Set struct {
	// Path is the file the set was read from, for messages.
	Path  string
	Feeds []Feed
}

// Lookup returns the feed whose key is key, or nil. It hashes key and
// compares the hash with every feed's in constant time, all of them
// whatever matched, so the time taken says nothing about which feed (if
// any) came close.
func (s *Set) Lookup(key string) *Feed {
	h := sha256.Sum256([]byte(key))
	found := -1
	for i := range s.Feeds {
		eq := subtle.ConstantTimeCompare(h[:], s.Feeds[i].Hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &s.Feeds[found]
}

// Hash returns the SHA-256 of key, as the key file stores it.
func Hash(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// KeyPrefix starts every key NewKey makes, so a secret scanner or a reader
// of a leaked config can tell what it is.
const KeyPrefix = "nofly_"

// NewKey returns a fresh random key: KeyPrefix and 32 random bytes in
// unpadded base64url (256 bits).
func NewKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("feedkey: random key: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Load reads and parses the key file at path.
func Load(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("feed keys: %w", err)
	}
	return Parse(path, bytes.NewReader(b))
}

// ErrSyntax is wrapped by every error of a key file's content.
var ErrSyntax = errors.New("feed key file")

// Parse reads a key file from r; path names it in errors. An empty file (or
// one of comments only) is an error: it would refuse every write while
// looking configured.
func Parse(path string, r io.Reader) (*Set, error) {
	s := &Set{Path: path}
	names := map[string]int{}
	hashes := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		f, err := parseLine(fields)
		if err != nil {
			return nil, fmt.Errorf("%w %s:%d: %s", ErrSyntax, path, n, err)
		}
		if prev, dup := names[f.Name]; dup {
			return nil, fmt.Errorf("%w %s:%d: feed %q already defined on line %d", ErrSyntax, path, n, f.Name, prev)
		}
		if prev, dup := hashes[f.Hash]; dup {
			return nil, fmt.Errorf("%w %s:%d: feed %q has the same key hash as line %d; every feed needs its own key", ErrSyntax, path, n, f.Name, prev)
		}
		names[f.Name], hashes[f.Hash] = n, n
		s.Feeds = append(s.Feeds, f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("feed keys %s: %w", path, err)
	}
	if len(s.Feeds) == 0 {
		return nil, fmt.Errorf("%w %s: no feed defined (one per line: NAME sha256:<hex> [prefixes=..] [rate=N/s])", ErrSyntax, path)
	}
	return s, nil
}

var perOf = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}
var unitOf = map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}

func parseLine(fields []string) (Feed, error) {
	var f Feed
	if err := CheckName(fields[0]); err != nil {
		return f, err
	}
	f.Name = fields[0]
	if len(fields) < 2 {
		return f, fmt.Errorf("feed %q: the key hash (sha256:<64 hex digits>) is missing", f.Name)
	}
	hx, ok := strings.CutPrefix(fields[1], "sha256:")
	if !ok {
		return f, fmt.Errorf("feed %q: second field %q is not sha256:<64 hex digits> (the file holds the key's hash, never the key)", f.Name, elide(fields[1]))
	}
	if b, err := hex.DecodeString(hx); err != nil || len(b) != sha256.Size {
		return f, fmt.Errorf("feed %q: sha256: needs 64 hex digits, got %d characters", f.Name, len(hx))
	} else {
		copy(f.Hash[:], b)
	}
	seen := map[string]bool{}
	for _, opt := range fields[2:] {
		k, v, ok := strings.Cut(opt, "=")
		if !ok {
			return f, fmt.Errorf("feed %q: %q is not an option (prefixes=, rate=, burst=)", f.Name, elide(opt))
		}
		if seen[k] {
			return f, fmt.Errorf("feed %q: option %s given twice", f.Name, k)
		}
		seen[k] = true
		switch k {
		case "prefixes":
			ps, err := ParsePrefixes(v)
			if err != nil {
				return f, fmt.Errorf("feed %q: prefixes: %s", f.Name, err)
			}
			f.Prefixes = ps
		case "rate":
			n, per, err := ParseRate(v)
			if err != nil {
				return f, fmt.Errorf("feed %q: rate: %s", f.Name, err)
			}
			f.Rate, f.Per = n, per
		case "burst":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return f, fmt.Errorf("feed %q: burst: %q is not a positive integer (records)", f.Name, v)
			}
			f.Burst = n
		default:
			return f, fmt.Errorf("feed %q: unknown option %q (prefixes=, rate=, burst=)", f.Name, k)
		}
	}
	switch {
	case f.Burst > 0 && f.Rate == 0:
		return f, fmt.Errorf("feed %q: burst= needs rate=", f.Name)
	case f.Rate > 0 && f.Burst == 0:
		f.Burst = f.Rate
	}
	return f, nil
}

// CheckName says why name cannot be a feed's name, or nil.
func CheckName(name string) error {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("feed name %q must be 1-64 characters of [A-Za-z0-9._-]", elide(name))
	}
	return nil
}

// ParsePrefixes reads a comma-separated list of drone-id prefixes, each 1-64
// characters of the drone-id alphabet [A-Za-z0-9._:-].
func ParsePrefixes(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p == "" || len(p) > 64 || strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") != "" {
			return nil, fmt.Errorf("%q is not a drone-id prefix (1-64 of [A-Za-z0-9._:-], comma-separated, no blanks)", elide(p))
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseRate reads N/s, N/m or N/h, N a positive integer.
func ParseRate(s string) (int, time.Duration, error) {
	ns, unit, ok := strings.Cut(s, "/")
	per, known := perOf[unit]
	n, err := strconv.Atoi(ns)
	if !ok || !known || err != nil || n < 1 {
		return 0, 0, fmt.Errorf("%q is not N/s, N/m or N/h with N a positive integer (records)", elide(s))
	}
	return n, per, nil
}

// elide shortens what a message quotes from the file, in case someone
// pasted a key where its hash belongs.
func elide(s string) string {
	if len(s) > 12 {
		return s[:6] + "…"
	}
	return s
}

// Changes are the feed names a reload of the key file added, removed, or
// kept with another key, prefixes, rate or burst, each sorted: names only,
// never a key or hash, so they may be logged.
type Changes struct {
	Added, Removed, Changed []string
}

// Diff compares two key files' feeds by name.
func Diff(old, new *Set) Changes {
	var c Changes
	was := map[string]*Feed{}
	for i := range old.Feeds {
		was[old.Feeds[i].Name] = &old.Feeds[i]
	}
	for i := range new.Feeds {
		f := &new.Feeds[i]
		o, ok := was[f.Name]
		switch {
		case !ok:
			c.Added = append(c.Added, f.Name)
		case !f.same(o):
			c.Changed = append(c.Changed, f.Name)
		}
		delete(was, f.Name)
	}
	for n := range was {
		c.Removed = append(c.Removed, n)
	}
	slices.Sort(c.Added)
	slices.Sort(c.Removed)
	slices.Sort(c.Changed)
	return c
}

// same reports whether f and o are the same line (Line compares every
// field, the hash included).
func (f *Feed) same(o *Feed) bool { return f.Line() == o.Line() }

// SameRate reports whether f and o have the same rate and burst (a reload
// keeps such a feed's token bucket, so it does not earn a fresh burst).
func (f *Feed) SameRate(o *Feed) bool {
	return f.Rate == o.Rate && f.Per == o.Per && f.Burst == o.Burst
}

// ByName is the feed named name, or nil.
func (s *Set) ByName(name string) *Feed {
	for i := range s.Feeds {
		if s.Feeds[i].Name == name {
			return &s.Feeds[i]
		}
	}
	return nil
}
