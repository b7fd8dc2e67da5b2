package benchcompare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// E2EResult is one run of the end-to-end benchmark: its configuration,
// the machine and every figure.
type E2EResult struct {
	Config  E2EConfig `json:"config"`
	Machine Machine   `json:"machine"`
	RunID   string    `json:"run_id"`
	Started time.Time `json:"started"`

	// Records of 202 answers and of others, and the requests; Produced is
	// what the telemetry topic holds at the end.
	Accepted        int64 `json:"accepted"`
	Refused         int64 `json:"refused"`
	Requests        int   `json:"requests"`
	RefusedRequests int   `json:"refused_requests"`
	Produced        int64 `json:"produced"`
	AlerterRecords  int64 `json:"alerter_records"`
	// Seconds from the first request to the last answer, to the group's
	// lag reaching 0 after it, to the last event read from alerts.events.
	SendSeconds      float64 `json:"send_s"`
	ProcessedSeconds float64 `json:"processed_s"`
	EventsSeconds    float64 `json:"events_s"`

	// Events read from alerts.events as read_committed (distinct event
	// ids), read again, not matched to an accepted record; AlerterEvents
	// is what the alerter's metrics say it committed.
	Events          int   `json:"events"`
	DuplicateEvents int   `json:"duplicate_events"`
	UnmatchedEvents int   `json:"unmatched_events"`
	AlerterEvents   int64 `json:"alerter_events"`
	// EventPolls is the benchmark's fetches of alerts.events (its own
	// load on the broker).
	EventPolls int `json:"event_polls"`
	// Answer202 is ingest's answer to a request: from sending it to its
	// 202 (the records' acknowledgement by the broker included).
	Answer202 Latency `json:"answer_202"`
	// Latency from a record's 202 to its event in alerts.events, and its
	// first stages: to the event's append to the Redis outbox (its stream
	// id) and to the dispatcher's produce (the record's timestamp), both
	// to the millisecond.
	Latency           Latency `json:"latency"`
	LatencyToOutbox   Latency `json:"latency_to_outbox"`
	LatencyToProduced Latency `json:"latency_to_produced"`
	// LatencyToSSE is from a record's 202 to its event's frame at a client
	// of GET /v1/events/stream (the operator's screen);
	// LatencyOutboxToSSE the share after the Redis outbox append (the
	// hub's wake and the write). SSEEvents the distinct events the client
	// got, SSEDuplicateEvents those it got again, SSEReconnects its
	// broken connections.
	LatencyToSSE       Latency `json:"latency_to_sse"`
	LatencyOutboxToSSE Latency `json:"latency_outbox_to_sse"`
	SSEEvents          int     `json:"sse_events"`
	SSEDuplicateEvents int     `json:"sse_duplicate_events"`
	SSEReconnects      int     `json:"sse_reconnects"`
	// BatchMeanSeconds is the alerter's mean time to apply and commit one
	// batch (nofly_alerter_batch_seconds), RecordsPerBatch its mean batch:
	// the decide-and-commit share of 202 → outbox; the rest is the fetch
	// and the batch's wait to fill (--linger, --linger-idle).
	BatchMeanSeconds float64 `json:"batch_mean_s"`
	RecordsPerBatch  float64 `json:"records_per_batch"`

	// Redis is INFO's counters over the run (shared Redis: other clients
	// count too); RedisIdleCommandsPerSecond was its rate in the idle
	// window before the run.
	Redis                      RedisStats `json:"redis"`
	RedisIdleCommandsPerSecond float64    `json:"redis_idle_commands_per_s"`

	CPU []ProcessCPU `json:"cpu"`
	Lag Lag          `json:"lag"`
}

// Machine is where the run ran.
type Machine struct {
	CPUs         int    `json:"nproc"`
	GoVersion    string `json:"go"`
	RedisVersion string `json:"redis"`
	LoadStart    string `json:"loadavg_start"`
	LoadEnd      string `json:"loadavg_end"`
}

