// Package dedup makes the alerter's decisions stick: per Kafka partition it
// keeps the drones' states, the partition's applied offset (the version) and
// the outbox of alarm events, and it commits one batch of changes in one
// atomic, versioned step. docs/redis-layout.md describes the Redis layout;
// Memory is an in-memory implementation with the same contract.
//
// The store knows little of alarms: drone states and events are opaque
// bytes to it, keyed by drone id and event id; an event id's suffix
// (SuffixRaised, SuffixCleared) and a raised event's "ts" file it in the
// partition's alarm index, which alerts/alarmstore reads.
package dedup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// ErrFenced is returned by Commit when the partition's stored version is not
// the one the caller started from: another engine owns the partition (or a
// zombie wrote first). Nothing was written. The caller must stop processing
// the partition; it may reload with Load on a new assignment.
var ErrFenced = errors.New("dedup: partition version changed: fenced")

// NoVersion is the version of a partition nothing was ever applied to.
const NoVersion int64 = -1

// DefaultEventTTL is how long an event's unique key is kept at least: an
// event with the same id is not appended again for that long (the Redis
// store keeps it up to one and a half times that, docs/redis-layout.md).
const DefaultEventTTL = 7 * 24 * time.Hour

// DefaultAlarmRetention is how long a cleared alarm stays in the alarm
// index (--alarm-retention), the unique keys' TTL.
const DefaultAlarmRetention = DefaultEventTTL

// DefaultTrackLen is how many points a drone's track keeps, and
// DefaultTrackTTL how long a track lives after its last point.
const (
	DefaultTrackLen = 50
	DefaultTrackTTL = 24 * time.Hour
)

// DefaultHeldTrackLen is how many points a held track keeps (Batch.Held):
// the track of a drone with an alarm, sampled every second while alarmed
// (alerts.AlarmTrackInterval), so an incident report can draw it from
// before the entry to after the clear: 20 minutes of an alarm at 1 s, or
// 3 h 20 min at the ten-second pace of a drone no longer alarmed. About
// 110 bytes a point: ~130 KB per held drone at most.
const DefaultHeldTrackLen = 1200

// The event id suffixes of an alarm's events (event id = alarm id +
// suffix): the alarm index files each event under its id.
const (
	SuffixRaised  = ":raised"
	SuffixCleared = ":cleared"
	SuffixAcked   = ":acked"
	// SuffixLost is the alarm index's entry of an alarm whose drone's
	// signal is lost (alarm id + SuffixLost: the signal_lost event), set by
	// a signal_lost and removed by a signal_regained or a clear. Those two
	// events' ids are alarm id + InfixLost or InfixRegained + a count.
	SuffixLost    = ":lost"
	InfixLost     = ":signal_lost:"
	InfixRegained = ":signal_regained:"
	// SuffixAuth is the alarm index's entry of an alarm's latest
	// authorized or unauthorized event (alarm id + SuffixAuth): the
	// alarm's authorisation now. Those events' ids are alarm id +
	// InfixAuthorized or InfixUnauthorized + a count.
	SuffixAuth        = ":auth"
	InfixAuthorized   = ":authorized:"
	InfixUnauthorized = ":unauthorized:"
)

// ZoneSwitch is one of a partition's zone switches: the records after
// offset After were evaluated with zone set Version.
type ZoneSwitch struct {
	Version int64
	After   int64
}

// String is the switch as stored: "<version> <after>".
func (z ZoneSwitch) String() string {
	return strconv.FormatInt(z.Version, 10) + " " + strconv.FormatInt(z.After, 10)
}

// ParseZoneSwitch parses a stored zone switch, "<version> <after>".
func ParseZoneSwitch(s string) (ZoneSwitch, error) {
	v, a, ok := strings.Cut(s, " ")
	z := ZoneSwitch{}
	var err1, err2 error
	z.Version, err1 = strconv.ParseInt(v, 10, 64)
	z.After, err2 = strconv.ParseInt(a, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return ZoneSwitch{}, fmt.Errorf("dedup: bad zone switch %q", s)
	}
	return z, nil
}

