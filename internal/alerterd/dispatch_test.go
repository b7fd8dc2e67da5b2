package alerterd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/kafkatopic"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// withEvents turns the Kafka output of the dispatcher on for the
// pipeline's alerters, to a topic of the test's own that the alerter
// creates on start (with the telemetry topic's partition count).
func (p *pipeline) withEvents() *pipeline {
	p.events = testenv.UniqueName("alerts.events")
	brokers := p.brokers
	topic := p.events
	p.t.Cleanup(func() {
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	})
	return p
}

// eventRecord is one record of the events topic.
type eventRecord struct {
	partition int
	offset    int64
	outboxID  string
	eventID   string
	value     []byte
}

// eventsTopic reads every committed record of every partition of the
// events topic, up to the last stable offset, as a read_committed consumer
// sees them (kafka-go's Fetch would also return aborted writes).
func (p *pipeline) eventsTopic(ctx context.Context) ([]eventRecord, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(p.brokers...), Topic: p.events, Transport: tr}
	var out []eventRecord
	for part := 0; part < p.partitions; part++ {
		recs, err := r.ReadAll(ctx, part)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			er := eventRecord{partition: part, offset: rec.Offset, value: rec.Value}
			if v, ok := rec.Header(outbox.HeaderOutboxID); ok {
				er.outboxID = string(v)
			}
			if v, ok := rec.Header(outbox.HeaderEventID); ok {
				er.eventID = string(v)
			}
			out = append(out, er)
		}
	}
	return out, nil
}

// eventsCaughtUp is nil once the events topic holds at least as many
// records as the outboxes hold entries.
func (p *pipeline) eventsCaughtUp() error {
	ctx := context.Background()
	recs, err := p.eventsTopic(ctx)
	if err != nil {
		return err
	}
	s := p.store()
	n := 0
	for part := 0; part < p.partitions; part++ {
		es, err := s.Outbox(ctx, part)
		if err != nil {
			return err
		}
		n += len(es)
	}
	if len(recs) < n {
		return fmt.Errorf("events topic %s: %d records, outboxes %d entries", p.events, len(recs), n)
	}
	return nil
}

// checkEventsTopic waits until the events topic has caught up with the
// outboxes, then asserts that it holds every outbox event exactly once
// (counted by event_id: 0 missing, 0 duplicate), partition p's events in
// partition p, each with the nofly-outbox-id header of its outbox entry
// and the event's JSON as value. It returns the number of events.
func (p *pipeline) checkEventsTopic() int {
	t := p.t
	t.Helper()
	testenv.CheckFor(t, 120*time.Second, p.eventsCaughtUp)
	ctx := context.Background()
	recs, err := p.eventsTopic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type where struct {
		partition int
		outboxID  string
		value     string
	}
	want := map[string]where{}
	s := p.store()
	for part := 0; part < p.partitions; part++ {
		es, err := s.Outbox(ctx, part)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if _, dup := want[e.EventID]; dup {
				t.Errorf("outbox holds event %s twice", e.EventID)
			}
			want[e.EventID] = where{part, e.ID, string(e.Event)}
		}
	}
	got := map[string]int{}
	var dups, extra, misplaced, noHeader, badValue []string
	for _, r := range recs {
		if r.outboxID == "" {
			noHeader = append(noHeader, fmt.Sprintf("p%d@%d", r.partition, r.offset))
		}
		got[r.eventID]++
		if got[r.eventID] == 2 {
			dups = append(dups, r.eventID)
		}
		w, ok := want[r.eventID]
		switch {
		case !ok:
			extra = append(extra, fmt.Sprintf("%q at p%d@%d", r.eventID, r.partition, r.offset))
		case w.partition != r.partition || w.outboxID != r.outboxID:
			misplaced = append(misplaced, fmt.Sprintf("%s: p%d outbox id %s, want p%d outbox id %s", r.eventID, r.partition, r.outboxID, w.partition, w.outboxID))
		case w.value != string(r.value):
			badValue = append(badValue, r.eventID)
		}
	}
	var missing []string
	for id := range want {
		if got[id] == 0 {
			missing = append(missing, id)
		}
	}
	first := func(s []string) []string { return s[:min(len(s), 5)] }
	if len(missing)+len(dups)+len(extra)+len(misplaced)+len(noHeader)+len(badValue) > 0 {
		t.Errorf("events topic %s: %d records for %d outbox events: %d missing %v, %d duplicated %v, %d unknown %v, %d in the wrong partition or with the wrong outbox id %v, %d without %s %v, %d with another value %v",
			p.events, len(recs), len(want), len(missing), first(missing), len(dups), first(dups), len(extra), first(extra),
			len(misplaced), first(misplaced), len(noHeader), outbox.HeaderOutboxID, first(noHeader), len(badValue), first(badValue))
	} else {
		t.Logf("events topic %s: %d records = %d outbox events, each once (0 missing, 0 duplicate), in its partition, with %s",
			p.events, len(recs), len(want), outbox.HeaderOutboxID)
	}
	return len(want)
}

