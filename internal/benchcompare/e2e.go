package benchcompare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// E2EConfig is a run of the end-to-end benchmark (cmd/bench): traffic at
// Rate positions/s (0: as fast as the clients get their 202s) through
// ingest → Kafka → alerter → alerts.events, until Duration has passed or
// Positions have been generated, whichever comes first.
type E2EConfig struct {
	Brokers    string  `json:"brokers"`
	Redis      string  `json:"redis"`
	Partitions int     `json:"partitions"`
	Rate       float64 `json:"rate"`
	// Duration and Positions bound the traffic; 0: no bound (one at
	// least must be set).
	Duration  time.Duration `json:"duration_ns"`
	Positions int           `json:"positions"`
	// Drones fly in all, TogglerShare of them togglers (crossing one zone
	// every ToggleEvery fixes), the rest internal/fleet's.
	Drones       int     `json:"drones"`
	TogglerShare float64 `json:"toggler_share"`
	ToggleEvery  int     `json:"toggle_every"`
	// Clients post concurrently, each the records of its own drones, one
	// request a tick.
	Clients int     `json:"clients"`
	DupRate float64 `json:"dup_rate"`
	Seed    uint64  `json:"seed"`
	Zones   string  `json:"zones"`
	// KafkaPIDFile is the broker's pid file (empty or unreadable: its
	// CPU is not reported).
	KafkaPIDFile string `json:"kafka_pid_file"`
	// BinDir holds prebuilt ingest and alerter binaries; empty: built
	// into a temporary directory.
	BinDir string `json:"bin_dir,omitempty"`
	// LogDir keeps ingest's and the alerter's logs; empty: removed.
	LogDir string `json:"log_dir,omitempty"`
	// Progress is the interval of the progress line (0: none).
	Progress time.Duration `json:"-"`
	// Command is the command line, for the report.
	Command string       `json:"command"`
	Log     *slog.Logger `json:"-"`
}

// Validate says what is wrong with c, if anything.
func (c E2EConfig) Validate() error {
	var errs []error
	if c.Duration <= 0 && c.Positions <= 0 {
		errs = append(errs, errors.New("set --duration or --positions (or both)"))
	}
	if c.Duration < 0 || c.Positions < 0 || c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		errs = append(errs, errors.New("--duration, --positions and --rate must not be negative"))
	}
	if c.Drones < 1 || c.Clients < 1 || c.Partitions < 1 || c.ToggleEvery < 1 {
		errs = append(errs, errors.New("--drones, --clients, --partitions and --toggle-every must be at least 1"))
	}
	if c.TogglerShare < 0 || c.TogglerShare > 1 || c.DupRate < 0 || c.DupRate > 1 {
		errs = append(errs, errors.New("--toggler-share and --dup-rate must be between 0 and 1"))
	}
	return errors.Join(errs...)
}

// togglers is how many of the drones are togglers.
func (c E2EConfig) togglers() int {
	return int(math.Round(float64(c.Drones) * c.TogglerShare))
}

// The processes whose CPU the run reports; the pipeline's are the first
// four.
var e2eProcs = []string{"ingest", "alerter", "kafka", "redis", "bench"}

const (
	lagEvery   = time.Second
	idleWindow = 3 * time.Second
)

