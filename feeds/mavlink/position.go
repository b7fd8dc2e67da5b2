package mavlink

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// GlobalPositionInt is GLOBAL_POSITION_INT (message 33) as sent.
type GlobalPositionInt struct {
	TimeBootMS  uint32 // ms since the autopilot booted
	Lat, Lon    int32  // degE7
	Alt         int32  // mm above mean sea level
	RelativeAlt int32  // mm above home (the arming point), not above ground
	VX, VY, VZ  int16  // cm/s north, east, down
	Hdg         uint16 // cdeg, UINT16_MAX when unknown
}

const gpiLen = 28

// HdgUnknown is GLOBAL_POSITION_INT's "heading unknown".
const HdgUnknown = math.MaxUint16

// DecodeGlobalPositionInt reads the payload of a GLOBAL_POSITION_INT frame.
// A v2 payload shorter than 28 bytes had trailing zeros cut: they are put
// back. A longer one is refused.
func DecodeGlobalPositionInt(payload []byte) (GlobalPositionInt, error) {
	if len(payload) > gpiLen {
		return GlobalPositionInt{}, fmt.Errorf("mavlink: GLOBAL_POSITION_INT payload of %d bytes, more than %d", len(payload), gpiLen)
	}
	var b [gpiLen]byte
	copy(b[:], payload)
	le := binary.LittleEndian
	return GlobalPositionInt{
		TimeBootMS:  le.Uint32(b[0:]),
		Lat:         int32(le.Uint32(b[4:])),
		Lon:         int32(le.Uint32(b[8:])),
		Alt:         int32(le.Uint32(b[12:])),
		RelativeAlt: int32(le.Uint32(b[16:])),
		VX:          int16(le.Uint16(b[20:])),
		VY:          int16(le.Uint16(b[22:])),
		VZ:          int16(le.Uint16(b[24:])),
		Hdg:         le.Uint16(b[26:]),
	}, nil
}

// Payload encodes m (28 bytes), for senders and tests.
func (m GlobalPositionInt) Payload() []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, gpiLen)
	b = le.AppendUint32(b, m.TimeBootMS)
	b = le.AppendUint32(b, uint32(m.Lat))
	b = le.AppendUint32(b, uint32(m.Lon))
	b = le.AppendUint32(b, uint32(m.Alt))
	b = le.AppendUint32(b, uint32(m.RelativeAlt))
	b = le.AppendUint16(b, uint16(m.VX))
	b = le.AppendUint16(b, uint16(m.VY))
	b = le.AppendUint16(b, uint16(m.VZ))
	return le.AppendUint16(b, m.Hdg)
}

// Clock resolves one vehicle's time since boot to UTC. The first message
// anchors boot = receive time − time_boot_ms; later messages keep that
// anchor, so the spacing of the autopilot's own clock is kept (network
// jitter does not reorder fixes). A time_boot_ms below the last one means
// the autopilot rebooted: the anchor is taken again. The anchor is also
// taken again when the resolved time would run ahead of the receive time by
// more than MaxAhead (an anchor taken from a late first datagram), never
// backwards. ts never goes back (a re-anchor behind the last fix keeps the
// last fix's time); seq is ts in unix milliseconds, or one above the last
// seq where that would not grow: both only grow, across reboots too.
type Clock struct {
	boot    time.Time
	lastMS  uint32
	lastSeq int64
	lastTS  time.Time
	started bool
}

// MaxAhead is how far a resolved time may run ahead of the receive time
// before the anchor is taken again.
const MaxAhead = 2 * time.Second

// Resolve returns the UTC time of a message sent at timeBootMS and received
// at recv, and its seq (unix ms, strictly above every earlier one).
func (c *Clock) Resolve(timeBootMS uint32, recv time.Time) (time.Time, int64) {
	since := time.Duration(timeBootMS) * time.Millisecond
	switch {
	case !c.started, timeBootMS < c.lastMS:
		c.boot = recv.Add(-since)
	case c.boot.Add(since).After(recv.Add(MaxAhead)):
		c.boot = recv.Add(-since)
	}
	c.started = true
	c.lastMS = timeBootMS
	ts := c.boot.Add(since).UTC()
	// A re-anchor behind an earlier fix, or two fixes in one ms: ts stays at
	// the last one and seq above it. The alerter orders a drone's records
	// by ts, then seq, and drops one not after the last it applied: a fix
	// resolved a little before its predecessor is still the newer one.
	if ts.Before(c.lastTS) {
		ts = c.lastTS
	}
	c.lastTS = ts
	seq := max(ts.UnixMilli(), c.lastSeq+1)
	c.lastSeq = seq
	return ts, seq
}

// Position converts m from the vehicle named droneID: lat/lon degE7 to
// degrees, alt mm MSL to alt_m AMSL, speed from vx/vy, heading from hdg
// (absent when unknown). relative_alt is dropped: it is height above home,
// the arming point, which is not the ground under the drone; reading it as
// AGL would miss a drone that took off from a roof or a hill. The geofence
// counts a missing AGL as meeting AGL limits, the conservative reading.
func Position(droneID string, m GlobalPositionInt, ts time.Time, seq int64) (telemetry.Position, error) {
	lat := float64(m.Lat) / 1e7
	lon := float64(m.Lon) / 1e7
	switch {
	case lat < -90 || lat > 90:
		return telemetry.Position{}, fmt.Errorf("lat %d degE7 out of range", m.Lat)
	case lon < -180 || lon > 180:
		return telemetry.Position{}, fmt.Errorf("lon %d degE7 out of range", m.Lon)
	case m.Lat == 0 && m.Lon == 0:
		// What autopilots send before a GNSS fix.
		return telemetry.Position{}, fmt.Errorf("no position (lat 0, lon 0: no GNSS fix)")
	}
	p := telemetry.Position{DroneID: droneID, Seq: seq, TS: ts, Lat: lat, Lon: lon,
		AltM: telemetry.Float(float64(m.Alt) / 1000), AltRef: telemetry.RefAMSL,
		SpeedMPS: telemetry.Float(math.Hypot(float64(m.VX), float64(m.VY)) / 100)}
	if m.Hdg != HdgUnknown && m.Hdg < 36000 {
		p.HeadingDeg = telemetry.Float(float64(m.Hdg) / 100)
	}
	return p, nil
}
