package mavlink

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// The pilot's position. MAVLink carries Remote ID's System message as
// OPEN_DRONE_ID_SYSTEM (the operator's position and its location type) and
// its live updates as OPEN_DRONE_ID_SYSTEM_UPDATE (position only). Both
// arrive apart from GLOBAL_POSITION_INT: the Decoder keeps the latest per
// vehicle and attaches it to that vehicle's next positions for
// OperatorMaxAge. A GCS sends them to the vehicle (target_system names
// it); a Remote ID module or autopilot sends its own (target_system 0, the
// frame's system id names it).

// Message ids, from common.xml.
const (
	MsgOpenDroneIDSystem       = 12904
	MsgOpenDroneIDSystemUpdate = 12919
)

// OperatorMaxAge is how long a System message's pilot position goes with a
// vehicle's positions without a newer one. F3411 broadcasts the System
// message at least every 3 s; ten times that without one and the pilot's
// position is no longer known, rather than shown stale.
const OperatorMaxAge = 30 * time.Second

// OpenDroneIDSystem is OPEN_DRONE_ID_SYSTEM (or the fields of
// OPEN_DRONE_ID_SYSTEM_UPDATE, which has no location type) as sent.
type OpenDroneIDSystem struct {
	TargetSystem, TargetComponent uint8
	OperatorLat                   int32   // degE7, 0 with OperatorLon 0: unknown
	OperatorLon                   int32   // degE7
	OperatorAltitudeGeo           float32 // m WGS84, -1000: unknown
	Timestamp                     uint32  // s since 2019-01-01 00:00 UTC
	Update                        bool    // an OPEN_DRONE_ID_SYSTEM_UPDATE: the fields above only

	// OPEN_DRONE_ID_SYSTEM's other fields.
	OperatorLocationType   uint8 // 0 take-off, 1 live GNSS, 2 fixed
	ClassificationType     uint8
	IDOrMAC                [20]byte
	AreaCount, AreaRadius  uint16
	AreaCeiling, AreaFloor float32
	CategoryEU, ClassEU    uint8
}

// Payload sizes (wire order: fields by size, arrays by element).
const (
	odidSystemLen       = 54
	odidSystemUpdateLen = 18
)

// DecodeOpenDroneIDSystem reads the payload of an OPEN_DRONE_ID_SYSTEM
// (update false) or OPEN_DRONE_ID_SYSTEM_UPDATE frame; trailing zeros a v2
// sender cut are put back.
func DecodeOpenDroneIDSystem(payload []byte, update bool) (OpenDroneIDSystem, error) {
	n, name := odidSystemLen, "OPEN_DRONE_ID_SYSTEM"
	if update {
		n, name = odidSystemUpdateLen, "OPEN_DRONE_ID_SYSTEM_UPDATE"
	}
	if len(payload) > n {
		return OpenDroneIDSystem{}, fmt.Errorf("mavlink: %s payload of %d bytes, more than %d", name, len(payload), n)
	}
	b := make([]byte, n)
	copy(b, payload)
	le := binary.LittleEndian
	m := OpenDroneIDSystem{Update: update,
		OperatorLat: int32(le.Uint32(b[0:])), OperatorLon: int32(le.Uint32(b[4:]))}
	f32 := func(i int) float32 { return math.Float32frombits(le.Uint32(b[i:])) }
	if update {
		// operator_latitude, operator_longitude, operator_altitude_geo,
		// timestamp, target_system, target_component.
		m.OperatorAltitudeGeo, m.Timestamp = f32(8), le.Uint32(b[12:])
		m.TargetSystem, m.TargetComponent = b[16], b[17]
		return m, nil
	}
	// operator_latitude, operator_longitude, area_ceiling, area_floor,
	// operator_altitude_geo, timestamp, area_count, area_radius,
	// target_system, target_component, id_or_mac[20],
	// operator_location_type, classification_type, category_eu, class_eu.
	m.AreaCeiling, m.AreaFloor, m.OperatorAltitudeGeo, m.Timestamp = f32(8), f32(12), f32(16), le.Uint32(b[20:])
	m.AreaCount, m.AreaRadius = le.Uint16(b[24:]), le.Uint16(b[26:])
	m.TargetSystem, m.TargetComponent = b[28], b[29]
	copy(m.IDOrMAC[:], b[30:50])
	m.OperatorLocationType, m.ClassificationType, m.CategoryEU, m.ClassEU = b[50], b[51], b[52], b[53]
	return m, nil
}

