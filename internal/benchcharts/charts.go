// Package benchcharts draws BENCHMARKS.md's charts: it reads the JSON in
// benchmarks/ (what cmd/bench and cmd/benchcompare write with --json, what
// scripts/bench-replay.sh writes, and raw tables transcribed from
// BENCHMARKS.md for benchmarks that write none) and renders hand-written
// SVG, byte for byte the same for the same JSON. cmd/benchcharts writes
// the files; a test holds the committed ones to what Generate makes.
package benchcharts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/internal/benchcompare"
)

// Series colours.
const (
	colNofly    = "#2f6fde"
	colTile38   = "#e8730c"
	colIngest   = "#8cb8f5"
	colAlerter  = "#2f6fde"
	colKafka    = "#1b3f85"
	colRedis    = "#d1495b"
	colBefore   = "#a0a8b2"
	colAfter    = "#2f6fde"
	colRecorded = "#a0a8b2"
	colGreen    = "#1a7f37"
)

// Chart is one SVG: its file name and how it is drawn from the JSON.
type Chart struct {
	Name  string
	Build func(dir string) (*Figure, error)
}

// Charts are BENCHMARKS.md's charts, in its order.
var Charts = []Chart{
	{"tile38.svg", tile38Figure},
	{"latency.svg", latencyFigure},
	{"redis.svg", redisFigure},
	{"replay.svg", replayFigure},
	{"scale.svg", scaleFigure},
}

// Output is a rendered chart and the figures printed on it.
type Output struct {
	Name     string
	SVG      []byte
	Measured []string
}

// Generate renders every chart from the JSON in dir.
func Generate(dir string) ([]Output, error) {
	out := make([]Output, 0, len(Charts))
	for _, ch := range Charts {
		f, err := ch.Build(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ch.Name, err)
		}
		svg := f.SVG()
		out = append(out, Output{Name: ch.Name, SVG: svg, Measured: slices.Clone(f.measured)})
	}
	return out, nil
}

// essential is a command line without the flags that only say where its
// output goes or where its binaries come from.
func essential(cmd string) string {
	f := strings.Fields(cmd)
	var keep []string
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case "--bin", "--md", "--json", "--log-dir":
			i++ // and its value
			continue
		}
		keep = append(keep, f[i])
	}
	return strings.Join(keep, " ")
}

// tile38Figure: nofly and Tile38 side by side, per round, on both stream
// lengths — positions/s and CPU per position by process.
func tile38Figure(dir string) (*Figure, error) {
	f := &Figure{
		Title: "nofly vs Tile38 end to end: same 48 zones, same stream, alternating rounds",
		Legend: []LegendItem{{colNofly, "nofly"}, {colTile38, "Tile38 1.37.0"}, {colIngest, "nofly's CPU: ingest"}, {colAlerter, "alerter"},
			{colKafka, "Kafka broker"}, {colRedis, "Redis"}},
	}
	rate := &BarPanel{Title: "positions/s (higher is better; ratio nofly / Tile38)", Unit: "positions per second, whole pipeline until every event is delivered"}
	cpu := &BarPanel{Title: "CPU µs per position (lower is better)", Unit: "µs of CPU per position, all of the side's processes",
		LabelWidth: 1, Target: &Target{10, "target ≤ 10 µs"}}
	var cmds []string
	transcribed := false
	for _, name := range []string{"benchcompare-960.json", "benchcompare-320.json"} {
		r, err := loadCompare(dir, name)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, essential(r.Command))
		transcribed = transcribed || r.Source != ""
		g := BarGroup{Label: fmt.Sprintf("%s positions (%s drones × %d)", numAuto(float64(r.Rows[0].Positions)), numAuto(float64(r.Config.Drones)), r.Config.Positions)}
		gc := BarGroup{Label: " "} // keeps the rows level with the left panel's
		for round := 1; round <= r.Config.Rounds; round++ {
			n, okN := findRow(r.Rows, round, "nofly")
			t, okT := findRow(r.Rows, round, "tile38")
			if !okN || !okT {
				return nil, fmt.Errorf("%s: round %d lacks a side", name, round)
			}
			ratio := n.PositionsPerSecond / t.PositionsPerSecond
			g.Rows = append(g.Rows, BarRow{Label: fmt.Sprintf("round %d (%s×)", round, f.measure(num(ratio, 2))), Bars: []Bar{
				Solid(n.PositionsPerSecond, colNofly, num(n.PositionsPerSecond, 0)),
				Solid(t.PositionsPerSecond, colTile38, num(t.PositionsPerSecond, 0)),
			}})
			var parts []Part
			for _, p := range []struct{ name, color string }{{"ingest", colIngest}, {"alerter", colAlerter}, {"kafka", colKafka}, {"redis", colRedis}} {
				v, ok := n.CPUOwn[p.name]
				if !ok {
					return nil, fmt.Errorf("%s: round %d: no %s CPU", name, round, p.name)
				}
				parts = append(parts, Part{v, p.color})
			}
			gc.Rows = append(gc.Rows, BarRow{Bars: []Bar{
				{Parts: parts, Label: num(n.CPUTotal, 2)},
				Solid(t.CPUTotal, colTile38, num(t.CPUTotal, 2)),
			}})
		}
		rate.Groups = append(rate.Groups, g)
		cpu.Groups = append(cpu.Groups, gc)
	}
	f.Rows = [][]Panel{{rate, cpu}}
	f.Note = commandLines(cmds) + " · 2 vCPU"
	if transcribed {
		f.Note += " · figures transcribed from the raw tables below"
	}
	return f, nil
}

