// Command demo runs the whole pipeline in one process and shows it working:
//
//	make demo     (go run ./cmd/demo)
//
// By default it needs nothing but Go: ingest, the alerter (with its alert
// API and dashboard) and a simulated fleet run in this process, on an
// embedded Kafka-protocol broker and an embedded Redis (internal/embedded),
// through the very code the services run (internal/ingestd and
// internal/alerterd's Main). With --real, or NOFLY_KAFKA_BROKERS /
// NOFLY_REDIS_ADDR set, it runs on the real services instead (--real starts
// them with scripts/services.sh).
//
// The fleet flies missions from sites near real airports (internal/fleet)
// through ingest's HTTP API with a share of records sent twice, and every
// alarm is printed as the alerter writes it to the outbox. Then it checks
// the promise: no event twice, the live events equal what `alerter replay`
// computes from the records that were sent, and the run's alerts.events
// topic, read as a read_committed consumer reads it, holds every outbox
// event exactly once. On a terminal it then keeps the fleet flying (in real
// time) and the dashboard up until Ctrl-C.
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
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/alerterd"
	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/fleet"
	"github.com/nofly-dev/nofly/internal/ingestd"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

type config struct {
	drones     int
	duration   time.Duration
	stepsPerS  int
	dupRate    float64
	strayShare float64
	zones      string
	partitions int
	seed       uint64
	real       bool
	brokers    string
	redis      string
	keep       bool
	hold       bool
	mapPMTiles string
}

