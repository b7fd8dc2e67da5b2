// Package alarmstore is the read and ack side of the alarm index that the
// batch script (dedup) keeps per partition: list and filter alarms newest
// first by raise time, get one, and acknowledge one, the ack being an
// event appended once to the alarm's partition outbox (docs/redis-layout.md,
// "Alarms"). Any alerter instance may serve it: the state is in Redis.
package alarmstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/redisreplica"
)

// MaxNote is the longest ack note, in bytes.
const MaxNote = 1024

// The limits of a list request.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// States of an alarm, and of a list filter (StateAll: either).
const (
	StateActive  = "active"
	StateCleared = "cleared"
	StateAll     = "all"
)

// ErrNotFound is returned for an alarm id no partition holds.
var ErrNotFound = errors.New("alarmstore: no such alarm")

// ErrBadCursor is returned for a cursor List did not hand out.
var ErrBadCursor = errors.New("alarmstore: bad cursor")

// Options configure a Store. Redis, Topic and Partitions are required.
type Options struct {
	Redis      redis.UniversalClient
	Prefix     string // dedup.DefaultPrefix when empty
	Topic      string
	Partitions int
	Now        func() time.Time // time.Now when nil: the ack time
	// Replicas, when on, makes an ack count only once the partition's
	// primary has that many replicas holding it (--redis-min-replicas).
	Replicas redisreplica.Wait
	// Log tells of the backfill of the alarm index (slog.Default() when nil).
	Log *slog.Logger
	// A List that finds a partition's secondary sets incomplete (an
	// upgrade) runs one backfill step of BackfillStep alarms (1000 when 0)
	// on it, and more while BackfillBudget lasts (25ms when 0; negative:
	// one step).
	BackfillStep   int
	BackfillBudget time.Duration
}

// Store reads and acks the alarms of every partition of a topic.
type Store struct {
	o    Options
	keys []redislayout.Keys
}

