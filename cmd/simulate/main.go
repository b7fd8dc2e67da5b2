// Command simulate flies a fleet of simulated drones near real airports and
// sends their positions to the ingest service (POST /v1/telemetry, NDJSON), or
// writes them to a file for `ingest send` and `alerter replay`.
//
//	go run ./cmd/simulate --ingest http://127.0.0.1:8080 --drones 50 --duration 30s
//	go run ./cmd/simulate --out track.ndjson --drones 10 --steps 300
//
// Each drone flies missions from its own site a few kilometres from an
// airport (internal/fleet); a share of them strays into zones and out
// again. --dup-rate re-sends a share of records, as a feed that
// retries would: the alerter must raise each alarm once all the same.
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
	ingest   string
	out      string
	drones   int
	rate     float64
	duration time.Duration
	steps    int
	batch    int
	dupRate  float64
	seed     uint64
}

func main() {
	var c config
	flag.StringVar(&c.ingest, "ingest", envOr("NOFLY_INGEST_URL", "http://127.0.0.1:8080"), "ingest base URL (env NOFLY_INGEST_URL)")
	flag.StringVar(&c.out, "out", "", "write NDJSON to this file (- for stdout) instead of posting")
	flag.IntVar(&c.drones, "drones", 20, "number of drones")
	flag.Float64Var(&c.rate, "rate", 1, "positions per second per drone when posting (0 = as fast as possible)")
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "how long to fly when posting (0 = until --steps)")
	flag.IntVar(&c.steps, "steps", 0, "positions per drone (0 = unbounded when posting; 300 when writing a file)")
	flag.IntVar(&c.batch, "batch", 100, "records per POST")
	flag.Float64Var(&c.dupRate, "dup-rate", 0.03, "share of records sent twice")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed: the same seed flies the same fleet")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, log); err != nil && !errors.Is(err, context.Canceled) {
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

func run(ctx context.Context, c config, log *slog.Logger) error {
	if c.drones < 1 || c.batch < 1 || c.dupRate < 0 || c.dupRate >= 1 {
		return errors.New("--drones and --batch must be >= 1, --dup-rate in [0, 1)")
	}
	fl := fleet.New(c.drones, c.seed, time.Now().UTC().Truncate(time.Second), fleet.Options{})
	rng := rand.New(rand.NewPCG(c.seed, 99))
	if c.out != "" {
		steps := c.steps
		if steps == 0 {
			steps = 300
		}
		return writeFile(c.out, fl, steps, c.dupRate, rng)
	}
	var deadline <-chan time.Time
	if c.duration > 0 {
		deadline = time.After(c.duration)
	}
	tick := time.Duration(0)
	if c.rate > 0 {
		tick = time.Duration(float64(time.Second) / c.rate)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	sent := 0
	for step := 0; c.steps == 0 || step < c.steps; step++ {
		recs := fl.Step(rng, c.dupRate)
		for i := 0; i < len(recs); i += c.batch {
			if err := post(ctx, client, c.ingest, recs[i:min(i+c.batch, len(recs))]); err != nil {
				return err
			}
		}
		sent += len(recs)
		if step%10 == 0 {
			log.Info("flying", "step", step, "records_sent", sent)
		}
		if tick > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline:
				log.Info("done", "records_sent", sent)
				return nil
			case <-time.After(tick):
			}
		}
	}
	log.Info("done", "records_sent", sent)
	return nil
}

func writeFile(path string, fl *fleet.Fleet, steps int, dupRate float64, rng *rand.Rand) error {
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
		for _, p := range fl.Step(rng, dupRate) {
			buf = append(p.AppendJSON(buf[:0]), '\n')
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

func post(ctx context.Context, client *http.Client, base string, recs []telemetry.Position) error {
	var body bytes.Buffer
	for _, p := range recs {
		body.Write(p.AppendJSON(nil))
		body.WriteByte('\n')
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/telemetry", bytes.NewReader(body.Bytes()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := client.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusAccepted:
				return nil
			case resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests:
				return fmt.Errorf("ingest answered %s: %s", resp.Status, msg)
			}
			err = fmt.Errorf("ingest answered %s", resp.Status)
		}
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
