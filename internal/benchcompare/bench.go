// Package benchcompare runs the whole nofly pipeline and a Tile38 server
// side by side on the same zones and the same stream, alternating, and
// reports for each side positions/s, the CPU per position of every process
// and its events against the reference. cmd/benchcompare is its command
// line; BENCHMARKS.md has the figures.
//
// nofly: C clients POST batches of B records (NDJSON) to cmd/ingest →
// Kafka → cmd/alerter → Redis outbox → alerts.events; the stream has been
// delivered when alerts.events, read as read_committed, holds every event.
// Tile38: one channel per zone (SETCHAN … WITHIN … FENCE DETECT
// enter,exit) and one subscriber; C clients each pipeline their batch of B
// `SET … FIELD seq N POINT lat lon` and wait for its replies; delivered
// when the subscriber has every message. The reference is internal/reference
// over the whole stream (`alerter replay` must equal it, checked before the
// rounds); Tile38's enter is mapped to raised, exit to cleared, and both
// sides are compared on (type, drone, zone, seq) — with the reference, and
// with a stale-blind one (every record taken as the drone's next position,
// as a SET is), which shows what Tile38's differences come from.
//
// RunE2E (cmd/bench) is nofly alone end to end at a set rate or flat out:
// a fleet and drones that toggle in and out of a zone → ingest → Kafka →
// alerter → alerts.events, reporting positions/s accepted and processed,
// the latency from each record's 202 to its alarm event read as
// read_committed, Redis round trips and every process's CPU per 1,000
// positions, and the consumer group's lag.
package benchcompare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/reference"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/telemetry"
)

// Config says what to run.
type Config struct {
	Tile38     string // host:port of a running Tile38 server; empty: nofly only
	Brokers    string
	Redis      string
	Partitions int
	Drones     int // the scenario's drones (320 × 500 positions ≈ 168k records)
	Positions  int // per drone
	Seed       uint64
	Clients    int
	Batch      int
	Rounds     int
	// KafkaPIDFile is the broker's pid file (scripts/kafka.sh writes it);
	// empty or unreadable: the broker's CPU is not reported.
	KafkaPIDFile string
	// BinDir holds prebuilt ingest and alerter binaries; empty: they are
	// built from ./cmd/ingest and ./cmd/alerter into a temporary directory.
	BinDir string
	// LogDir keeps ingest's and the alerter's logs of every round; empty:
	// they go to the temporary directory, removed at the end.
	LogDir string
	Log    *slog.Logger
}

// KafkaPID is the pid of the broker in scripts/kafka.sh's default pid file,
// checked to be a running Kafka, for benchmarks that measure its CPU.
func KafkaPID() (int, error) { return pidFile(DefaultKafkaPIDFile(), "kafka") }

// DefaultKafkaPIDFile is where scripts/kafka.sh keeps the broker's pid.
func DefaultKafkaPIDFile() string {
	dir := os.Getenv("NOFLY_CACHE")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "nofly")
	}
	return filepath.Join(dir, "run", "kafka-9092", "kafka.pid")
}

// The processes measured, in the table's order.
const (
	pIngest = iota
	pAlerter
	pKafka
	pRedis
	pTile38
	pClient
	nProcs
)

var procNames = [nProcs]string{"ingest", "alerter", "kafka", "redis", "tile38", "client"}

// sideOf says which processes a side's total counts.
var sideOf = map[string][]int{
	"nofly":  {pIngest, pAlerter, pKafka, pRedis},
	"tile38": {pTile38},
}

// Row is one side's result in one round.
type Row struct {
	Side    string
	Round   int
	Records int
	Wall    time.Duration
	CPU     [nProcs]time.Duration // -1: not measured
	Diff    Diff
	// StaleBlind is the events against the stale-blind reference (every
	// record taken as the drone's next position, as Tile38 takes a SET).
	StaleBlind Diff
}

// PerSecond is the side's positions/s.
func (r Row) PerSecond() float64 { return float64(r.Records) / r.Wall.Seconds() }

// MicrosPerRecord is process p's CPU per position in µs (negative: not
// measured).
func (r Row) MicrosPerRecord(p int) float64 {
	if r.CPU[p] < 0 {
		return -1
	}
	return float64(r.CPU[p].Microseconds()) / float64(r.Records)
}

// TotalMicros is the CPU per position of the side's own processes.
func (r Row) TotalMicros() float64 {
	t := 0.0
	for _, p := range sideOf[r.Side] {
		if v := r.MicrosPerRecord(p); v > 0 {
			t += v
		}
	}
	return t
}

