package redislayout

// The alarm index's secondary sets (docs/redis-layout.md, "Alarms"): per
// partition, one sorted set per drone, zone and category and per state,
// member = alarm id, score = raise time, so that GET /v1/alarms?drone=
// (zone=, category=) reads the alarms it lists instead of scanning the
// partition's. The batch script builds these names itself from
// AlarmsActive and AlarmsCleared (":" + by + ":" + value), keeping the
// hash tag.

// The dimensions of the secondary sets (AlarmsActiveBy's by).
const (
	ByDrone    = "drone"
	ByZone     = "zone"
	ByCategory = "category"
)

// AlarmsActiveBy is the sorted set of the active alarms whose by (ByDrone,
// ByZone, ByCategory) is value: member = alarm id, score = raise time.
func (k Keys) AlarmsActiveBy(by, value string) string {
	return k.AlarmsActive() + ":" + by + ":" + value
}

// AlarmsClearedBy is AlarmsActiveBy for the cleared alarms.
func (k Keys) AlarmsClearedBy(by, value string) string {
	return k.AlarmsCleared() + ":" + by + ":" + value
}

// AlarmsIndexMark is the string "<applied> <progress>" that says how far
// the secondary sets hold the partition's alarms: "<applied> done" when
// they hold every alarm, and the batch script that wrote applied kept
// them; anything else (absent, another applied offset, a backfill's
// progress) means a reader must not rely on them yet.
func (k Keys) AlarmsIndexMark() string { return k.tag + ":alarms:ixv" }