func TestParseConfigDispatch(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(Config) bool
		wantErr string
	}{
		{"defaults", []string{"--zones", "z"}, nil, func(c Config) bool {
			return c.EventsTopic == "alerts.events" && len(c.Webhooks) == 0 && c.WebhookMaxAttempts == outbox.DefaultWebhookMaxAttempts && c.WebhookTimeout == 10*time.Second && c.dispatching()
		}, ""},
		{"kafka output off", []string{"--zones", "z", "--events-topic="}, map[string]string{"NOFLY_EVENTS_TOPIC": "x"},
			func(c Config) bool { return c.EventsTopic == "" && !c.dispatching() }, ""},
		{"repeated webhook flag", []string{"--zones", "z", "--webhook", "a=http://h:1/x", "--webhook", "b=https://h/y?q=1"}, nil,
			func(c Config) bool {
				return reflect.DeepEqual(c.Webhooks, []WebhookURL{{"a", "http://h:1/x"}, {"b", "https://h/y?q=1"}})
			}, ""},
		{"webhooks from env", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_WEBHOOKS": "a=http://h/1, b=http://h/2",
			"NOFLY_WEBHOOK_MAX_ATTEMPTS": "3", "NOFLY_WEBHOOK_TIMEOUT": "2s", "NOFLY_EVENTS_TOPIC": "ev"},
			func(c Config) bool {
				return reflect.DeepEqual(c.Webhooks, []WebhookURL{{"a", "http://h/1"}, {"b", "http://h/2"}}) &&
					c.WebhookMaxAttempts == 3 && c.WebhookTimeout == 2*time.Second && c.EventsTopic == "ev"
			}, ""},
		{"flag beats env", []string{"--webhook", "f=http://h/f"}, map[string]string{"NOFLY_ZONES": "z", "NOFLY_WEBHOOKS": "e=http://h/e"},
			func(c Config) bool { return reflect.DeepEqual(c.Webhooks, []WebhookURL{{"f", "http://h/f"}}) }, ""},
		{"webhook without name", []string{"--zones", "z", "--webhook", "http://h/x"}, nil, nil, "is not NAME=URL"},
		{"webhook bad url", []string{"--zones", "z", "--webhook", "a=ftp://h/x"}, nil, nil, "Webhooks (--webhook, NOFLY_WEBHOOKS)"},
		{"webhook bad name", []string{"--zones", "z", "--webhook", "a b=http://h/x"}, nil, nil, "Webhooks"},
		{"webhook name twice", []string{"--zones", "z", "--webhook", "a=http://h/x", "--webhook", "a=http://h/y"}, nil, nil, "used twice"},
		{"bad events topic", []string{"--zones", "z", "--events-topic", "a/b"}, nil, nil, "EventsTopic (--events-topic, NOFLY_EVENTS_TOPIC)"},
		{"events topic is telemetry", []string{"--zones", "z", "--events-topic", "telemetry.positions"}, nil, nil, "EventsTopic"},
		{"bad attempts", []string{"--zones", "z", "--webhook-max-attempts", "0"}, nil, nil, "WebhookMaxAttempts (--webhook-max-attempts, NOFLY_WEBHOOK_MAX_ATTEMPTS)"},
		{"bad timeout", []string{"--zones", "z", "--webhook-timeout", "0s"}, nil, nil, "WebhookTimeout (--webhook-timeout, NOFLY_WEBHOOK_TIMEOUT)"},
		{"outbox retention default", []string{"--zones", "z"}, nil,
			func(c Config) bool {
				return c.OutboxRetention == 24*time.Hour && c.dispatchConfig().Retention == 24*time.Hour
			}, ""},
		{"outbox retention from env", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_OUTBOX_RETENTION": "90m"},
			func(c Config) bool { return c.dispatchConfig().Retention == 90*time.Minute }, ""},
		{"outbox retention 0 keeps all", []string{"--zones", "z", "--outbox-retention", "0"}, nil,
			func(c Config) bool { return c.dispatchConfig().Retention < 0 }, ""},
		{"bad outbox retention", []string{"--zones", "z", "--outbox-retention", "-1h"}, nil, nil, "OutboxRetention (--outbox-retention, NOFLY_OUTBOX_RETENTION)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("config = %+v", c)
			}
			oc := c.dispatchConfig()
			for i, w := range oc.Webhooks {
				if w.MaxAttempts != c.WebhookMaxAttempts || w.Timeout != c.WebhookTimeout || w.Name != c.Webhooks[i].Name {
					t.Errorf("dispatch webhook %d = %+v", i, w)
				}
			}
		})
	}
}

// TestEventsTopicPartitionCount: an existing events topic with another
// partition count than the telemetry topic stops the alerter at start,
// with an error that says why.
func TestEventsTopicPartitionCount(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	p := newPipeline(t, brokers, raddr, 3)
	cfg := p.config()
	cfg.EventsTopic = testenv.CreateTopic(t, brokers, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := serve(ctx, cfg, testLog(t), nil)
	if !errors.Is(err, kafkatopic.ErrPartitionCount) || !strings.Contains(err.Error(), "has 2 partitions, want 3") {
		t.Fatalf("serve = %v, want an error about the partition counts (2, want 3)", err)
	}
	t.Logf("refused: %v", err)
}

func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// metricSum sums the samples of metric name whose labels contain every
// one of labels (each `key="value"`), from /metrics.
func (pr *proc) metricSum(name string, labels ...string) (float64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://" + pr.http + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
lines:
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(f[0], l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, err
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("%s: no metric %s%v", pr.name, name, labels)
	}
	return sum, nil
}
