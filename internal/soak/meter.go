package soak

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/benchcompare"
)

// meter takes the samples: the lag every second, everything else every
// cfg.Sample.
type meter struct {
	cfg   Config
	pl    *benchcompare.Pipeline
	rdb   *redis.Client
	pids  map[string]int
	pages []*page
	sse   *sseClient
	tr    *traffic
	start time.Time
	log   *slog.Logger

	mu     sync.Mutex
	lagMax int64 // since the last sample
	lagNow int64
	done   int64   // the group's committed offsets, summed
	ageMax float64 // ingest's gauge, since the last sample

	prevAt       time.Time
	prevCPU      map[string]time.Duration
	prevAccepted int64
	prevRefused  int64
	prevDone     int64
	samples      []Sample
	latencies    []time.Duration
	unmatched    int
}

func (m *meter) lagLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if age, err := ingestLagSeconds(ctx, m.pl.IngestAddr); err == nil {
			m.mu.Lock()
			m.ageMax = max(m.ageMax, age)
			m.mu.Unlock()
		}
		end, done, err := m.pl.Lag(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Debug("lag", "err", err)
			}
			continue
		}
		m.mu.Lock()
		m.done = done
		m.lagNow = end - done
		m.lagMax = max(m.lagMax, end-done)
		m.mu.Unlock()
	}
}

// cpu reads every process's CPU so far (-1: unknown).
func (m *meter) cpu() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, n := range procNames {
		out[n] = -1
		switch n {
		case "chromium":
			if len(m.pages) == 0 {
				continue
			}
			var sum time.Duration
			for _, p := range m.pages {
				c, err := treeCPU(p.pid)
				if err != nil {
					sum = -1
					break
				}
				sum += c
			}
			out[n] = sum
		default:
			if pid := m.pids[n]; pid > 0 {
				if c, err := benchcompare.ProcCPU(pid); err == nil {
					out[n] = c
				}
			}
		}
	}
	return out
}

// begin is the first reading, before the traffic; it returns the run's
// own Redis keys' MB then.
func (m *meter) begin(ctx context.Context) (float64, error) {
	own, _, err := ownRedis(ctx, m.rdb, m.pl.RunID)
	if err != nil {
		return 0, err
	}
	m.prevAt, m.prevCPU = time.Now(), m.cpu()
	m.mu.Lock()
	m.prevDone = m.done
	m.mu.Unlock()
	return own, ctx.Err()
}