// New returns a store on o.
func New(o Options) (*Store, error) {
	if o.Redis == nil || o.Topic == "" || o.Partitions <= 0 {
		return nil, errors.New("alarmstore: Options need Redis, Topic and Partitions")
	}
	if o.Prefix == "" {
		o.Prefix = dedup.DefaultPrefix
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.BackfillStep <= 0 {
		o.BackfillStep = 1000
	}
	if o.BackfillBudget == 0 {
		o.BackfillBudget = 25 * time.Millisecond
	}
	s := &Store{o: o, keys: make([]redislayout.Keys, o.Partitions)}
	for p := range s.keys {
		s.keys[p] = redislayout.Of(o.Prefix, o.Topic, p)
	}
	return s, nil
}

// Point is the event that raised or cleared an alarm.
type Point struct {
	EventID       string    `json:"event_id"`
	Seq           int64     `json:"seq"`
	TS            time.Time `json:"ts"`
	Lat           float64   `json:"lat"`
	Lon           float64   `json:"lon"`
	AltM          *float64  `json:"alt_m"`
	AltRef        string    `json:"alt_ref"`
	HeightAssumed bool      `json:"height_assumed"`
}

// Clear is the clearing event, with its reason.
type Clear struct {
	Point
	Reason string `json:"reason"`
}

// Ack is an alarm's acknowledgement.
type Ack struct {
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Note string    `json:"note"`
}

// Alarm is one alarm as the API answers it.
type Alarm struct {
	AlarmID     string `json:"alarm_id"`
	DroneID     string `json:"drone_id"`
	ZoneID      string `json:"zone_id"`
	ZoneName    string `json:"zone_name"`
	Category    string `json:"category"`
	State       string `json:"state"`
	Raised      Point  `json:"raised"`
	Cleared     *Clear `json:"cleared"`
	Ack         *Ack   `json:"ack"`
	ZoneVersion int64  `json:"zone_version"`
	// SignalLostSince is, while the alarm's drone is not heard (a
	// signal_lost event and no signal_regained or clear since), when it was
	// last heard on the log's clock; null while it is heard.
	SignalLostSince *time.Time `json:"signal_lost_since"`
	// Authorization is the authorisation covering the alarm now: the
	// raise's, as changed by the latest authorized or unauthorized event;
	// null when none covers it (an alarm that pages).
	Authorization *alerts.AuthRef `json:"authorization"`
	// Operator is the drone's pilot as known at the raise, with range and
	// bearing from the raising position; OperatorLatest is the pilot as
	// the drone's state holds it now, from the drone's last position (set
	// by Pilots). Null when not reported.
	Operator       *alerts.Pilot `json:"operator"`
	OperatorLatest *alerts.Pilot `json:"operator_latest"`

	// Partition holds the alarm (its drone's partition).
	Partition int `json:"-"`
	raised    alerts.Event
}

func point(e *alerts.Event) Point {
	return Point{EventID: e.EventID, Seq: e.Seq, TS: e.TS, Lat: e.Lat, Lon: e.Lon, AltM: e.AltM,
		AltRef: e.AltRef, HeightAssumed: e.HeightAssumed}
}

// fields are the alarm index's hash fields of alarm id, in the order
// decode reads them.
func fields(id string) []string {
	return []string{id + dedup.SuffixRaised, id + dedup.SuffixCleared, id + dedup.SuffixAcked, id + dedup.SuffixLost, id + dedup.SuffixAuth}
}

// decode builds an alarm from its hash values (HMGET of fields); ok is
// false when the raised event is absent.
func decode(p int, vals []any) (Alarm, bool, error) {
	if len(vals) != 5 {
		return Alarm{}, false, fmt.Errorf("alarmstore: %d values, want 5", len(vals))
	}
	raw, ok := vals[0].(string)
	if !ok {
		return Alarm{}, false, nil
	}
	var r alerts.Event
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Alarm{}, false, fmt.Errorf("alarmstore: partition %d: raised event: %w", p, err)
	}
	a := Alarm{AlarmID: r.AlarmID, DroneID: r.DroneID, ZoneID: r.ZoneID, ZoneName: r.ZoneName,
		Category: r.Category, State: StateActive, Raised: point(&r), ZoneVersion: r.ZoneVersion,
		Partition: p, raised: r, Authorization: r.Authorization, Operator: alerts.PilotOf(r.Operator, r.Lat, r.Lon, true)}
	if raw, ok := vals[1].(string); ok {
		var c alerts.Event
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return Alarm{}, false, fmt.Errorf("alarmstore: alarm %s: cleared event: %w", a.AlarmID, err)
		}
		a.State = StateCleared
		a.Cleared = &Clear{Point: point(&c), Reason: c.Reason}
	}
	if raw, ok := vals[2].(string); ok {
		ack, err := ackOf(raw)
		if err != nil {
			return Alarm{}, false, fmt.Errorf("alarmstore: alarm %s: %w", a.AlarmID, err)
		}
		a.Ack = &ack
	}
	if raw, ok := vals[3].(string); ok && a.Cleared == nil {
		var l alerts.Event
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			return Alarm{}, false, fmt.Errorf("alarmstore: alarm %s: signal_lost event: %w", a.AlarmID, err)
		}
		since := l.TS
		if l.LastSeen != nil {
			since = *l.LastSeen
		}
		a.SignalLostSince = &since
	}
	if raw, ok := vals[4].(string); ok {
		var au alerts.Event
		if err := json.Unmarshal([]byte(raw), &au); err != nil {
			return Alarm{}, false, fmt.Errorf("alarmstore: alarm %s: authorisation event: %w", a.AlarmID, err)
		}
		a.Authorization = nil
		if au.Type == alerts.Authorized {
			a.Authorization = au.Authorization
		}
	}
	return a, true, nil
}

func ackOf(raw string) (Ack, error) {
	var e alerts.Event
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return Ack{}, fmt.Errorf("acked event: %w", err)
	}
	return Ack{By: e.By, At: e.TS, Note: e.Note}, nil
}

