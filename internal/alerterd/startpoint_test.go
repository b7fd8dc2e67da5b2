package alerterd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestStartPoints: a partition Redis has never seen starts at the group's
// committed Kafka offset; once Redis has a version, Redis's applied offset
// is the start point, not Kafka's (here deliberately rewound).
func TestStartPoints(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	p := newPipeline(t, brokers, raddr, 1)
	cfg := p.config()
	recs := toggling(1, 300, 10) // one drone crossing POLY every 10 records
	p.produce(recs)
	commit := func(off int64) {
		t.Helper()
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
		// A new group's coordinator may answer NOT_COORDINATOR or
		// COORDINATOR_LOAD_IN_PROGRESS for a moment on a busy broker: retried.
		testenv.CheckFor(t, 30*time.Second, func() error {
			res, err := c.OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{GroupID: cfg.Group, GenerationID: -1,
				Topics: map[string][]kafka.OffsetCommit{p.topic: {{Partition: 0, Offset: off}}}})
			if err != nil {
				return err
			}
			for _, ps := range res.Topics[p.topic] {
				switch {
				case errors.Is(ps.Error, kafka.NotCoordinatorForGroup), errors.Is(ps.Error, kafka.GroupCoordinatorNotAvailable),
					errors.Is(ps.Error, kafka.GroupLoadInProgress):
					return ps.Error
				case ps.Error != nil:
					t.Fatal(ps.Error)
				}
			}
			return nil
		})
	}
	offsets := func() []int64 {
		var out []int64
		for _, b := range p.outbox() {
			var e struct {
				Offset int64 `json:"offset"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Offset)
		}
		return out
	}

	commit(150)
	stop := p.startInProcess(cfg)
	testenv.CheckFor(t, 60*time.Second, p.caughtUp)
	stop()
	first := offsets()
	if len(first) == 0 || first[0] < 150 {
		t.Fatalf("events at offsets %v: want some, all at or after the committed offset 150", first)
	}

	// Kafka's committed offset rewound: Redis's version wins, nothing is
	// applied twice.
	commit(0)
	more := toggling(1, 320, 10)[300:]
	p.produce(more)
	stop = p.startInProcess(cfg)
	testenv.CheckFor(t, 60*time.Second, p.caughtUp)
	stop()
	all := offsets()
	seen := map[int64]bool{}
	for _, o := range all {
		if seen[o] {
			t.Errorf("an event at offset %d twice", o)
		}
		seen[o] = true
	}
	if len(all) <= len(first) || fmt.Sprint(all[:len(first)]) != fmt.Sprint(first) {
		t.Errorf("after restart: events at %v, before %v", all, first)
	}
	t.Logf("from committed offset 150: %d events; after a rewound Kafka offset: %d", len(first), len(all))
}
