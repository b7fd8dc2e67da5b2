package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/zonegen"
)

// seedZones is the alerter's --zones: the zone store's first version,
// replaced by the generated set's PUT before any traffic.
const seedZones = "testdata/zones/airports.geojson"

// Run runs the soak and returns its figures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if _, err := os.Stat(seedZones); err != nil {
		return nil, fmt.Errorf("soak: %w (run from the repository root)", err)
	}
	rep := &Report{Config: cfg, CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadAvg: [2]string{loadavg(), ""}, Started: time.Now()}
	rep.Config.Log = nil

	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	pids := map[string]int{"soak": os.Getpid()}
	redisPID, version, err := benchcompare.RedisPID(ctx, rdb)
	if redisPID == 0 && err != nil {
		return nil, err
	}
	rep.Redis = version
	if err != nil {
		log.Warn("redis CPU not measured", "err", err)
	} else {
		pids["redis"] = redisPID
	}
	if cfg.KafkaPIDFile != "" {
		if pid, err := benchcompare.KafkaPIDFrom(cfg.KafkaPIDFile); err != nil {
			log.Warn("broker CPU not measured", "err", err)
		} else {
			pids["kafka"] = pid
		}
	}

	// The zone set first: a wrong generator fails before anything starts.
	t0 := time.Now()
	gen := zonegen.FAAGrid
	if cfg.ZoneFormat == "ed269" {
		gen = zonegen.ED269
	}
	set := gen(cfg.Seed, cfg.Zones)
	rep.ZoneSet = ZoneLoad{Format: cfg.ZoneFormat, Zones: set.Zones, Bytes: len(set.Doc), GenerateS: time.Since(t0).Seconds()}
	zs, _, err := geofence.Loader{}.Parse(bytes.NewReader(set.Doc))
	if err != nil {
		return nil, fmt.Errorf("soak: the generated set does not load: %w", err)
	}
	ix, err := geofence.NewIndex(zs)
	if err != nil {
		return nil, fmt.Errorf("soak: index of the generated set: %w", err)
	}
	in, out, site, err := togglerPoints(set, ix, time.Now())
	if err != nil {
		return nil, err
	}
	rep.TogglerSite = fmt.Sprintf("%s (%.4f, %.4f)", site.Name, site.Lat, site.Lon)
	log.Info("zone set generated", "zones", set.Zones, "MB", len(set.Doc)/1e6, "seconds", rep.ZoneSet.GenerateS, "toggler_site", site.Name)

	tmp, err := os.MkdirTemp("", "nofly-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.BinDir
	if bin == "" {
		bin = tmp
		log.Info("building cmd/ingest and cmd/alerter")
		b := exec.CommandContext(ctx, "go", "build", "-o", tmp+string(filepath.Separator), "./cmd/ingest", "./cmd/alerter")
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return nil, fmt.Errorf("soak: go build (run from the repository root): %w", err)
		}
	}
	tokenFile := filepath.Join(tmp, "tokens")
	admin, err := newToken(ctx, bin, tokenFile, "soak-admin", "admin")
	if err != nil {
		return nil, err
	}
	var viewers []string
	for i := range cfg.Dashboards + 1 { // the pages' and the SSE client's
		v, err := newToken(ctx, bin, tokenFile, "soak-viewer-"+strconv.Itoa(i), "viewer")
		if err != nil {
			return nil, err
		}
		viewers = append(viewers, v)
	}
	// A national set's PUT validates and stages tens of MB: on a loaded
	// machine that outlasts the default 30 s --http-read-timeout, which
	// also ends the handler's context (a 500 at "stage an entry").
	alerterArgs := []string{"--api-tokens=" + tokenFile, "--http-read-timeout=5m"}
	if n := 2 * len(set.Doc); n > 128<<20 {
		alerterArgs = append(alerterArgs, "--api-zone-set-max-bytes="+strconv.Itoa(n))
	}
	pl, err := benchcompare.StartPipeline(ctx, benchcompare.PipelineConfig{Brokers: cfg.Brokers, Redis: cfg.Redis,
		Partitions: cfg.Partitions, Zones: seedZones, RunPrefix: "soak-", BinDir: bin, LogDir: cfg.LogDir,
		AlerterArgs: alerterArgs, IngestLag: true, Log: log})
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	rep.RunID = pl.RunID
	pids["ingest"], pids["alerter"] = pl.IngestPID, pl.AlerterPID
	api := "http://" + pl.AlerterAddr

	if err := putZones(ctx, api, admin, set.Doc, pl, &rep.ZoneSet, log); err != nil {
		return nil, err
	}

	var pages []*page
	if cfg.Dashboards > 0 {
		log.Info("opening the dashboards", "pages", cfg.Dashboards)
		pages, err = openPages(ctx, api, viewers[1:], pageViewsOf(set, site))
		if err != nil {
			return nil, err
		}
		defer closePages(pages)
	}

	start := time.Now()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	sse := &sseClient{url: api + "/v1/events/stream", token: viewers[0], start: start, log: log}
	tr := &traffic{fleet: newFleet(set, cfg.Drones, cfg, in, out), accepts: newAcceptLog(cfg.Clients), cfg: cfg,
		url: "http://" + pl.IngestAddr + "/v1/telemetry", start: start, log: log}
	rep.Togglers = tr.fleet.togglers(cfg.Drones)
	m := &meter{cfg: cfg, pl: pl, rdb: rdb, pids: pids, pages: pages, sse: sse, tr: tr, start: start, log: log}
	var bg sync.WaitGroup
	bg.Go(func() { sse.run(runCtx) })
	bg.Go(func() { m.lagLoop(runCtx) })
	var sendErr error
	bg.Go(func() {
		if err := tr.run(runCtx); err != nil && runCtx.Err() == nil {
			sendErr = err
			stopRun()
		}
	})
	if len(pages) == len(pageViews) {
		bg.Go(func() { panLoop(runCtx, pages[2], cfg.PanEvery, log) })
	}
	if rep.OwnBaseMB, err = m.begin(ctx); err != nil {
		return nil, err
	}
	if cfg.Ceiling {
		err = m.search(runCtx, rep)
	} else {
		log.Info("traffic", "drones", cfg.Drones, "hz", cfg.Hz, "duration", cfg.Duration, "load", loadavg())
		tr.active.Store(int64(cfg.Drones))
		rep.Profiles, err = m.hold(runCtx, cfg.Duration, cfg.Drones, cfg.Profile > 0)
	}
	stopRun()
	bg.Wait()
	if sendErr != nil {
		return nil, fmt.Errorf("%w\ningest log:\n%s", sendErr, pl.IngestLogTail())
	}
	if err != nil {
		if perr := pl.Exited(); perr != nil {
			return nil, errors.Join(err, perr)
		}
		return nil, err
	}
	rep.Samples = m.samples
	rep.Latency = benchcompare.Summarize(m.latencies)
	rep.Unmatched = m.unmatched
	sse.mu.Lock()
	rep.OtherEvents, rep.Reconnects = sse.other, sse.reconnect
	sse.mu.Unlock()
	rep.LoadAvg[1] = loadavg()
	t := totals(rep.Samples)
	log.Info("done", "positions", t.Positions, "lag_max_s", fmt.Sprintf("%.2f", t.LagMaxS), "p99", rep.Latency.P99,
		"pipeline_cpu_per_1k", f4(per1k(t.PipelineCPU(), t.Positions)))
	return rep, nil
}