// validID: alarm ids are 32 lowercase hex digits; anything else is looked
// up nowhere (and never spliced into a key).
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Get returns alarm id, looked up on every partition in one pipelined
// round trip; ErrNotFound when none holds it.
func (s *Store) Get(ctx context.Context, id string) (Alarm, error) {
	if !validID(id) {
		return Alarm{}, ErrNotFound
	}
	cmds := make([]*redis.SliceCmd, len(s.keys))
	_, err := s.o.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range s.keys {
			cmds[i] = p.HMGet(ctx, k.Alarms(), fields(id)...)
		}
		return nil
	})
	if err != nil {
		return Alarm{}, fmt.Errorf("alarmstore: get %s: %w", id, err)
	}
	for p, c := range cmds {
		a, ok, err := decode(p, c.Val())
		if err != nil {
			return Alarm{}, err
		}
		if ok {
			return a, nil
		}
	}
	return Alarm{}, ErrNotFound
}

// Pilots sets the alarms' OperatorLatest from their drones' states: one
// HMGET per partition among them, in one pipelined round trip. A drone
// whose state is gone (forgotten) or never reported a pilot has none.
func (s *Store) Pilots(ctx context.Context, as []Alarm) error {
	if len(as) == 0 {
		return nil
	}
	byP := map[int][]int{}
	for i := range as {
		byP[as[i].Partition] = append(byP[as[i].Partition], i)
	}
	cmds := map[int]*redis.SliceCmd{}
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, idx := range byP {
			ids := make([]string, len(idx))
			for j, i := range idx {
				ids[j] = as[i].DroneID
			}
			cmds[p] = pl.HMGet(ctx, s.keys[p].Drones(), ids...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("alarmstore: read the alarms' drone states: %w", err)
	}
	for p, c := range cmds {
		for j, v := range c.Val() {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			st, err := alerts.DecodeDroneState([]byte(raw))
			if err != nil {
				return fmt.Errorf("alarmstore: partition %d: %w", p, err)
			}
			as[byP[p][j]].OperatorLatest = alerts.PilotOf(&st.Op, st.Pos.Lat, st.Pos.Lon, !st.Pos.IsZero())
		}
	}
	return nil
}

// get reads alarm id on partition p.
func (s *Store) get(ctx context.Context, p int, id string) (Alarm, error) {
	vals, err := s.o.Redis.HMGet(ctx, s.keys[p].Alarms(), fields(id)...).Result()
	if err != nil {
		return Alarm{}, fmt.Errorf("alarmstore: get %s on partition %d: %w", id, p, err)
	}
	a, ok, err := decode(p, vals)
	if err != nil {
		return Alarm{}, err
	}
	if !ok {
		return Alarm{}, ErrNotFound
	}
	return a, nil
}

// ackScript records an ack and appends its event in one step, so
// concurrent acks of one alarm append one event: {0} when the alarm is not
// (or no longer) indexed, {2, acked_json} when it was acked before (nothing
// written), {1} when this ack is recorded and appended, with its audit
// entry (package audit) when one is given: only the ack that writes is
// audited, once however often a client retries. KEYS = alarms, outbox,
// audit stream; ARGV = alarm id, acked event JSON, audit entry JSON ("":
// none), the audit stream's MINID.
var ackScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1] .. '` + dedup.SuffixRaised + `') == 0 then
  return {0}
end
local id = ARGV[1] .. '` + dedup.SuffixAcked + `'
local cur = redis.call('HGET', KEYS[1], id)
if cur then
  return {2, cur}