func main() {
	var c config
	flag.IntVar(&c.drones, "drones", 60, "simulated drones")
	flag.DurationVar(&c.duration, "duration", 40*time.Second, "how long the fleet flies before the checks")
	flag.IntVar(&c.stepsPerS, "speedup", 30, "simulated seconds per wall-clock second before the checks (one fix per drone per simulated second)")
	flag.Float64Var(&c.dupRate, "dup-rate", 0.05, "share of records the feed sends twice")
	flag.Float64Var(&c.strayShare, "stray-share", 0.5, "share of drones whose missions stray into a zone and out again (some above its ceiling)")
	flag.StringVar(&c.zones, "zones", "testdata/zones/airports.geojson", "zone set (GeoJSON, ED-269 or ED-318)")
	flag.IntVar(&c.partitions, "partitions", 12, "partitions of the demo's telemetry topic")
	flag.Uint64Var(&c.seed, "seed", uint64(time.Now().Unix()), "fleet seed")
	flag.BoolVar(&c.real, "real", false, "run on the real Kafka and Redis, started by scripts/services.sh (needs Java and Debian's redis-server), instead of the embedded ones")
	flag.StringVar(&c.brokers, "brokers", os.Getenv("NOFLY_KAFKA_BROKERS"), "real Kafka brokers to run on (env NOFLY_KAFKA_BROKERS; empty: the embedded broker, or 127.0.0.1:9092 with --real)")
	flag.StringVar(&c.redis, "redis", os.Getenv("NOFLY_REDIS_ADDR"), "real Redis to run on (env NOFLY_REDIS_ADDR; empty: the embedded Redis, or 127.0.0.1:6379 with --real)")
	flag.BoolVar(&c.keep, "keep", false, "on real services, leave the demo's topics and Redis keys in place afterwards")
	flag.BoolVar(&c.hold, "hold", isTerminal(os.Stdout), "after the checks, keep the fleet flying and the dashboard up until Ctrl-C (default: when stdout is a terminal)")
	flag.StringVar(&c.mapPMTiles, "map-pmtiles", "", "a PMTiles base map for the dashboard, passed to the alerter's --map-pmtiles (an extract of where the fleet flies; empty: the coastline)")
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

// bold is whether say may use a terminal's bold: not in a log file.
var bold = isTerminal(os.Stdout)

func say(format string, args ...any) {
	if bold {
		format = "\033[1m▶ " + format + "\033[0m"
	} else {
		format = "▶ " + format
	}
	fmt.Printf(format+"\n", args...)
}

func run(ctx context.Context, c config) error {
	began := time.Now()
	if _, err := os.Stat(c.zones); err != nil {
		return fmt.Errorf("zone set %s: %w (run the demo from the repository root)", c.zones, err)
	}
	st, err := openStack(ctx, c)
	if err != nil {
		return err
	}
	defer st.close()
	tmp, err := os.MkdirTemp("", "nofly-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	runID := "demo-" + strconv.FormatInt(time.Now().Unix(), 36)
	topic := runID + ".telemetry.positions"
	eventsTopic := runID + ".alerts.events"
	ingestAddr, alerterAddr := freeAddr(), freeAddr()
	brokers := strings.Join(st.brokers, ",")
	// The services get their configuration as flags, as on a command
	// line, and no environment: the demo's run must not pick up a
	// NOFLY_* variable of the shell it runs in.
	common := []string{"--brokers=" + brokers, "--topic=" + topic,
		"--partitions=" + strconv.Itoa(c.partitions), "--log-level=warn"}
	ingest := startService(ctx, "ingest", ingestd.Main, append([]string{"serve", "--addr=" + ingestAddr}, common...), tmp+"/ingest.log")
	defer ingest.stop()
	alerterArgs := []string{"serve", "--redis=" + st.redis,
		"--redis-prefix=" + runID, "--group=" + runID, "--zones=" + c.zones,
		"--events-topic=" + eventsTopic, "--http=" + alerterAddr}
	if c.mapPMTiles != "" {
		alerterArgs = append(alerterArgs, "--map-pmtiles="+c.mapPMTiles)
	}
	alerter := startService(ctx, "alerter", alerterd.Main, append(alerterArgs, common...), tmp+"/alerter.log")
	defer alerter.stop()

	if err := waitHTTP(ctx, "http://"+ingestAddr+"/readyz", ingest); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+alerterAddr+"/healthz", alerter); err != nil {
		return err
	}
	say("ingest  http://%s   (POST /v1/telemetry, /metrics, /openapi.yaml)", ingestAddr)
	say("alerter http://%s   (/v1/alarms, /v1/events/stream, /metrics, /openapi.json; loopback: no token); topics %s and %s, Redis prefix %s", alerterAddr, topic, eventsTopic, runID)
	say("dashboard: open http://%s/ to follow the drones and alarms on the map and acknowledge them (up %.1f s after the start)", alerterAddr, time.Since(began).Seconds())

	rdb := redis.NewClient(&redis.Options{Addr: st.redis})
	defer rdb.Close()
	if st.shared && !c.keep {
		defer cleanup(rdb, brokers, runID, topic, eventsTopic)
	}
	events := make(chan event, 1024)
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	go tail(tailCtx, rdb, runID, topic, c.partitions, events)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for e := range events {
			fmt.Println(e)
		}
	}()

	sentFile := filepath.Join(tmp, "sent.ndjson")
	fl := newFleet(c)
	sent, dups, err := fly(ctx, c, fl, "http://"+ingestAddr, sentFile)
	if err != nil {
		return err
	}
	say("fleet flew %v of missions in %v: %d records sent, %d of them a second time; waiting for the alerter to catch up", time.Duration(c.stepsPerS)*c.duration, c.duration, sent, dups)
	ends, err := caughtUp(ctx, brokers, rdb, runID, topic, c.partitions)
	if err != nil {
		return fmt.Errorf("%w\nalerter log:\n%s", err, alerter.tailLog())
	}
	all, err := readOutbox(ctx, rdb, runID, topic, c.partitions)
	if err != nil {
		return err
	}
	// The clock ticks go on, and so may decisions by the log's clock: the
	// verdict is over the records up to where the alerter caught up.
	var live []event
	for _, e := range all {
		if e.Offset < ends[e.Partition] {
			live = append(live, e)
		}
	}
	// Let the live feed print everything before the summary.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(events) > 0; {
		time.Sleep(50 * time.Millisecond)
	}
	if !c.hold {
		stopTail()
	}

	say("replaying each partition of %s as the log holds it, ticks and receive times included (kcat -f '%%T\\t%%s\\n' | alerter replay --partition p --zones %s --input -)", topic, c.zones)
	var replayed []event
	for p := range c.partitions {
		dump := filepath.Join(tmp, fmt.Sprintf("partition-%d.ndjson", p))
		if err := dumpPartition(ctx, brokers, topic, p, ends[p], dump); err != nil {
			return err
		}
		var out bytes.Buffer
		if code := alerterd.Main(ctx, []string{"replay", "--zones", c.zones, "--partition", strconv.Itoa(p), "--input", dump}, noEnv, &out, os.Stderr); code != 0 {
			return fmt.Errorf("alerter replay of partition %d exited with %d", p, code)
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				return fmt.Errorf("replay output: %w", err)
			}
			replayed = append(replayed, e)
		}
	}
	if err := verdict(live, replayed); err != nil {
		return err
	}
	say("reading %s as a read_committed consumer does", eventsTopic)
	if err := checkEventsTopic(ctx, brokers, eventsTopic, c.partitions, live); err != nil {
		return err
	}
	if c.hold {
		say("the fleet flies on in real time; the dashboard stays up at http://%s/ — Ctrl-C to stop", alerterAddr)
		if _, _, err := flyOn(ctx, fl, c, "http://"+ingestAddr); err != nil && ctx.Err() == nil {
			return err
		}
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
	// Partition and Offset: the record the event was decided at.
	Partition int   `json:"partition"`
	Offset    int64 `json:"offset"`
}

