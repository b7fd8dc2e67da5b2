// Command demo runs the whole pipeline on this machine and shows it working:
//
//	make demo     (go run ./cmd/demo)
//
// It starts the real Kafka broker and Redis server with scripts/services.sh,
// builds and starts cmd/ingest and cmd/alerter on topics, a consumer group and
// Redis keys of its own (so a demo never mixes with another run), flies a
// simulated fleet across real airports (the embedded default zone set,
// testdata/zones/airports.geojson) through ingest's HTTP API with a share of
// records sent twice, and prints every alarm as the alerter writes it to the
// outbox. At the end it checks the promise: no event twice, the live events
// equal what `alerter replay` computes from the records that were sent, and
// the run's alerts.events topic, read as a read_committed consumer reads it,
// holds every outbox event exactly once.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/fleet"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

type config struct {
	drones     int
	duration   time.Duration
	stepsPerS  int
	dupRate    float64
	zones      string
	partitions int
	seed       uint64
	brokers    string
	redis      string
	keep       bool
	hold       bool
}

func main() {
	var c config
	flag.IntVar(&c.drones, "drones", 40, "simulated drones")
	flag.DurationVar(&c.duration, "duration", 40*time.Second, "how long the fleet flies")
	flag.IntVar(&c.stepsPerS, "speedup", 20, "simulated seconds per wall-clock second (one fix per drone per simulated second)")
	flag.Float64Var(&c.dupRate, "dup-rate", 0.05, "share of records the feed sends twice")
	flag.StringVar(&c.zones, "zones", "testdata/zones/airports.geojson", "zone set (GeoJSON, ED-269 or ED-318)")
	flag.IntVar(&c.partitions, "partitions", 12, "partitions of the demo's telemetry topic")
	flag.Uint64Var(&c.seed, "seed", uint64(time.Now().Unix()), "fleet seed")
	flag.StringVar(&c.brokers, "brokers", envOr("NOFLY_KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka brokers (env NOFLY_KAFKA_BROKERS)")
	flag.StringVar(&c.redis, "redis", envOr("NOFLY_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env NOFLY_REDIS_ADDR)")
	flag.BoolVar(&c.keep, "keep", false, "leave the demo's topic and Redis keys in place afterwards")
	flag.BoolVar(&c.hold, "hold", isTerminal(os.Stdout), "after the checks, keep the pipeline and its dashboard up until Ctrl-C (default: when stdout is a terminal)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func say(format string, args ...any) { fmt.Printf("\033[1m▶ "+format+"\033[0m\n", args...) }

func run(ctx context.Context, c config) error {
	if _, err := os.Stat(c.zones); err != nil {
		return fmt.Errorf("zone set %s: %w (run the demo from the repository root)", c.zones, err)
	}
	say("starting Kafka and Redis (scripts/services.sh start)")
	if err := runCmd(ctx, "bash", "scripts/services.sh", "start"); err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "nofly-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	say("building cmd/ingest and cmd/alerter")
	if err := runCmd(ctx, "go", "build", "-o", tmp+"/", "./cmd/ingest", "./cmd/alerter"); err != nil {
		return err
	}

	runID := "demo-" + strconv.FormatInt(time.Now().Unix(), 36)
	topic := runID + ".telemetry.positions"
	eventsTopic := runID + ".alerts.events"
	ingestAddr, alerterAddr := freeAddr(), freeAddr()
	// Flags, not NOFLY_* variables: a flag the command no longer has stops
	// it at start, where a variable it no longer reads would be ignored and
	// its default used (each command's table is in its package main, which
	// the demo cannot import). Flags also win over any NOFLY_* variable of
	// the shell the demo runs in.
	common := []string{"--brokers=" + c.brokers, "--topic=" + topic,
		"--partitions=" + strconv.Itoa(c.partitions), "--log-level=warn"}
	ingest := start(ctx, tmp+"/ingest", append([]string{"serve", "--addr=" + ingestAddr}, common...), tmp+"/ingest.log")
	defer ingest.stop()
	alerter := start(ctx, tmp+"/alerter", append([]string{"serve", "--redis=" + c.redis,
		"--redis-prefix=" + runID, "--group=" + runID, "--zones=" + c.zones,
		"--events-topic=" + eventsTopic, "--http=" + alerterAddr}, common...), tmp+"/alerter.log")
	defer alerter.stop()

	if err := waitHTTP(ctx, "http://"+ingestAddr+"/readyz", ingest); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+alerterAddr+"/healthz", alerter); err != nil {
		return err
	}
	say("ingest  http://%s   (POST /v1/telemetry, /metrics, /openapi.yaml)", ingestAddr)
	say("alerter http://%s   (/v1/alarms, /v1/events/stream, /metrics, /openapi.json; loopback: no token); topics %s and %s, Redis prefix %s", alerterAddr, topic, eventsTopic, runID)
	say("dashboard: open http://%s/ to follow the drones and alarms on the map and acknowledge them", alerterAddr)

	rdb := redis.NewClient(&redis.Options{Addr: c.redis})
	defer rdb.Close()
	if !c.keep {
		defer cleanup(rdb, c.brokers, runID, topic, eventsTopic)
	}
	events := make(chan event, 1024)
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	go tail(tailCtx, rdb, runID, topic, c.partitions, events)
	go func() {
		for e := range events {
			fmt.Println(e)
		}
	}()

	sentFile := filepath.Join(tmp, "sent.ndjson")
	sent, dups, err := fly(ctx, c, "http://"+ingestAddr, sentFile)
	if err != nil {
		return err
	}
	say("fleet landed: %d records sent, %d of them a second time; waiting for the alerter to catch up", sent, dups)
	if err := caughtUp(ctx, c.brokers, rdb, runID, topic, c.partitions); err != nil {
		return fmt.Errorf("%w\nalerter log:\n%s", err, alerter.tailLog())
	}
	live, err := readOutbox(ctx, rdb, runID, topic, c.partitions)
	if err != nil {
		return err
	}
	// Let the live feed print everything before the summary.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(events) > 0; {
		time.Sleep(50 * time.Millisecond)
	}
	stopTail()

	say("replaying the records that were sent with `alerter replay --zones %s --input sent.ndjson`", c.zones)
	var out bytes.Buffer
	rep := exec.CommandContext(ctx, tmp+"/alerter", "replay", "--zones", c.zones, "--input", sentFile)
	rep.Stdout, rep.Stderr = &out, os.Stderr
	if err := rep.Run(); err != nil {
		return fmt.Errorf("alerter replay: %w", err)
	}
	var replayed []event
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("replay output: %w", err)
		}
		replayed = append(replayed, e)
	}
	if err := verdict(live, replayed); err != nil {
		return err
	}
	say("reading %s as a read_committed consumer does", eventsTopic)
	if err := checkEventsTopic(ctx, c.brokers, eventsTopic, c.partitions, live); err != nil {
		return err
	}
	if c.hold {
		say("the dashboard stays up at http://%s/ (alarms still unacked wait there); Ctrl-C to stop", alerterAddr)
		<-ctx.Done()
	}
	return nil
}

// checkEventsTopic waits (up to a minute) until the events topic holds as
// many committed events as the outbox, then checks it holds each outbox
// event exactly once.
func checkEventsTopic(ctx context.Context, brokers, topic string, partitions int, live []event) error {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(strings.Split(brokers, ",")...), Topic: topic, Transport: tr}
	var ids map[string]int
	n := 0
	for deadline := time.Now().Add(time.Minute); ; {
		ids, n = map[string]int{}, 0
		for p := range partitions {
			recs, err := r.ReadAll(ctx, p)
			if err != nil {
				return err
			}
			for _, rec := range recs {
				id, _ := rec.Header("nofly-event-id")
				ids[string(id)]++
				n++
			}
		}
		if n >= len(live) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	dups, missing := 0, 0
	for _, k := range ids {
		if k > 1 {
			dups++
		}
	}
	for _, e := range live {
		if ids[e.EventID] == 0 {
			missing++
		}
	}
	fmt.Printf("%s: %d committed events; duplicates: %d   missing: %d\n", topic, n, dups, missing)
	if dups+missing > 0 || n != len(live) {
		return fmt.Errorf("%s does not hold the outbox's %d events exactly once", topic, len(live))
	}
	say("alerts.events holds every event exactly once")
	return nil
}

type event struct {
	EventID  string   `json:"event_id"`
	AlarmID  string   `json:"alarm_id"`
	Type     string   `json:"type"`
	DroneID  string   `json:"drone_id"`
	ZoneID   string   `json:"zone_id"`
	ZoneName string   `json:"zone_name"`
	Category string   `json:"category"`
	Seq      int64    `json:"seq"`
	TS       string   `json:"ts"`
	Lat      float64  `json:"lat"`
	Lon      float64  `json:"lon"`
	AltM     *float64 `json:"alt_m"`
	Reason   string   `json:"reason"`
}

func (e event) String() string {
	alt := "?"
	if e.AltM != nil {
		alt = strconv.FormatFloat(*e.AltM, 'f', 0, 64) + " m"
	}
	verb := "\033[31mRAISED \033[0m"
	extra := ""
	if e.Type == "cleared" {
		verb, extra = "\033[32mCLEARED\033[0m", " ("+e.Reason+")"
	}
	return fmt.Sprintf("%s %-9s %-22s %-10s seq %-5d %9.5f,%10.5f %7s%s", verb, e.DroneID, e.ZoneID, e.Category, e.Seq, e.Lat, e.Lon, alt, extra)
}

// fly posts the fleet's fixes to ingest, c.stepsPerS simulated seconds per
// second, and keeps a copy of every record sent (duplicates too, in the order
// sent) for the replay.
// maxLead is how far ahead of the wall clock the fleet's ts may run:
// under ingest's default 10-minute bound on a record's lead.
const maxLead = 8 * time.Minute

func fly(ctx context.Context, c config, ingest, sentFile string) (sent, dups int, err error) {
	f, err := os.Create(sentFile)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	// The fleet's clock runs --speedup times faster than the wall clock,
	// and ingest refuses a ts more than 10 minutes ahead of its own
	// (--max-clock-skew-ahead): start it early enough that the flight
	// ends at most maxLead ahead.
	start := time.Now().UTC().Truncate(time.Second)
	if lead := time.Duration(c.stepsPerS-1) * c.duration; lead > maxLead {
		start = start.Add(maxLead - lead)
	}
	fl := fleet.New(c.drones, c.seed, start, 2500)
	rng := rand.New(rand.NewPCG(c.seed, 1))
	client := &http.Client{Timeout: 30 * time.Second}
	say("flying %d drones for %v (seed %d, %.0f%% of records sent twice)", c.drones, c.duration, c.seed, c.dupRate*100)
	end := time.Now().Add(c.duration)
	tick := time.NewTicker(time.Second / time.Duration(c.stepsPerS))
	defer tick.Stop()
	var body bytes.Buffer
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return sent, dups, ctx.Err()
		case <-tick.C:
		}
		body.Reset()
		seen := map[string]int64{}
		for _, p := range fl.Step(rng, c.dupRate) {
			if seen[p.DroneID] == p.Seq {
				dups++
			}
			seen[p.DroneID] = p.Seq
			line := append(p.AppendJSON(nil), '\n')
			body.Write(line)
			w.Write(line)
			sent++
		}
		if err := post(ctx, client, ingest, body.Bytes()); err != nil {
			return sent, dups, err
		}
	}
	return sent, dups, nil
}

