// Package redislayout is the one place the alerter's Redis layout is spelled:
// the keys of a Kafka partition, the fields of its outbox and dead-letter
// streams, and the one reader of outbox entries. docs/redis-layout.md is the
// written contract; layout_test.go checks this package against its tables,
// so the two cannot drift. dedup writes the layout, alerts/outbox reads it
// and keeps its cursors and dead letters in it, tools and the demo read it.
package redislayout

import (
	"strconv"
)

// Keys names the Redis keys of one partition. Every key shares the hash tag
// {prefix:topic:partition}, so a script that touches one partition touches
// one Redis Cluster slot.
type Keys struct{ tag string }

// Of returns the keys of partition of topic under prefix.
func Of(prefix, topic string, partition int) Keys {
	return Keys{tag: "{" + prefix + ":" + topic + ":" + strconv.Itoa(partition) + "}"}
}

// Match is the SCAN MATCH pattern of every key under prefix, all topics and
// partitions (a tag's "{", "}", "*" and "?" in prefix are not escaped).
func Match(prefix string) string { return "{" + prefix + ":*" }

// Tag is the partition's hash tag, {prefix:topic:partition}.
func (k Keys) Tag() string { return k.tag }

// Applied is the string holding the partition's applied Kafka offset (its version).
func (k Keys) Applied() string { return k.tag + ":applied" }

// Drones is the hash of drone id → drone state JSON.
func (k Keys) Drones() string { return k.tag + ":drones" }

// DroneIDs is the sorted set of the drone hash's ids, every score 0: the
// id-ordered pages of GET /v1/drones read it by range (ZRANGEBYLEX).
func (k Keys) DroneIDs() string { return k.tag + ":drones:ids" }

// DroneGeo is the geo set of the drones' last positions (GEOADD):
// GET /v1/drones?bbox= searches it.
func (k Keys) DroneGeo() string { return k.tag + ":drones:geo" }

// DroneChanges is the stream of the batches' drone ids (one entry per
// batch: its applied offset, the one before it and the drones whose state
// it wrote): the positions streams' producer reads what changed since its
// last tick.
func (k Keys) DroneChanges() string { return k.tag + ":drones:changes" }

// DroneIndexed marks a partition whose drone indexes (DroneIDs, DroneGeo)
// hold every drone of its hash: absent for a partition written before
// them, until the backfill builds them.
func (k Keys) DroneIndexed() string { return k.tag + ":drones:indexed" }

// Audit is the partition's audit stream (package audit): the acks'
// entries, each written by the ack script with its ack.
func (k Keys) Audit() string { return k.tag + ":audit" }

// Outbox is the stream of alarm events: field FieldEvent, the event's JSON
// (entries written before issue 32 also carry FieldEventID).
func (k Keys) Outbox() string { return k.tag + ":outbox" }

// Event is the unique key of event id in the layout before event buckets
// (a string claimed with SET NX EX). It is no longer written; the commit
// script still reads it while Legacy exists, so an upgrade keeps
// suppressing the events claimed before it until their keys expire.
func (k Keys) Event(id string) string { return k.EventPrefix() + id }

// EventPrefix is what Event puts before an event id: the commit script gets
// it as an argument and appends the ids itself, so each event travels once.
func (k Keys) EventPrefix() string { return k.tag + ":ev:" }

// EventBucket is the hash of the event ids claimed while it was the
// partition's newest bucket (field = event id, value "1"); the bucket expires
// at unix time expiresMS (milliseconds), which names it.
func (k Keys) EventBucket(expiresMS int64) string {
	return k.EventBucketPrefix() + strconv.FormatInt(expiresMS, 10)
}

// EventBucketPrefix is what EventBucket puts before the expiry: the commit
// script gets it as an argument and names its buckets itself.
func (k Keys) EventBucketPrefix() string { return k.tag + ":evb:" }

// EventMark is the string "<applied> <expiry_ms>..." the commit script
// writes with each batch: the applied offset it committed and the expiries
// (so the names) of the event buckets still to be read, oldest first.
func (k Keys) EventMark() string { return k.tag + ":evmark" }

// Legacy is the string that, while it exists, makes the commit script also
// read the per-event unique keys of the earlier layout (Event). It is set,
// to expire one event TTL later, by a commit that finds the partition last
// committed by something other than the bucket layout.
func (k Keys) Legacy() string { return k.tag + ":evlegacy" }

// Alarms is the hash of the partition's alarms: field = an alarm event's
// id (<alarm_id>:raised, :cleared, :acked), value = that event's JSON.
func (k Keys) Alarms() string { return k.tag + ":alarms" }

// AlarmsActive is the sorted set of active alarm ids, score = raise time
// (unix milliseconds of the raised event's ts).
func (k Keys) AlarmsActive() string { return k.tag + ":alarms:active" }

// AlarmsCleared is the sorted set of cleared alarm ids, score = raise time.
func (k Keys) AlarmsCleared() string { return k.tag + ":alarms:cleared" }