func (e event) String() string {
	alt := "?"
	if e.AltM != nil {
		alt = strconv.FormatFloat(*e.AltM, 'f', 0, 64) + " m"
	}
	verb, extra := "RAISED ", ""
	if e.Type == "cleared" {
		verb, extra = "CLEARED", " ("+e.Reason+")"
	}
	if bold {
		colour := "31" // red
		if e.Type == "cleared" {
			colour = "32" // green
		}
		verb = "\033[" + colour + "m" + verb + "\033[0m"
	}
	return fmt.Sprintf("%s %-9s %-22s %-10s seq %-5d %9.5f,%10.5f %7s%s", verb, e.DroneID, e.ZoneID, e.Category, e.Seq, e.Lat, e.Lon, alt, extra)
}

// maxLead is how far ahead of the wall clock the fleet's ts may run:
// under ingest's default 10-minute bound on a record's lead.
const maxLead = 8 * time.Minute

// flight is the demo's fleet and the randomness of its feed.
type flight struct {
	fl  *fleet.Fleet
	rng *rand.Rand
}

// newFleet builds the fleet. Its clock runs --speedup times faster than
// the wall clock until the checks, and ingest refuses a ts more than 10
// minutes ahead of its own (--max-clock-skew-ahead): it starts early
// enough that the fast flight ends at most maxLead ahead, and the
// real-time flight after it keeps that lead.
func newFleet(c config) *flight {
	start := time.Now().UTC().Truncate(time.Second)
	if lead := time.Duration(c.stepsPerS-1) * c.duration; lead > maxLead {
		start = start.Add(maxLead - lead)
	}
	return &flight{fl: fleet.New(c.drones, c.seed, start, fleet.Options{StrayShare: c.strayShare, Operators: true}), rng: rand.New(rand.NewPCG(c.seed, 1))}
}