// newToken adds a token to the file with alerter api-token and returns it.
func newToken(ctx context.Context, bin, file, name, role string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "alerter"), "api-token", "--name", name, "--role", role, "--append", file).Output()
	if err != nil {
		return "", fmt.Errorf("soak: alerter api-token: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// putZones PUTs the set and waits until the alerter uses its version.
func putZones(ctx context.Context, api, token string, doc []byte, pl *benchcompare.Pipeline, z *ZoneLoad, log *slog.Logger) error {
	log.Info("PUT /v1/zones", "MB", len(doc)/1e6)
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, api+"/v1/zones", bytes.NewReader(doc))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("soak: PUT /v1/zones: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	z.PutS = time.Since(t0).Seconds()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("soak: PUT /v1/zones: %s: %s", resp.Status, body)
	}
	v, err := strconv.ParseInt(strings.Trim(resp.Header.Get("ETag"), `W/"`), 10, 64)
	if err != nil {
		return fmt.Errorf("soak: PUT /v1/zones: ETag %q: %w", resp.Header.Get("ETag"), err)
	}
	z.Version = v
	for deadline := time.Now().Add(5 * time.Minute); ; {
		mv, err := pl.AlerterMetrics(ctx, "nofly_alerter_zone_version")
		if err == nil && int64(mv["nofly_alerter_zone_version"]) >= v {
			break
		}
		if perr := pl.Exited(); perr != nil {
			return perr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: the alerter has not switched to zone version %d in 5 minutes:\n%s", v, pl.AlerterLogTail())
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	z.SwitchS = time.Since(t0).Seconds()
	log.Info("zones in use", "version", v, "put_s", fmt.Sprintf("%.1f", z.PutS), "switch_s", fmt.Sprintf("%.1f", z.SwitchS))
	return nil
}

func panLoop(ctx context.Context, p *page, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := p.pan(ctx); err != nil && ctx.Err() == nil {
			log.Warn("pan", "err", err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// traffic posts the fleet's ticks: tick k of client c is due at start +
// k/Hz + c/clients of a tick, so the requests spread over the tick.
type traffic struct {
	fleet   *fleet
	accepts *acceptLog
	cfg     Config
	url     string
	start   time.Time
	log     *slog.Logger

	active            atomic.Int64 // drones flying (a prefix of the fleet)
	accepted, refused atomic.Int64
	refusedReqs       atomic.Int64
}

func (t *traffic) run(ctx context.Context) error {
	interval := time.Duration(float64(time.Second) / t.cfg.Hz)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type job struct {
		k    int64
		body []byte
		n    int
	}
	chans := make([]chan job, t.cfg.Clients)
	for c := range chans {
		chans[c] = make(chan job, 2)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			for _, ch := range chans {
				close(ch)
			}
		}()
		for k := int64(0); ; k++ {
			// Generate a tick just before it is due, so its ts is now.
			if err := sleepCtx(ctx, time.Until(t.start.Add(time.Duration(k)*interval-interval/10))); err != nil {
				return
			}
			bodies := t.fleet.tick(k, int(t.active.Load()), interval.Seconds(), time.Now().UTC().Truncate(time.Millisecond))
			for c, b := range bodies {
				if len(b) == 0 {
					continue
				}
				select {
				case chans[c] <- job{k, b, bytes.Count(b, []byte{'\n'})}:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	for c := range t.cfg.Clients {
		wg.Go(func() {
			client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for j := range chans[c] {
				due := t.start.Add(time.Duration(j.k)*interval + interval*time.Duration(c)/time.Duration(t.cfg.Clients))
				if err := sleepCtx(ctx, time.Until(due)); err != nil {
					return
				}
				status, msg, err := benchcompare.PostBatch(ctx, client, t.url, j.body)
				if err != nil {
					if ctx.Err() == nil {
						cancel(err)
					}
					return
				}
				if status != http.StatusAccepted {
					t.refused.Add(int64(j.n))
					if t.refusedReqs.Add(1) <= 3 {
						t.log.Warn("ingest refused a request", "client", c, "status", status, "answer", msg)
					}
					continue
				}
				t.accepts.add(c, j.k, time.Since(t.start).Nanoseconds())
				t.accepted.Add(int64(j.n))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("soak: posting: %w", err)
	}
	return nil
}

// togglers is how many of the first n drones are togglers.
func (f *fleet) togglers(n int) int {
	if f.stride == 0 {
		return 0
	}
	return (n + f.stride - 1) / f.stride
}
