package ingestd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestFarFutureTSRealKafka: a record whose ts is in 2099 — a drone clock
// far ahead — is a 400 naming ts under the default bound, and with the
// bound off (--max-clock-skew-ahead 0) a 202 whose record is in the topic,
// stamped with the receive time. Before, ts was the Kafka record time, the
// broker refused it (log.message.timestamp.after.max.ms, 1h) and the
// answer was a 500 on every retry.
func TestFarFutureTSRealKafka(t *testing.T) {
	brokers := testenv.Kafka(t)
	const partitions = 2
	topic := testenv.UniqueName("ingest-clock")
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
	p := position("FAST-CLOCK", 1)
	p.TS = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	body := string(p.AppendJSON(nil))

	postOne := func(url string) (int, []byte) {
		t.Helper()
		res, err := http.Post(url+"/v1/telemetry", "application/x-ndjson", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}

	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Partitions = brokers, topic, partitions
	bounded := startService(t, cfg)
	code, answer := postOne(bounded.url)
	var e struct {
		Errors []struct {
			Line  int
			Field string
			Error string
		}
	}
	if err := json.Unmarshal(answer, &e); err != nil {
		t.Fatalf("%d %s: %v", code, answer, err)
	}
	if code != http.StatusBadRequest || len(e.Errors) != 1 || e.Errors[0].Field != "ts" || e.Errors[0].Line != 1 ||
		!strings.Contains(e.Errors[0].Error, "ahead of the receive time") {
		t.Fatalf("default bound: %d %s; want 400 naming line 1, ts and the skew", code, answer)
	}
	if err := bounded.stop(); err != nil {
		t.Fatal(err)
	}

	cfg.MaxClockSkewAhead = 0 // no bound
	open := startService(t, cfg)
	before := time.Now().Truncate(time.Millisecond)
	if code, answer := postOne(open.url); code != http.StatusAccepted {
		t.Fatalf("no bound: %d %s; want 202", code, answer)
	}
	after := time.Now()
	msgs := readTopic(t, brokers, topic, partitions)
	if len(msgs) != 1 {
		t.Fatalf("the topic holds %d records, want the one accepted", len(msgs))
	}
	m := msgs[0]
	got, err := telemetry.Decode(m.Value)
	if err != nil || !bytes.Equal(m.Value, p.AppendJSON(nil)) || !got.TS.Equal(p.TS) {
		t.Fatalf("value %s (%v), want %s", m.Value, err, p.AppendJSON(nil))
	}
	if m.Time.Before(before) || m.Time.After(after) {
		t.Errorf("record time %v, want the receive time in [%v, %v]", m.Time, before, after)
	}
}
