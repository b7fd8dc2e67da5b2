package audit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// Source is one audit stream: Name is the prefix of its entries' ids
// ("p<partition>", "zones", "auths", "misc"), Key the stream.
type Source struct {
	Name string
	Key  string
}

// Sources are the audit streams of a deployment: one per telemetry
// partition, the zone store's, the authorisation store's and the one of
// entries tied to no store, in that order (the order breaks ties of
// equal stream ids). The zone and authorisation tags are those of
// geofence/zonestore and authorization/authstore (a test pins them).
func Sources(prefix, topic string, partitions int) []Source {
	ss := make([]Source, 0, partitions+3)
	for p := range partitions {
		ss = append(ss, Source{Name: "p" + strconv.Itoa(p), Key: redislayout.Of(prefix, topic, p).Audit()})
	}
	return append(ss,
		Source{Name: "zones", Key: Stream("{" + prefix + ":zones}")},
		Source{Name: "auths", Key: Stream("{" + prefix + ":auths}")},
		Source{Name: "misc", Key: Stream(Tag(prefix))})
}

// Log reads the audit streams and records the entries tied to no store.
type Log struct {
	rdb       redis.UniversalClient
	sources   []Source
	retention time.Duration
	now       func() time.Time
}

// DefaultRetention is how long entries are kept in Redis (--audit-retention):
// a year and a month, so a yearly audit finds the whole year.
const DefaultRetention = 400 * 24 * time.Hour

// NewLog returns the log of sources (Sources), trimming entries older
// than retention as it writes (0: keep all).
func NewLog(rdb redis.UniversalClient, sources []Source, retention time.Duration, now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{rdb: rdb, sources: sources, retention: retention, now: now}
}

// Sources are the log's streams.
func (l *Log) Sources() []Source { return l.sources }

// Retention is how long entries are kept.
func (l *Log) Retention() time.Duration { return l.retention }

// Record appends e to the stream of entries tied to no store (the last
// source): one XADD, trimming by age in the same command.
func (l *Log) Record(ctx context.Context, e Entry) error {
	src := l.sources[len(l.sources)-1]
	err := l.rdb.XAdd(ctx, &redis.XAddArgs{Stream: src.Key, MinID: minID(l.now(), l.retention), Approx: true,
		Values: []any{FieldEntry, e.Encode()}}).Err()
	if err != nil {
		return fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	return nil
}

// Filter selects entries for List: each set field must match exactly
// (Since and Until bound TS, both inclusive).
type Filter struct {
	Who, Action, Target, Outcome string
	Since, Until                 time.Time
	// Cursor continues a List (its next); Limit is at most MaxLimit.
	Cursor string
	Limit  int
}

// The limits of a List.
const (
	DefaultLimit = 100
	MaxLimit     = 500
	// MaxScan bounds the entries one List reads, whatever the filter
	// matches: a filter that matches little returns a short page (maybe
	// empty) with a cursor to go on, so no request reads the whole trail.
	MaxScan = 5000
	// fetch is how many entries a round reads from each stream.
	fetch = 100
)

// ErrBadCursor is returned for a cursor List did not hand out.
var ErrBadCursor = errors.New("audit: bad cursor")

// pos is a place in the merged order: a stream id and its source's
// index, compared id first (newest first, ties by source).
type pos struct {
	ms, seq uint64
	src     int
}

func (a pos) less(b pos) bool {
	if a.ms != b.ms {
		return a.ms < b.ms
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.src < b.src
}

func (a pos) id() string { return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10) }

func parsePos(id string, src int) (pos, error) {
	m, s, ok := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(m, 10, 64)
	seq, err2 := strconv.ParseUint(s, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return pos{}, fmt.Errorf("audit: stream id %q", id)
	}
	return pos{ms: ms, seq: seq, src: src}, nil
}

func (l *Log) encodeCursor(p pos) string {
	return base64.RawURLEncoding.EncodeToString([]byte(p.id() + "." + strconv.Itoa(p.src)))
}

func (l *Log) decodeCursor(c string) (pos, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) > 64 {
		return pos{}, ErrBadCursor
	}
	id, src, ok := strings.Cut(string(b), ".")
	n, err := strconv.Atoi(src)
	if !ok || err != nil || n < 0 || n >= len(l.sources) {
		return pos{}, ErrBadCursor
	}
	p, err := parsePos(id, n)
	if err != nil {
		return pos{}, ErrBadCursor
	}
	return p, nil
}

