package ingestd

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/ingest/feedkey"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// syncBuffer is a log sink shared by the service's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// feedKey runs "ingest feed-key" and returns the key and the line it
// printed.
func feedKey(t *testing.T, args ...string) (key, line string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append([]string{"feed-key"}, args...), func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("feed-key %v: exit %d: %s", args, code, errOut.String())
	}
	var plain []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, "#") {
			plain = append(plain, l)
		}
	}
	if len(plain) != 2 {
		t.Fatalf("feed-key printed %q, want a key and a line", out.String())
	}
	return plain[0], plain[1]
}

func TestFeedKeyCmd(t *testing.T) {
	tests := []struct {
		args []string
		want feedkey.Feed // Hash not compared
	}{
		{[]string{"--name", "lab"}, feedkey.Feed{Name: "lab"}},
		{[]string{"--name", "ogn", "--prefixes", "OGN-,FLR-", "--rate", "200/s"},
			feedkey.Feed{Name: "ogn", Prefixes: []string{"OGN-", "FLR-"}, Rate: 200, Per: time.Second, Burst: 200}},
		{[]string{"--name", "f", "--rate", "60/m", "--burst", "600"},
			feedkey.Feed{Name: "f", Rate: 60, Per: time.Minute, Burst: 600}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			key, line := feedKey(t, tt.args...)
			if strings.Contains(line, key) {
				t.Fatalf("the line %q holds the key", line)
			}
			s, err := feedkey.Parse("printed", strings.NewReader(line))
			if err != nil {
				t.Fatal(err)
			}
			f := s.Lookup(key)
			if f == nil {
				t.Fatalf("the printed key is not the key of the printed line %q", line)
			}
			if f.Name != tt.want.Name || strings.Join(f.Prefixes, ",") != strings.Join(tt.want.Prefixes, ",") ||
				f.Rate != tt.want.Rate || f.Per != tt.want.Per || f.Burst != tt.want.Burst {
				t.Errorf("line %q is %+v, want %+v", line, *f, tt.want)
			}
		})
	}
	k1, _ := feedKey(t, "--name", "a")
	k2, _ := feedKey(t, "--name", "a")
	if k1 == k2 {
		t.Error("two runs made the same key")
	}
}

func TestFeedKeyAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("# mine\nold sha256:"+strings.Repeat("ab", 32)), 0o600); err != nil { // no final newline
		t.Fatal(err)
	}
	var keys []string
	for _, name := range []string{"a", "b"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"feed-key", "--name", name, "--append", path}, os.Getenv, &out, &errOut); code != 0 {
			t.Fatalf("append %s: exit %d: %s", name, code, errOut.String())
		}
		keys = append(keys, strings.TrimSpace(out.String()))
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"feed-key", "--name", "a", "--append", path}, os.Getenv, &out, &errOut)
	if want := path + `:5: feed "a" already defined on line 3`; code != 2 || !strings.Contains(errOut.String(), want) || out.Len() != 0 {
		t.Fatalf("a second feed a: exit %d, stdout %q, stderr %q; want 2, nothing, and %q", code, out.String(), errOut.String(), want)
	}
	s, err := feedkey.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Feeds) != 3 || s.Lookup(keys[0]).Name != "a" || s.Lookup(keys[1]).Name != "b" {
		t.Fatalf("file holds %+v", s.Feeds)
	}
	b, _ := os.ReadFile(path)
	for _, k := range keys {
		if bytes.Contains(b, []byte(k)) {
			t.Fatal("the key file holds a key")
		}
	}
}

func TestFeedKeyExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad-keys")
	if err := os.WriteFile(bad, []byte("ok sha256:"+strings.Repeat("00", 32)+"\n\nno-hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"feed-key"}, "--name is required"},
		{[]string{"feed-key", "--name", "a b"}, `--name: feed name "a b"`},
		{[]string{"feed-key", "--name", "a", "--prefixes", "UAV-,"}, `--prefixes: "" is not a drone-id prefix`},
		{[]string{"feed-key", "--name", "a", "--rate", "5"}, `--rate: "5" is not N/s`},
		{[]string{"feed-key", "--name", "a", "--burst", "5"}, "--burst needs --rate"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--feed-keys", bad}, bad + `:3: feed "no-hash": the key hash`},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--feed-keys", filepath.Join(dir, "missing")}, "FeedKeys (--feed-keys, NOFLY_INGEST_FEED_KEYS)"},
		{[]string{"serve", "--feed-keys", bad, "--insecure-open-intake"}, "InsecureOpenIntake (--insecure-open-intake, NOFLY_INGEST_INSECURE_OPEN_INTAKE): cannot be set with --feed-keys"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tt.args, func(string) string { return "" }, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut.String(), tt.wantErr)
			}
		})
	}
}