func post(ctx context.Context, client *http.Client, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/telemetry", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post telemetry: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("ingest answered %s: %s", resp.Status, msg)
	}
	return nil
}

// tail reads every partition's outbox stream from the start and sends the
// events on.
func tail(ctx context.Context, rdb *redis.Client, prefix, topic string, partitions int, out chan<- event) {
	after := make([]string, partitions)
	for ctx.Err() == nil {
		got := 0
		for p := range partitions {
			es, err := redislayout.ReadOutbox(ctx, rdb, redislayout.Of(prefix, topic, p), after[p], 500, 0)
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintln(os.Stderr, "demo: reading the outbox:", err)
					time.Sleep(time.Second)
				}
				continue
			}
			got += len(es)
			for _, m := range es {
				after[p] = m.ID
				var e event
				if json.Unmarshal(m.Event, &e) == nil {
					select {
					case out <- e:
					case <-ctx.Done():
						return
					}
				}
			}
		}
		if got == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// caughtUp waits until every partition's applied offset in Redis is the last
// offset of the partition in Kafka: the alerter has applied all that was sent.
func caughtUp(ctx context.Context, brokers string, rdb *redis.Client, prefix, topic string, partitions int) error {
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	end := map[int]int64{}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return fmt.Errorf("list offsets of partition %d: %w", po.Partition, po.Error)
		}
		end[po.Partition] = po.LastOffset
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		behind := 0
		for p := range partitions {
			if end[p] == 0 {
				continue
			}
			applied, err := rdb.Get(ctx, redislayout.Of(prefix, topic, p).Applied()).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("read applied offset: %w", err)
			}
			if errors.Is(err, redis.Nil) || applied < end[p]-1 {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the alerter has not caught up after 2 minutes (%d partitions behind)", behind)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readOutbox returns every event in the demo's outbox streams.
func readOutbox(ctx context.Context, rdb *redis.Client, prefix, topic string, partitions int) ([]event, error) {
	var out []event
	for p := range partitions {
		for after := redislayout.StartID; ; {
			es, err := redislayout.ReadOutbox(ctx, rdb, redislayout.Of(prefix, topic, p), after, 10000, 0)
			if err != nil {
				return nil, fmt.Errorf("read outbox of partition %d: %w", p, err)
			}
			for _, m := range es {
				var e event
				if err := json.Unmarshal(m.Event, &e); err != nil {
					return nil, fmt.Errorf("outbox entry %s: %w", m.ID, err)
				}
				out = append(out, e)
			}
			if len(es) < 10000 {
				break
			}
			after = es[len(es)-1].ID
		}
	}
	return out, nil
}

// verdict checks the promise on the demo's own run: no event twice, and the
// live pipeline's events are exactly those replay computes from the records.
func verdict(live, replayed []event) error {
	key := func(e event) string {
		return e.EventID + "|" + e.DroneID + "|" + e.ZoneID + "|" + strconv.FormatInt(e.Seq, 10)
	}
	count := func(es []event) (map[string]int, int, int) {
		m := map[string]int{}
		raised, cleared := 0, 0
		for _, e := range es {
			m[key(e)]++
			if e.Type == "raised" {
				raised++
			} else {
				cleared++
			}
		}
		return m, raised, cleared
	}
	lm, lr, lc := count(live)
	rm, rr, rc := count(replayed)
	var dup, missing, extra []string
	for k, n := range lm {
		if n > 1 {
			dup = append(dup, k)
		}
		if rm[k] == 0 {
			extra = append(extra, k)
		}
	}
	for k := range rm {
		if lm[k] == 0 {
			missing = append(missing, k)
		}
	}
	sort.Strings(dup)
	sort.Strings(missing)
	sort.Strings(extra)
	fmt.Printf("\nlive pipeline: %d alarms raised, %d cleared (%d events)\n", lr, lc, len(live))
	fmt.Printf("replay:        %d alarms raised, %d cleared (%d events)\n", rr, rc, len(replayed))
	fmt.Printf("duplicates: %d   missing from live: %d   live but not in replay: %d\n", len(dup), len(missing), len(extra))
	if len(dup)+len(missing)+len(extra) > 0 {
		return fmt.Errorf("exactly-once check failed: duplicates %v, missing %v, extra %v",
			dup[:min(5, len(dup))], missing[:min(5, len(missing))], extra[:min(5, len(extra))])
	}
	say("every alarm raised once and cleared once; live equals replay")
	return nil
}

// cleanup deletes the demo's Redis keys and topics.
func cleanup(rdb *redis.Client, brokers, prefix string, topics ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, redislayout.Match(prefix), 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for i := 0; i < len(keys); i += 500 {
		rdb.Del(ctx, keys[i:min(i+500, len(keys))]...)
	}
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	_, _ = client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
}

type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func start(ctx context.Context, bin string, args []string, logPath string) *proc {
	lf, _ := os.Create(logPath)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	p := &proc{cmd: cmd, log: logPath, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		p.done <- err
		return p
	}
	go func() { p.done <- cmd.Wait(); lf.Close() }()
	return p
}

func (p *proc) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

func (p *proc) tailLog() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

func waitHTTP(ctx context.Context, url string, p *proc) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			return fmt.Errorf("%s exited (%v):\n%s", filepath.Base(p.cmd.Path), err, p.tailLog())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer %s in 60s:\n%s", filepath.Base(p.cmd.Path), url, p.tailLog())
}

func runCmd(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}