// RunE2E runs the benchmark once and returns its figures.
func RunE2E(ctx context.Context, cfg E2EConfig) (*E2EResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if _, err := os.Stat(cfg.Zones); err != nil {
		return nil, fmt.Errorf("zone set: %w (run from the repository root)", err)
	}
	res := &E2EResult{Config: cfg, Machine: Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadavg()}}
	res.Config.Log = nil
	res.Config.Progress = 0

	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	redisBefore, err := redisInfo(ctx, rdb)
	if err != nil {
		return nil, fmt.Errorf("%w (is it running? bash scripts/services.sh start)", err)
	}
	res.Machine.RedisVersion = redisBefore.Version
	pids := map[string]int{"bench": os.Getpid()}
	if err := checkPid(redisBefore.PID, "redis"); err != nil {
		log.Warn("redis CPU not measured", "err", err)
	} else {
		pids["redis"] = redisBefore.PID
	}
	if cfg.KafkaPIDFile != "" {
		if pid, err := pidFile(cfg.KafkaPIDFile, "kafka"); err != nil {
			log.Warn("broker CPU not measured", "err", err)
		} else {
			pids["kafka"] = pid
		}
	}

	pl, err := StartPipeline(ctx, PipelineConfig{Brokers: cfg.Brokers, Redis: cfg.Redis, Partitions: cfg.Partitions,
		Zones: cfg.Zones, RunPrefix: "bench-", BinDir: cfg.BinDir, LogDir: cfg.LogDir, Log: log})
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	runID, topic, eventsTopic := pl.RunID, pl.Topic, pl.EventsTopic
	res.RunID = runID
	brokers := strings.Split(cfg.Brokers, ",")
	kc := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ingest, alerter := pl.ingest, pl.alerter
	ingestAddr, alerterAddr := pl.IngestAddr, pl.AlerterAddr
	pids["ingest"], pids["alerter"] = pl.IngestPID, pl.AlerterPID
	smp := &sampler{}
	for _, n := range e2eProcs {
		smp.add(n, pids[n])
	}

	// What the processes and Redis do before any traffic: the shared
	// servers' other users, and the pipeline idling.
	log.Info("measuring the idle machine", "for", idleWindow)
	idle0 := smp.take()
	idleR0, err := redisInfo(ctx, rdb)
	if err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, idleWindow); err != nil {
		return nil, err
	}
	idle1 := smp.take()
	redis0, err := redisInfo(ctx, rdb)
	if err != nil {
		return nil, err
	}
	idleSecs := idle1.at.Sub(idle0.at).Seconds()
	res.RedisIdleCommandsPerSecond = float64(redis0.Sub(idleR0).Commands) / idleSecs

	// The run.
	start := time.Now()
	res.Started = start
	cpu0 := smp.take()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	follower := &eventFollower{addr: kafka.TCP(brokers...), topic: eventsTopic, partitions: cfg.Partitions, start: start}
	var bg sync.WaitGroup
	bg.Go(func() { follower.run(runCtx) })
	// The operator's screen: connected before the first position.
	screen := &sseFollower{url: "http://" + alerterAddr + "/v1/events/stream", start: start}
	screenUp := make(chan struct{})
	bg.Go(func() { screen.run(runCtx, screenUp) })
	select {
	case <-screenUp:
	case <-time.After(10 * time.Second):
		_, last := screen.fails.get()
		return nil, fmt.Errorf("the SSE client did not connect to %s within 10s: %v", screen.url, last)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	lags := &lagSeries{}
	bg.Go(func() { lags.run(runCtx, kc, topic, runID, cfg.Partitions, start, log) })
	var accepted atomic.Int64
	if cfg.Progress > 0 {
		bg.Go(func() { progress(runCtx, cfg.Progress, start, &accepted, lags, follower, log) })
	}
	log.Info("traffic", "rate", rateName(cfg.Rate), "duration", cfg.Duration, "positions", cfg.Positions,
		"drones", cfg.Drones, "togglers", cfg.togglers(), "clients", cfg.Clients, "load", res.Machine.LoadStart)
	sent, err := sendTraffic(runCtx, cfg, "http://"+ingestAddr+"/v1/telemetry", start, &accepted, log)
	if err != nil {
		return nil, fmt.Errorf("%w\ningest log:\n%s", err, ingest.tailLog())
	}
	res.Accepted, res.Refused, res.RefusedRequests, res.Requests = sent.accepted, sent.refused, sent.refusedReqs, sent.requests
	res.Answer202 = Summarize(sent.answers)
	res.SendSeconds = sent.last.Sub(start).Seconds()
	log.Info("traffic sent; waiting for the alerter", "accepted", sent.accepted, "refused", sent.refused,
		"seconds", fmt.Sprintf("%.2f", res.SendSeconds))

	caught, produced, err := waitCaughtUp(ctx, kc, topic, runID, cfg.Partitions, alerter)
	if err != nil {
		return nil, err
	}
	res.Produced = produced
	res.ProcessedSeconds = caught.Sub(start).Seconds()
	lags.add(start, caught, produced, produced)

	m, err := alerterMetrics(ctx, "http://"+alerterAddr+"/metrics")
	if err != nil {
		return nil, err
	}
	res.AlerterEvents = int64(m["nofly_alerter_events_raised_total"] + m["nofly_alerter_events_cleared_total"] - m["nofly_alerter_events_suppressed_total"])
	res.AlerterRecords = int64(m["nofly_alerter_records_total"])
	if c := m["nofly_alerter_batch_seconds_count"]; c > 0 {
		res.BatchMeanSeconds = m["nofly_alerter_batch_seconds_sum"] / c
		res.RecordsPerBatch = m["nofly_alerter_records_total"] / c
	}
	done := waitEvents(ctx, follower, int(res.AlerterEvents), log)
	res.EventsSeconds = done.Sub(start).Seconds()
	// The screen gets each event from Redis, not the topic: give it a
	// moment to show the last ones.
	for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait) && screen.count() < follower.count(); {
		time.Sleep(20 * time.Millisecond)
	}
	cpu1 := smp.take()
	redis1, err := redisInfo(ctx, rdb)
	if err != nil {
		return nil, err
	}
	res.Machine.LoadEnd = loadavg()
	stopRun()
	bg.Wait()

	// Figures.
	res.Redis = redis1.Sub(redis0)
	window := cpu1.at.Sub(cpu0.at).Seconds()
	used, idleUsed := delta(cpu0, cpu1), delta(idle0, idle1)
	for i, name := range e2eProcs {
		pc := ProcessCPU{Name: name, Seconds: -1}
		if used[i] >= 0 {
			pc.Seconds = used[i].Seconds()
			pc.Cores = pc.Seconds / window
			pc.IdleCores = idleUsed[i].Seconds() / idleSecs
		}
		res.CPU = append(res.CPU, pc)
	}
	res.Lag = lags.summary(res.SendSeconds)
	res.matchEvents(follower, sent.log)
	res.matchSSE(screen, follower, sent.log)
	if res.SSEEvents < res.Events {
		log.Warn("the SSE client got fewer events than alerts.events holds", "sse", res.SSEEvents, "topic", res.Events)
	}
	if n, last := follower.fails.get(); n > 0 {
		log.Debug("polls of alerts.events that failed (retried)", "count", n, "last", last)
	}
	if res.Events < int(res.AlerterEvents) {
		log.Warn("alerts.events holds fewer events than the alerter committed", "seen", res.Events, "alerter", res.AlerterEvents)
	}
	if res.Latency.N == 0 {
		log.Warn("no alarm event: no latency measured (the togglers cross " + togglerZone + " of testdata/zones/airports.geojson)")
	}
	log.Info("done", "accepted_per_s", int(res.AcceptedPerSecond()), "processed_per_s", int(res.ProcessedPerSecond()),
		"p50", res.Latency.P50, "p99", res.Latency.P99, "events", res.Events)
	return res, nil
}

