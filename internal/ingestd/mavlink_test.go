package ingestd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/feeds/mavlink"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// freeUDPAddr returns a loopback UDP address nobody listens on.
func freeUDPAddr(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := c.LocalAddr().String()
	c.Close()
	return a
}

// startMavlink runs `ingest mavlink` in-process until the returned stop
// (SIGTERM's path: the context ends) and returns its error.
func startMavlink(t testing.TB, args ...string) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stderr := &syncWriter{w: &bytes.Buffer{}}
	go func() { done <- mavlinkCmd(ctx, args, func(string) string { return "" }, stderr) }()
	var err error
	var stopped bool
	stop = func() error {
		if stopped {
			return err
		}
		stopped = true
		cancel()
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			err = fmt.Errorf("ingest mavlink did not stop within 60s")
		}
		if err != nil {
			t.Logf("ingest mavlink stderr:\n%s", stderr.String())
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// sendGPI sends one GLOBAL_POSITION_INT frame to addr.
func sendGPI(t testing.TB, conn net.Conn, seq, sys uint8, m mavlink.GlobalPositionInt) {
	t.Helper()
	b, err := mavlink.EncodeV2(seq, sys, 1, mavlink.MsgGlobalPositionInt, m.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestMavlinkRelay: GLOBAL_POSITION_INT of two vehicles over UDP reach the
// topic as positions, a reboot keeps seq growing, and positions still
// lingering in a batch at SIGTERM are produced before the command returns.
func TestMavlinkRelay(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 3)
	addr := freeUDPAddr(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	stop := startMavlink(t, "--brokers", strings.Join(brokers, ","), "--topic", topic, "--partitions", "3",
		"--listen", "udp://"+addr, "--fleet", "ops", "--http", httpAddr, "--linger", "30s", "--log-level", "warn")
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Bound (a second bind fails) means datagrams wait in the socket's
	// buffer until the relay reads them.
	testenv.CheckFor(t, 30*time.Second, func() error {
		c, err := net.ListenPacket("udp", addr)
		if err == nil {
			c.Close()
			return fmt.Errorf("%s not bound yet", addr)
		}
		return nil
	})
	// Vehicle 7's pilot, heard before its positions (OPEN_DRONE_ID_SYSTEM).
	sys, err := mavlink.EncodeV2(0, 7, 1, mavlink.MsgOpenDroneIDSystem, mavlink.OpenDroneIDSystem{
		OperatorLat: 514690000, OperatorLon: -4520000, OperatorAltitudeGeo: 95, OperatorLocationType: 1}.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(sys); err != nil {
		t.Fatal(err)
	}
	boots := []uint32{10_000, 10_200, 10_400, 1_000, 1_200} // the third to fourth: a reboot
	for i, b := range boots {
		sendGPI(t, conn, uint8(i), 7, mavlink.GlobalPositionInt{TimeBootMS: b, Lat: 514700000 + int32(i), Lon: -4610000, Alt: 85250, RelativeAlt: 40100, Hdg: 27000})
		sendGPI(t, conn, uint8(i), 12, mavlink.GlobalPositionInt{TimeBootMS: b, Lat: 475000000, Lon: 85000000 + int32(i), Alt: 500000, Hdg: mavlink.HdgUnknown})
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // read, but lingering in the batch (--linger 30s)
	res, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(metrics), "\nnofly_mavlink_system_messages_total 1\n") {
		t.Errorf("metrics do not count the System message:\n%s", metrics)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	msgs := readTopic(t, brokers, topic, 3)
	byDrone := map[string][]telemetry.Position{}
	for _, m := range msgs {
		p, err := telemetry.Decode(m.Value)
		if err != nil {
			t.Fatalf("record %s: %v", m.Value, err)
		}
		if string(m.Key) != p.DroneID {
			t.Fatalf("key %q, drone %q", m.Key, p.DroneID)
		}
		byDrone[p.DroneID] = append(byDrone[p.DroneID], p)
	}
	for _, id := range []string{"ops-7", "ops-12"} {
		ps := byDrone[id]
		if len(ps) != len(boots) {
			t.Fatalf("%s: %d records, want %d (all sent before SIGTERM)", id, len(ps), len(boots))
		}
		for i, p := range ps {
			if i > 0 && p.Seq <= ps[i-1].Seq {
				t.Fatalf("%s: seq %d after %d (record %d)", id, p.Seq, ps[i-1].Seq, i)
			}
			if p.AltRef != telemetry.RefAMSL || p.AGLM != nil {
				t.Fatalf("%s: %s", id, p.AppendJSON(nil))
			}
		}
		if d := ps[1].TS.Sub(ps[0].TS); d != 200*time.Millisecond {
			t.Errorf("%s: fixes 200 ms apart by the autopilot's clock resolved %v apart", id, d)
		}
	}
	p := byDrone["ops-7"][0]
	if p.Lat != 51.47 || *p.AltM != 85.25 || *p.HeadingDeg != 270 {
		t.Fatalf("ops-7: %s", p.AppendJSON(nil))
	}
	if q := byDrone["ops-12"][0]; q.HeadingDeg != nil || *q.AltM != 500 || q.Operator != nil {
		t.Fatalf("ops-12: %s", q.AppendJSON(nil))
	}
	for _, p := range byDrone["ops-7"] {
		if o := p.Operator; o == nil || o.Lat != 51.469 || o.Lon != -0.452 || o.Type != telemetry.OperatorLive {
			t.Fatalf("ops-7 without its pilot: %s", p.AppendJSON(nil))
		}
	}
}

func TestMavlinkConfigErrors(t *testing.T) {
	tests := []struct{ args, want string }{
		{"--listen udp://127.0.0.1:14550", "--fleet"},
		{"--fleet a --listen tcp://127.0.0.1:1", "--listen"},
		{"--fleet a --listen udp://127.0.0.1", "--listen"},
		{"--fleet a/b", "--fleet"},
		{"--fleet a --batch 0", "--batch"},
		{"--fleet a --listen udp://0.0.0.0:14550", "not a loopback address"},
		{"--fleet a --listen udp://192.0.2.1:14550", "--insecure-open-intake"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"mavlink"}, strings.Fields(tc.args)...), func(string) string { return "" }, &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %s", code, errb.String(), tc.want)
			}
		})
	}
}

// syncWriter serialises writes (the command logs from several goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
