package ingestd

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/feeds/mavlink"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestMavlinkSurvivesSIGHUP: a real `ingest mavlink` with a position
// lingering in its batch gets SIGHUP (what reloads `ingest serve`'s feed
// keys, and what `pkill -HUP ingest` sends every ingest process): it logs
// that it has nothing to reload and goes on; at SIGTERM the position is
// produced. Without the handler the signal's default ends the process.
func TestMavlinkSurvivesSIGHUP(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	bin := filepath.Join(t.TempDir(), "ingest")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/ingest").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := freeUDPAddr(t)
	var logs syncBuffer
	cmd := exec.Command(bin, "mavlink", "--brokers", strings.Join(brokers, ","), "--topic", topic, "--partitions", "1",
		"--listen", "udp://"+addr, "--fleet", "hup", "--http", "", "--linger", "30s")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testenv.CheckFor(t, 60*time.Second, func() error {
		if !strings.Contains(logs.String(), "mavlink listening") {
			return fmt.Errorf("not listening yet; log:\n%s", logs.String())
		}
		return nil
	})
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sendGPI(t, conn, 0, 3, mavlink.GlobalPositionInt{TimeBootMS: 5_000, Lat: 514700000, Lon: -4610000, Alt: 85250, RelativeAlt: 40100, Hdg: 27000})
	time.Sleep(300 * time.Millisecond) // read, lingering in the batch
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 10*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("ingest mavlink ended at SIGHUP (%v); log:\n%s", err, logs.String())
		default:
		}
		if !strings.Contains(logs.String(), "nothing to reload") {
			return fmt.Errorf("SIGHUP not logged; log:\n%s", logs.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit at SIGTERM: %v; log:\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit 60 s after SIGTERM; log:\n%s", logs.String())
	}
	if msgs := readTopic(t, brokers, topic, 1); len(msgs) != 1 || !strings.Contains(string(msgs[0].Value), `"hup-3"`) {
		t.Fatalf("topic holds %d positions, want hup-3's one: %v", len(msgs), msgs)
	}
}
