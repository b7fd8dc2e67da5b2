package mavlink

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// golden reads testdata/feeds/mavlink/frames.tsv: frames pymavlink wrote
// (name TAB hex), see the README beside it.
func golden(t testing.TB) map[string][]byte {
	t.Helper()
	f, err := os.Open("../../testdata/feeds/mavlink/frames.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, h, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b
	}
	return out
}

func TestGoldenFrames(t *testing.T) {
	g := golden(t)
	// The values genmav gave pymavlink (README): time_boot_ms, lat, lon,
	// alt, relative_alt, vx, vy, vz, hdg.
	tests := []struct {
		name    string
		version int
		sys     uint8
		seq     uint8
		want    GlobalPositionInt
	}{
		{"v2 gpi sys 7", 2, 7, 3, GlobalPositionInt{123456, 514700000, -4610000, 85250, 40100, 100, -200, 5, 27000}},
		{"v2 gpi hdg unknown", 2, 7, 4, GlobalPositionInt{123556, 514700100, -4610100, 85300, 40150, 0, 0, 0, 65535}},
		{"v2 gpi trailing zeros truncated", 2, 9, 0, GlobalPositionInt{1000, -338688000, 1512093000, -1500, 0, 0, 0, 0, 0}},
		{"v1 gpi sys 12", 1, 12, 1, GlobalPositionInt{5000, 475000000, 85000000, 500000, 20000, 0, 0, 0, 9000}},
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
			if f.Version != tc.version || f.SysID != tc.sys || f.Seq != tc.seq || f.MsgID != MsgGlobalPositionInt || !f.Checked || f.FrameLen != len(b) {
				t.Fatalf("frame %+v", f)
			}
			m, err := DecodeGlobalPositionInt(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Fatalf("decoded %+v, want %+v", m, tc.want)
			}
			if tc.version == 2 {
				// Our encoder writes the very bytes pymavlink wrote.
				enc, err := EncodeV2(tc.seq, tc.sys, 1, MsgGlobalPositionInt, tc.want.Payload())
				if err != nil {
					t.Fatal(err)
				}
				if hex.EncodeToString(enc) != hex.EncodeToString(b) {
					t.Fatalf("EncodeV2\n got %x\nwant %x", enc, b)
				}
			}
		})
	}
}

