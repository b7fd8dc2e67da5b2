package mavlink

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// MaxFleetLen leaves room for "-" and a system id (up to 255) in a drone_id.
const MaxFleetLen = telemetry.MaxDroneIDLen - 4

// Decoder turns the datagrams of one fleet's MAVLink stream into positions.
// Each vehicle (MAVLink system id) is the drone "<fleet>-<sysid>", with its
// own Clock. Not safe for concurrent use.
type Decoder struct {
	fleet  string
	clocks map[uint8]*Clock
	// operators is each vehicle's latest pilot position (operator.go), at
	// most 256.
	operators map[uint8]heardOperator
}

// NewDecoder returns a Decoder for the fleet named fleet: 1-60 characters
// of the drone_id alphabet [A-Za-z0-9._:-].
func NewDecoder(fleet string) (*Decoder, error) {
	if fleet == "" || len(fleet) > MaxFleetLen {
		return nil, fmt.Errorf("fleet name must be 1-%d characters", MaxFleetLen)
	}
	for i := 0; i < len(fleet); i++ {
		c := fleet[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return nil, fmt.Errorf("fleet name %q: %q is not one of [A-Za-z0-9._:-]", fleet, c)
		}
	}
	return &Decoder{fleet: fleet, clocks: map[uint8]*Clock{}}, nil
}

// DroneID is the drone_id of the vehicle with system id sys.
func (d *Decoder) DroneID(sys uint8) string { return d.fleet + "-" + strconv.Itoa(int(sys)) }

// Vehicles is how many vehicles have been heard.
func (d *Decoder) Vehicles() int { return len(d.clocks) }

// Stats count what one datagram held.
type Stats struct {
	Frames    int // good frames
	Positions int // GLOBAL_POSITION_INT turned into positions
	Invalid   int // GLOBAL_POSITION_INT without a usable position (no GNSS fix, out of range)
	Systems   int // OPEN_DRONE_ID_SYSTEM(_UPDATE) read: the pilot's position
	BadBytes  int // bytes that were no good frame
	// Dropped lists the optional fields dropped from the positions (a
	// value outside its physical range: telemetry.DecodeWarn's rules),
	// one entry per field dropped.
	Dropped []telemetry.FieldWarning
}

// Datagram appends the positions in b, received at recv, to out. The
// errors say why a GLOBAL_POSITION_INT gave no position.
func (d *Decoder) Datagram(b []byte, recv time.Time, out []telemetry.Position) ([]telemetry.Position, Stats, []error) {
	frames, bad := Frames(b)
	st := Stats{Frames: len(frames), BadBytes: bad}
	var errs []error
	for _, f := range frames {
		if !f.Checked {
			continue
		}
		if f.MsgID == MsgOpenDroneIDSystem || f.MsgID == MsgOpenDroneIDSystemUpdate {
			if err := d.system(f, recv); err != nil {
				errs = append(errs, fmt.Errorf("system %d: %w", f.SysID, err))
			} else {
				st.Systems++
			}
			continue
		}
		if f.MsgID != MsgGlobalPositionInt {
			continue
		}
		m, err := DecodeGlobalPositionInt(f.Payload)
		if err != nil {
			st.Invalid++
			errs = append(errs, fmt.Errorf("system %d: %w", f.SysID, err))
			continue
		}
		c := d.clocks[f.SysID]
		if c == nil {
			c = &Clock{}
			d.clocks[f.SysID] = c
		}
		id := d.DroneID(f.SysID)
		// The clock moves even for a fix without a position: a reboot is
		// seen when it happens.
		ts, seq := c.Resolve(m.TimeBootMS, recv)
		p, err := Position(id, m, ts, seq)
		if err == nil {
			p.Operator = d.operator(f.SysID, recv)
			// Through the validator every feed's record goes through: an
			// altitude or speed outside its physical range is dropped
			// there (the height then counts as unknown, which alarms),
			// and the record says what was dropped.
			n := len(st.Dropped)
			p, st.Dropped, err = telemetry.DecodeWarn(p.AppendJSON(nil), st.Dropped)
			p.Dropped = telemetry.DroppedOf(st.Dropped[n:])
		}
		if err != nil {
			st.Invalid++
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		st.Positions++
		out = append(out, p)
	}
	return out, st, errs
}