end
redis.call('HSET', KEYS[1], id, ARGV[2])
redis.call('XADD', KEYS[2], '*', '` + redislayout.FieldEvent + `', ARGV[2])
` + audit.XAddLua("KEYS[3]", "ARGV[3]", "ARGV[4]") + `return {1}
`)

// AckEvent is the acked event of alarm a by caller by with note at time
// at: the raised event's fields (drone, zone, category, zone version,
// seq, position, partition and offset of the raising record) with type
// acked, ts at, by and note.
func AckEvent(a Alarm, by, note string, at time.Time) alerts.Event {
	e := a.raised
	e.EventID = a.AlarmID + dedup.SuffixAcked
	e.Type = alerts.Acked
	e.TS = at.UTC()
	e.Reason = ""
	e.By, e.Note = by, note
	return e
}

// Ack acknowledges alarm id as by with note. already is true when it was
// acknowledged before: that first ack is kept and nothing is written.
// The acked event is appended to the alarm's partition outbox in the same
// script that records the ack.
func (s *Store) Ack(ctx context.Context, id, by, note string) (a Alarm, already bool, err error) {
	if len(note) > MaxNote {
		return Alarm{}, false, fmt.Errorf("alarmstore: note of %d bytes is over %d", len(note), MaxNote)
	}
	a, err = s.Get(ctx, id)
	if err != nil {
		return Alarm{}, false, err
	}
	if a.Ack != nil {
		return a, true, nil
	}
	ev := AckEvent(a, by, note, s.o.Now())
	js := ev.AppendJSON(nil)
	k := s.keys[a.Partition]
	aw, _ := audit.Change(ctx, 0, 0)
	cmd, werr := s.o.Replicas.Run(ctx, s.o.Redis, ackScript, []string{k.Alarms(), k.Outbox(), k.Audit()}, id, js, aw.Entry, aw.MinID)
	res, err := cmd.Slice()
	if err != nil {
		return Alarm{}, false, fmt.Errorf("alarmstore: ack %s: %w", id, err)
	}
	if werr != nil {
		// Recorded on the primary, maybe not on its replicas: the caller
		// says so and may ack again (an ack is idempotent).
		return Alarm{}, false, fmt.Errorf("alarmstore: ack %s recorded on the primary but may be lost in a failover: %w", id, werr)
	}
	code, _ := res[0].(int64)
	switch code {
	case 0:
		return Alarm{}, false, ErrNotFound
	case 2:
		raw, _ := res[1].(string)
		ack, err := ackOf(raw)
		if err != nil {
			return Alarm{}, false, err
		}
		a.Ack = &ack
		return a, true, nil
	}
	// Read back: a clear may have come in between.
	a, err = s.get(ctx, a.Partition, id)
	return a, false, err
}

// Filter selects alarms for List. The zero value lists active alarms,
// DefaultLimit of them.
type Filter struct {
	State string // StateActive (default), StateCleared, StateAll
	Acked *bool  // nil: either
	// Authorized: true lists alarms an authorisation covers now, false
	// those none covers (the ones that page); nil: either.
	Authorized *bool
	Drone      string // "" : any
	Zone       string
	Category   string
	// Since and Until bound the raise time (inclusive); zero: unbounded.
	Since, Until time.Time
	Limit        int    // DefaultLimit when 0; at most MaxLimit
	Cursor       string // from a previous page's next cursor
}

func (f *Filter) match(a *Alarm) bool {
	return (f.Acked == nil || *f.Acked == (a.Ack != nil)) &&
		(f.Authorized == nil || *f.Authorized == (a.Authorization != nil)) &&
		(f.Drone == "" || f.Drone == a.DroneID) &&
		(f.Zone == "" || f.Zone == a.ZoneID) &&
		(f.Category == "" || f.Category == a.Category)
}

// rejects tells from an alarm's hash values (fields' order), before they
// are decoded, that f does not select it, or that it is not in state when
// one is asked: decoding is most of a list's cost, and most alarms a
// combined filter examines are dropped. The drone, zone and category are
// read from the raised event's JSON as the batch script reads them
// (dedup's alarmDimsLua); a value with an escape in it is left to match.
func (f *Filter) rejects(vals []any, oneState bool, state string) bool {
	raw, ok := vals[0].(string)
	if !ok || len(vals) != 5 {
		return false
	}
	if oneState && (vals[1] != nil) != (state == StateCleared) {
		return true
	}
	if f.Acked != nil && *f.Acked != (vals[2] != nil) {
		return true
	}
	for _, c := range [...]struct{ key, want string }{{`"drone_id":"`, f.Drone}, {`"zone_id":"`, f.Zone}, {`"category":"`, f.Category}} {
		if c.want == "" {
			continue
		}
		if v, ok := jsonString(raw, c.key); ok && v != c.want {
			return true
		}
	}
	return false
}