// Run runs cfg.Rounds rounds, each side once a round, the order swapped
// every round, and writes the table to out.
func Run(ctx context.Context, cfg Config, out io.Writer) ([]Row, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	tmp, logDir, bin, cleanup, err := workDirs(ctx, log, "nofly-benchcompare-", cfg.BinDir, cfg.LogDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	zones := Zones(cfg.Seed)
	zj, err := ZonesGeoJSON(zones)
	if err != nil {
		return nil, err
	}
	zonesFile := filepath.Join(tmp, "zones.geojson")
	if err := os.WriteFile(zonesFile, zj, 0o644); err != nil {
		return nil, err
	}
	sc := scenario.DefaultConfig()
	sc.Seed, sc.Drones, sc.Positions = cfg.Seed, cfg.Drones, cfg.Positions
	gen := scenario.Generate(sc)
	st := newStream(gen, cfg.Clients, cfg.Batch)
	streamFile := filepath.Join(tmp, "stream.ndjson")
	if err := os.WriteFile(streamFile, st.ndjson, 0o644); err != nil {
		return nil, err
	}
	log.Info("stream", "records", st.records, "unique", gen.Unique, "duplicates", gen.Duplicates, "stale", gen.Stale,
		"zones", len(zones), "clients", cfg.Clients, "batch", cfg.Batch)

	// The reference is internal/reference (independent of geofence/ and
	// alerts/); `alerter replay` over the same stream must equal it, which
	// checks the zone file reads the same in both.
	refZones, err := reference.LoadZones(zonesFile)
	if err != nil {
		return nil, err
	}
	ref := fromReference(reference.Events(refZones, gen.Records))
	replayed, err := replay(ctx, filepath.Join(bin, "alerter"), zonesFile, streamFile)
	if err != nil {
		return nil, err
	}
	if d := Compare(replayed, ref); !d.Exact() {
		return nil, fmt.Errorf("alerter replay differs from internal/reference: %+v", d)
	}
	if len(ref) == 0 {
		return nil, errors.New("the reference has no event: the zones miss the stream")
	}
	log.Info("reference: internal/reference over the stream (alerter replay equal)", "events", len(ref))
	// What a server without a notion of stale records raises: the
	// reference over the stream with every drone's records renumbered in
	// the order they are sent, so a stale re-send is a move like any other
	// (its events mapped back to the record's own seq). Tile38's
	// differences from the reference that this one explains come from
	// stale records alone.
	asMoves, orig := renumbered(gen)
	ref2 := fromReference(reference.Events(refZones, asMoves.Records))
	for i := range ref2 {
		ref2[i].Seq = orig[ref2[i].DroneID][ref2[i].Seq]
	}
	log.Info("stale-blind reference: every record taken as the drone's next position", "events", len(ref2))

	pids, err := servicePIDs(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	runID := "benchcmp-" + strconv.FormatInt(time.Now().Unix(), 36)
	var rows []Row
	for round := 1; round <= cfg.Rounds; round++ {
		sides := []string{"nofly", "tile38"}
		if round%2 == 0 {
			sides = []string{"tile38", "nofly"}
		}
		for _, side := range sides {
			if side == "tile38" && cfg.Tile38 == "" {
				continue
			}
			smp := &sampler{}
			for p := range nProcs {
				smp.add(procNames[p], pids[p])
			}
			name := fmt.Sprintf("%s-r%d", runID, round)
			log.Info("round", "round", round, "side", side, "load", loadavg())
			var res roundResult
			switch side {
			case "nofly":
				res, err = (&noflyRound{bin: bin, logDir: logDir, brokers: cfg.Brokers, redis: cfg.Redis,
					partitions: cfg.Partitions, zonesFile: zonesFile, runID: name, bodies: st.bodies,
					counts: st.counts, expected: len(ref), smp: smp, ingestIdx: pIngest, alerterIdx: pAlerter}).run(ctx)
			case "tile38":
				res, err = (&tile38Round{addr: cfg.Tile38, prefix: name + ":", zones: zones,
					sets: st.tile38Sets(name + ":fleet"), counts: st.counts, smp: smp}).run(ctx)
			}
			if err != nil {
				return rows, fmt.Errorf("round %d, %s: %w", round, side, err)
			}
			row := Row{Side: side, Round: round, Records: res.accepted, Wall: res.wall, Diff: Compare(res.events, ref),
				StaleBlind: Compare(res.events, ref2)}
			copy(row.CPU[:], res.cpu)
			rows = append(rows, row)
			log.Info("done", "round", round, "side", side, "positions_per_s", int(row.PerSecond()),
				"cpu_us_per_position", fmt.Sprintf("%.2f", row.TotalMicros()), "events", row.Diff.Events,
				"missing", row.Diff.Missing, "extra", row.Diff.Extra, "duplicate", row.Diff.Duplicate)
		}
	}
	WriteTable(out, rows)
	return rows, nil
}

// renumbered is sc with each drone's records numbered 1, 2, … in the
// order sent, and for each drone the map from those numbers back to the
// records' own seq.
func renumbered(sc *scenario.Scenario) (*scenario.Scenario, map[string]map[int64]int64) {
	out := &scenario.Scenario{Records: make([]telemetry.Position, len(sc.Records))}
	orig := map[string]map[int64]int64{}
	for i, p := range sc.Records {
		m := orig[p.DroneID]
		if m == nil {
			m = map[int64]int64{}
			orig[p.DroneID] = m
		}
		n := int64(len(m) + 1)
		m[n] = p.Seq
		p.Seq = n
		out.Records[i] = p
	}
	return out, orig
}

// fromReference keeps what both sides are compared on.
func fromReference(es []reference.Event) []Event {
	out := make([]Event, 0, len(es))
	for _, e := range es {
		if Compared(e.Type) {
			out = append(out, Event{Type: e.Type, DroneID: e.DroneID, ZoneID: e.ZoneID, Seq: e.Seq})
		}
	}
	return out
}

// replay runs `alerter replay` over the stream.
func replay(ctx context.Context, alerter, zones, input string) ([]Event, error) {
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(ctx, alerter, "replay", "--zones", zones, "--input", input, "--log-level=warn", "--approach-before=off")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("alerter replay: %w\n%s", err, stderr.String())
	}
	var evs []Event
	for line := range strings.Lines(stdout.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, ok, err := NoflyEvent([]byte(line))
		if err != nil {
			return nil, err
		}
		if ok {
			evs = append(evs, e)
		}
	}
	return evs, nil
}

// servicePIDs finds the shared servers' processes: Redis from INFO,
// Tile38 from SERVER, the broker from its pid file; the benchmark's own.
func servicePIDs(ctx context.Context, cfg Config, log *slog.Logger) ([nProcs]int, error) {
	var pids [nProcs]int
	pids[pClient] = os.Getpid()
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return pids, fmt.Errorf("redis at %s: %w", cfg.Redis, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pids[pRedis], _ = strconv.Atoi(v)
		}
	}
	if err := checkPid(pids[pRedis], "redis"); err != nil {
		log.Warn("redis CPU not measured", "err", err)
		pids[pRedis] = 0
	}
	if cfg.KafkaPIDFile != "" {
		if pids[pKafka], err = pidFile(cfg.KafkaPIDFile, "kafka"); err != nil {
			log.Warn("broker CPU not measured", "err", err)
			pids[pKafka] = 0
		}
	}
	if cfg.Tile38 != "" {
		if pids[pTile38], err = tile38PID(ctx, cfg.Tile38); err != nil {
			return pids, fmt.Errorf("tile38 at %s: %w", cfg.Tile38, err)
		}
	}
	return pids, nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// WriteTable prints the rounds as a Markdown table, then each round's
// ratio of nofly's positions/s to Tile38's.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| round | side | positions | wall s | positions/s | ingest | alerter | kafka | redis | tile38 | total µs/pos | client µs/pos | events | missing | extra (raised/cleared) | duplicate | vs stale-blind reference: missing/extra/duplicate |")
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		cell := func(p int) string {
			v := r.MicrosPerRecord(p)
			if v < 0 {
				return "–"
			}
			own := false
			for _, q := range sideOf[r.Side] {
				own = own || q == p
			}
			if !own {
				return fmt.Sprintf("(%.2f)", v) // another side's process, idle or serving others
			}
			return fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "| %d | %s | %d | %.2f | %.0f | %s | %s | %s | %s | %s | **%.2f** | %s | %d | %d | %d (%d/%d) | %d | %d/%d/%d |\n",
			r.Round, r.Side, r.Records, r.Wall.Seconds(), r.PerSecond(),
			cell(pIngest), cell(pAlerter), cell(pKafka), cell(pRedis), cell(pTile38), r.TotalMicros(), cell(pClient),
			r.Diff.Events, r.Diff.Missing, r.Diff.Extra, r.Diff.ExtraRaised, r.Diff.ExtraCleared, r.Diff.Duplicate,
			r.StaleBlind.Missing, r.StaleBlind.Extra, r.StaleBlind.Duplicate)
	}
	byRound := map[int]map[string]Row{}
	for _, r := range rows {
		if byRound[r.Round] == nil {
			byRound[r.Round] = map[string]Row{}
		}
		byRound[r.Round][r.Side] = r
	}
	rounds := make([]int, 0, len(byRound))
	for k := range byRound {
		rounds = append(rounds, k)
	}
	sort.Ints(rounds)
	fmt.Fprintln(w)
	for _, k := range rounds {
		n, okN := byRound[k]["nofly"]
		t, okT := byRound[k]["tile38"]
		if okN && okT {
			fmt.Fprintf(w, "round %d: nofly/Tile38 positions/s %.2f×, CPU per position %.2f×\n",
				k, n.PerSecond()/t.PerSecond(), n.TotalMicros()/t.TotalMicros())
		}
	}
	for _, r := range rows {
		for _, ex := range r.Diff.Examples {
			fmt.Fprintf(w, "round %d %s: %s\n", r.Round, r.Side, ex)
		}
		for _, ex := range r.StaleBlind.Examples {
			if r.Side != "tile38" {
				break
			}
			fmt.Fprintf(w, "round %d %s, vs stale-blind reference: %s\n", r.Round, r.Side, ex)
		}
	}
}