// Snapshot is a partition's stored state.
type Snapshot struct {
	// Applied is the offset of the last applied record, NoVersion if none.
	Applied int64
	// Drones maps drone id to its stored state.
	Drones map[string][]byte
	// Clock is the partition's log clock at Applied, in unix milliseconds
	// (0: none stored).
	Clock int64
	// ZoneVersion is the zone version the partition's last batch was
	// evaluated with; -1 when none was recorded (alerts.NoZoneVersion).
	ZoneVersion int64
	// AuthVersion is the authorisation set version the partition's last
	// batch was decided with (0: none recorded).
	AuthVersion int64
}

// Event is one alarm event to append to the outbox.
type Event struct {
	ID   string // unique key: an event with an ID seen before is not appended
	JSON []byte // the event as downstream gets it
}

// Batch is what one engine batch changed.
type Batch struct {
	// Drones are the new states of every drone the batch saw.
	Drones map[string][]byte
	// Events are the new events, in order.
	Events []Event
	// Applied is the batch's last offset: the new version. It must be
	// greater than the expected version.
	Applied int64
	// Tracks are the track points the batch sampled, by drone id: each is
	// appended to the drone's short track (the last TrackLen points are
	// kept). Drones without a new sample are absent.
	Tracks map[string][]byte
	// Held are the drones of Tracks whose track is held
	// (alerts.TrackHold): it keeps HeldTrackLen points instead of
	// TrackLen. Nil when none.
	Held map[string]bool
	// ZoneVersion is the version of the zone set the batch was evaluated
	// with (0: not versioned). When it differs from the partition's last
	// one, the commit records that records after the expected version
	// were evaluated with it (the partition's zone switches).
	ZoneVersion int64
	// AuthVersion is the version of the authorisation set the batch was
	// decided with (0: none): recorded like ZoneVersion (the partition's
	// authorisation switches).
	AuthVersion int64
	// Clock is the partition's log clock after the batch, in unix
	// milliseconds (0: none): stored with the version, so an engine
	// rebuilt from the snapshot resumes it.
	Clock int64
	// Forgotten are the drones the batch forgot: their states and tracks
	// are deleted (after the states are written: a drone is never in both).
	Forgotten []string
	// Placed are positions of drones in Drones for the spatial index of
	// GET /v1/drones?bbox= (a drone absent keeps its place in it: the
	// engine places a drone again once it moved alerts.PlaceStepM, and the
	// index is searched with that margin). Latitudes beyond GeoMaxLat are not placed (the
	// index cannot hold them; a search reaching there reads every drone).
	Placed []Placed
	// New are the drones of Drones whose state the partition did not hold
	// before the batch (the drone ids index gets them).
	New []string
}

// Placed is a drone's position in the spatial index.
type Placed struct {
	ID       string
	Lon, Lat float64
}

// GeoMaxLat is the highest latitude, north or south, the spatial index of
// the drones holds (Redis's GEO limit, the edge of Web Mercator).
const GeoMaxLat = 85.05112878

// Result tells what a commit did.
type Result struct {
	Appended   int // events appended to the outbox
	Suppressed int // events whose unique key already existed (not appended)
}

// Entry is one outbox entry, as the layout types it.
type Entry = redislayout.Entry

// Store is the per-partition versioned state of the alerter.
type Store interface {
	// Load returns the partition's drone states and applied offset.
	Load(ctx context.Context, partition int) (Snapshot, error)
	// Commit atomically checks that the partition's version equals
	// expected, writes the batch's drone states and track points, records
	// a zone switch, claims each event's unique key and appends the events
	// whose key was new (indexing their alarms), and sets the version to
	// b.Applied. It returns ErrFenced (writing nothing) when the version
	// differs.
	Commit(ctx context.Context, partition int, expected int64, b Batch) (Result, error)
}

// OutboxReader reads a partition's outbox (tests, replay, tools).
type OutboxReader interface {
	Outbox(ctx context.Context, partition int) ([]Entry, error)
}

func checkBatch(expected int64, b Batch) error {
	if expected < NoVersion {
		return fmt.Errorf("dedup: expected version %d is below %d", expected, NoVersion)
	}
	if b.Applied <= expected {
		return fmt.Errorf("dedup: batch offset %d is not above the expected version %d", b.Applied, expected)
	}
	return nil
}
