// Command simulate flies a fleet of simulated drones near real airports and
// sends their positions to the ingest service (POST /v1/telemetry, NDJSON), or
// writes them to a file for `ingest send` and `alerter replay`.
//
//	go run ./cmd/simulate --ingest http://127.0.0.1:8080 --drones 50 --duration 30s
//	go run ./cmd/simulate --ingest http://127.0.0.1:8080 --alerter http://127.0.0.1:9102 --stray-share 0.5
//	go run ./cmd/simulate --out track.ndjson --drones 10 --steps 300
//
// Each drone flies missions from its own site a few kilometres from an
// airport, again and again: take-off, climb, cruise to waypoints, loiter,
// return, descend, land, pause (internal/fleet). --stray-share is the share
// of drones whose missions enter a zone of testdata/zones/airports.geojson
// and leave it again, some of them above a zone's ceiling, where that zone
// must not alarm; the others never enter a zone. --dup-rate re-sends a
// share of records, as a feed that retries would: the alerter must raise
// each alarm once all the same.
//
// Progress goes to stderr: on a terminal a line redrawn in place four times
// a second (records sent, records/s, errors, alarms), otherwise a log line
// every 5 s. Alarms are the raised events the alerter given by --alerter
// committed since the start (nofly_alerter_events_raised_total on its
// /metrics, polled once a second); without --alerter they show as "–".
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nofly-dev/nofly/internal/fleet"
	"github.com/nofly-dev/nofly/telemetry"
)

type config struct {
	ingest     string
	out        string
	alerter    string
	drones     int
	rate       float64
	duration   time.Duration
	steps      int
	batch      int
	dupRate    float64
	strayShare float64
	seed       uint64

	// Not flags: tests shorten them.
	redraw time.Duration // progress line on a terminal
	logged time.Duration // progress log line otherwise
	poll   time.Duration // the alerter's /metrics
}

func defaults() config {
	return config{redraw: 250 * time.Millisecond, logged: 5 * time.Second, poll: time.Second}
}

func main() {
	c := defaults()
	flag.StringVar(&c.ingest, "ingest", envOr("NOFLY_INGEST_URL", "http://127.0.0.1:8080"), "ingest base URL (env NOFLY_INGEST_URL)")
	flag.StringVar(&c.out, "out", "", "write NDJSON to this file (- for stdout) instead of posting")
	flag.StringVar(&c.alerter, "alerter", os.Getenv("NOFLY_ALERTER_URL"), "alerter base URL (its --http) whose /metrics count the alarms raised, for the progress display (env NOFLY_ALERTER_URL; empty: alarms not shown)")
	flag.IntVar(&c.drones, "drones", 20, "number of drones")
	flag.Float64Var(&c.rate, "rate", 1, "positions per second per drone when posting (0 = as fast as possible)")
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "how long to fly when posting (0 = until --steps)")
	flag.IntVar(&c.steps, "steps", 0, "positions per drone (0 = unbounded when posting; 300 when writing a file)")
	flag.IntVar(&c.batch, "batch", 100, "records per POST")
	flag.Float64Var(&c.dupRate, "dup-rate", 0.03, "share of records sent twice")
	flag.Float64Var(&c.strayShare, "stray-share", fleet.DefaultStrayShare, "share of drones whose missions enter a zone and leave it again, some above a zone's ceiling (0 = none)")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed: the same seed flies the same fleet")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: simulate [flags]

Flies simulated drones on missions from sites near real airports and posts
their positions to ingest (POST /v1/telemetry, NDJSON), or writes them to
--out. A share of the drones (--stray-share) strays into zones and out
again. Progress goes to stderr: a line redrawn in place on a terminal, a
log line every 5 s otherwise.