// take ends a sample window: drones is what flew in it.
func (m *meter) take(ctx context.Context, drones int) Sample {
	now := time.Now()
	cpu := m.cpu()
	acc, ref := m.tr.accepted.Load(), m.tr.refused.Load()
	m.mu.Lock()
	lagMax, ageMax, done := m.lagMax, m.ageMax, m.done
	m.lagMax, m.ageMax = m.lagNow, -1
	m.mu.Unlock()
	s := Sample{T: now.Sub(m.start).Seconds(), Seconds: now.Sub(m.prevAt).Seconds(), Drones: drones,
		Positions: acc - m.prevAccepted, Refused: ref - m.prevRefused, Processed: done - m.prevDone, LagMax: lagMax,
		LagMaxS: lagSeconds(lagMax, float64(drones)*m.cfg.Hz), AgeMaxS: ageMax, CPU: map[string]float64{}}
	for _, n := range procNames {
		if cpu[n] < 0 || m.prevCPU[n] < 0 {
			s.CPU[n] = -1
		} else {
			s.CPU[n] = max(cpu[n]-m.prevCPU[n], 0).Seconds()
		}
	}
	lat, un := m.sse.match(m.tr.accepts, now.Sub(m.start).Nanoseconds(), int64(time.Minute))
	m.unmatched += un
	m.latencies = append(m.latencies, lat...)
	l := benchcompare.Summarize(lat)
	s.Events, s.P50, s.P99 = l.N, l.P50, l.P99
	var err error
	if s.RedisMB, err = redisUsedMB(ctx, m.rdb); err != nil {
		m.log.Warn("redis memory", "err", err)
	}
	if s.OwnMB, s.OwnKeys, err = ownRedis(ctx, m.rdb, m.pl.RunID); err != nil {
		m.log.Warn("redis memory of the run's keys", "err", err)
	}
	if s.AlerterMB, err = rssMB(m.pids["alerter"]); err != nil {
		m.log.Warn("alerter RSS", "err", err)
	}
	if s.IngestMB, err = rssMB(m.pids["ingest"]); err != nil {
		m.log.Warn("ingest RSS", "err", err)
	}
	for _, p := range m.pages {
		ps, err := p.sample(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("page sample", "err", err)
		}
		s.Pages = append(s.Pages, ps)
	}
	m.prevAt, m.prevCPU, m.prevAccepted, m.prevRefused, m.prevDone = now, cpu, acc, ref, done
	m.samples = append(m.samples, s)
	var pg []string
	for _, p := range s.Pages {
		pg = append(pg, fmt.Sprintf("%s:%.0fms/%.0fMB", p.Name, p.P95ms, p.HeapMB))
	}
	m.log.Info("sample", "t", time.Duration(s.T*float64(time.Second)).Round(time.Second), "drones", drones,
		"pos_per_s", int(s.PerSecond()), "processed_per_s", int(float64(s.Processed)/s.Seconds), "lag_max", lagMax, "lag_max_s", fmt.Sprintf("%.2f", s.LagMaxS),
		"ingest_lag_s", s.AgeMaxS, "events", s.Events, "p99", s.P99.Round(time.Millisecond), "redis_mb", int(s.RedisMB), "own_mb", fmt.Sprintf("%.1f", s.OwnMB), "alerter_rss_mb", int(s.AlerterMB),
		"pipeline_cpu_ms_per_1k", fmt.Sprintf("%.1f", 1000*per1k(pipelineOf(s.CPU), s.Positions)), "pages", strings.Join(pg, " "), "load", loadavg())
	return s
}

func pipelineOf(cpu map[string]float64) float64 {
	var sum float64
	for _, n := range procNames[:4] {
		if cpu[n] < 0 {
			return -1
		}
		sum += cpu[n]
	}
	return sum
}

// hold keeps drones flying for d, sampling, and fails if a process
// exits. With profile, perf records the alerter and ingest over the last
// cfg.Profile of it.
func (m *meter) hold(ctx context.Context, d time.Duration, drones int, profile bool) ([]Profile, error) {
	end := time.Now().Add(d)
	var prof []Profile
	var profErr error
	var wg sync.WaitGroup
	defer wg.Wait()
	profAt := end.Add(-m.cfg.Profile - m.cfg.Sample/2)
	started := false
	for {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		if profile && !started && time.Now().After(profAt) {
			started = true
			wg.Go(func() { prof, profErr = m.profile(ctx, drones) })
		}
		if err := sleepCtx(ctx, min(m.cfg.Sample, left)); err != nil {
			return nil, err
		}
		if err := m.pl.Exited(); err != nil {
			return nil, err
		}
		m.take(ctx, drones)
	}
	wg.Wait()
	if profErr != nil {
		m.log.Warn("profile", "err", profErr)
	}
	return prof, nil
}

// search is the ceiling search: steps of CeilingStep, the rate changed
// between them, the backlog of a failed step drained first; then, with
// Profile set, profiles at the ceiling.
func (m *meter) search(ctx context.Context, rep *Report) error {
	for {
		next, ceiling, done := nextStep(rep.Steps, m.cfg.CeilingStart, m.cfg.Drones)
		rep.Ceiling = ceiling
		if done {
			break
		}
		m.log.Info("ceiling step", "drones", next, "for", m.cfg.CeilingStep, "load", loadavg())
		m.tr.active.Store(int64(next))
		from := len(m.samples)
		if _, err := m.hold(ctx, m.cfg.CeilingStep, next, false); err != nil {
			return err
		}
		st := stepOf(m.samples[from:], next, m.cfg)
		rep.Steps = append(rep.Steps, st)
		m.log.Info("ceiling step done", "drones", next, "pos_per_s", int(st.PerSecond), "lag_max_s", fmt.Sprintf("%.2f", st.LagMaxS), "pass", st.Pass)
		if !st.Pass {
			if err := m.drain(ctx); err != nil {
				return err
			}
		}
	}
	m.log.Info("ceiling", "drones", rep.Ceiling)
	if m.cfg.Profile > 0 && rep.Ceiling > 0 {
		m.tr.active.Store(int64(rep.Ceiling))
		prof, err := m.hold(ctx, m.cfg.Profile+2*m.cfg.Sample, rep.Ceiling, true)
		rep.Profiles = prof
		return err
	}
	return nil
}

