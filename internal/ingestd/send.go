package ingestd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/producer"
	"github.com/nofly-dev/nofly/telemetry"
)

// maxReported caps the bad lines send lists before giving up on a file.
const maxReported = 20

// sendCmd streams a recorded NDJSON track through the producer. The whole
// file is validated first: with a bad line nothing is sent, and every bad
// line (up to 20) is reported as file:line: field: error. Records go out in
// file order, one Produce call at a time, so each drone's records reach its
// partition in order.
func sendCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := newFlagSet("ingest send")
	fs.SetOutput(stderr)
	fs.kafkaFlags(&cfg)
	file := fs.String("file", "", "NDJSON track file to send (required)")
	rate := fs.Float64("rate", 0, "records per second; 0 = as fast as the broker acknowledges")
	batchSize := fs.Int("batch", 1000, "records per Produce call (at most; smaller at low rates)")
	progress := fs.String("progress", "auto", "progress on stderr: auto (a bar on a terminal, a line every 5s otherwise), bar, lines, none")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	switch {
	case *file == "":
		return fmt.Errorf("%w: --file is required", ErrConfig)
	case *rate < 0:
		return fmt.Errorf("%w: --rate must not be negative", ErrConfig)
	case *batchSize < 1:
		return fmt.Errorf("%w: --batch must be at least 1", ErrConfig)
	}
	mode := *progress
	if mode == "auto" {
		mode = "lines"
		if isTerminal(stderr) {
			mode = "bar"
		}
	}
	if mode != "bar" && mode != "lines" && mode != "none" {
		return fmt.Errorf("%w: --progress must be auto, bar, lines or none", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)

	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	recs, dropped, err := readTrack(*file, data)
	if err != nil {
		return err
	}
	for _, d := range dropped {
		fmt.Fprintln(stderr, "optional field dropped, record sent without it:", d)
	}

	kc, err := cfg.Security.Load()
	if err != nil {
		return err
	}
	if err := kc.Check(ctx, cfg.Brokers); err != nil {
		return err
	}
	tr := kc.Transport("nofly-ingest-send")
	defer tr.CloseIdleConnections()
	admin := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	if err := ensureTopic(ctx, admin, cfg); err != nil {
		return err
	}
	p, err := producer.New(ctx, producer.Config{Brokers: cfg.Brokers, Topic: cfg.Topic, ClientID: "nofly-ingest-send", Logger: log,
		TLS: kc.TLS, SASL: kc.SASL})
	if err != nil {
		return err
	}

	var sent atomic.Int64
	start := time.Now()
	bar := startProgress(stderr, mode, int64(len(recs)), &sent, start)
	sendErr := sendPaced(ctx, p, recs, *rate, *batchSize, &sent)
	bar.stop()

	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Close(cctx)
	el := time.Since(start)
	st := p.Stats()
	fmt.Fprintf(stdout, "%s: %d of %d records acknowledged in %v (%.0f records/s) to %s; producer batches %d, retries %d, broker-dropped duplicates %d\n",
		*file, sent.Load(), len(recs), el.Round(time.Millisecond), float64(sent.Load())/el.Seconds(), cfg.Topic,
		st.Batches, st.Retries, st.Duplicates)
	if sendErr != nil {
		return fmt.Errorf("stopped after %d acknowledged records: %w", sent.Load(), sendErr)
	}
	return nil
}

