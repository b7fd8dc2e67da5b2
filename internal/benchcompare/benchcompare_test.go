package benchcompare

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

func TestParseStat(t *testing.T) {
	// Fields after the name: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime ...
	tail := " S 1 17054 17054 0 -1 4194560 264381 0 36 0 7140 310 0 0 20 0 87 0 3561 5410361344 196912\n"
	for _, tc := range []struct {
		name, line string
		want       uint64
		bad        bool
	}{
		{"plain", "17054 (java)" + tail, 7450, false},
		{"name with spaces and parens", "42 (tile38 (srv) x)" + tail, 7450, false},
		{"no name", "42 java S 1 2 3", 0, true},
		{"too short", "42 (x) S 1 2 3 4 5 6 7 8 9 10 11", 0, true},
		{"not a number", "42 (x) S 1 2 3 4 5 6 7 8 9 10 u 7", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.line))
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("ParseStat = %d, %v; want %d, error %v", got, err, tc.want, tc.bad)
			}
		})
	}
}

func TestProcCPUOfThisProcess(t *testing.T) {
	a, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := b - a; d < 20*time.Millisecond || d > 2*time.Second {
		t.Errorf("100 ms of spinning measured as %v", d)
	}
	if _, err := ProcCPU(0); err == nil {
		t.Error("pid 0 read as a process")
	}
}

func TestTile38Event(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
		want Event
		ok   bool
		bad  bool
	}{
		{"enter is raised", `{"command":"set","group":"g1","detect":"enter","hook":"r1:Z07","key":"r1:fleet","time":"2026-12-03T18:00:00Z","id":"UAV-0001","object":{"type":"Point","coordinates":[-0.4,51.4]},"fields":{"seq":1234}}`,
			Event{Type: "raised", DroneID: "UAV-0001", ZoneID: "Z07", Seq: 1234}, true, false},
		{"exit is cleared", `{"command":"set","detect":"exit","hook":"r1:Z12","id":"UAV-0002","fields":{"seq":7}}`,
			Event{Type: "cleared", DroneID: "UAV-0002", ZoneID: "Z12", Seq: 7}, true, false},
		{"inside is not an event", `{"command":"set","detect":"inside","hook":"r1:Z12","id":"UAV-0002","fields":{"seq":7}}`, Event{}, false, false},
		{"cross is not an event", `{"command":"set","detect":"cross","hook":"r1:Z12","id":"UAV-0002","fields":{"seq":7}}`, Event{}, false, false},
		{"another round's channel", `{"detect":"enter","hook":"r2:Z12","id":"UAV-0002","fields":{"seq":7}}`, Event{}, false, true},
		{"no seq", `{"detect":"enter","hook":"r1:Z12","id":"UAV-0002"}`, Event{}, false, true},
		{"not JSON", `enter`, Event{}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := Tile38Event([]byte(tc.msg), "r1:")
			if got != tc.want || ok != tc.ok || (err != nil) != tc.bad {
				t.Fatalf("got %+v, %v, %v; want %+v, %v, error %v", got, ok, err, tc.want, tc.ok, tc.bad)
			}
		})
	}
}

func TestNoflyEvent(t *testing.T) {
	got, ok, err := NoflyEvent([]byte(`{"event_id":"x","alarm_id":"a","type":"cleared","drone_id":"UAV-0003","zone_id":"Z01","seq":99,"reason":"left"}`))
	if want := (Event{Type: "cleared", DroneID: "UAV-0003", ZoneID: "Z01", Seq: 99}); err != nil || !ok || got != want {
		t.Fatalf("got %+v, %v, %v; want %+v", got, ok, err, want)
	}
	// Signal loss has no counterpart in Tile38: read, not compared.
	for _, typ := range []string{"signal_lost", "signal_regained"} {
		if _, ok, err := NoflyEvent([]byte(`{"type":"` + typ + `","drone_id":"UAV-0003","zone_id":"Z01","seq":7}`)); err != nil || ok {
			t.Errorf("%s: ok %v, err %v; want left out without error", typ, ok, err)
		}
	}
	for _, typ := range []string{"moved", "approaching"} {
		if _, _, err := NoflyEvent([]byte(`{"type":"` + typ + `"}`)); err == nil {
			t.Errorf("an event of type %q was accepted", typ)
		}
	}
}

func TestCompare(t *testing.T) {
	r := func(d string, seq int64) Event { return Event{Type: "raised", DroneID: d, ZoneID: "Z01", Seq: seq} }
	c := func(d string, seq int64) Event { return Event{Type: "cleared", DroneID: d, ZoneID: "Z01", Seq: seq} }
	ref := []Event{r("a", 1), c("a", 5), r("b", 2), r("b", 2)}
	for _, tc := range []struct {
		name                                string
		got                                 []Event
		missing, extra, xr, xc, dup, events int
	}{
		{"exact, any order", []Event{r("b", 2), c("a", 5), r("a", 1)}, 0, 0, 0, 0, 0, 3},
		{"missing", []Event{r("a", 1), r("b", 2)}, 1, 0, 0, 0, 0, 2},
		{"duplicate", []Event{r("a", 1), r("a", 1), c("a", 5), r("b", 2)}, 0, 0, 0, 0, 1, 4},
		// A stale re-send moves Tile38's object back: a spurious pair.
		{"spurious pair", []Event{r("a", 1), c("a", 3), r("a", 4), c("a", 5), r("b", 2)}, 0, 2, 1, 1, 0, 5},
		{"nothing", nil, 3, 0, 0, 0, 0, 0},
		{"twice where the reference has it twice", []Event{r("a", 1), c("a", 5), r("b", 2), r("b", 2)}, 0, 0, 0, 0, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Compare(tc.got, ref)
			if d.Missing != tc.missing || d.Extra != tc.extra || d.ExtraRaised != tc.xr || d.ExtraCleared != tc.xc ||
				d.Duplicate != tc.dup || d.Events != tc.events || d.Reference != 4 {
				t.Fatalf("%+v", d)
			}
			if d.Exact() != (tc.missing+tc.extra+tc.dup == 0) {
				t.Errorf("Exact() = %v", d.Exact())
			}
		})
	}
}

