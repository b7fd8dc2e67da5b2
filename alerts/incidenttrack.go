package alerts

import "time"

// An incident report (GET /v1/alarms/{id}/report) draws the drone's track
// from before its entry to after the clear, so a drone with an alarm or
// an approach warning is sampled denser and its track kept longer than the
// ten-second, 50-point track of every other drone. Both are decided from
// the log (the positions' ts, the partition's log clock), never a wall
// clock, so a replay keeps the same points.
const (
	// AlarmTrackInterval is the spacing of track samples, in the
	// positions' ts, while a drone has an active alarm or an open approach
	// episode. A position that caused an event (a raise, a clear, a
	// warning) is always sampled.
	AlarmTrackInterval = time.Second
	// TrackHold is how long, on the log's clock, after a drone's last raise
	// its track is held: the batch keeps dedup's held track length
	// (DefaultHeldTrackLen) for it instead of the short one. It equals the
	// track's expiry (dedup.DefaultTrackTTL): a report is possible as long
	// as the track lives.
	TrackHold = 24 * time.Hour
)

// trackEvery is the spacing of d's next track sample: none for a position
// that caused an event, AlarmTrackInterval while d is alarmed or
// approaching, the engine's otherwise.
func (e *Engine) trackEvery(d *drone, evented bool) time.Duration {
	if evented {
		return 0
	}
	if AlarmTrackInterval < e.trackGap && (len(d.Alarms) > 0 || approaching(d)) {
		return AlarmTrackInterval
	}
	return e.trackGap
}

// approaching reports whether d has an open approach episode.
func approaching(d *drone) bool {
	for i := range d.Approaches {
		if d.Approaches[i].ID != "" {
			return true
		}
	}
	return false
}

// heldTrack reports whether d's track is held (kept longer): it has an
// active alarm or raised one within TrackHold of the log's clock.
func (e *Engine) heldTrack(d *drone) bool {
	return len(d.Alarms) > 0 || (d.LastRaise != 0 && e.clock-d.LastRaise < TrackHold.Milliseconds())
}