// TestIntakeModeLogged: at start the service says who may write.
func TestIntakeModeLogged(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	_, line1 := feedKey(t, "--name", "one")
	_, line2 := feedKey(t, "--name", "two")
	if err := os.WriteFile(keys, []byte(line1+"\n"+line2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		feedKeys  string
		open      bool
		wantLevel string
		wantMsg   string
	}{
		{"keys", keys, false, "INFO", "intake: keys from " + keys + ": 2 feeds"},
		{"loopback", "", false, "INFO", "intake: loopback only"},
		{"open", "", true, "WARN", "intake: OPEN, insecure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Addr, cfg.FeedKeys, cfg.InsecureOpenIntake = "127.0.0.1:0", tt.feedKeys, tt.open
			var logs syncBuffer
			svc, err := newService(cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer svc.ln.Close()
			svc.logIntake()
			if want := `"level":"` + tt.wantLevel + `","msg":"` + tt.wantMsg; !strings.Contains(logs.String(), want) {
				t.Fatalf("log %s lacks %q", logs.String(), want)
			}
		})
	}
}

// TestServeFeedKeysRealKafka: through the service against the real broker,
// a keyed feed's records land in the topic (plain and gzip), and requests
// without a key, with a wrong one, or naming a drone outside the feed's
// prefixes land nothing. No key is ever in the service's log.
func TestServeFeedKeysRealKafka(t *testing.T) {
	brokers := testenv.Kafka(t)
	key, line := feedKey(t, "--name", "keyed-fleet", "--prefixes", "KEYED-")
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const partitions = 3
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.FeedKeys, cfg.Addr = brokers, testenv.UniqueName("ingest-keys"), partitions, keys, "127.0.0.1:0"
	cfg.LogLevel = "debug"
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{cfg.Topic}})
	})
	var logs syncBuffer
	svc, err := newService(cfg, slog.New(slog.NewJSONHandler(io.MultiWriter(&logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	url := "http://" + svc.Addr()
	testenv.CheckFor(t, 60*time.Second, func() error {
		res, err := http.Get(url + "/readyz")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", res.StatusCode)
		}
		return nil
	})

	batch := func(prefix string, from, n int) []byte {
		ps := make([]telemetry.Position, n)
		for i := range ps {
			ps[i] = position(fmt.Sprintf("%s%d", prefix, i%4), from+i)
		}
		return ndjsonBody(ps)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(batch("KEYED-", 100, 30))
	_ = zw.Close()
	wrong, _ := feedkey.NewKey()
	steps := []struct {
		name     string
		auth     string
		gzip     bool
		body     []byte
		wantCode int
		lands    int
	}{
		{"no key", "", false, batch("KEYED-", 0, 10), 401, 0},
		{"wrong key", "Bearer " + wrong, false, batch("KEYED-", 0, 10), 401, 0},
		{"outside the prefixes", "Bearer " + key, false, append(batch("KEYED-", 0, 5), batch("OTHER-", 5, 1)...), 403, 0},
		{"keyed", "Bearer " + key, false, batch("KEYED-", 0, 20), 202, 20},
		{"keyed gzip", "Bearer " + key, true, zipped.Bytes(), 202, 30},
	}
	want := 0
	for _, st := range steps {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/telemetry", bytes.NewReader(st.body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		if st.auth != "" {
			req.Header.Set("Authorization", st.auth)
		}
		if st.gzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != st.wantCode {
			t.Fatalf("%s: %d %s, want %d", st.name, res.StatusCode, b, st.wantCode)
		}
		want += st.lands
	}
	msgs := readTopic(t, brokers, cfg.Topic, partitions)
	if len(msgs) != want {
		t.Fatalf("topic holds %d records, want the %d of the keyed feed", len(msgs), want)
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		p, err := telemetry.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.DroneID, "KEYED-") || seen[fmt.Sprint(p.DroneID, p.Seq)] {
			t.Fatalf("unexpected or repeated record %s", m.Value)
		}
		seen[fmt.Sprint(p.DroneID, p.Seq)] = true
	}
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, w := range []string{
		`nofly_ingest_feed_records_accepted_total{feed="keyed-fleet"} 50`,
		`nofly_ingest_auth_failures_total{reason="no_key"} 1`,
		`nofly_ingest_auth_failures_total{reason="bad_key"} 1`,
		`nofly_ingest_auth_failures_total{reason="prefix"} 1`,
	} {
		if !bytes.Contains(metrics, []byte(w)) {
			t.Errorf("metrics lack %q", w)
		}
	}
	out := logs.String()
	for _, k := range []string{key, wrong} {
		if strings.Contains(out, k) {
			t.Error("a key is in the log")
		}
	}
	if !strings.Contains(out, `"feed":"keyed-fleet"`) || !strings.Contains(out, "intake: keys from "+keys+": 1 feeds") {
		t.Errorf("the log names neither the feed nor the mode:\n%s", out)
	}
}

// TestComposeSampleKey: the sample key file docker-compose.yml mounts
// parses, the key docs/docker.md and its comment publish is the key of its
// feed, and the compose file passes it to ingest.
func TestComposeSampleKey(t *testing.T) {
	const sampleKey = "nofly_SAMPLE-not-for-production-do-not-use-0000000"
	s, err := feedkey.Load("../../compose/feed-keys.sample")
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Lookup(sampleKey); f == nil || f.Name != "sample" {
		t.Fatalf("the published sample key is not the key of feed sample: %+v", s.Feeds)
	}
	for file, wants := range map[string][]string{
		"../../docker-compose.yml":       {"./compose/feed-keys.sample:/etc/nofly/feed-keys:ro", "NOFLY_INGEST_FEED_KEYS: /etc/nofly/feed-keys"},
		"../../compose/feed-keys.sample": {"NOT FOR PRODUCTION", sampleKey},
		"../../docs/docker.md":           {sampleKey},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !bytes.Contains(b, []byte(w)) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
}
