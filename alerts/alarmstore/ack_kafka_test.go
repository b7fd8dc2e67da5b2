package alarmstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/alerts/outbox"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// TestConcurrentAcksReachKafkaOnce: ten concurrent acks of one alarm,
// through the real outbox dispatcher and its Kafka transactions, give one
// acked event in the events topic (read_committed), after the alarm's
// raise and in the alarm's partition, with every raise and clear there
// exactly once as well.
func TestConcurrentAcksReachKafkaOnce(t *testing.T) {
	ctx := context.Background()
	brokers := testenv.Kafka(t)
	rdb := testenv.RedisClient(t)
	const partitions = 2
	topic := testenv.CreateTopic(t, brokers, partitions)
	prefix := testenv.RedisPrefix(t, "ackkafka")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var raised []alerts.Event
	for i := 0; i < 6; i++ {
		e := storetest.Raised(i%partitions, fmt.Sprintf("D%d", i), "Z", "restricted", int64(i+1), base.Add(time.Duration(i)*time.Second))
		w.Add(e)
		raised = append(raised, e)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w.Add(storetest.ClearedOf(raised[1], 50, base.Add(time.Minute), alerts.ReasonExited))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := outbox.NewDispatcher(outbox.Config{Prefix: prefix, Topic: "pos", Block: 50 * time.Millisecond, Logger: logger},
		rdb, outbox.NewKafkaOutput(brokers, topic, producer.Config{Logger: logger}))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var runs sync.WaitGroup
	for p := 0; p < partitions; p++ {
		runs.Add(1)
		go func() {
			defer runs.Done()
			if err := d.Run(runCtx, p); err != nil && runCtx.Err() == nil {
				t.Errorf("dispatcher partition %d: %v", p, err)
			}
		}()
	}
	defer func() {
		cancel()
		runs.Wait()
	}()

	s, err := alarmstore.New(alarmstore.Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	target := raised[1] // cleared, on partition 1
	var wg sync.WaitGroup
	firsts := make(chan string, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, already, err := s.Ack(ctx, target.AlarmID, fmt.Sprintf("op%d", i), "on it")
			if err != nil {
				t.Error(err)
			}
			if !already {
				firsts <- fmt.Sprintf("op%d", i)
			}
		}()
	}
	wg.Wait()
	close(firsts)
	var by []string
	for b := range firsts {
		by = append(by, b)
	}
	if len(by) != 1 {
		t.Fatalf("acks that were first: %q, want one", by)
	}

	// Every raise (6), the clear and one ack: 8 events.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	type rec struct {
		partition int
		offset    int64
		ev        alerts.Event
	}
	var got []rec
	testenv.CheckFor(t, 60*time.Second, func() error {
		got = got[:0]
		for p := 0; p < partitions; p++ {
			rs, err := r.ReadAll(ctx, p)
			if err != nil {
				return err
			}
			for _, x := range rs {
				var e alerts.Event
				if err := json.Unmarshal(x.Value, &e); err != nil {
					return err
				}
				got = append(got, rec{p, x.Offset, e})
			}
		}
		if len(got) < 8 {
			return fmt.Errorf("%d events in %s, want 8", len(got), topic)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // anything more would show up now
	count := map[string]int{}
	var raiseAt, ackAt int64 = -1, -1
	for _, g := range got {
		count[g.ev.EventID]++
		if g.ev.AlarmID == target.AlarmID && g.partition == target.Partition {
			switch g.ev.Type {
			case alerts.Raised:
				raiseAt = g.offset
			case alerts.Acked:
				ackAt = g.offset
				if g.ev.By != by[0] || g.ev.Note != "on it" || g.ev.DroneID != target.DroneID || g.ev.ZoneVersion != target.ZoneVersion {
					t.Errorf("acked event = %+v, want by %s", g.ev, by[0])
				}
			}
		}
	}
	if len(got) != 8 || len(count) != 8 || count[target.AlarmID+":acked"] != 1 {
		t.Errorf("events topic holds %d records, by event id %v; want 8 distinct with one acked", len(got), count)
	}
	if raiseAt < 0 || ackAt <= raiseAt {
		t.Errorf("in partition %d the raise is at offset %d, the ack at %d: want the ack after the raise", target.Partition, raiseAt, ackAt)
	}
}