// stepOf judges a step by its samples after the first (which holds the
// change of rate).
func stepOf(ss []Sample, drones int, cfg Config) Step {
	st := Step{Drones: drones}
	if len(ss) > 1 {
		ss = ss[1:]
	}
	var lat []time.Duration
	t := totals(ss)
	// The stricter of the two lags: records behind in seconds of traffic,
	// and ingest's age of the oldest record not committed.
	st.LagMaxS, st.Refused = max(t.LagMaxS, t.AgeMaxS), t.Refused
	if t.Seconds > 0 {
		st.PerSecond = float64(t.Positions) / t.Seconds
	}
	for _, s := range ss {
		lat = append(lat, s.P99)
	}
	if len(lat) > 0 {
		st.P99 = slices.Max(lat)
	}
	st.Pass = passes(st.LagMaxS, st.Refused, st.PerSecond, float64(drones)*cfg.Hz, cfg.LagTarget)
	return st
}

// drain stops the traffic until the backlog is consumed (3 minutes at
// most), sampling as it goes.
func (m *meter) drain(ctx context.Context) error {
	m.tr.active.Store(0)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return err
		}
		m.mu.Lock()
		lag := m.lagNow
		m.mu.Unlock()
		if lag < 1000 {
			break
		}
	}
	if err := m.pl.Exited(); err != nil {
		return err
	}
	m.take(ctx, 0)
	return nil
}

// profile records perf profiles of the alerter and ingest at once for
// cfg.Profile and returns the top of each report. The binaries have no
// pprof endpoint: perf samples them from outside, symbols from the ELF.
func (m *meter) profile(ctx context.Context, drones int) ([]Profile, error) {
	var out []Profile
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, name := range []string{"alerter", "ingest"} {
		wg.Go(func() {
			file := filepath.Join(m.cfg.ProfileDir, fmt.Sprintf("%s-%s-%d.perf.data", m.pl.RunID, name, drones))
			secs := fmt.Sprintf("%.0f", m.cfg.Profile.Seconds())
			rec := exec.CommandContext(ctx, "perf", "record", "-F", "199", "-g", "-p", fmt.Sprint(m.pids[name]), "-o", file, "--", "sleep", secs)
			if b, err := rec.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("perf record %s: %w: %s", name, err, b))
				mu.Unlock()
				return
			}
			top, err := exec.CommandContext(ctx, "perf", "report", "-i", file, "--stdio", "--no-children", "-g", "none",
				"--sort", "sym", "--percent-limit", "1").Output()
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("perf report %s: %w", name, err))
				mu.Unlock()
				return
			}
			mu.Lock()
			out = append(out, Profile{Process: name, Drones: drones, File: file, Top: perfTop(string(top), 25)})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b Profile) int { return strings.Compare(a.Process, b.Process) })
	if len(errs) > 0 {
		return out, fmt.Errorf("soak: %v", errs)
	}
	return out, nil
}

// perfTop keeps the first n sample lines of a perf report (no comments,
// no blank lines).
func perfTop(report string, n int) string {
	var keep []string
	for line := range strings.Lines(report) {
		l := strings.TrimRight(line, "\n")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		keep = append(keep, l)
		if len(keep) == n {
			break
		}
	}
	return strings.Join(keep, "\n")
}
