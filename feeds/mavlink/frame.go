// Package mavlink reads MAVLink v1 and v2 frames and turns GLOBAL_POSITION_INT
// into telemetry positions: degE7 to degrees, millimetres MSL to alt_m AMSL,
// the autopilot's time since boot to UTC; OPEN_DRONE_ID_SYSTEM and
// OPEN_DRONE_ID_SYSTEM_UPDATE give those positions the pilot's position.
//
// It is our own small reader, not a general MAVLink library: the one such
// library for Go (gomavlib) is not served by the module proxy this project
// builds from. It knows the CRC_EXTRA of the messages it decodes (only
// GLOBAL_POSITION_INT, OPEN_DRONE_ID_SYSTEM and OPEN_DRONE_ID_SYSTEM_UPDATE);
// every other message's frame is skipped by its length without a CRC check. Signed v2 frames are read, their signature is not
// checked (no key is configured): a feed that must be authenticated belongs
// on the HTTP intake. The golden frames in testdata/feeds/mavlink were made
// by pymavlink, the reference implementation, so the wire format is checked
// against code we did not write.
package mavlink

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame start markers.
const (
	magicV1 = 0xFE
	magicV2 = 0xFD
)

// MsgGlobalPositionInt is GLOBAL_POSITION_INT's message id.
const MsgGlobalPositionInt = 33

// crcExtra is the CRC_EXTRA seed of each message decoded here (from the
// message's definition in common.xml).
var crcExtra = map[uint32]byte{MsgGlobalPositionInt: 104, MsgOpenDroneIDSystem: 77, MsgOpenDroneIDSystemUpdate: 7}

// Frame is one MAVLink frame. Payload is the payload as sent (a v2 payload
// may have lost its trailing zero bytes).
type Frame struct {
	Version  int // 1 or 2
	Seq      uint8
	SysID    uint8
	CompID   uint8
	MsgID    uint32
	Payload  []byte
	Signed   bool
	Checked  bool // the CRC was checked (the message is one we know)
	FrameLen int  // bytes the frame took
}

// Errors of a frame that starts with a magic byte but is not a good frame.
var (
	ErrTruncated = errors.New("mavlink: frame truncated")
	ErrCRC       = errors.New("mavlink: bad checksum")
)

// ParseFrame reads the frame at the start of b (b[0] must be a magic byte).
func ParseFrame(b []byte) (Frame, error) {
	if len(b) == 0 {
		return Frame{}, ErrTruncated
	}
	var f Frame
	var hdr int
	switch b[0] {
	case magicV1:
		hdr = 6
		if len(b) < hdr {
			return f, ErrTruncated
		}
		f = Frame{Version: 1, Seq: b[2], SysID: b[3], CompID: b[4], MsgID: uint32(b[5])}
	case magicV2:
		hdr = 10
		if len(b) < hdr {
			return f, ErrTruncated
		}
		f = Frame{Version: 2, Seq: b[4], SysID: b[5], CompID: b[6],
			MsgID: uint32(b[7]) | uint32(b[8])<<8 | uint32(b[9])<<16, Signed: b[2]&0x01 != 0}
	default:
		return f, fmt.Errorf("mavlink: no frame start (0x%02x)", b[0])
	}
	n := int(b[1])
	end := hdr + n + 2
	if f.Signed {
		end += 13
	}
	if len(b) < end {
		return f, ErrTruncated
	}
	f.Payload = b[hdr : hdr+n]
	f.FrameLen = end
	if extra, ok := crcExtra[f.MsgID]; ok {
		c := crcAccumulate(0xFFFF, b[1:hdr+n])
		c = crcAccumulate(c, []byte{extra})
		if got := binary.LittleEndian.Uint16(b[hdr+n:]); got != c {
			return f, fmt.Errorf("%w: message %d from system %d: 0x%04x, computed 0x%04x", ErrCRC, f.MsgID, f.SysID, got, c)
		}
		f.Checked = true
	}
	return f, nil
}

// Frames returns the good frames in a datagram and how many bytes could not
// be read as one (noise, a bad checksum, a truncated tail). A bad frame's
// magic byte is stepped over, so a frame that follows it is still found.
func Frames(b []byte) (frames []Frame, badBytes int) {
	for len(b) > 0 {
		if b[0] != magicV1 && b[0] != magicV2 {
			b = b[1:]
			badBytes++
			continue
		}
		f, err := ParseFrame(b)
		if err != nil {
			b = b[1:]
			badBytes++
			continue
		}
		frames = append(frames, f)
		b = b[f.FrameLen:]
	}
	return frames, badBytes
}

// crcAccumulate is the X.25 CRC-16 (CRC-16/MCRF4XX) MAVLink uses.
func crcAccumulate(crc uint16, data []byte) uint16 {
	for _, d := range data {
		tmp := d ^ byte(crc)
		tmp ^= tmp << 4
		crc = (crc >> 8) ^ uint16(tmp)<<8 ^ uint16(tmp)<<3 ^ uint16(tmp)>>4
	}
	return crc
}

// EncodeV2 builds an unsigned v2 frame of a message whose CRC_EXTRA is
// known here, trailing zero bytes of the payload cut as v2 senders do. It is
// what a sender (tests, a simulator) needs; the reader never uses it.
func EncodeV2(seq, sysID, compID uint8, msgID uint32, payload []byte) ([]byte, error) {
	extra, ok := crcExtra[msgID]
	if !ok {
		return nil, fmt.Errorf("mavlink: no CRC_EXTRA known for message %d", msgID)
	}
	n := len(payload)
	for n > 1 && payload[n-1] == 0 {
		n--
	}
	b := make([]byte, 0, 10+n+2)
	b = append(b, magicV2, byte(n), 0, 0, seq, sysID, compID, byte(msgID), byte(msgID>>8), byte(msgID>>16))
	b = append(b, payload[:n]...)
	c := crcAccumulate(0xFFFF, b[1:])
	c = crcAccumulate(c, []byte{extra})
	return binary.LittleEndian.AppendUint16(b, c), nil
}