// ProcessCPU is a process's CPU over the run (from the first request to
// the last event read): Seconds (-1: not measured), Cores = seconds per
// second of the run, IdleCores the same in the idle window before it.
type ProcessCPU struct {
	Name      string  `json:"name"`
	Seconds   float64 `json:"cpu_s"`
	Cores     float64 `json:"cores"`
	IdleCores float64 `json:"idle_cores"`
}

// Lag is the consumer group's lag on the telemetry topic: end offsets
// less committed offsets, in records, sampled every Every seconds.
type Lag struct {
	Every     float64     `json:"every_s"`
	Max       int64       `json:"max"`
	MaxAt     float64     `json:"max_at_s"`
	AtSendEnd int64       `json:"at_send_end"` // first sample after the last 202; -1: none
	Series    []LagSample `json:"series"`
}

// LagSample is one sample, T seconds after the start.
type LagSample struct {
	T         float64 `json:"t_s"`
	Produced  int64   `json:"produced"`
	Processed int64   `json:"processed"`
	Lag       int64   `json:"lag"`
}

// AcceptedPerSecond is the records accepted per second of sending.
func (r *E2EResult) AcceptedPerSecond() float64 { return perSecond(r.Accepted, r.SendSeconds) }

// ProcessedPerSecond is the records the alerter processed per second,
// from the first request until it had processed all.
func (r *E2EResult) ProcessedPerSecond() float64 { return perSecond(r.Produced, r.ProcessedSeconds) }

func perSecond(n int64, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(n) / s
}

// Per1k is n per 1,000 accepted positions.
func (r *E2EResult) Per1k(n float64) float64 {
	if r.Accepted == 0 {
		return 0
	}
	return n * 1000 / float64(r.Accepted)
}

// PipelineCPU is the CPU seconds of ingest, the alerter, Kafka and Redis
// (those measured).
func (r *E2EResult) PipelineCPU() float64 {
	t := 0.0
	for _, p := range r.CPU {
		if p.Name != "bench" && p.Seconds > 0 {
			t += p.Seconds
		}
	}
	return t
}

// WriteJSON writes r as indented JSON.
// WriteReports writes r's Markdown to mdPath (stdout when empty) and, when
// jsonPath is set, its JSON there: what cmd/bench and cmd/soak write.
func WriteReports(r interface {
	WriteMarkdown(io.Writer) error
	WriteJSON(io.Writer) error
}, mdPath, jsonPath string) error {
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	if mdPath == "" {
		if _, err := os.Stdout.Write(md.Bytes()); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	} else if err := os.WriteFile(mdPath, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if jsonPath != "" {
		var js bytes.Buffer
		if err := r.WriteJSON(&js); err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, js.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write JSON report: %w", err)
		}
	}
	return nil
}