Flags:
`)
		flag.PrintDefaults()
	}
	flag.Parse()
	con := &console{w: os.Stderr, tty: isTerminal(os.Stderr)}
	log := slog.New(slog.NewTextHandler(con, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, log, con); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// isTerminal reports whether f is a character device: a terminal, so the
// progress line can be redrawn in place.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func run(ctx context.Context, c config, log *slog.Logger, con *console) error {
	if c.drones < 1 || c.batch < 1 || c.dupRate < 0 || c.dupRate >= 1 || c.strayShare < 0 || c.strayShare > 1 {
		return errors.New("--drones and --batch must be >= 1, --dup-rate in [0, 1), --stray-share in [0, 1]")
	}
	fl := fleet.New(c.drones, c.seed, time.Now().UTC().Truncate(time.Second), fleetOptions(c))
	rng := rand.New(rand.NewPCG(c.seed, 99))
	steps := c.steps
	if c.out != "" && steps == 0 {
		steps = 300
	}
	var cnt counters
	started := time.Now()
	// done is the share of the run behind us, -1 when it has no end.
	done := func() float64 {
		f := -1.0
		if steps > 0 {
			f = float64(cnt.steps.Load()) / float64(steps)
		}
		if c.out == "" && c.duration > 0 {
			f = max(f, time.Since(started).Seconds()/c.duration.Seconds())
		}
		return min(f, 1)
	}
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	if c.out == "" && c.alerter != "" {
		go pollAlerter(pctx, c.alerter, c.poll, &cnt, log)
	}
	d := &display{cnt: &cnt, con: con, log: log, done: done, start: started, file: c.out != "", alerter: c.alerter != ""}
	stopDisplay := d.run(c)
	var err error
	if c.out != "" {
		err = writeFile(ctx, c.out, fl, steps, c.dupRate, rng, &cnt)
	} else {
		err = fly(ctx, c, steps, fl, rng, &cnt, log)
	}
	stopPoll()
	stopDisplay()
	if err == nil && cnt.rejected.Load() > 0 {
		err = fmt.Errorf("ingest rejected %d records", cnt.rejected.Load())
	}
	return err
}

func fleetOptions(c config) fleet.Options {
	if c.strayShare == 0 {
		return fleet.Options{StrayShare: -1} // the fleet reads 0 as its default
	}
	return fleet.Options{StrayShare: c.strayShare}
}

// fly posts the fleet's fixes, one step per 1/--rate seconds, until
// --steps, --duration or ctx ends it.
func fly(ctx context.Context, c config, steps int, fl *fleet.Fleet, rng *rand.Rand, cnt *counters, log *slog.Logger) error {
	var deadline <-chan time.Time
	if c.duration > 0 {
		t := time.NewTimer(c.duration)
		defer t.Stop()
		deadline = t.C
	}
	var tick <-chan time.Time
	if c.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / c.rate))
		defer t.Stop()
		tick = t.C
	}
	client := &http.Client{Timeout: 30 * time.Second}
	rej := rejections{log: log}
	for step := 0; steps == 0 || step < steps; step++ {
		if step > 0 {
			if tick != nil {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-deadline:
					return nil
				case <-tick:
				}
			} else {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-deadline:
					return nil
				default:
				}
			}
		}
		recs := fl.Step(rng, c.dupRate)
		for i := 0; i < len(recs); i += c.batch {
			if err := post(ctx, client, c.ingest, recs[i:min(i+c.batch, len(recs))], cnt, &rej); err != nil {
				return err
			}
		}
		cnt.steps.Add(1)
	}
	return nil
}

func writeFile(ctx context.Context, path string, fl *fleet.Fleet, steps int, dupRate float64, rng *rand.Rand, cnt *counters) error {
	var w io.Writer = os.Stdout
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	buf := make([]byte, 0, 256)
	for range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs := fl.Step(rng, dupRate)
		for _, p := range recs {
			buf = append(p.AppendJSON(buf[:0]), '\n')
			if _, err := bw.Write(buf); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
		}
		cnt.sent.Add(int64(len(recs)))
		cnt.steps.Add(1)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// rejections logs the batches ingest refused, at most one every 5 s: a
// fleet whose records ingest refuses would otherwise flood the log.
type rejections struct {
	log    *slog.Logger
	last   time.Time
	quiet  int // refused since the last line
	quietN int // their records
}

func (r *rejections) add(n int, status, msg string) {
	r.quiet++
	r.quietN += n
	if time.Since(r.last) < 5*time.Second {
		return
	}
	r.log.Warn("ingest refused records", "status", status, "answer", strings.TrimSpace(msg), "batches", r.quiet, "records", r.quietN)
	r.last, r.quiet, r.quietN = time.Now(), 0, 0
}

// post sends one batch. A batch ingest refuses as invalid (400, 422) is
// counted and logged, and the run goes on; 429, 503 and network errors are
// retried; any other answer ends the run.
func post(ctx context.Context, client *http.Client, base string, recs []telemetry.Position, cnt *counters, rej *rejections) error {
	var body bytes.Buffer
	for _, p := range recs {
		body.Write(p.AppendJSON(nil))
		body.WriteByte('\n')
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/telemetry", bytes.NewReader(body.Bytes()))
		if err != nil {
			return fmt.Errorf("post telemetry: %w", err)
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := client.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusAccepted:
				cnt.sent.Add(int64(len(recs)))
				return nil
			case http.StatusBadRequest, http.StatusUnprocessableEntity:
				cnt.rejected.Add(int64(len(recs)))
				rej.add(len(recs), resp.Status, string(msg))
				return nil
			case http.StatusServiceUnavailable, http.StatusTooManyRequests:
				err = fmt.Errorf("ingest answered %s", resp.Status)
			default:
				return fmt.Errorf("ingest answered %s: %s", resp.Status, bytes.TrimSpace(msg))
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		cnt.httpErrs.Add(1)
		if attempt == 20 {
			return fmt.Errorf("giving up after %d attempts: %w", attempt+1, err)
		}
		// Retrying the same records is safe: (drone_id, seq) dedups them.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(min(1<<attempt, 20)) * 100 * time.Millisecond):
		}
	}
}