func TestFramesSkipsNoiseAndBadFrames(t *testing.T) {
	g := golden(t)
	a, hb, c := g["v2 gpi sys 7"], g["v2 heartbeat"], g["v1 gpi sys 12"]
	bad := append([]byte(nil), a...)
	bad[12] ^= 0x01 // a payload bit flipped: CRC fails
	var dgram []byte
	dgram = append(dgram, 0x00, 0x42)
	dgram = append(dgram, bad...)
	dgram = append(dgram, hb...)
	dgram = append(dgram, c...)
	dgram = append(dgram, a[:10]...) // truncated tail
	frames, badBytes := Frames(dgram)
	var ids []uint32
	for _, f := range frames {
		ids = append(ids, f.MsgID)
	}
	// The corrupt frame may hide no good frame behind it; the heartbeat is
	// skipped by its length, unchecked; the v1 frame is found.
	if len(frames) != 2 || frames[0].MsgID != 0 || frames[0].Checked || frames[1].MsgID != MsgGlobalPositionInt || frames[1].SysID != 12 {
		t.Fatalf("frames %v (%+v)", ids, frames)
	}
	if badBytes != 2+len(bad)+10 {
		t.Fatalf("bad bytes %d, want %d", badBytes, 2+len(bad)+10)
	}
	if _, err := ParseFrame(bad); !errors.Is(err, ErrCRC) {
		t.Fatalf("corrupt frame: %v, want ErrCRC", err)
	}
	if _, err := ParseFrame(a[:len(a)-1]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short frame: %v, want ErrTruncated", err)
	}
}

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	type step struct {
		bootMS uint32
		recv   time.Duration // after t0
		wantTS time.Duration // after t0
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first message anchors, later ones keep the autopilot's spacing despite jitter", []step{
			{10_000, 0, 0},
			{10_200, 900 * time.Millisecond, 200 * time.Millisecond}, // arrived late: still at 0.2 s
			{10_400, 400 * time.Millisecond, 400 * time.Millisecond},
		}},
		{"reboot (time_boot_ms drops) re-anchors and seq keeps growing", []step{
			{600_000, 0, 0},
			{600_500, 500 * time.Millisecond, 500 * time.Millisecond},
			{1_000, 2 * time.Second, 2 * time.Second},
			{1_500, 2500 * time.Millisecond, 2500 * time.Millisecond},
		}},
		{"reboot resolving to the same millisecond: seq one above the last", []step{
			{600_000, 0, 0},
			{5, 0, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Clock
			var last int64
			for i, s := range tc.steps {
				ts, seq := c.Resolve(s.bootMS, t0.Add(s.recv))
				if want := t0.Add(s.wantTS); !ts.Equal(want) {
					t.Fatalf("step %d: ts %v, want %v", i, ts, want)
				}
				if seq < ts.UnixMilli() || seq <= last || (seq != ts.UnixMilli() && seq != last+1) {
					t.Fatalf("step %d: seq %d (ts %d ms, last %d)", i, seq, ts.UnixMilli(), last)
				}
				last = seq
			}
		})
	}
	t.Run("anchor from a delayed first datagram is taken again, ts never goes back", func(t *testing.T) {
		var c Clock
		// The first fix arrives 5 s late: boot is anchored 5 s too late.
		first, seq0 := c.Resolve(10_000, t0.Add(5*time.Second))
		// The next one, sent 1 s later, arrives on time at 1 s: resolved
		// from the old anchor it would be 5 s in the future, from the new
		// one it is 4 s before the first fix. The alerter orders a drone's
		// fixes by ts, so it keeps the first fix's time (and a higher seq)
		// rather than be dropped as stale.
		ts, seq1 := c.Resolve(11_000, t0.Add(time.Second))
		if !ts.Equal(first) || seq1 <= seq0 {
			t.Fatalf("ts %v seq %d after ts %v seq %d: want the same ts and a higher seq", ts, seq1, first, seq0)
		}
		// Once the corrected clock passes the first fix, it is used: the
		// re-anchor is kept.
		ts, seq2 := c.Resolve(17_000, t0.Add(7*time.Second))
		if want := t0.Add(7 * time.Second); !ts.Equal(want) || seq2 <= seq1 {
			t.Fatalf("ts %v seq %d, want %v above %d", ts, seq2, want, seq1)
		}
	})
}

func TestPosition(t *testing.T) {
	ts := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	p, err := Position("fleet-7", GlobalPositionInt{Lat: 514700000, Lon: -4610000, Alt: 85250, RelativeAlt: 40100, VX: 300, VY: 400, Hdg: 27000}, ts, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Lat != 51.47 || p.Lon != -0.461 || *p.AltM != 85.25 || p.AltRef != "AMSL" || p.AGLM != nil || *p.SpeedMPS != 5 || *p.HeadingDeg != 270 {
		t.Fatalf("%+v", p)
	}
	p, err = Position("fleet-7", GlobalPositionInt{Lat: 1, Lon: 1, Hdg: HdgUnknown}, ts, 1)
	if err != nil || p.HeadingDeg != nil {
		t.Fatalf("hdg unknown: %+v %v", p, err)
	}
	for _, m := range []GlobalPositionInt{{Lat: 0, Lon: 0}, {Lat: 900000001, Lon: 1}, {Lat: 1, Lon: -1800000001}} {
		if _, err := Position("x", m, ts, 1); err == nil {
			t.Fatalf("%+v accepted", m)
		}
	}
}

func FuzzFrames(f *testing.F) {
	for _, b := range golden(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, bad := Frames(b)
		n := bad
		for _, fr := range frames {
			n += fr.FrameLen
			if fr.MsgID == MsgGlobalPositionInt {
				if _, err := DecodeGlobalPositionInt(fr.Payload); err != nil && len(fr.Payload) <= gpiLen {
					t.Fatal(err)
				}
			}
		}
		if n != len(b) {
			t.Fatalf("frames and bad bytes cover %d of %d bytes", n, len(b))
		}
	})
}