// Payload encodes m (54 bytes; 18 for an update), for senders and tests.
func (m OpenDroneIDSystem) Payload() []byte {
	le := binary.LittleEndian
	f32 := func(b []byte, f float32) []byte { return le.AppendUint32(b, math.Float32bits(f)) }
	b := make([]byte, 0, odidSystemLen)
	b = le.AppendUint32(b, uint32(m.OperatorLat))
	b = le.AppendUint32(b, uint32(m.OperatorLon))
	if m.Update {
		b = f32(b, m.OperatorAltitudeGeo)
		b = le.AppendUint32(b, m.Timestamp)
		return append(b, m.TargetSystem, m.TargetComponent)
	}
	b = f32(f32(f32(b, m.AreaCeiling), m.AreaFloor), m.OperatorAltitudeGeo)
	b = le.AppendUint32(b, m.Timestamp)
	b = le.AppendUint16(le.AppendUint16(b, m.AreaCount), m.AreaRadius)
	b = append(b, m.TargetSystem, m.TargetComponent)
	b = append(b, m.IDOrMAC[:]...)
	return append(b, m.OperatorLocationType, m.ClassificationType, m.CategoryEU, m.ClassEU)
}

// Operator is the pilot's position m gives, nil when unknown (0, 0; out of
// range). prev is the vehicle's earlier one: an update keeps its type.
func (m OpenDroneIDSystem) Operator(prev *telemetry.Operator) *telemetry.Operator {
	lat, lon := float64(m.OperatorLat)/1e7, float64(m.OperatorLon)/1e7
	if m.OperatorLat == 0 && m.OperatorLon == 0 || lat < -90 || lat > 90 || lon < -180 || lon > 180 {
		return nil
	}
	o := &telemetry.Operator{Lat: lat, Lon: lon}
	if alt := float64(m.OperatorAltitudeGeo); alt != -1000 && !math.IsNaN(alt) && !math.IsInf(alt, 0) {
		o.AltM = &alt
	}
	switch {
	case m.Update && prev != nil:
		o.Type = prev.Type
	case m.Update:
	case int(m.OperatorLocationType) < len(operatorTypes):
		o.Type = operatorTypes[m.OperatorLocationType]
	}
	return o
}

// operatorTypes are MAV_ODID_OPERATOR_LOCATION_TYPE's values 0, 1, 2.
var operatorTypes = [...]string{telemetry.OperatorTakeoff, telemetry.OperatorLive, telemetry.OperatorFixed}

// heardOperator is a vehicle's latest pilot position and when it came.
type heardOperator struct {
	op *telemetry.Operator
	at time.Time
}

// system takes in an OPEN_DRONE_ID_SYSTEM(_UPDATE) frame received at recv.
func (d *Decoder) system(f Frame, recv time.Time) error {
	m, err := DecodeOpenDroneIDSystem(f.Payload, f.MsgID == MsgOpenDroneIDSystemUpdate)
	if err != nil {
		return err
	}
	vehicle := f.SysID
	if m.TargetSystem != 0 {
		vehicle = m.TargetSystem
	}
	if d.operators == nil {
		d.operators = map[uint8]heardOperator{}
	}
	d.operators[vehicle] = heardOperator{m.Operator(d.operators[vehicle].op), recv}
	return nil
}

// operator is the pilot's position to attach to a position of vehicle sys
// received at recv (a copy), or nil.
func (d *Decoder) operator(sys uint8, recv time.Time) *telemetry.Operator {
	h, ok := d.operators[sys]
	if !ok || h.op == nil || recv.Sub(h.at) > OperatorMaxAge {
		return nil
	}
	o := *h.op
	if h.op.AltM != nil {
		o.AltM = telemetry.Float(*h.op.AltM)
	}
	return &o
}
