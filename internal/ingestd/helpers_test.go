package ingestd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// testLogger writes warnings and errors to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewJSONHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// runningService is a service serving on a loopback port.
type runningService struct {
	*service
	url    string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// startService starts the intake on cfg and waits until /readyz says it is
// connected to Kafka. It is stopped (gracefully) when the test ends.
func startService(t testing.TB, cfg Config) *runningService {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	svc, err := newService(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningService{service: svc, url: "http://" + svc.Addr(), cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- svc.run(ctx) }()
	t.Cleanup(func() { _ = rs.stop() })
	testenv.CheckFor(t, 60*time.Second, func() error {
		res, err := http.Get(rs.url + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d: %s", res.StatusCode, body)
		}
		return nil
	})
	return rs
}

// stop shuts the service down gracefully and returns run's error.
func (rs *runningService) stop() error {
	rs.once.Do(func() {
		rs.cancel()
		rs.err = <-rs.done
	})
	return rs.err
}

func position(drone string, seq int) telemetry.Position {
	return telemetry.Position{DroneID: drone, Seq: int64(seq),
		TS:  time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second),
		Lat: 51.47 + float64(seq%100)*1e-4, Lon: -0.46, AltM: telemetry.Float(85)}
}

func ndjsonBody(ps []telemetry.Position) []byte {
	var b bytes.Buffer
	for i := range ps {
		b.Write(ps[i].AppendJSON(nil))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// postNDJSON posts ps and returns the status code.
func postNDJSON(ctx context.Context, c *http.Client, url string, ps []telemetry.Position) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/telemetry", bytes.NewReader(ndjsonBody(ps)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header, nil
}

// readTopic reads every position record of every partition of topic, up
// to the high watermark at the time of the call: the clock ticks ingest
// writes beside them (ticker.go) are left out.
func readTopic(t *testing.T, brokers []string, topic string, partitions int) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for _, m := range readTopicAll(t, brokers, topic, partitions) {
		if _, tick := telemetry.ParseTick(m.Value); !tick {
			out = append(out, m)
		}
	}
	return out
}

// readTopicAll is readTopic with the ticks.
func readTopicAll(t *testing.T, brokers []string, topic string, partitions int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second, Transport: tr}
	reqs := make([]kafka.OffsetRequest, partitions)
	for p := range partitions {
		reqs[p] = kafka.LastOffsetOf(p)
	}
	var offs []kafka.PartitionOffsets
	testenv.CheckFor(t, time.Minute, func() error {
		res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
		if err != nil {
			return err
		}
		offs = res.Topics[topic]
		for _, o := range offs {
			if o.Error != nil {
				return fmt.Errorf("partition %d: %w", o.Partition, o.Error)
			}
		}
		if len(offs) != partitions {
			return fmt.Errorf("%d partitions' offsets, want %d", len(offs), partitions)
		}
		return nil
	})
	var out []kafka.Message
	for _, o := range offs {
		if o.LastOffset == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: o.Partition,
			MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 200 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("read partition %d of %s: %v", o.Partition, topic, err)
			}
			out = append(out, m)
			if m.Offset >= o.LastOffset-1 {
				break
			}
		}
		r.Close()
	}
	return out
}