func (r *E2EResult) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("benchcompare: encode result: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteMarkdown writes r as a Markdown section.
func (r *E2EResult) WriteMarkdown(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "## nofly end to end (cmd/bench), run %s\n\n", r.RunID)
	if c.Command != "" {
		fmt.Fprintf(&b, "    %s\n\n", c.Command)
	}
	bounds := []string{}
	if c.Duration > 0 {
		bounds = append(bounds, c.Duration.String())
	}
	if c.Positions > 0 {
		bounds = append(bounds, commas(int64(c.Positions))+" positions")
	}
	tog := c.togglers()
	fmt.Fprintf(&b, "- config: rate %s, for %s (whichever first); %s drones: %s togglers crossing %s every %d fixes, %s of internal/fleet; "+
		"%d clients (one request a tick each); dup rate %g; %d partitions; zones %s; seed %d\n",
		rateName(c.Rate), strings.Join(bounds, " or "), commas(int64(c.Drones)), commas(int64(tog)), togglerZone, c.ToggleEvery,
		commas(int64(c.Drones-tog)), c.Clients, c.DupRate, c.Partitions, c.Zones, c.Seed)
	m := r.Machine
	fmt.Fprintf(&b, "- machine: %d CPUs; load average %s at the start, %s at the end; %s; Redis %s; started %s\n\n",
		m.CPUs, m.LoadStart, m.LoadEnd, m.GoVersion, m.RedisVersion, r.Started.UTC().Format(time.RFC3339))

	b.WriteString("| figure | value |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| positions accepted (202) | %s in %.2f s: **%s/s** (%s requests) |\n",
		commas(r.Accepted), r.SendSeconds, commas(int64(r.AcceptedPerSecond())), commas(int64(r.Requests)))
	fmt.Fprintf(&b, "| refused (not 202) | %s positions in %s requests |\n", commas(r.Refused), commas(int64(r.RefusedRequests)))
	if a := r.Answer202; a.N > 0 {
		fmt.Fprintf(&b, "| ingest's answer, request → 202 (the broker's acknowledgement included): p50 / p90 / p99 / max | %s / %s / %s / %s ms (n %s) |\n",
			ms(a.P50), ms(a.P90), ms(a.P99), ms(a.Max), commas(int64(a.N)))
	}
	fmt.Fprintf(&b, "| processed by the alerter end to end (group lag 0) | %s in %.2f s: **%s/s**, %.2f s after the last 202 |\n",
		commas(r.Produced), r.ProcessedSeconds, commas(int64(r.ProcessedPerSecond())), r.ProcessedSeconds-r.SendSeconds)
	share := 0.0
	if r.Accepted > 0 {
		share = 100 * float64(r.Events) / float64(r.Accepted)
	}
	fmt.Fprintf(&b, "| alarm events in alerts.events (read_committed) | %s (%.2f %% of positions; the alerter committed %s; read twice %d; no accepted record %d), the last %.2f s after the last 202; %s fetches to read them |\n",
		commas(int64(r.Events)), share, commas(r.AlerterEvents), r.DuplicateEvents, r.UnmatchedEvents, r.EventsSeconds-r.SendSeconds,
		commas(int64(r.EventPolls)))
	l := r.Latency
	if l.N > 0 {
		fmt.Fprintf(&b, "| latency 202 → alerts.events: p50 / p90 / p99 / max | **%s / %s / %s / %s ms** (n %s; min %s, mean %s) |\n",
			ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max), commas(int64(l.N)), ms(l.Min), ms(l.Mean))
		for _, st := range []struct {
			name string
			l    Latency
		}{{"202 → Redis outbox (alerter; stream id, ms)", r.LatencyToOutbox}, {"202 → produced to alerts.events (dispatcher; record timestamp, ms)", r.LatencyToProduced}} {
			if st.l.N > 0 {
				fmt.Fprintf(&b, "| stage: %s: p50 / p90 / p99 / max | %s / %s / %s / %s ms |\n", st.name, ms(st.l.P50), ms(st.l.P90), ms(st.l.P99), ms(st.l.Max))
			}
		}
		if r.RecordsPerBatch > 0 {
			fmt.Fprintf(&b, "| of 202 → outbox, the alerter's apply and commit of a batch (mean) | %.2f ms for %.1f records a batch; the rest is the fetch and the batch's wait to fill |\n",
				r.BatchMeanSeconds*1e3, r.RecordsPerBatch)
		}
	} else {
		b.WriteString("| latency 202 → alerts.events | no event: not measured |\n")
	}
	if s := r.LatencyToSSE; s.N > 0 {
		fmt.Fprintf(&b, "| latency 202 → the event's frame at an SSE client of /v1/events/stream: p50 / p90 / p99 / max | **%s / %s / %s / %s ms** (n %s; %d read twice, %d reconnects) |\n",
			ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), commas(int64(s.N)), r.SSEDuplicateEvents, r.SSEReconnects)
		if o := r.LatencyOutboxToSSE; o.N > 0 {
			fmt.Fprintf(&b, "| stage: Redis outbox → SSE frame (the hub's wake and the write; outbox ms): p50 / p90 / p99 / max | %s / %s / %s / %s ms |\n",
				ms(o.P50), ms(o.P90), ms(o.P99), ms(o.Max))
		}
	} else {
		b.WriteString("| latency 202 → SSE client | no event on the stream: not measured |\n")
	}
	rs := r.Redis
	fmt.Fprintf(&b, "| Redis round trips / 1,000 positions (replies written) | **%.2f** (reads %.2f) |\n",
		r.Per1k(float64(rs.Writes)), r.Per1k(float64(rs.Reads)))
	fmt.Fprintf(&b, "| Redis commands / 1,000 positions (total_commands_processed, scripts' inner ones included) | %.1f; script calls %.2f; idle before: %.1f commands/s |\n",
		r.Per1k(float64(rs.Commands)), r.Per1k(float64(rs.ScriptCalls())), r.RedisIdleCommandsPerSecond)
	atEnd := "–"
	if r.Lag.AtSendEnd >= 0 {
		atEnd = commas(r.Lag.AtSendEnd)
	}
	fmt.Fprintf(&b, "| consumer lag (records; sampled every %g s): max / just after the last 202 | %s at %.0f s / %s |\n",
		r.Lag.Every, commas(r.Lag.Max), r.Lag.MaxAt, atEnd)
	b.WriteString("\n")

	fmt.Fprintf(&b, "CPU from the first request to the last event (%.2f s):\n\n", r.EventsSeconds)
	b.WriteString("| process | CPU s | CPU s / 1,000 positions | cores | idle before (cores) |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, p := range r.CPU {
		name := p.Name
		if name == "bench" {
			name = "bench (traffic and clients; not counted)"
		}
		if p.Seconds < 0 {
			fmt.Fprintf(&b, "| %s | – | – | – | – |\n", name)
			continue
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.4f | %.2f | %.2f |\n", name, p.Seconds, r.Per1k(p.Seconds), p.Cores, p.IdleCores)
	}
	fmt.Fprintf(&b, "| **pipeline** (ingest + alerter + kafka + redis) | %.2f | **%.4f** | | |\n\n", r.PipelineCPU(), r.Per1k(r.PipelineCPU()))

	if len(rs.ByCommand) > 0 {
		type kv struct {
			k string
			v int64
		}
		var cmds []kv
		for k, v := range rs.ByCommand {
			cmds = append(cmds, kv{k, v})
		}
		sort.Slice(cmds, func(i, j int) bool { return cmds[i].v > cmds[j].v || cmds[i].v == cmds[j].v && cmds[i].k < cmds[j].k })
		var parts []string
		for _, x := range cmds[:min(10, len(cmds))] {
			parts = append(parts, fmt.Sprintf("%s %.1f", x.k, r.Per1k(float64(x.v))))
		}
		fmt.Fprintf(&b, "Redis calls / 1,000 positions by command (INFO commandstats): %s\n\n", strings.Join(parts, ", "))
	}
	if s := lagLine(r.Lag.Series, 24); s != "" {
		fmt.Fprintf(&b, "Lag over time (s: records): %s\n", s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// lagLine is at most n samples of the series, evenly picked, the last
// always.
func lagLine(series []LagSample, n int) string {
	if len(series) == 0 {
		return ""
	}
	step := (len(series) + n - 1) / n
	var parts []string
	for i := 0; i < len(series); i += step {
		if i+step >= len(series) {
			i = len(series) - 1
		}
		parts = append(parts, fmt.Sprintf("%.1f: %s", series[i].T, commas(series[i].Lag)))
	}
	return strings.Join(parts, ", ")
}

// ms is d in milliseconds, one decimal.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// commas writes n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}