// readTrack validates every line and returns the records to produce, or an
// error listing the bad lines. It reads as ingest's intake does: a UTF-8 BOM
// at the start is skipped, and an optional field outside every convention
// is dropped (listed in dropped, up to 20, as file:line: field: why). The
// record time is left to the producer, the time of sending: never ts (see
// package ingest).
func readTrack(name string, data []byte) (recs []producer.Record, dropped []string, err error) {
	var bad []string
	var ws []telemetry.FieldWarning
	nBad, nDropped := 0, 0
	data = telemetry.TrimBOM(data)
	for line := 1; len(data) > 0; line++ {
		var ln []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			ln, data = data[:i], data[i+1:]
		} else {
			ln, data = data, nil
		}
		ln = bytes.TrimSpace(ln)
		if len(ln) == 0 {
			continue
		}
		pos, warns, err := telemetry.DecodeWarn(ln, ws[:0])
		ws = warns
		if err != nil {
			nBad++
			if len(bad) < maxReported {
				bad = append(bad, fmt.Sprintf("%s:%d: %v", name, line, err))
			}
			continue
		}
		for _, w := range warns {
			if nDropped++; len(dropped) < maxReported {
				dropped = append(dropped, fmt.Sprintf("%s:%d: %s", name, line, w))
			}
		}
		recs = append(recs, producer.NewRecord(pos.Key(), pos.AppendJSON(nil)))
	}
	if nBad > 0 {
		more := ""
		if nBad > len(bad) {
			more = fmt.Sprintf("\n... and %d more", nBad-len(bad))
		}
		return nil, nil, fmt.Errorf("%d invalid line(s), nothing sent:\n%s%s", nBad, strings.Join(bad, "\n"), more)
	}
	if len(recs) == 0 {
		return nil, nil, fmt.Errorf("%s: no records", name)
	}
	if nDropped > len(dropped) {
		dropped = append(dropped, fmt.Sprintf("... and %d more", nDropped-len(dropped)))
	}
	return recs, dropped, nil
}

// sendPaced produces recs in order, in batches, at rate records/s (0: no
// pacing). sent counts acknowledged records.
func sendPaced(ctx context.Context, p *producer.Producer, recs []producer.Record, rate float64, batchSize int, sent *atomic.Int64) error {
	if rate > 0 {
		batchSize = max(1, min(batchSize, int(rate/20))) // ~20 sends a second
	}
	start := time.Now()
	for i := 0; i < len(recs); i += batchSize {
		if rate > 0 {
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
		chunk := recs[i:min(i+batchSize, len(recs))]
		if err := p.Produce(ctx, chunk); err != nil {
			var pe *producer.ProduceError
			if errors.As(err, &pe) && len(pe.Records) > 0 {
				// Records before the first failure may be acknowledged too, but
				// only the ones Produce did not list are known to be.
				sent.Add(int64(len(chunk) - len(pe.Records)))
			}
			return err
		}
		sent.Add(int64(len(chunk)))
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

type progress struct {
	done chan struct{}
	end  chan struct{}
}

func (p *progress) stop() {
	close(p.done)
	<-p.end
}

// startProgress draws a bar (redrawn in place) or prints a line every 5s.
func startProgress(w io.Writer, mode string, total int64, sent *atomic.Int64, start time.Time) *progress {
	p := &progress{done: make(chan struct{}), end: make(chan struct{})}
	every := 5 * time.Second
	if mode == "bar" {
		every = 200 * time.Millisecond
	}
	draw := func(final bool) {
		n := sent.Load()
		el := time.Since(start).Seconds()
		r := float64(n) / max(el, 1e-9)
		switch mode {
		case "bar":
			const width = 30
			fill := int(float64(width) * float64(n) / float64(total))
			bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
			if fill < width {
				bar = bar[:fill] + ">" + bar[fill+1:]
			}
			end := ""
			if final {
				end = "\n"
			}
			fmt.Fprintf(w, "\r[%s] %d/%d %3.0f%% %7.0f rec/s%s", bar, n, total, 100*float64(n)/float64(total), r, end)
		case "lines":
			fmt.Fprintf(w, "progress: %d/%d records (%.0f%%), %.0f records/s\n", n, total, 100*float64(n)/float64(total), r)
		}
	}
	go func() {
		defer close(p.end)
		if mode == "none" {
			<-p.done
			return
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				if mode == "bar" {
					draw(true)
				}
				return
			case <-t.C:
				draw(false)
			}
		}
	}()
	return p
}
