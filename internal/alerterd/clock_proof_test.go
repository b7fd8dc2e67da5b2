package alerterd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ref "github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/testenv"
)

var (
	ingestBuildOnce sync.Once
	ingestBinPath   string
	ingestBuildErr  error
)

// ingestBinary builds cmd/ingest once per test binary, beside the alerter
// (TestMain removes the directory).
func ingestBinary(t testing.TB) string {
	t.Helper()
	alerter := alerterBinary(t)
	ingestBuildOnce.Do(func() {
		ingestBinPath = filepath.Join(filepath.Dir(alerter), "ingest")
		if out, err := exec.Command("go", "build", "-o", ingestBinPath, "../../cmd/ingest").CombinedOutput(); err != nil {
			ingestBuildErr = fmt.Errorf("go build cmd/ingest: %v\n%s", err, out)
		}
	})
	if ingestBuildErr != nil {
		t.Fatal(ingestBuildErr)
	}
	return ingestBinPath
}

// ingestProc is an `ingest serve` process on the pipeline's topic.
type ingestProc struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func (p *pipeline) startIngest(name string, tick time.Duration) *ingestProc {
	t := p.t
	port := testenv.FreePort(t)
	logPath := filepath.Join(t.TempDir(), name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ingestBinary(t), "serve")
	cmd.Env = append(os.Environ(), "NOFLY_KAFKA_BROKERS="+strings.Join(p.brokers, ","), "NOFLY_TELEMETRY_TOPIC="+p.topic,
		"NOFLY_TELEMETRY_PARTITIONS="+strconv.Itoa(p.partitions), "NOFLY_INGEST_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"NOFLY_INGEST_TICK_INTERVAL="+tick.String(), "NOFLY_INGEST_LAG_GROUPS="+p.group, "NOFLY_LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ip := &ingestProc{url: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); lf.Close(); close(ip.done) }()
	t.Cleanup(ip.kill)
	testenv.CheckFor(t, 60*time.Second, func() error {
		res, err := http.Get(ip.url + "/readyz")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("%s /readyz: %d", name, res.StatusCode)
		}
		return nil
	})
	return ip
}

func (ip *ingestProc) kill() {
	select {
	case <-ip.done:
	default:
		_ = ip.cmd.Process.Kill()
		<-ip.done
	}
}

// post sends NDJSON records; anything but 202 fails the test.
func (ip *ingestProc) post(t testing.TB, lines ...string) {
	t.Helper()
	res, err := http.Post(ip.url+"/v1/telemetry", "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("ingest answered %d", res.StatusCode)
	}
}