func TestRESP(t *testing.T) {
	cmd := appendCommand(nil, "SET", "k", "UAV 1", "")
	if want := "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nUAV 1\r\n$0\r\n\r\n"; string(cmd) != want {
		t.Fatalf("appendCommand = %q, want %q", cmd, want)
	}
	in := "+OK\r\n-ERR bad\r\n:42\r\n$5\r\nhe\r\nl\r\n$-1\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\n{}\r\n"
	r := bufio.NewReader(strings.NewReader(in))
	want := []any{"OK", respError("ERR bad"), int64(42), "he\r\nl", nil, []any{"message", "ch", "{}"}}
	for i, w := range want {
		got, err := readReply(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !equalReply(got, w) {
			t.Fatalf("reply %d = %#v, want %#v", i, got, w)
		}
	}
	if _, err := readReply(bufio.NewReader(strings.NewReader("?x\r\n"))); err == nil {
		t.Error("an unknown reply type was read")
	}
}

func equalReply(a, b any) bool {
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok != bok {
		return false
	}
	if !aok {
		return a == b
	}
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if !equalReply(as[i], bs[i]) {
			return false
		}
	}
	return true
}

// The zones load in the alerter's loader, strict, as 48 zones of the three
// kinds, and every one becomes a Tile38 channel command.
func TestZones(t *testing.T) {
	zs := Zones(1)
	b, err := ZonesGeoJSON(zs)
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := geofence.Loader{Strict: true}.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Zones) != 48 || len(set.Report.Warnings) != 0 {
		t.Fatalf("%d zones, warnings %v", len(set.Zones), set.Report.Warnings)
	}
	kinds := map[string]int{}
	for _, z := range zs {
		args, err := z.SetChan("r:"+z.ID, "r:fleet")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case z.RadiusM > 0:
			if args[len(args)-4] != "CIRCLE" {
				t.Errorf("circle %s: %v", z.ID, args)
			}
			kinds["circle"]++
		case z.Multi:
			holes := 0
			for _, p := range z.Polygons {
				holes += len(p) - 1
			}
			if holes == 0 {
				t.Errorf("multipolygon %s has no hole", z.ID)
			}
			kinds["multi"]++
		default:
			kinds["polygon"]++
		}
		if z.RadiusM == 0 && args[len(args)-2] != "OBJECT" {
			t.Errorf("zone %s: %v", z.ID, args[:len(args)-1])
		}
	}
	if kinds["circle"] != 16 || kinds["multi"] != 16 || kinds["polygon"] != 16 {
		t.Errorf("kinds %v", kinds)
	}
	if b2, _ := ZonesGeoJSON(Zones(1)); !bytes.Equal(b, b2) {
		t.Error("one seed gave two zone sets")
	}
}

// Each client owns its drones, and every drone's records keep the stream's
// order, in both encodings.
func TestStreamKeepsEachDronesOrder(t *testing.T) {
	cfg := scenario.DefaultConfig()
	cfg.Drones, cfg.Positions = 20, 60
	sc := scenario.Generate(cfg)
	st := newStream(sc, 3, 50)
	want := map[string][]string{}
	for _, p := range sc.Records {
		want[p.DroneID] = append(want[p.DroneID], p.DroneID+":"+itoa(int(p.Seq)))
	}
	got := map[string][]string{}
	owner := map[string]int{}
	total := 0
	for c, bodies := range st.bodies {
		for i, body := range bodies {
			lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
			if len(lines) != st.counts[c][i] || len(lines) > 50 {
				t.Fatalf("client %d batch %d: %d lines, count %d", c, i, len(lines), st.counts[c][i])
			}
			total += len(lines)
			for _, l := range lines {
				e, err := telemetry.Decode([]byte(l))
				if err != nil {
					t.Fatal(err)
				}
				if o, seen := owner[e.DroneID]; seen && o != c {
					t.Fatalf("drone %s sent by clients %d and %d", e.DroneID, o, c)
				}
				owner[e.DroneID] = c
				got[e.DroneID] = append(got[e.DroneID], e.DroneID+":"+itoa(int(e.Seq)))
			}
		}
	}
	if total != len(sc.Records) || st.records != total {
		t.Fatalf("%d records sent of %d", total, len(sc.Records))
	}
	for d, w := range want {
		if strings.Join(got[d], ",") != strings.Join(w, ",") {
			t.Fatalf("drone %s: order %v, want %v", d, got[d][:5], w[:5])
		}
	}
	sets := st.tile38Sets("r:fleet")
	n := 0
	for c := range sets {
		for i, b := range sets[c] {
			r := bufio.NewReader(bytes.NewReader(b))
			for range st.counts[c][i] {
				v, err := readReply(r) // a command is an array of bulk strings, as a reply is
				if err != nil {
					t.Fatal(err)
				}
				a := v.([]any)
				if a[0] != "SET" || a[1] != "r:fleet" || a[3] != "FIELD" || a[4] != "seq" || a[6] != "POINT" {
					t.Fatalf("command %v", a)
				}
				n++
			}
			if r.Buffered() != 0 {
				t.Fatalf("client %d batch %d: bytes after its %d commands", c, i, st.counts[c][i])
			}
		}
	}
	if n != total {
		t.Fatalf("%d SETs for %d records", n, total)
	}
}