// commandLines is commands that extend the shortest one written as it
// with the extensions in brackets, others joined with "; ".
func commandLines(cmds []string) string {
	short := slices.MinFunc(cmds, func(a, b string) int { return len(a) - len(b) })
	var ext []string
	for _, c := range cmds {
		rest, ok := strings.CutPrefix(c, short)
		if !ok {
			return strings.Join(cmds, "; ")
		}
		if rest = strings.TrimSpace(rest); rest != "" {
			ext = append(ext, rest)
		}
	}
	if len(ext) == 0 {
		return short
	}
	return short + " [" + strings.Join(ext, " | ") + "]"
}

func findRow(rows []benchcompare.ReportRow, round int, side string) (benchcompare.ReportRow, bool) {
	for _, r := range rows {
		if r.Round == round && r.Side == side {
			return r, true
		}
	}
	return benchcompare.ReportRow{}, false
}

// spanOf is the range of vs as a bar, each printed with dec decimals.
func spanOf(vs []float64, dec int, color string) Bar {
	lo, hi := slices.Min(vs), slices.Max(vs)
	label := num(lo, dec)
	if num(hi, dec) != label {
		label += "–" + num(hi, dec)
	}
	return Span(lo, hi, color, label)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadRange is the range of the runs' one-minute load averages.
func loadRange(rs []*benchcompare.E2EResult) string {
	var v []float64
	for _, r := range rs {
		for _, s := range []string{r.Machine.LoadStart, r.Machine.LoadEnd} {
			if f := strings.Fields(s); len(f) > 0 {
				if x, err := strconv.ParseFloat(f[0], 64); err == nil {
					v = append(v, x)
				}
			}
		}
	}
	if len(v) == 0 {
		return "?"
	}
	return num(slices.Min(v), 2) + "–" + num(slices.Max(v), 2)
}

// latencyFigure: the 202 → alerts.events distribution of cmd/bench's
// fresh runs at 5,000/s and flat out, beside the recorded earlier runs.
func latencyFigure(dir string) (*Figure, error) {
	rec, err := loadTables(dir, "bench-015ec23.json")
	if err != nil {
		return nil, err
	}
	old, err := rec.Table("mission-fleet")
	if err != nil {
		return nil, err
	}
	loads := []struct {
		title, prefix, column string
	}{
		{"at 5,000 positions/s (--rate 5000)", "bench-rate5000-run", "--rate 5000 (2 runs)"},
		{"flat out (--rate 0): latency is the queue", "bench-rate0-run", "--rate 0, flat out (2 runs)"},
	}
	var panels []Panel
	var all []*benchcompare.E2EResult
	var day string
	for i, l := range loads {
		var runs []*benchcompare.E2EResult
		for n := 1; n <= 2; n++ {
			r, err := loadE2E(dir, fmt.Sprintf("%s%d.json", l.prefix, n))
			if err != nil {
				return nil, err
			}
			runs = append(runs, r)
			day = r.Started.UTC().Format("2006-01-02")
		}
		all = append(all, runs...)
		p := &BarPanel{Title: l.title, Unit: "ms from the 202 to the event readable in alerts.events"}
		if i > 0 {
			p.LabelWidth = 1
		}
		type q struct {
			label, oldRow string
			pick          func(benchcompare.Latency) time.Duration
		}
		stat := func(g string, lat func(*benchcompare.E2EResult) benchcompare.Latency, qs []q) (BarGroup, error) {
			grp := BarGroup{Label: g}
			for _, x := range qs {
				var v []float64
				for _, r := range runs {
					v = append(v, millis(x.pick(lat(r))))
				}
				cell, err := old.Cell(x.oldRow, l.column)
				if err != nil {
					return grp, err
				}
				label := x.label
				if i > 0 {
					label = ""
				}
				grp.Rows = append(grp.Rows, BarRow{Label: label, Bars: []Bar{spanOf(v, 1, colNofly), cell.Bar(colRecorded, "")}})
			}
			return grp, nil
		}
		p50 := func(l benchcompare.Latency) time.Duration { return l.P50 }
		p99 := func(l benchcompare.Latency) time.Duration { return l.P99 }
		g1, err := stat("202 → alerts.events (read_committed)", func(r *benchcompare.E2EResult) benchcompare.Latency { return r.Latency }, []q{
			{"p50", "latency 202 → alerts.events p50 ms", p50},
			{"p90", "latency 202 → alerts.events p90 ms", func(l benchcompare.Latency) time.Duration { return l.P90 }},
			{"p99", "latency 202 → alerts.events p99 ms", p99},
			{"max", "latency 202 → alerts.events max ms", func(l benchcompare.Latency) time.Duration { return l.Max }},
		})
		if err != nil {
			return nil, err
		}
		g2, err := stat("of which 202 → Redis outbox", func(r *benchcompare.E2EResult) benchcompare.Latency { return r.LatencyToOutbox }, []q{
			{"p50", "stage 202 → Redis outbox p50 ms", p50},
			{"p99", "stage 202 → Redis outbox p99 ms", p99},
		})
		if err != nil {
			return nil, err
		}
		if i > 0 {
			g1.Label, g2.Label = " ", " "
		}
		p.Groups = []BarGroup{g1, g2}
		panels = append(panels, p)
	}
	return &Figure{
		Title: "Latency from ingest's 202 to the alarm event in alerts.events (cmd/bench)",
		Note: fmt.Sprintf("go run ./cmd/bench --rate 5000|0 --duration 30s, 1,000 drones, 10 clients · %s, 2 vCPU, %s, Redis %s, load average %s",
			day, all[0].Machine.GoVersion, all[0].Machine.RedisVersion, loadRange(all)),
		Legend: []LegendItem{{colNofly, "runs of " + day + " (JSON beside the chart)"},
			{colRecorded, "recorded runs, code of " + old.Commit}},
		LegendNote: "bar: solid to the lower of 2 runs, light to the higher",
		Rows:       [][]Panel{panels},
	}, nil
}

// redisFigure: Redis CPU per event through the layout changes, where it
// goes, and round trips per 1,000 positions.
func redisFigure(dir string) (*Figure, error) {
	t, err := loadTables(dir, "redis.json")
	if err != nil {
		return nil, err
	}
	buckets, err := t.Table("buckets")
	if err != nil {
		return nil, err
	}
	idx, err := t.Table("alarm-index")
	if err != nil {
		return nil, err
	}
	parts, err := t.Table("script-parts")
	if err != nil {
		return nil, err
	}
	oldEv, err := buckets.Cell("Redis main thread / event µs", "old")
	if err != nil {
		return nil, err
	}
	newEv, err := buckets.Cell("Redis main thread / event µs", "new")
	if err != nil {
		return nil, err
	}
	nowEv, err := idx.Values("Redis main thread / event µs")
	if err != nil {
		return nil, err
	}
	perEvent := &BarPanel{Title: "Redis main-thread CPU per alarm event (20 % transitions)", Unit: "µs per event",
		Target: &Target{5, "target ≤ 5 µs"}, Groups: []BarGroup{{Rows: []BarRow{
			{"a key per event (SET NX EX)", []Bar{oldEv.Bar(colBefore, "")}},
			{"event ids in buckets (" + buckets.Commit + ")", []Bar{newEv.Bar(colRedis, "")}},
			{"+ the alarm index (now)", []Bar{spanOf(nowEv, 1, colRedis)}},
		}}}}
	where := &BarPanel{Title: "Where it goes: the batch script's parts", Unit: "µs per event (probe: 33 states + 100 events a batch)"}
	for _, p := range []struct{ row, label, color string }{
		{"+ XADD outbox * event_id <id> event <json> per event", "XADD of the outbox entry", colRedis},
		{"fixed: receive ~48 KB of arguments, GET, HSET 33 states, SET, AOF write + fdatasync", "batch's fixed part, AOF + fsync", colRedis},
		{"+ one HSET of the 100 ids into a bucket (new unique key)", "unique key: HSET into a bucket", colRedis},
		{"+ one HMGET of the 100 ids", "duplicate check: HMGET", colRedis},
		{"+ SET NX EX per event (old unique key)", "(old unique key: SET NX EX)", colBefore},
	} {
		cell, err := parts.Cell(p.row, "per event µs")
		if err != nil {
			return nil, err
		}
		where.Groups = append(where.Groups, BarGroup{Rows: []BarRow{{p.label, []Bar{cell.Bar(p.color, "")}}}})
	}

	rec, err := loadTables(dir, "bench-015ec23.json")
	if err != nil {
		return nil, err
	}
	fleet, err := rec.Table("mission-fleet")
	if err != nil {
		return nil, err
	}
	rt, err := idx.Values("Redis round trips / 1,000 records")
	if err != nil {
		return nil, err
	}
	trips := &BarPanel{Title: "Redis round trips per 1,000 positions", Unit: "round trips (replies written) per 1,000 positions",
		Target: &Target{5, "target ≤ 5"}}
	trips.Groups = append(trips.Groups, BarGroup{Rows: []BarRow{{"filled topic, batches of 500", []Bar{spanOf(rt, 2, colRedis)}}}})
	// cmd/bench's recorded runs only: the committed runs' round trips
	// count other users of the shared Redis too (BENCHMARKS.md says how
	// many), which the quiet recorded runs did not have.
	for _, l := range []struct{ label, column string }{
		{"cmd/bench, paced 5,000/s", "--rate 5000 (2 runs)"},
		{"cmd/bench, flat out", "--rate 0, flat out (2 runs)"},
	} {
		cell, err := fleet.Cell("Redis round trips / 1,000 positions", l.column)
		if err != nil {
			return nil, err
		}
		trips.Groups = append(trips.Groups, BarGroup{Rows: []BarRow{{l.label + " (" + fleet.Commit + ")", []Bar{cell.Bar(colRedis, "")}}}})
	}
	return &Figure{
		Title:      "Redis: CPU per alarm event and round trips per 1,000 positions",
		Note:       "go test -bench AlerterVsPlain/transitions-20 ./internal/alerterd (alternating builds); a script probe; go run ./cmd/bench · 2 vCPU, Redis 7.0.15, appendfsync always",
		Legend:     []LegendItem{{colRedis, "latest recorded"}, {colBefore, "earlier code"}},
		LegendNote: "light: the range over runs",
		Rows:       [][]Panel{{perEvent, where}, {trips}},
	}, nil
}

// replayFigure: replay's records/s on one core and its peak memory
// against the input's size.
func replayFigure(dir string) (*Figure, error) {
	t, err := loadTables(dir, "replay.json")
	if err != nil {
		return nil, err
	}
	bench, err := t.Table("benchmark")
	if err != nil {
		return nil, err
	}
	file, err := t.Table("file-1gb")
	if err != nil {
		return nil, err
	}
	fresh, err := loadTables(dir, "replay-sizes.json")
	if err != nil {
		return nil, err
	}
	sizes, err := fresh.Table("sizes")
	if err != nil {
		return nil, err
	}
	rate := &BarPanel{Title: "records/s on one core", Unit: "records per second", Target: &Target{1e6, "target ≥ 1 M/s"}}
	mem := &BarPanel{Title: "peak memory (max RSS) against the input", Unit: "MB of max RSS", Target: &Target{64, "target ≤ 64 MB"}}
	g := BarGroup{Label: "BenchmarkReplay, 210k records from memory"}
	for _, b := range []struct{ row, label, color string }{{"old (decode twice, encode states)", "before", colBefore}, {"new (decode once, Decide)", "now", colAfter}} {
		cell, err := bench.Cell(b.row, "records/s")
		if err != nil {
			return nil, err
		}
		g.Rows = append(g.Rows, BarRow{b.label, []Bar{cell.Bar(b.color, "")}})
	}
	rate.Groups = append(rate.Groups, g)
	gf := BarGroup{Label: "1 GB file (7.2 M records), " + file.Commit}
	gm := BarGroup{Label: "1 GB file (7.2 M records), " + file.Commit}
	for _, b := range []struct{ row, label, color string }{{"old", "before", colBefore}, {"new", "now", colAfter}} {
		r, err := file.Cell(b.row, "records/s")
		if err != nil {
			return nil, err
		}
		m, err := file.Cell(b.row, "max RSS MB")
		if err != nil {
			return nil, err
		}
		gf.Rows = append(gf.Rows, BarRow{b.label, []Bar{r.Bar(b.color, "")}})
		gm.Rows = append(gm.Rows, BarRow{b.label, []Bar{m.Bar(b.color, " MB")}})
	}
	rate.Groups = append(rate.Groups, gf)
	mem.Groups = append(mem.Groups, gm)
	day := strings.TrimPrefix(fresh.Source, "written by scripts/bench-replay.sh on ")
	gs := BarGroup{Label: "files of 1,000 drones, " + day + " (loaded machine)"}
	gsm := BarGroup{Label: "input size, " + day}
	for _, r := range sizes.Rows {
		mb, err := sizes.Cell(r.Label, "input MB")
		if err != nil {
			return nil, err
		}
		rs, err := sizes.Cell(r.Label, "records/s")
		if err != nil {
			return nil, err
		}
		rss, err := sizes.Cell(r.Label, "max RSS MB")
		if err != nil {
			return nil, err
		}
		label := mb.Label() + " MB"
		gs.Rows = append(gs.Rows, BarRow{label, []Bar{rs.Bar(colGreen, "")}})
		gsm.Rows = append(gsm.Rows, BarRow{label, []Bar{rss.Bar(colGreen, " MB")}})
	}
	rate.Groups = append(rate.Groups, gs)
	mem.Groups = append(mem.Groups, gsm)
	return &Figure{
		Title:      "alerter replay: throughput on one core, memory independent of the input",
		Note:       "taskset -c 1: BenchmarkReplay ./alerts/consume; alerter replay of cmd/simulate files (/usr/bin/time); bash scripts/bench-replay.sh · 2 vCPU",
		Legend:     []LegendItem{{colBefore, "before " + bench.Commit + " (decoding twice)"}, {colAfter, "recorded, now"}, {colGreen, "bench-replay.sh, " + day}},
		LegendNote: "light: the range over runs",
		Rows:       [][]Panel{{rate, mem}},
	}, nil
}

// scaleFigure: a day of a million drones with memory flat, map streams'
// cost against their number, the alarm list with 10,000 active alarms.
func scaleFigure(dir string) (*Figure, error) {
	t, err := loadTables(dir, "scale.json")
	if err != nil {
		return nil, err
	}
	churn, err := t.Table("churn-day")
	if err != nil {
		return nil, err
	}
	hourTicks := []float64{0, 4, 8, 12, 16, 20, 24}
	hour := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "h" }
	line := func(col, label, color string) (Series, error) {
		s := Series{Label: label, Color: color}
		cells, err := churn.Column(col)
		if err != nil {
			return s, err
		}
		for i, r := range churn.Rows {
			h, err := strconv.ParseFloat(strings.TrimSuffix(r.Label, "h"), 64)
			if err != nil {
				return s, fmt.Errorf("churn-day row %q: want hours like 12h", r.Label)
			}
			s.Points = append(s.Points, [2]float64{h, cells[i].Max})
		}
		s.EndLabel = numAuto(s.Points[len(s.Points)-1][1]) + " " + label
		return s, nil
	}
	var drones, memory []Series
	for _, l := range []struct{ col, label, color string }{
		{"drones seen", "seen", colBefore}, {"known (engine = Redis hash)", "known", colNofly}, {"in the air", "in the air", colGreen},
	} {
		s, err := line(l.col, l.label, l.color)
		if err != nil {
			return nil, err
		}
		drones = append(drones, s)
	}
	for _, l := range []struct{ col, label, color string }{
		{"Redis used_memory MiB", "MiB Redis", colRedis}, {"Go heap MiB", "MiB Go heap", colNofly},
	} {
		s, err := line(l.col, l.label, l.color)
		if err != nil {
			return nil, err
		}
		memory = append(memory, s)
	}
	xunit := "hours of the log's clock (--drone-ttl 2h)"
	dp := &LinePanel{Title: "a day of 1,000,000 session ids: drones", XUnit: xunit, YUnit: "drones", XTicks: hourTicks, XTick: hour, Series: drones}
	mp := &LinePanel{Title: "… and memory, flat after the TTL", XUnit: xunit, YUnit: "MiB", XTicks: hourTicks, XTick: hour, Series: memory}

	streams, err := t.Table("map-streams")
	if err != nil {
		return nil, err
	}
	sp := &BarPanel{Title: "map streams: the API's CPU", Unit: "CPU ms per second (server and stream readers)"}
	for _, g := range []struct{ label, prefix string }{{"50,000 idle drones", "50,000 idle"}, {"5,000 flying drones", "5,000 flying"}} {
		grp := BarGroup{Label: g.label}
		for _, n := range []string{"1 stream", "5 streams"} {
			row := g.prefix + ", " + n
			b, err := streams.Cell(row, "before: CPU ms/s")
			if err != nil {
				return nil, err
			}
			a, err := streams.Cell(row, "after: CPU ms/s")
			if err != nil {
				return nil, err
			}
			grp.Rows = append(grp.Rows, BarRow{n, []Bar{b.Bar(colBefore, ""), a.Bar(colAfter, "")}})
		}
		sp.Groups = append(sp.Groups, grp)
	}
	alarms, err := t.Table("alarms-list")
	if err != nil {
		return nil, err
	}
	ap := &BarPanel{Title: "GET /v1/alarms, 10,000 active, under commit load", Unit: "ms (default listing: active, limit 100)",
		Target: &Target{50, "target p99 ≤ 50 ms"}}
	grp := BarGroup{}
	for _, col := range []string{"p50 ms", "p99 ms"} {
		b, err := alarms.Cell("default, before 8b42ce5 (limit+1 per partition)", col)
		if err != nil {
			return nil, err
		}
		a, err := alarms.Cell("default (active, limit 100), after 8b42ce5", col)
		if err != nil {
			return nil, err
		}
		grp.Rows = append(grp.Rows, BarRow{strings.TrimSuffix(col, " ms"), []Bar{b.Bar(colBefore, ""), a.Bar(colAfter, "")}})
	}
	ap.Groups = []BarGroup{grp}
	return &Figure{
		Title:  "Scale: drones forgotten, streams and alarms that do not grow the cost",
		Note:   "go test -bench: BenchmarkChurnDay ./internal/alerterd; BenchmarkPositionsStreams, BenchmarkAlarmsList ./api · 2 vCPU, Redis 7.0",
		Legend: []LegendItem{{colBefore, "before the fix (cb3e966 / 8b42ce5)"}, {colAfter, "now"}},
		Rows:   [][]Panel{{dp, mp}, {sp, ap}},
	}, nil
}