// TestClockProof: time decided from the log, end to end on the real Kafka
// and Redis. Two ingest processes write ticks; a drone goes silent inside
// POLY alone in its partition (no other traffic there: only the ticks move
// its clock) while other drones fly in the other partitions. The alerter
// stops itself with the signal_lost decided but not committed and is
// SIGKILLed, one ingest is SIGKILLed, a new alerter takes over and a
// second joins (a rebalance), then the drone is heard again. Exactly one
// signal_lost until then and one signal_regained (silent again after, it
// may be lost again: the signal events alternate); every event once in the outbox and
// in alerts.events; each partition's clock never went back; and a replay of
// each partition as the topic holds it — ticks and receive times included —
// equals the live events.
func TestClockProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	p := newPipeline(t, brokers, raddr, 4).withEvents()
	cfg := p.config()
	cfg.SignalLostAfter = 3 * time.Second
	alerterBinary(t)

	// The silent drone's partition holds no other drone.
	const silent = "SILENT-1"
	sp := ref.PartitionOf(silent, p.partitions)
	var traffic []string
	for i := 0; len(traffic) < 6; i++ {
		if id := fmt.Sprintf("T-%d", i); ref.PartitionOf(id, p.partitions) != sp {
			traffic = append(traffic, id)
		}
	}
	inA, inB := p.startIngest("ingest-a", 200*time.Millisecond), p.startIngest("ingest-b", 200*time.Millisecond)
	a1 := p.startProc("alerter-1", cfg, faultStopBeforeEventEnv+"=signal_lost")
	rec := func(drone string, seq int64, lat, lon float64) string {
		return fmt.Sprintf(`{"drone_id":%q,"seq":%d,"ts":%q,"lat":%v,"lon":%v,"alt_m":80}`, drone, seq, time.Now().UTC().Format(time.RFC3339Nano), lat, lon)
	}
	inA.post(t, rec(silent, 1, 51.47, -0.47)) // inside POLY

	// Traffic elsewhere until the end, and the partitions' clocks watched.
	ctx, stopTraffic := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for seq := int64(1); ctx.Err() == nil; seq++ {
			var ls []string
			for i, id := range traffic {
				ls = append(ls, rec(id, seq, 51.60+float64(i)*0.001, -0.70))
			}
			res, err := http.Post(inA.url+"/v1/telemetry", "application/x-ndjson", strings.NewReader(strings.Join(ls, "\n")))
			if err == nil {
				res.Body.Close()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	clockBack := make(chan string, 1)
	go func() {
		defer wg.Done()
		last := make([]int64, p.partitions)
		for ctx.Err() == nil {
			for q := range p.partitions {
				c, err := p.rc.Get(context.Background(), p.store().Keys(q).Clock()).Int64()
				if err == nil && c < last[q] {
					select {
					case clockBack <- fmt.Sprintf("partition %d: clock %d after %d", q, c, last[q]):
					default:
					}
				}
				last[q] = max(last[q], c)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// The alerter decides signal_lost after 3 s of the ticks' clock and
	// stops itself before committing it: SIGKILL it there, and one ingest.
	a1.waitStopped(60 * time.Second)
	stop := a1.faultStop()
	if stop.Partition != sp {
		t.Fatalf("stopped before a signal_lost commit on partition %d, the silent drone's is %d", stop.Partition, sp)
	}
	a1.kill()
	inB.kill()
	t.Logf("alerter-1 SIGKILLed with signal_lost decided and not committed (partition %d, expected %d); ingest-b SIGKILLed", stop.Partition, stop.Expected)

	a2 := p.startProc("alerter-2", cfg)
	a2.up(90 * time.Second)
	lostOnce := func() error {
		n := 0
		for _, l := range p.outbox() {
			if bytes.Contains(l, []byte(`"type":"signal_lost"`)) && bytes.Contains(l, []byte(`"drone_id":"`+silent+`"`)) &&
				bytes.Contains(l, []byte(`"zone_id":"POLY"`)) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d signal_lost of %s's POLY alarm in the outbox", n, silent)
		}
		return nil
	}
	testenv.CheckFor(t, 60*time.Second, lostOnce)

	// A zone whose window opens over the silent drone 4 s from now and
	// closes 4 s later, added through the API: raised by the clock
	// (zone_activated) and at once lost (its drone is silent), then cleared
	// when the window closes (zone_inactive) — no position needed.
	from, until := time.Now().UTC().Add(4*time.Second), time.Now().UTC().Add(8*time.Second)
	win := fmt.Sprintf(`{"type":"Feature","properties":{"id":"WIN","name":"Window","category":"restricted","active_from":%q,"active_until":%q},`+
		`"geometry":{"type":"Polygon","coordinates":[[[-0.48,51.46],[-0.46,51.46],[-0.46,51.48],[-0.48,51.48],[-0.48,51.46]]]}}`,
		from.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
	req, err := http.NewRequest(http.MethodPut, "http://"+a2.http+"/v1/zones/WIN", strings.NewReader(win))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/geo+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%v; alerter-2's log:\n%s", err, a2.tail())
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PUT /v1/zones/WIN: %d", res.StatusCode)
	}
	testenv.CheckFor(t, 60*time.Second, func() error {
		var got []string
		for _, l := range p.outbox() {
			var e struct {
				Type   string `json:"type"`
				ZoneID string `json:"zone_id"`
				Reason string `json:"reason"`
			}
			if json.Unmarshal(l, &e) == nil && e.ZoneID == "WIN" {
				got = append(got, e.Type+" "+e.Reason)
			}
		}
		if want := "raised zone_activated; signal_lost ; cleared zone_inactive"; strings.Join(got, "; ") != want {
			return fmt.Errorf("WIN's events %q, want %q", got, want)
		}
		return nil
	})

	// A rebalance: a second alerter joins; both must own partitions.
	a3 := p.startProc("alerter-3", cfg)
	testenv.CheckFor(t, 60*time.Second, func() error {
		n2, err2 := a2.metric("nofly_alerter_assigned_partitions")
		n3, err3 := a3.metric("nofly_alerter_assigned_partitions")
		if err2 != nil || err3 != nil || n2 == 0 || n3 == 0 || n2+n3 != float64(p.partitions) {
			return fmt.Errorf("partitions: alerter-2 %v (%v), alerter-3 %v (%v)", n2, err2, n3, err3)
		}
		return nil
	})
	time.Sleep(4 * time.Second) // ticks across the rebalance: no second signal_lost
	inA.post(t, rec(silent, 2, 51.47, -0.471))
	testenv.CheckFor(t, 60*time.Second, func() error {
		n := 0
		for _, l := range p.outbox() {
			if bytes.Contains(l, []byte(`"type":"signal_regained"`)) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d signal_regained in the outbox", n)
		}
		return nil
	})
	stopTraffic()
	wg.Wait()
	select {
	case msg := <-clockBack:
		t.Errorf("a partition's clock went back: %s", msg)
	default:
	}

	// Caught up to the ends at this moment (the ticks go on): compare what
	// was decided up to there.
	ends, err := p.endOffsets()
	if err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 60*time.Second, func() error {
		s := p.store()
		for q := range p.partitions {
			snap, err := s.Load(context.Background(), q)
			if err != nil {
				return err
			}
			if snap.Applied < ends[q]-1 {
				return fmt.Errorf("partition %d applied %d of %d", q, snap.Applied, ends[q]-1)
			}
		}
		return nil
	})
	live := p.outbox()
	var kept [][]byte
	seen := map[string]int{}
	for _, l := range live {
		var e struct {
			EventID   string `json:"event_id"`
			Partition int    `json:"partition"`
			Offset    int64  `json:"offset"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		seen[e.EventID]++
		if seen[e.EventID] == 2 {
			t.Errorf("event %s twice in the outbox", e.EventID)
		}
		if e.Offset < ends[e.Partition] {
			kept = append(kept, l)
		}
	}
	// Heard again, the drone fell silent again while the test waited for
	// the ends (3 s of log clock is little on a loaded machine): a second
	// signal_lost then is right. What must hold is that the drone's
	// signal events alternate — never lost twice without a regain between.
	var signals []string
	for _, l := range live {
		if !bytes.Contains(l, []byte(`"drone_id":"`+silent+`"`)) || !bytes.Contains(l, []byte(`"zone_id":"POLY"`)) {
			continue
		}
		switch {
		case bytes.Contains(l, []byte(`"type":"signal_lost"`)):
			signals = append(signals, "lost")
		case bytes.Contains(l, []byte(`"type":"signal_regained"`)):
			signals = append(signals, "regained")
		}
	}
	for i, s := range signals {
		if want := [2]string{"lost", "regained"}[i%2]; s != want {
			t.Errorf("%s's POLY alarm: signal events %v, want lost and regained alternating from lost", silent, signals)
			break
		}
	}
	if len(signals) < 2 {
		t.Errorf("%s's POLY alarm: signal events %v, want lost then regained", silent, signals)
	}
	p.checkEventsTopic()

	// Replay each partition as the topic holds it.
	var replayed []byte
	for q := range p.partitions {
		dump := filepath.Join(t.TempDir(), fmt.Sprintf("p%d.ndjson", q))
		p.dumpPartitionTo(q, ends[q], dump)
		var stdout, stderr bytes.Buffer
		// The zone sets as the partition switched them live (WIN came in
		// through the API), from the alerter's own history.
		args := []string{"replay", "--zone-history", "http://" + a2.http + "/v1/zones/history", "--partition", strconv.Itoa(q),
			"--input", dump, "--signal-lost-after", "3s"}
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("replay of partition %d exited %d: %s", q, code, stderr.String())
		}
		replayed = append(replayed, stdout.Bytes()...)
	}
	compareWithReplay(t, kept, replayed)
	ticks := 0
	if n, err := a2.metric("nofly_alerter_ticks_total"); err == nil {
		ticks = int(n)
	}
	if ticks == 0 {
		t.Error("alerter-2 applied no tick")
	}
	t.Logf("%d events live up to the ends %v, equal to the replay of the topic; alerter-2 applied %d ticks", len(kept), ends, ticks)
}