// jsonString is the string value after key (`"name":"`) in an event's
// flat JSON, where key's bytes cannot occur inside a string value (its
// quotes would be escaped); ok is false when absent or escaped.
func jsonString(js, key string) (string, bool) {
	i := strings.Index(js, key)
	if i < 0 {
		return "", false
	}
	rest := js[i+len(key):]
	j := strings.IndexAny(rest, `"\`)
	if j < 0 || rest[j] != '"' {
		return "", false
	}
	return rest[:j], true
}

// position is a place in the list order: raise time descending, then
// alarm id descending (the sorted sets' reverse order).
type position struct {
	ms int64
	id string
}

func (p position) before(q position) bool { return p.ms > q.ms || (p.ms == q.ms && p.id > q.id) }

// The cursor is the last listed alarm's position, base64url of "ms id".
func (p position) cursor() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.ms, 10) + " " + p.id))
}

func parseCursor(c string) (position, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return position{}, ErrBadCursor
	}
	ms, id, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || !validID(id) {
		return position{}, ErrBadCursor
	}
	return position{n, id}, nil
}

// minPage is the smallest first page of a source (tests lower it to
// exercise refills and ties across pages).
var minPage int64 = 16

// source is one sorted set (one partition's active or cleared alarms)
// read in pages, newest first, strictly after a position.
type source struct {
	p        int
	state    string // of the alarms in the set
	key      string
	max      string // inclusive upper score of the next page
	min      string
	off      int64 // members at score max already read
	after    *position
	buf      []position
	done     bool
	pageSize int64 // of the next page
	maxPage  int64
}

func (src *source) query() *redis.ZRangeBy {
	return &redis.ZRangeBy{Max: src.max, Min: src.min, Offset: src.off, Count: src.pageSize}
}

// fill takes one page's reply.
func (src *source) fill(zs []redis.Z) {
	if int64(len(zs)) < src.pageSize {
		src.done = true
	}
	defer func() { src.pageSize = min(2*src.pageSize, src.maxPage) }()
	if len(zs) == 0 {
		return
	}
	last := zs[len(zs)-1].Score
	if ls := strconv.FormatFloat(last, 'f', -1, 64); ls == src.max {
		src.off += int64(len(zs))
	} else {
		src.max = ls
		src.off = 0
		for _, z := range zs {
			if z.Score == last {
				src.off++
			}
		}
	}
	for _, z := range zs {
		pos := position{int64(z.Score), z.Member.(string)}
		if src.after != nil && !src.after.before(pos) {
			continue
		}
		src.buf = append(src.buf, pos)
	}
}

// cand is an alarm List examines: its partition, position and the set it
// was read from, of which state.
type cand struct {
	p     int
	state string
	key   string
	pos   position
}

// List returns up to f.Limit alarms matching f, newest first by raise time
// (ties by alarm id, descending), across every partition, and the cursor
// of the next page ("" when there is none).
//
// A drone, zone or category filter reads that value's secondary sets
// (the smallest, by ZCARD, when several are given) and checks the other
// criteria on the alarms read. Each request examines at most MaxExamine
// alarms: past that it answers what it found, maybe fewer than f.Limit or
// none, with the cursor of the last alarm examined, so no request scans a
// partition's whole index.
func (s *Store) List(ctx context.Context, f Filter) ([]Alarm, string, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	f.Limit = min(f.Limit, MaxLimit)
	var states []string
	switch f.State {
	case "", StateActive:
		states = []string{StateActive}
	case StateCleared:
		states = []string{StateCleared}
	case StateAll:
		states = []string{StateActive, StateCleared}
	default:
		return nil, "", fmt.Errorf("alarmstore: bad state %q", f.State)
	}
	hi, lo := "+inf", "-inf"
	if !f.Until.IsZero() {
		hi = strconv.FormatInt(f.Until.UnixMilli(), 10)
	}
	if !f.Since.IsZero() {
		lo = strconv.FormatInt(f.Since.UnixMilli(), 10)
	}
	var after *position
	if f.Cursor != "" {
		c, err := parseCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &c
		if f.Until.IsZero() || c.ms < f.Until.UnixMilli() {
			hi = strconv.FormatInt(c.ms, 10)
		}
	}
	srcs, err := s.sources(ctx, &f, states, hi, lo, after)
	if err != nil {
		return nil, "", err
	}
	out := make([]Alarm, 0, f.Limit)
	var listed, examined position // the last alarm listed, the last examined
	budget := maxExamine
	var prev cand
	seen := false
	for want := f.Limit + 1; budget > 0; want = min(2*want, MaxLimit) {
		// Merge the next chunk of candidates (newest first) from the sources.
		var chunk []cand
		for len(chunk) < min(want, budget) {
			// Every source must show its next member (or be done) before the
			// newest is taken: a page may be all skipped (at the cursor).
			for {
				var refill []*source
				for _, src := range srcs {
					if len(src.buf) == 0 && !src.done {
						refill = append(refill, src)
					}
				}
				if len(refill) == 0 {
					break
				}
				if err := s.fetch(ctx, refill); err != nil {
					return nil, "", err
				}
			}
			var best *source
			for _, src := range srcs {
				if len(src.buf) > 0 && (best == nil || src.buf[0].before(best.buf[0])) {
					best = src
				}
			}
			if best == nil {
				break
			}
			c := cand{best.p, best.state, best.key, best.buf[0]}
			best.buf = best.buf[1:]
			// The same alarm from two sets (state=all while it was being
			// cleared, or a set an earlier release left stale) is one.
			if seen && prev.pos == c.pos && prev.p == c.p {
				continue
			}
			prev, seen = c, true
			chunk = append(chunk, c)
		}
		if len(chunk) == 0 {
			return out, "", nil
		}
		budget -= len(chunk)
		cmds := make([]*redis.SliceCmd, len(chunk))
		_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i, c := range chunk {
				cmds[i] = pl.HMGet(ctx, s.keys[c.p].Alarms(), fields(c.pos.id)...)
			}
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("alarmstore: list: %w", err)
		}
		var orphans []cand
		for i, c := range chunk {
			examined = c.pos
			vals := cmds[i].Val()
			if f.rejects(vals, len(states) == 1, c.state) {
				continue
			}
			a, ok, err := decode(c.p, vals)
			if err != nil {
				return nil, "", err
			}
			// A member without its events was deleted in between (GC), one
			// in a set of the other state was cleared in between (or is an
			// earlier release's leftover): skip it.
			if !ok {
				orphans = append(orphans, c)
			}
			if !ok || (len(states) == 1 && a.State != c.state) || !f.match(&a) {
				continue
			}
			if len(out) == f.Limit {
				return out, listed.cursor(), nil
			}
			out = append(out, a)
			listed = c.pos
		}
		s.dropOrphans(ctx, orphans)
	}
	// The request's bound is reached: the next page goes on after the last
	// alarm examined.
	for _, src := range srcs {
		if len(src.buf) > 0 || !src.done {
			return out, examined.cursor(), nil
		}
	}
	return out, "", nil
}

// dropOrphans removes set members whose alarm is gone, best effort. The
// batch script deletes an alarm's members with its events, in one step, and
// an alarm id never comes back, so a member found without its raised event
// is one an earlier release's GC left in the secondary sets (it did not
// know them) or one deleted since it was read: removing it is safe either
// way, and keeps such leftovers from being read again.
func (s *Store) dropOrphans(ctx context.Context, orphans []cand) {
	if len(orphans) == 0 {
		return
	}
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, c := range orphans {
			pl.ZRem(ctx, c.key, c.pos.id)
		}
		return nil
	})
	if err != nil {
		s.o.Log.Warn("alarmstore: remove alarm index members whose alarm is gone", "error", err)
	}
}

// maxExamine bounds the alarms one List request examines (reads and
// checks against the filter); tests lower it.
var maxExamine = 2000

// sources returns the sorted sets List reads, per partition and state,
// with their first pages read in one pipeline: the secondary sets of the
// most selective of f's drone, zone and category (smallest ZCARD over the
// partitions and states asked) on partitions whose secondary sets are
// complete, the partition's whole sets otherwise (read by the merge's
// first refill). The marks, the ZCARDs and the first pages of the
// dimension presumed most selective (a drone has fewer alarms than a
// zone, a zone than a category) are read together, so a filtered list
// costs one round trip before the alarms are read, and one more when the
// ZCARDs say otherwise.
func (s *Store) sources(ctx context.Context, f *Filter, states []string, hi, lo string, after *position) ([]*source, error) {
	type dim struct{ by, value string }
	var dims []dim
	for _, d := range []dim{{redislayout.ByDrone, f.Drone}, {redislayout.ByZone, f.Zone}, {redislayout.ByCategory, f.Category}} {
		if d.value != "" {
			dims = append(dims, d)
		}
	}
	setOf := func(k redislayout.Keys, st string, d *dim) string {
		switch {
		case d == nil && st == StateActive:
			return k.AlarmsActive()
		case d == nil:
			return k.AlarmsCleared()
		case st == StateActive:
			return k.AlarmsActiveBy(d.by, d.value)
		}
		return k.AlarmsClearedBy(d.by, d.value)
	}
	unfiltered := f.Acked == nil && f.Authorized == nil
	// When the sets read hold only matching alarms, limit+1 candidates
	// tell whether a next page exists; otherwise pages grow to MaxLimit,
	// since some are dropped.
	page := int64(f.Limit + 1)
	if !unfiltered || len(dims) > 1 {
		page = MaxLimit
	}
	newSource := func(p int, st, key string, first, maxPage int64) *source {
		return &source{p: p, state: st, key: key, max: hi, min: lo, after: after, pageSize: first, maxPage: maxPage}
	}
	// Each source's first page is twice its share of a page when alarms
	// spread evenly over the partitions; a source that runs dry doubles its
	// page on every refill (skewed partitions cost a few round trips).
	// Whole pages from every source would save refills but cost more than
	// they save: 24 pages of 101 members took 10x as long as 24 of 16.
	n := int64(len(s.keys) * len(states))
	first := max(minPage, min(page, (2*page+n-1)/n))
	if len(dims) == 0 {
		var srcs []*source
		for p, k := range s.keys {
			for _, st := range states {
				srcs = append(srcs, newSource(p, st, setOf(k, st, nil), first, page))
			}
		}
		return srcs, s.fetch(ctx, srcs)
	}
	// A drone's alarms are on its partition (a repartition aside): its
	// sets' first page is a whole page.
	if dims[0].by == redislayout.ByDrone {
		first = max(minPage, int64(f.Limit+1))
	}
	applied := make([]*redis.StringCmd, len(s.keys))
	marks := make([]*redis.StringCmd, len(s.keys))
	cards := make([][]*redis.IntCmd, len(dims))
	bydim := make([][]*source, len(dims))
	pages := make(map[*source]*redis.ZSliceCmd)
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for p, k := range s.keys {
			applied[p] = pl.Get(ctx, k.Applied())
			marks[p] = pl.Get(ctx, k.AlarmsIndexMark())
			for i := range dims {
				for _, st := range states {
					key := setOf(k, st, &dims[i])
					if len(dims) > 1 {
						cards[i] = append(cards[i], pl.ZCard(ctx, key))
					}
					src := newSource(p, st, key, first, page)
					bydim[i] = append(bydim[i], src)
					if i == 0 {
						pages[src] = pl.ZRevRangeByScoreWithScores(ctx, key, src.query())
					}
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("alarmstore: list: %w", err)
	}
	best, bestN := 0, int64(-1)
	for i := range cards {
		var sum int64
		for _, c := range cards[i] {
			sum += c.Val()
		}
		if bestN < 0 || sum < bestN {
			best, bestN = i, sum
		}
	}
	ready := make([]bool, len(s.keys))
	var pending []int
	for p := range s.keys {
		if ready[p] = dedup.AlarmIndexDone(marks[p].Val(), applied[p].Val()); !ready[p] {
			pending = append(pending, p)
		}
	}
	if len(pending) > 0 {
		if err := s.backfill(ctx, pending, ready); err != nil {
			return nil, err
		}
	}
	srcs := bydim[best]
	for i, src := range srcs {
		if ready[src.p] {
			if pg, ok := pages[src]; ok {
				src.fill(pg.Val())
			}
			continue
		}
		// Not backfilled yet (an upgrade): the whole set, read by the
		// merge's first refill, each alarm checked against f.
		whole := newSource(src.p, src.state, setOf(s.keys[src.p], src.state, nil), first, MaxLimit)
		srcs[i] = whole
	}
	return srcs, nil
}

// backfill runs backfill steps on the partitions pending (one on each,
// more while Options.BackfillBudget lasts), marking those it completes
// ready. A partition not done by then is read from its whole sets for
// this request.
func (s *Store) backfill(ctx context.Context, pending []int, ready []bool) error {
	until := time.Now().Add(s.o.BackfillBudget)
	for _, p := range pending {
		filed := 0
		for step := 0; step == 0 || time.Now().Before(until); step++ {
			done, n, err := dedup.BackfillAlarmIndex(ctx, s.o.Redis, s.keys[p], s.o.BackfillStep)
			if err != nil {
				return fmt.Errorf("alarmstore: list: %w", err)
			}
			filed += n
			if done {
				ready[p] = true
				break
			}
		}
		if filed > 0 {
			s.o.Log.Info("alarm index backfilled", "partition", p, "alarms", filed, "done", ready[p])
		}
	}
	return nil
}

// fetch reads the next page of each source, pipelined.
func (s *Store) fetch(ctx context.Context, srcs []*source) error {
	cmds := make([]*redis.ZSliceCmd, len(srcs))
	_, err := s.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, src := range srcs {
			cmds[i] = pl.ZRevRangeByScoreWithScores(ctx, src.key, src.query())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("alarmstore: list: %w", err)
	}
	for i, src := range srcs {
		src.fill(cmds[i].Val())
	}
	return nil
}

// Raise is the event that raised the alarm, as the index holds it (its
// position, altitude and authorisation at the raise).
func (a Alarm) Raise() alerts.Event { return a.raised }

// activePage is how many active alarms ActiveIn reads per round trip.
const activePage = 500

// ActiveIn returns the active alarms of one partition's index (keys k,
// partition p), oldest raise first, reading pages of 500 (ZRANGE, then one
// HMGET each, pipelined): what the Alertmanager output re-posts for the
// partitions its instance owns. An alarm cleared or deleted between the
// two reads is left out.
func ActiveIn(ctx context.Context, rdb redis.UniversalClient, k redislayout.Keys, p int) ([]Alarm, error) {
	var out []Alarm
	for start := int64(0); ; start += activePage {
		ids, err := rdb.ZRange(ctx, k.AlarmsActive(), start, start+activePage-1).Result()
		if err != nil {
			return nil, fmt.Errorf("alarmstore: active alarms of partition %d: %w", p, err)
		}
		cmds := make([]*redis.SliceCmd, len(ids))
		if len(ids) > 0 {
			_, err = rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
				for i, id := range ids {
					cmds[i] = pl.HMGet(ctx, k.Alarms(), fields(id)...)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("alarmstore: active alarms of partition %d: %w", p, err)
			}
		}
		for i := range ids {
			a, ok, err := decode(p, cmds[i].Val())
			if err != nil {
				return nil, err
			}
			if ok && a.State == StateActive {
				out = append(out, a)
			}
		}
		if len(ids) < activePage {
			return out, nil
		}
	}
}

// GetIn reads alarm id from one partition's index (keys k, partition p):
// ErrNotFound when that index does not hold it (never raised there, or
// deleted after the alarm retention).
func GetIn(ctx context.Context, rdb redis.UniversalClient, k redislayout.Keys, p int, id string) (Alarm, error) {
	if !validID(id) {
		return Alarm{}, ErrNotFound
	}
	vals, err := rdb.HMGet(ctx, k.Alarms(), fields(id)...).Result()
	if err != nil {
		return Alarm{}, fmt.Errorf("alarmstore: get %s on partition %d: %w", id, p, err)
	}
	a, ok, err := decode(p, vals)
	if err != nil {
		return Alarm{}, err
	}
	if !ok {
		return Alarm{}, ErrNotFound
	}
	return a, nil
}
