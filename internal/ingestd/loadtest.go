package ingestd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nofly-dev/nofly/telemetry"
)

// loadResult is what one loadtest run measured.
type loadResult struct {
	Requests, Accepted202, Records int
	Status                         map[int]int
	Errors                         int // transport errors
	Elapsed                        time.Duration
	Latencies                      []time.Duration // of the 202s, sorted
}

func (r loadResult) percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(r.Latencies)))) - 1
	return r.Latencies[max(0, min(i, len(r.Latencies)-1))]
}

// loadtestCmd posts NDJSON batches of --batch synthetic records from
// --clients concurrent clients to a running intake for --duration and
// reports accepted records/s and the latency of the 202s. Each client sends
// its next request after the previous answer (as a feed keeping its drones'
// order does) and owns its drones, so every record is unique by
// (drone_id, seq).
func loadtestCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ingest loadtest")
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/v1/telemetry", "intake URL")
	clients := fs.Int("clients", 8, "concurrent clients")
	batchN := fs.Int("batch", 100, "records per request")
	dur := fs.Duration("duration", 20*time.Second, "how long to post")
	drones := fs.Int("drones", 10, "drones per client")
	prefix := fs.String("prefix", fmt.Sprintf("LOAD-%d", time.Now().Unix()), "drone id prefix (keep runs apart)")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	if *clients < 1 || *batchN < 1 || *dur <= 0 || *drones < 1 {
		return fmt.Errorf("%w: --clients, --batch, --drones must be at least 1 and --duration positive", ErrConfig)
	}
	fmt.Fprintf(stdout, "loadtest: %d clients x %d records/request (~%d bytes/record), %v, %s\n",
		*clients, *batchN, len(synthRecord(*prefix, 0, 0, 0)), *dur, *url)
	res := loadtest(ctx, *url, *clients, *batchN, *drones, *dur, *prefix)
	printLoad(stdout, res)
	if res.Accepted202 == 0 {
		return fmt.Errorf("no request was accepted")
	}
	return nil
}

func printLoad(w io.Writer, r loadResult) {
	fmt.Fprintf(w, "requests %d, 202 %d, other statuses %v, transport errors %d\n", r.Requests, r.Accepted202, r.Status, r.Errors)
	fmt.Fprintf(w, "accepted %d records in %v: %.0f records/s, %.0f requests/s\n", r.Records, r.Elapsed.Round(time.Millisecond),
		float64(r.Records)/r.Elapsed.Seconds(), float64(r.Accepted202)/r.Elapsed.Seconds())
	fmt.Fprintf(w, "202 latency: p50 %v, p90 %v, p99 %v, max %v\n", r.percentile(50).Round(time.Microsecond),
		r.percentile(90).Round(time.Microsecond), r.percentile(99).Round(time.Microsecond), r.percentile(100).Round(time.Microsecond))
}

func loadtest(ctx context.Context, url string, clients, batchN, drones int, dur time.Duration, prefix string) loadResult {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	var (
		mu  sync.Mutex
		res = loadResult{Status: map[int]int{}}
		wg  sync.WaitGroup
	)
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			seq := 0
			for ctx.Err() == nil {
				body.Reset()
				for i := range batchN {
					body.Write(synthRecord(prefix, c, (seq+i)%drones, (seq+i)/drones))
					body.WriteByte('\n')
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body.Bytes()))
				req.Header.Set("Content-Type", "application/x-ndjson")
				t0 := time.Now()
				resp, err := hc.Do(req)
				lat := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil {
						return // the run ended mid-request: not counted
					}
					mu.Lock()
					res.Requests++
					res.Errors++
					mu.Unlock()
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				res.Requests++
				if resp.StatusCode == http.StatusAccepted {
					res.Accepted202++
					res.Records += batchN
					res.Latencies = append(res.Latencies, lat)
					seq += batchN
				} else {
					res.Status[resp.StatusCode]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Latencies)
	hc.CloseIdleConnections()
	return res
}

var loadEpoch = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// synthRecord is drone d of client c at step n: a slow walk west of
// Heathrow, one fix a second.
func synthRecord(prefix string, c, d, n int) []byte {
	p := telemetry.Position{
		DroneID: fmt.Sprintf("%s-%d-%d", prefix, c, d), Seq: int64(n),
		TS:  loadEpoch.Add(time.Duration(n) * time.Second),
		Lat: 51.40 + float64(d%50)*0.002, Lon: -0.60 + float64(n%1000)*0.0002,
		AltM: telemetry.Float(80 + float64(n%40)), SpeedMPS: telemetry.Float(12.5), HeadingDeg: telemetry.Float(90),
	}
	return p.AppendJSON(nil)
}