// fly posts the fleet's fixes to ingest for c.duration, c.stepsPerS
// simulated seconds per second, and keeps a copy of every record sent
// (duplicates too, in the order sent) for the replay.
func fly(ctx context.Context, c config, f *flight, ingest, sentFile string) (sent, dups int, err error) {
	out, err := os.Create(sentFile)
	if err != nil {
		return 0, 0, err
	}
	defer out.Close()
	w := bufio.NewWriter(out)
	say("flying %d drones for %v, %d× real time (seed %d, %.0f%% of them straying, %.0f%% of records sent twice)",
		c.drones, c.duration, c.stepsPerS, c.seed, c.strayShare*100, c.dupRate*100)
	if behind := time.Since(f.fl.Now()) - 2*time.Minute; behind > 0 {
		// The dashboard draws drones seen in the last 2 minutes.
		say("the fleet's clock starts %v behind: the dashboard draws the drones from about %.0f s on, the alarms at once",
			time.Since(f.fl.Now()).Round(time.Second), behind.Seconds()/float64(c.stepsPerS-1))
	}
	sent, dups, err = f.post(ctx, ingest, c.stepsPerS, time.Now().Add(c.duration), c.dupRate, w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return sent, dups, err
}

// flyOn keeps the fleet flying in real time until ctx ends.
func flyOn(ctx context.Context, f *flight, c config, ingest string) (sent, dups int, err error) {
	return f.post(ctx, ingest, 1, time.Time{}, c.dupRate, io.Discard)
}

// post steps the fleet stepsPerS times a second until end (forever when
// zero) or ctx ends, posting each step's fixes and writing them to w.
func (f *flight) post(ctx context.Context, ingest string, stepsPerS int, end time.Time, dupRate float64, w io.Writer) (sent, dups int, err error) {
	client := &http.Client{Timeout: 30 * time.Second}
	tick := time.NewTicker(time.Second / time.Duration(max(1, stepsPerS)))
	defer tick.Stop()
	var body bytes.Buffer
	for end.IsZero() || time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return sent, dups, ctx.Err()
		case <-tick.C:
		}
		body.Reset()
		seen := map[string]int64{}
		for _, p := range f.fl.Step(f.rng, dupRate) {
			if seen[p.DroneID] == p.Seq {
				dups++
			}
			seen[p.DroneID] = p.Seq
			line := append(p.AppendJSON(nil), '\n')
			body.Write(line)
			if _, err := w.Write(line); err != nil {
				return sent, dups, err
			}
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
func caughtUp(ctx context.Context, brokers string, rdb *redis.Client, prefix, topic string, partitions int) (map[int]int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	end := map[int]int64{}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("list offsets of partition %d: %w", po.Partition, po.Error)
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
				return nil, fmt.Errorf("read applied offset: %w", err)
			}
			if errors.Is(err, redis.Nil) || applied < end[p]-1 {
				behind++
			}
		}
		if behind == 0 {
			return end, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the alerter has not caught up after 2 minutes (%d partitions behind)", behind)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dumpPartition writes partition p of topic, offsets 0 to end-1, as kcat
// -f '%T\t%s\n' does: each record's Kafka timestamp in unix milliseconds
// (the log's clock), a tab and its value — positions and clock ticks.
func dumpPartition(ctx context.Context, brokers, topic string, p int, end int64, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	if end > 0 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(brokers, ","), Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 200 * time.Millisecond})
		defer r.Close()
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for {
			m, err := r.ReadMessage(rctx)
			if err != nil {
				return fmt.Errorf("dump partition %d: %w", p, err)
			}
			fmt.Fprintf(w, "%d\t%s\n", m.Time.UnixMilli(), m.Value)
			if m.Offset >= end-1 {
				break
			}
		}
	}
	return errors.Join(w.Flush(), f.Close())
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
	count := func(es []event) (map[string]int, int, int, int, int) {
		m := map[string]int{}
		raised, cleared, signal, approach := 0, 0, 0, 0
		for _, e := range es {
			switch e.Type {
			case "acked":
				continue // an operator's, from the dashboard: not the log's
			case "raised":
				raised++
			case "cleared":
				cleared++
			case "approaching":
				approach++
			default:
				signal++
			}
			m[key(e)]++
		}
		return m, raised, cleared, signal, approach
	}
	lm, lr, lc, ls, la := count(live)
	rm, rr, rc, rs, ra := count(replayed)
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
	fmt.Printf("\nlive pipeline: %d alarms raised, %d cleared, %d approach warnings, %d other (signal, approach ended, authorisation; %d events)\n", lr, lc, la, ls, len(live))
	fmt.Printf("replay:        %d alarms raised, %d cleared, %d approach warnings, %d other (signal, approach ended, authorisation; %d events)\n", rr, rc, ra, rs, len(replayed))
	fmt.Printf("duplicates: %d   missing from live: %d   live but not in replay: %d\n", len(dup), len(missing), len(extra))
	if lr == 0 {
		// A demo that shows no alarm shows nothing: the fleet must stray.
		return errors.New("no alarm was raised: no drone of the fleet entered a zone")
	}
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

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}
