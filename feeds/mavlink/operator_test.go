package mavlink

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// TestGoldenSystemFrames: pymavlink's OPEN_DRONE_ID_SYSTEM(_UPDATE) frames
// (testdata/feeds/mavlink/README.md) pass the CRC check and decode to the
// values they were made from.
func TestGoldenSystemFrames(t *testing.T) {
	g := golden(t)
	tests := []struct {
		name   string
		sys    uint8
		comp   uint8
		seq    uint8
		msgID  uint32
		want   OpenDroneIDSystem
		wantOp string
	}{
		{"v2 odid system sys 7 live", 7, 1, 6, MsgOpenDroneIDSystem,
			OpenDroneIDSystem{OperatorLat: 514690000, OperatorLon: -4520000, OperatorAltitudeGeo: 95.5, OperatorLocationType: 1,
				AreaCount: 1, AreaCeiling: -1000, AreaFloor: -1000}, `51.469 -0.452 95.5 "live"`},
		// Its trailing zeros cut: a 25-byte payload.
		{"v2 odid system sys 7 unknown", 7, 1, 7, MsgOpenDroneIDSystem,
			OpenDroneIDSystem{OperatorAltitudeGeo: -1000, AreaCount: 1, AreaCeiling: -1000, AreaFloor: -1000}, "-"},
		{"v2 odid system gcs for sys 9 fixed", 255, 190, 2, MsgOpenDroneIDSystem,
			OpenDroneIDSystem{TargetSystem: 9, TargetComponent: 1, OperatorLat: -338690000, OperatorLon: 1512090000, OperatorAltitudeGeo: 40,
				OperatorLocationType: 2, AreaCount: 1, AreaCeiling: -1000, AreaFloor: -1000}, `-33.869 151.209 40 "fixed"`},
		{"v2 odid system update sys 7", 7, 1, 8, MsgOpenDroneIDSystemUpdate,
			OpenDroneIDSystem{OperatorLat: 514691000, OperatorLon: -4521000, OperatorAltitudeGeo: 96, Update: true}, `51.4691 -0.4521 96 ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := g[tc.name]
			if !ok {
				t.Fatalf("no golden frame %q", tc.name)
			}
			f, err := ParseFrame(b)
			if err != nil {
				t.Fatal(err)
			}
			if f.SysID != tc.sys || f.MsgID != tc.msgID || !f.Checked || f.FrameLen != len(b) {
				t.Fatalf("frame %+v", f)
			}
			m, err := DecodeOpenDroneIDSystem(f.Payload, tc.msgID == MsgOpenDroneIDSystemUpdate)
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Fatalf("decoded %+v, want %+v", m, tc.want)
			}
			if got := opString(m.Operator(nil)); got != tc.wantOp {
				t.Fatalf("operator %s, want %s", got, tc.wantOp)
			}
			// Our encoder writes the very bytes pymavlink wrote.
			enc, err := EncodeV2(tc.seq, tc.sys, tc.comp, tc.msgID, tc.want.Payload())
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(enc) != hex.EncodeToString(b) {
				t.Fatalf("EncodeV2\n got %x\nwant %x", enc, b)
			}
		})
	}
	if _, err := DecodeOpenDroneIDSystem(make([]byte, odidSystemLen+1), false); err == nil {
		t.Error("a payload longer than the message was read")
	}
}

func opString(o *telemetry.Operator) string {
	if o == nil {
		return "-"
	}
	alt := "-"
	if o.AltM != nil {
		alt = fmt.Sprint(*o.AltM)
	}
	return fmt.Sprintf("%v %v %s %q", o.Lat, o.Lon, alt, o.Type)
}

// TestDecoderOperator: a System message goes with its vehicle's later
// positions — the vehicle being the frame's system, or its target_system
// when a GCS sent it — an update moves the pilot and keeps the type, one
// saying "unknown" forgets it, and after OperatorMaxAge without one the
// positions go without.
func TestDecoderOperator(t *testing.T) {
	g := golden(t)
	d, err := NewDecoder("ops")
	if err != nil {
		t.Fatal(err)
	}
	recv := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	gpi7 := func(ms uint32) []byte {
		b, err := EncodeV2(9, 7, 1, MsgGlobalPositionInt, GlobalPositionInt{TimeBootMS: ms, Lat: 514700000, Lon: -4610000, Alt: 85250, Hdg: HdgUnknown}.Payload())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cat := func(bs ...[]byte) (out []byte) {
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	steps := []struct {
		name  string
		after time.Duration
		dgram []byte
		want  []string // drone and opString per position
	}{
		{"System then position", 0, cat(g["v2 odid system sys 7 live"], g["v2 gpi sys 7"], g["v1 gpi sys 12"]),
			[]string{`ops-7 51.469 -0.452 95.5 "live"`, "ops-12 -"}},
		{"update keeps the type", time.Second, cat(g["v2 odid system update sys 7"], g["v2 gpi hdg unknown"]),
			[]string{`ops-7 51.4691 -0.4521 96 "live"`}},
		{"from a GCS, for its target", 2 * time.Second, cat(g["v2 odid system gcs for sys 9 fixed"], g["v2 gpi trailing zeros truncated"]),
			[]string{`ops-9 -33.869 151.209 40 "fixed"`}},
		{"kept in a later datagram", 3 * time.Second, gpi7(126556), []string{`ops-7 51.4691 -0.4521 96 "live"`}},
		{"too old: none", 32 * time.Second, gpi7(155556), []string{"ops-7 -"}},
		{"heard again", 33 * time.Second, cat(g["v2 odid system sys 7 live"], gpi7(156556)), []string{`ops-7 51.469 -0.452 95.5 "live"`}},
		{"unknown forgets it", 34 * time.Second, cat(g["v2 odid system sys 7 unknown"], gpi7(157556)), []string{"ops-7 -"}},
	}
	for _, s := range steps {
		ps, st, errs := d.Datagram(s.dgram, recv.Add(s.after), nil)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", s.name, errs)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.DroneID+" "+opString(p.Operator))
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: got %q, want %q (stats %+v)", s.name, got, s.want, st)
		}
	}
}