// matchEvents finds each event's record (drone, seq) among those
// accepted and its latency.
func (r *E2EResult) matchEvents(f *eventFollower, accepted *acceptLog) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := make(map[string]bool, len(f.events))
	var ds, toOutbox, toProduced []time.Duration
	startMs := r.Started.UnixMilli()
	for _, e := range f.events {
		if seen[e.id] {
			r.DuplicateEvents++
			continue
		}
		seen[e.id] = true
		r.Events++
		at, ok := accepted.at(e.drone, e.seq)
		if !ok {
			r.UnmatchedEvents++
			continue
		}
		ds = append(ds, time.Duration(e.at-at))
		// The stages, in milliseconds since the start, against the
		// 202's time truncated to the millisecond.
		acceptMs := startMs + at/1e6
		if e.outbox > 0 {
			toOutbox = append(toOutbox, time.Duration(e.outbox-acceptMs)*time.Millisecond)
		}
		if e.produced > 0 {
			toProduced = append(toProduced, time.Duration(e.produced-acceptMs)*time.Millisecond)
		}
	}
	r.Latency = Summarize(ds)
	r.LatencyToOutbox = Summarize(toOutbox)
	r.LatencyToProduced = Summarize(toProduced)
	r.EventPolls = f.polls
}

// workDirs makes a run's temporary directory and says where the services'
// logs go (logDir, or that directory) and where their binaries are (binDir,
// or built there from ./cmd/ingest and ./cmd/alerter). cleanup removes the
// temporary directory.
func workDirs(ctx context.Context, log *slog.Logger, pattern, binDir, logDir string) (tmp, logs, bin string, cleanup func(), err error) {
	tmp, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	logs, bin = tmp, tmp
	if logDir != "" {
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			cleanup()
			return "", "", "", nil, err
		}
		logs = logDir
	}
	if binDir != "" {
		return tmp, logs, binDir, cleanup, nil
	}
	log.Info("building cmd/ingest and cmd/alerter")
	b := exec.CommandContext(ctx, "go", "build", "-o", tmp+string(filepath.Separator), "./cmd/ingest", "./cmd/alerter")
	b.Stdout, b.Stderr = os.Stderr, os.Stderr
	if err := b.Run(); err != nil {
		cleanup()
		return "", "", "", nil, fmt.Errorf("go build (run from the repository root): %w", err)
	}
	return tmp, logs, bin, cleanup, nil
}