func TestDecoder(t *testing.T) {
	g := golden(t)
	d, err := NewDecoder("ops")
	if err != nil {
		t.Fatal(err)
	}
	recv := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	var dgram []byte
	for _, n := range []string{"v2 heartbeat", "v2 gpi sys 7", "v1 gpi sys 12", "v2 gpi hdg unknown"} {
		dgram = append(dgram, g[n]...)
	}
	ps, st, errs := d.Datagram(dgram, recv, nil)
	if len(errs) > 0 || st.Frames != 4 || st.Positions != 3 || st.BadBytes != 0 || d.Vehicles() != 2 {
		t.Fatalf("stats %+v, errors %v, vehicles %d", st, errs, d.Vehicles())
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s %s %d", p.DroneID, p.TS.Format("15:04:05.000"), p.Seq))
	}
	// sys 7: anchored by 123456 ms, the second fix 100 ms later by its own clock.
	want := []string{
		fmt.Sprintf("ops-7 08:00:00.000 %d", recv.UnixMilli()),
		fmt.Sprintf("ops-12 08:00:00.000 %d", recv.UnixMilli()),
		fmt.Sprintf("ops-7 08:00:00.100 %d", recv.UnixMilli()+100),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"", "a b", strings.Repeat("x", MaxFleetLen+1)} {
		if _, err := NewDecoder(bad); err == nil {
			t.Errorf("fleet %q accepted", bad)
		}
	}
}

// TestDecoderDropsImpossibleValues: a GLOBAL_POSITION_INT whose altitude
// or speed no aircraft can have keeps its position, without them, and says
// so: the height is unknown, which alarms (telemetry's physical ranges, as
// for every feed).
func TestDecoderDropsImpossibleValues(t *testing.T) {
	recv := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		m          GlobalPositionInt
		wantAlt    bool
		wantDrop   string
		wantFields []string
	}{
		{"sane", GlobalPositionInt{TimeBootMS: 1000, Lat: 514700000, Lon: -4610000, Alt: 85250, VX: 300, VY: 400, Hdg: 27000}, true, "", nil},
		{"2,000 km up", GlobalPositionInt{TimeBootMS: 1000, Lat: 514700000, Lon: -4610000, Alt: 2_000_000_000, VX: 300}, false, "alt_m", []string{"alt_m"}},
		{"deep underground", GlobalPositionInt{TimeBootMS: 1000, Lat: 514700000, Lon: -4610000, Alt: -2_000_000}, false, "alt_m", []string{"alt_m"}},
		{"faster than sound", GlobalPositionInt{TimeBootMS: 1000, Lat: 514700000, Lon: -4610000, Alt: 85250, VX: 32000, VY: 32000}, true, "speed_mps", []string{"speed_mps"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecoder("ops")
			if err != nil {
				t.Fatal(err)
			}
			frame, err := EncodeV2(0, 7, 1, MsgGlobalPositionInt, tc.m.Payload())
			if err != nil {
				t.Fatal(err)
			}
			ps, st, errs := d.Datagram(frame, recv, nil)
			if len(errs) > 0 || len(ps) != 1 {
				t.Fatalf("positions %v, errors %v: the position was lost", ps, errs)
			}
			p := ps[0]
			var fields []string
			for _, w := range st.Dropped {
				fields = append(fields, w.Field)
			}
			if (p.AltM != nil) != tc.wantAlt || p.Dropped != tc.wantDrop || fmt.Sprint(fields) != fmt.Sprint(tc.wantFields) {
				t.Errorf("alt %v dropped %q warnings %v; want alt %v, dropped %q, %v", p.AltM, p.Dropped, st.Dropped, tc.wantAlt, tc.wantDrop, tc.wantFields)
			}
		})
	}
}

func FuzzDatagram(f *testing.F) {
	var all []byte
	for _, b := range golden(f) {
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	recv := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, _ := NewDecoder("f")
		ps, st, _ := d.Datagram(b, recv, nil)
		ps, _, _ = d.Datagram(b, recv.Add(time.Second), ps)
		if len(ps) < st.Positions {
			t.Fatal("positions lost")
		}
		last := map[string]int64{}
		for _, p := range ps {
			if s, ok := last[p.DroneID]; ok && p.Seq <= s {
				t.Fatalf("%s: seq %d after %d", p.DroneID, p.Seq, s)
			}
			last[p.DroneID] = p.Seq
			if _, err := telemetry.Decode(p.AppendJSON(nil)); err != nil {
				t.Fatalf("%s: %v", p.AppendJSON(nil), err)
			}
		}
	})
}
