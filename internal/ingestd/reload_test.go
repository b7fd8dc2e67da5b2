package ingestd

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/ingest/feedkey"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestFeedKeysReloadSIGHUP: a real `ingest serve` with a key file. After
// the file is rewritten without feed A and with feed B and the process
// gets SIGHUP, A's key gets 401 and B's 202; a file that does not parse
// keeps the feeds in use and logs its file and line; the metrics count
// both. The log never holds a key or a key's hash.
func TestFeedKeysReloadSIGHUP(t *testing.T) {
	brokers := testenv.Kafka(t)
	bin := filepath.Join(t.TempDir(), "ingest")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/ingest").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	keys := map[string]string{}
	line := func(name string) string {
		k, l := feedKey(t, "--name", name)
		keys[name] = k
		return l + "\n"
	}
	write := func(s string) {
		tmp := path + ".new" // saved as an editor does: renamed over
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	lineA := line("feed-a")
	write(lineA)
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.FeedKeys, cfg.Addr = brokers, testenv.UniqueName("ingest-reload"), 1, path, addr
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{cfg.Topic}})
	})
	vars, flags := cfg.Environ()
	var logs syncBuffer
	cmd := exec.Command(bin, append([]string{"serve"}, flags...)...)
	cmd.Env = append(os.Environ(), vars...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	url := "http://" + addr
	seq := 0
	post := func(name string) int {
		seq++
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/telemetry",
			bytes.NewReader(ndjsonBody([]telemetry.Position{position("RELOAD-1", seq)})))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+keys[name])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	metric := func(name string) float64 {
		res, err := http.Get(url + "/metrics")
		if err != nil {
			return -1
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == name {
				v, _ := strconv.ParseFloat(f[1], 64)
				return v
			}
		}
		return -1
	}
	testenv.CheckFor(t, 60*time.Second, func() error {
		if c := post("feed-a"); c != 202 {
			return fmt.Errorf("feed-a: %d", c)
		}
		return nil
	})

	write(line("feed-b"))
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 5*time.Second, func() error {
		if a, b := post("feed-a"), post("feed-b"); a != 401 || b != 202 {
			return fmt.Errorf("after SIGHUP: feed-a %d (want 401), feed-b %d (want 202)", a, b)
		}
		return nil
	})
	t.Logf("SIGHUP to feed-a refused and feed-b accepted: %v", time.Since(sent).Round(time.Millisecond))
	if !strings.Contains(logs.String(), `"msg":"feed keys: reloaded"`) || !strings.Contains(logs.String(), `"added":["feed-b"],"removed":["feed-a"]`) {
		t.Errorf("the log does not name the feeds added and removed:\n%s", logs.String())
	}
	for m, want := range map[string]float64{`nofly_ingest_feed_keys_reloads_total{result="ok"}`: 1, `nofly_ingest_feed_keys`: 1, `nofly_ingest_feed_keys_last_reload_successful`: 1} {
		if v := metric(m); v != want {
			t.Errorf("%s = %v, want %v", m, v, want)
		}
	}

	// A key pasted where its hash belongs, on line 2: the feeds stay.
	pasted, _ := feedkey.NewKey()
	keys["pasted"] = pasted
	write(line("feed-c") + "feed-d " + pasted + "\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 5*time.Second, func() error {
		if v := metric(`nofly_ingest_feed_keys_reloads_total{result="error"}`); v != 1 {
			return fmt.Errorf("reload errors %v", v)
		}
		return nil
	})
	if v := metric(`nofly_ingest_feed_keys_last_reload_successful`); v != 0 {
		t.Errorf("nofly_ingest_feed_keys_last_reload_successful = %v after a failed reload, want 0", v)
	}
	if b, c := post("feed-b"), post("feed-c"); b != 202 || c != 401 {
		t.Errorf("after a bad file: feed-b %d (want 202), feed-c %d (want 401)", b, c)
	}
	if !strings.Contains(logs.String(), "feed keys: reload failed") || !strings.Contains(logs.String(), path+`:2: feed \"feed-d\"`) {
		t.Errorf("the log does not name the bad file's line:\n%s", logs.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("ingest did not stop on SIGTERM")
	}
	out := logs.String()
	for name, k := range keys {
		h := feedkey.Hash(k)
		for _, s := range []string{k, k[len(feedkey.KeyPrefix):], hex.EncodeToString(h[:])} {
			if strings.Contains(out, s) {
				t.Errorf("the log holds %s's key or hash", name)
			}
		}
	}
}