func redisInfo(ctx context.Context, rdb *redis.Client) (RedisStats, error) {
	info, err := rdb.Info(ctx, "server", "stats", "commandstats").Result()
	if err != nil {
		return RedisStats{}, fmt.Errorf("redis INFO at %s: %w", rdb.Options().Addr, err)
	}
	return ParseRedisInfo(info)
}

func alerterMetrics(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("alerter metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("alerter metrics: %w", err)
	}
	return MetricValues(string(b), "nofly_alerter_events_raised_total", "nofly_alerter_events_cleared_total",
		"nofly_alerter_events_suppressed_total", "nofly_alerter_records_total",
		"nofly_alerter_batch_seconds_sum", "nofly_alerter_batch_seconds_count")
}

// cleanupRun deletes the run's Redis keys, topics and consumer group.
func cleanupRun(rdb *redis.Client, kc *kafka.Client, prefix, group string, topics ...string) {
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
	_, _ = kc.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
	_, _ = kc.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{group}})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func rateName(r float64) string {
	if r == 0 {
		return "flat out"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// sent is what the clients did.
type sent struct {
	accepted, refused     int64 // records in 202 answers, in others
	requests, refusedReqs int
	last                  time.Time // the last answer
	log                   *acceptLog
	answers               []time.Duration // each 202's time from the request's start
}

// sendTraffic generates the ticks and has the clients post them, paced
// at cfg.Rate (each client's tick k is due at start + (k + c/clients) ×
// drones/rate, so the clients' requests are spread over the tick) or as
// fast as they get their answers.
func sendTraffic(ctx context.Context, cfg E2EConfig, url string, start time.Time, accepted *atomic.Int64, log *slog.Logger) (sent, error) {
	tr := newTraffic(cfg.Drones, cfg.togglers(), cfg.ToggleEvery, cfg.Clients, cfg.DupRate, cfg.Seed)
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(cfg.Drones) / cfg.Rate)
	}
	type tickBatch struct {
		k int
		b batch
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	chans := make([]chan tickBatch, cfg.Clients)
	for c := range chans {
		chans[c] = make(chan tickBatch, 4)
	}
	go func() {
		defer func() {
			for _, ch := range chans {
				close(ch)
			}
		}()
		generated := 0
		for k := 0; ; k++ {
			if cfg.Duration > 0 {
				if interval > 0 && time.Duration(k)*interval >= cfg.Duration ||
					interval == 0 && time.Since(start) >= cfg.Duration {
					return
				}
			}
			limit := 0
			if cfg.Positions > 0 {
				if generated >= cfg.Positions {
					return
				}
				limit = cfg.Positions - generated
			}
			bs, n := tr.tick(time.Now().UTC().Truncate(time.Millisecond), limit)
			generated += n
			for c, b := range bs {
				if len(b.recs) == 0 {
					continue
				}
				select {
				case chans[c] <- tickBatch{k, b}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	outs := make([]sent, cfg.Clients)
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Go(func() {
			out := &outs[c]
			out.log = newAcceptLog()
			client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for tb := range chans[c] {
				if interval > 0 {
					due := start.Add(time.Duration(tb.k)*interval + interval*time.Duration(c)/time.Duration(cfg.Clients))
					if err := sleepCtx(ctx, time.Until(due)); err != nil {
						return
					}
				}
				began := time.Now()
				status, msg, err := PostBatch(ctx, client, url, tb.b.body)
				now := time.Now()
				if err != nil {
					cancel(err)
					return
				}
				out.requests++
				out.last = now
				if status != http.StatusAccepted {
					out.refused += int64(len(tb.b.recs))
					if out.refusedReqs++; out.refusedReqs <= 3 {
						log.Warn("ingest refused a request", "client", c, "status", status, "answer", msg)
					}
					continue
				}
				out.answers = append(out.answers, now.Sub(began))
				ns := now.Sub(start).Nanoseconds()
				for _, r := range tb.b.recs {
					out.log.add(r.drone, r.seq, ns)
				}
				out.accepted += int64(len(tb.b.recs))
				accepted.Add(int64(len(tb.b.recs)))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return sent{}, fmt.Errorf("posting: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sent{}, err
	}
	total := sent{log: newAcceptLog()}
	for _, o := range outs {
		total.accepted += o.accepted
		total.refused += o.refused
		total.requests += o.requests
		total.refusedReqs += o.refusedReqs
		total.answers = append(total.answers, o.answers...)
		if o.last.After(total.last) {
			total.last = o.last
		}
		total.log.merge(o.log)
	}
	if total.requests == 0 {
		return sent{}, errors.New("no request was sent")
	}
	return total, nil
}

// PostBatch posts an NDJSON body and returns the answer's status and, when
// it is not 202, the start of its body.
func PostBatch(ctx context.Context, client *http.Client, url string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("post telemetry: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode == http.StatusAccepted {
		msg = nil
	}
	return resp.StatusCode, string(msg), nil
}

// waitCaughtUp polls the group's lag until it has processed every record
// of the topic (5 minutes at most), and returns when it first saw that and
// the records the topic holds.
func waitCaughtUp(ctx context.Context, kc *kafka.Client, topic, group string, partitions int, alerter *proc) (time.Time, int64, error) {
	deadline := time.Now().Add(5 * time.Minute)
	var lastErr error
	for {
		end, done, err := groupLag(ctx, kc, topic, group, partitions)
		now := time.Now()
		if err == nil && done >= end {
			return now, end, nil
		}
		if err != nil {
			lastErr = err
		}
		if perr := alerter.exited(); perr != nil {
			return time.Time{}, 0, perr
		}
		if now.After(deadline) {
			return time.Time{}, 0, fmt.Errorf("the alerter has not caught up in 5 minutes (processed %d of %d; last error %v)\nalerter log:\n%s",
				done, end, lastErr, alerter.tailLog())
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return time.Time{}, 0, err
		}
	}
}

// waitEvents waits until the follower has read want events, or for 60 s
// without a new one, and returns when it stopped waiting.
func waitEvents(ctx context.Context, f *eventFollower, want int, log *slog.Logger) time.Time {
	last, n := time.Now(), f.count()
	for n < want && ctx.Err() == nil {
		if time.Since(last) > time.Minute {
			log.Warn("no new event in alerts.events for a minute", "seen", n, "want", want)
			break
		}
		_ = sleepCtx(ctx, 10*time.Millisecond)
		if m := f.count(); m > n {
			n, last = m, time.Now()
		}
	}
	return last
}

// lagSeries is the group's lag sampled every lagEvery.
type lagSeries struct {
	mu      sync.Mutex
	samples []LagSample
}

func (l *lagSeries) add(start, at time.Time, end, done int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, LagSample{T: at.Sub(start).Seconds(), Produced: end, Processed: done, Lag: end - done})
}

func (l *lagSeries) last() (LagSample, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) == 0 {
		return LagSample{}, false
	}
	return l.samples[len(l.samples)-1], true
}

func (l *lagSeries) run(ctx context.Context, kc *kafka.Client, topic, group string, partitions int, start time.Time, log *slog.Logger) {
	t := time.NewTicker(lagEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		end, done, err := groupLag(ctx, kc, topic, group, partitions)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("lag sample", "err", err)
			}
			continue
		}
		l.add(start, time.Now(), end, done)
	}
}

// summary is the lag's maximum, its value at the sample nearest after
// sendEnd (seconds since the start) and the series.
func (l *lagSeries) summary(sendEnd float64) Lag {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := Lag{Every: lagEvery.Seconds(), Series: append([]LagSample(nil), l.samples...), AtSendEnd: -1}
	for _, s := range l.samples {
		if s.Lag > out.Max {
			out.Max, out.MaxAt = s.Lag, s.T
		}
		if out.AtSendEnd < 0 && s.T >= sendEnd {
			out.AtSendEnd = s.Lag
		}
	}
	return out
}

func progress(ctx context.Context, every time.Duration, start time.Time, accepted *atomic.Int64, lags *lagSeries, f *eventFollower, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	prevT, prevN, prevP := start, int64(0), int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, n := time.Now(), accepted.Load()
		s, _ := lags.last()
		secs := now.Sub(prevT).Seconds()
		log.Info("progress", "t", now.Sub(start).Round(time.Second), "accepted", n,
			"accepted_per_s", int(float64(n-prevN)/secs), "processed", s.Processed,
			"processed_per_s", int(float64(s.Processed-prevP)/secs), "lag", s.Lag, "events", f.count(), "load", loadavg())
		prevT, prevN, prevP = now, n, s.Processed
	}
}