// AlarmsGC is the sorted set of cleared alarm ids, score = the unix
// milliseconds (Redis's clock) of the commit that cleared them: the batch
// script deletes those older than the alarm retention.
func (k Keys) AlarmsGC() string { return k.tag + ":alarms:gc" }

// Track is drone's short track: a list of track point JSON, newest last.
func (k Keys) Track(drone string) string { return k.TrackPrefix() + drone }

// TrackPrefix is what Track puts before a drone id (the commit script's
// argument).
func (k Keys) TrackPrefix() string { return k.tag + ":track:" }

// ZoneVersion is the string holding the zone set version of the
// partition's last versioned batch.
func (k Keys) ZoneVersion() string { return k.tag + ":zonever" }

// Clock is the partition's log clock after its last batch, unix
// milliseconds (docs/redis-layout.md).
func (k Keys) Clock() string { return k.tag + ":clock" }

// ZoneSwitches is the list of "<version> <after_offset>": the records with
// an offset above after_offset were evaluated with zone set version.
func (k Keys) ZoneSwitches() string { return k.tag + ":zoneswitch" }

// AuthVersion is the string holding the authorisation set version of the
// partition's last batch that had one (docs/design.md, "Authorised
// flights").
func (k Keys) AuthVersion() string { return k.tag + ":authver" }

// AuthSwitches is the list of "<version> <after_offset>": the records with
// an offset above after_offset were decided with authorisation set version.
func (k Keys) AuthSwitches() string { return k.tag + ":authswitch" }

// ReplCheck is the string a reader writes (the version or outbox id it
// read) only so that a WAIT after it on the same connection covers every
// earlier write of the partition (redisreplica.Wait.Confirm): written with
// --redis-min-replicas by the alerter's load and the dispatcher's reads.
func (k Keys) ReplCheck() string { return k.tag + ":replcheck" }

// Cursor is the string holding the stream id output last passed; output is
// KafkaOutput, WebhookOutput(name) or AlertmanagerOutput(name).
func (k Keys) Cursor(output string) string { return k.tag + ":cursor:" + output }

// Dead is output's dead-letter stream (fields of DeadLetter.Values).
func (k Keys) Dead(output string) string { return k.tag + ":dead:" + output }

// State is output's hash of what it last told its endpoint per alarm:
// field = alarm id, value = AlertmanagerState JSON (the Alertmanager
// outputs: the series posted and the ack's silence id). Written with the
// output's cursor, in one script.
func (k Keys) State(output string) string { return k.tag + ":state:" + output }

// KafkaOutput names the dispatcher's Kafka output in cursor keys and metrics.
const KafkaOutput = "kafka"

// WebhookOutput names webhook name's output in cursor and dead-letter keys
// and in metrics.
func WebhookOutput(name string) string { return "webhook:" + name }

// AlertmanagerOutput names the output to Alertmanager name (its URL's
// host, port and path) in cursor and state keys and in metrics.
func AlertmanagerOutput(name string) string { return "alertmanager:" + name }

// The fields of an outbox entry: FieldEvent, the event's JSON, whose
// first member is its event_id. FieldEventID is that id again, in dead
// letters and in outbox entries written before issue 32 (EventIDOf reads
// it from the JSON otherwise).
const (
	FieldEventID = "event_id"
	FieldEvent   = "event"
)

// The other fields of a dead letter, besides FieldEventID and FieldEvent.
const (
	FieldOutboxID = "outbox_id"
	FieldReason   = "reason"
	FieldAttempts = "attempts"
	FieldStatus   = "status"
)

// StartID is the stream id to read after when nothing was read yet.
const StartID = "0-0"

// Entry is one outbox stream entry.
type Entry struct {
	ID      string // stream entry id
	EventID string
	Event   []byte // the event's JSON, as downstream gets it
}

// Values are the entry's fields as the commit script writes them (the
// event alone; tests and tools that add entries use this).
func (e Entry) Values() []any {
	return []any{FieldEvent, e.Event}
}

// LegacyValues are the fields of an entry written before issue 32: the
// event id, then the event (the upgrade tests write these).
func (e Entry) LegacyValues() []any {
	return []any{FieldEventID, e.EventID, FieldEvent, e.Event}
}

// DeadLetter is one entry of a webhook's dead-letter stream: the outbox
// entry that could not be delivered, and why.
type DeadLetter struct {
	ID       string // the dead letter's own stream id
	Entry    Entry  // Entry.ID is the outbox entry's id (field outbox_id)
	Reason   string
	Attempts int
	Status   int // last HTTP status, 0 for none
}

// Values are the dead letter's fields in XADD order: outbox_id, event_id,
// event, reason, attempts, status.
func (d DeadLetter) Values() []any {
	return []any{FieldOutboxID, d.Entry.ID, FieldEventID, d.Entry.EventID, FieldEvent, d.Entry.Event,
		FieldReason, d.Reason, FieldAttempts, d.Attempts, FieldStatus, d.Status}
}
