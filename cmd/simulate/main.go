// Command simulate flies a fleet of simulated drones over real airports and
// sends their positions to the ingest service (POST /v1/telemetry, NDJSON), or
// writes them to a file for `ingest send` and `alerter replay`.
//
//	go run ./cmd/simulate --ingest http://127.0.0.1:8080 --drones 50 --duration 30s
//	go run ./cmd/simulate --out track.ndjson --drones 10 --steps 300
//
// Each drone starts a few kilometres from an airport and flies a straight
// line across it at its own speed and height, so it enters and leaves the
// aerodrome's zones. --dup-rate re-sends a share of records, as a feed that
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
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// airports are aerodrome reference points (public facts) the fleet flies
// across; the zone set in testdata/zones covers them.
var airports = []struct {
	icao     string
	lat, lon float64
}{
	{"EGLL", 51.4700, -0.4543}, {"EGKK", 51.1537, -0.1821}, {"LFPG", 49.0097, 2.5479},
	{"EHAM", 52.3105, 4.7683}, {"EDDF", 50.0379, 8.5622}, {"LSZH", 47.4582, 8.5555},
	{"LEMD", 40.4983, -3.5676}, {"LIRF", 41.8003, 12.2389}, {"EIDW", 53.4264, -6.2499},
	{"EKCH", 55.6180, 12.6508}, {"KJFK", 40.6413, -73.7781}, {"KLAX", 33.9416, -118.4085},
}

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
	fleet := NewFleet(c.drones, c.seed, time.Now().UTC().Truncate(time.Second))
	rng := rand.New(rand.NewPCG(c.seed, 99))
	if c.out != "" {
		steps := c.steps
		if steps == 0 {
			steps = 300
		}
		return writeFile(c.out, fleet, steps, c.dupRate, rng)
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
		recs := fleet.Step(rng, c.dupRate)
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

func writeFile(path string, fleet *Fleet, steps int, dupRate float64, rng *rand.Rand) error {
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
		for _, p := range fleet.Step(rng, dupRate) {
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

// Fleet is a set of simulated drones; Step advances every drone by one fix.
type Fleet struct {
	drones []*drone
	now    time.Time
}

type drone struct {
	id               string
	seq              int64
	lat, lon         float64
	dLat, dLon       float64 // degrees per step
	alt              float64
	heading, speed   float64
	stepsLeft, total int
}

// NewFleet places n drones around the airports, deterministically from seed.
func NewFleet(n int, seed uint64, start time.Time) *Fleet {
	rng := rand.New(rand.NewPCG(seed, 7))
	f := &Fleet{now: start}
	for i := range n {
		d := &drone{id: fmt.Sprintf("SIM-%04d", i+1)}
		d.retarget(rng)
		f.drones = append(f.drones, d)
	}
	return f
}

// retarget starts a straight pass across a random airport, from 6-10 km out
// on one side to as far out on the other, at 10-25 m/s and 40-400 m AMSL.
func (d *drone) retarget(rng *rand.Rand) {
	ap := airports[rng.IntN(len(airports))]
	bearing := rng.Float64() * 2 * math.Pi
	dist := 6000 + rng.Float64()*4000
	d.speed = 10 + rng.Float64()*15
	d.alt = 40 + rng.Float64()*360
	d.heading = math.Mod(bearing*180/math.Pi+180, 360)
	mPerDegLat := 111_320.0
	mPerDegLon := 111_320.0 * math.Cos(ap.lat*math.Pi/180)
	d.lat = ap.lat + dist*math.Cos(bearing)/mPerDegLat
	d.lon = ap.lon + dist*math.Sin(bearing)/mPerDegLon
	d.total = int(2 * dist / d.speed)
	d.stepsLeft = d.total
	d.dLat = -d.speed * math.Cos(bearing) / mPerDegLat
	d.dLon = -d.speed * math.Sin(bearing) / mPerDegLon
}

// Step moves every drone one second on and returns their fixes; a share
// dupRate of them is appended a second time, as a retrying feed would.
func (f *Fleet) Step(rng *rand.Rand, dupRate float64) []telemetry.Position {
	f.now = f.now.Add(time.Second)
	out := make([]telemetry.Position, 0, len(f.drones))
	for _, d := range f.drones {
		if d.stepsLeft == 0 {
			d.retarget(rng)
		}
		d.stepsLeft--
		d.seq++
		d.lat += d.dLat
		d.lon += d.dLon
		p := telemetry.Position{
			DroneID: d.id, Seq: d.seq, TS: f.now,
			Lat: round(d.lat, 7), Lon: round(d.lon, 7),
			AltM:       telemetry.Float(round(d.alt+rng.NormFloat64()*2, 1)),
			SpeedMPS:   telemetry.Float(round(d.speed, 1)),
			HeadingDeg: telemetry.Float(round(d.heading, 1)),
		}
		out = append(out, p)
		if rng.Float64() < dupRate {
			out = append(out, p)
		}
	}
	return out
}

func round(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}