// List returns the entries f selects, newest first, and the cursor of
// the next page ("" when there is none). A page may hold fewer than
// f.Limit entries while a cursor is returned (MaxScan was reached).
func (l *Log) List(ctx context.Context, f Filter) ([]Entry, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	var at *pos // entries strictly before at in the merged order
	if f.Cursor != "" {
		p, err := l.decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		at = &p
	}
	minBound := "-"
	if !f.Since.IsZero() {
		minBound = strconv.FormatInt(max(f.Since.UnixMilli(), 0), 10)
	}
	var untilMS int64 = -1
	if !f.Until.IsZero() {
		untilMS = f.Until.UnixMilli()
		if untilMS < 0 {
			return []Entry{}, "", nil
		}
	}
	out := []Entry{}
	scanned := 0
	for {
		type got struct {
			p   pos
			raw string
		}
		var all []got
		var frontier *pos // entries before it may be missing from this round
		cmds := make([]*redis.XMessageSliceCmd, len(l.sources))
		_, err := l.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i, s := range l.sources {
				maxBound := "+"
				if untilMS >= 0 {
					maxBound = strconv.FormatInt(untilMS, 10)
				}
				if at != nil {
					// Strictly before at: an equal id of an earlier source
					// comes after it in the merged order.
					b := at.id()
					if i >= at.src {
						b = "(" + b
					}
					if untilMS < 0 || at.ms <= uint64(untilMS) {
						maxBound = b
					}
				}
				cmds[i] = pl.XRevRangeN(ctx, s.Key, maxBound, minBound, fetch)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, "", fmt.Errorf("audit: list: %w", err)
		}
		for i, c := range cmds {
			msgs, err := c.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, "", fmt.Errorf("audit: list %s: %w", l.sources[i].Key, err)
			}
			for _, m := range msgs {
				p, err := parsePos(m.ID, i)
				if err != nil {
					return nil, "", err
				}
				raw, _ := m.Values[FieldEntry].(string)
				all = append(all, got{p, raw})
			}
			if len(msgs) == fetch {
				last, _ := parsePos(msgs[len(msgs)-1].ID, i)
				if frontier == nil || frontier.less(last) {
					frontier = &last
				}
			}
		}
		slices.SortFunc(all, func(a, b got) int {
			switch {
			case b.p.less(a.p):
				return -1
			case a.p.less(b.p):
				return 1
			}
			return 0
		})
		for _, g := range all {
			if frontier != nil && g.p.less(*frontier) {
				break
			}
			p := g.p
			at = &p
			scanned++
			e, err := l.decode(g.p, g.raw)
			if err == nil && f.match(e) {
				out = append(out, e)
				if len(out) == limit {
					return out, l.encodeCursor(p), nil
				}
			}
			if scanned >= MaxScan {
				return out, l.encodeCursor(p), nil
			}
		}
		if frontier == nil {
			return out, "", nil // every stream read to its end
		}
	}
}

func (l *Log) decode(p pos, raw string) (Entry, error) {
	return Decode(l.sources[p.src].Name, p.id(), raw)
}

// Decode is the entry stored as raw under stream id of source: its ID
// and TS set from them.
func Decode(source, id, raw string) (Entry, error) {
	p, err := parsePos(id, 0)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return Entry{}, fmt.Errorf("audit: entry %s-%s: %w", source, id, err)
	}
	e.ID = source + "-" + id
	e.TS = time.UnixMilli(int64(p.ms)).UTC()
	return e, nil
}

func (f Filter) match(e Entry) bool {
	return (f.Who == "" || e.Who == f.Who) && (f.Action == "" || e.Action == f.Action) &&
		(f.Target == "" || e.Target == f.Target) && (f.Outcome == "" || e.Outcome == f.Outcome) &&
		(f.Since.IsZero() || !e.TS.Before(f.Since.Truncate(time.Millisecond))) &&
		(f.Until.IsZero() || !e.TS.After(f.Until))
}
