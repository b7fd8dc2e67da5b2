package auditkafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/audit/auditkafka"
	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/producer"
)

// TestDispatchExactlyOnce: entries of every audit stream reach the topic
// once each, in each stream's order, through everything that can make a
// dispatcher send twice or skip: entries written while no dispatcher runs
// (a crash after the Redis commit), a dispatcher stopped and another
// started, and two dispatchers running at once (a zombie: each new one
// fences the other, and reads the committed tail before it sends).
func TestDispatchExactlyOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "auditkafka")
	topic := testenv.CreateTopic(t, brokers, 1)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := audit.NewLog(rdb, audit.Sources(prefix, "pos", 2), time.Hour, nil)
	newProducer, tail := auditkafka.NewKafka(brokers, topic, producer.Config{DeliveryTimeout: 5 * time.Second, Logger: log})
	newDispatcher := func() *auditkafka.Dispatcher {
		d, err := auditkafka.New(auditkafka.Options{Redis: rdb, Sources: l.Sources(), NewProducer: newProducer, Tail: tail,
			Cursor: audit.Tag(prefix) + ":cursor:kafka", Poll: 20 * time.Millisecond, Batch: 7, Backoff: 50 * time.Millisecond, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	run := func() (stop func()) {
		c, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = newDispatcher().Run(c); close(done) }()
		return func() { cancel(); <-done }
	}
	n := 0
	write := func(k int) {
		for range k {
			src := l.Sources()[n%len(l.Sources())]
			e := audit.Entry{Who: "w", Action: audit.ActionAck, Target: fmt.Sprint(n), Outcome: "ok"}.Encode()
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: src.Key, Values: []any{audit.FieldEntry, e}}).Err(); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	write(30) // before any dispatcher: the commit happened, the dispatch did not
	stop := run()
	write(30)
	time.Sleep(300 * time.Millisecond)
	stop() // stopped between batches or in one
	write(30)
	stopA, stopB := run(), run() // a zombie beside the new owner
	for range 10 {
		write(5)
		time.Sleep(30 * time.Millisecond)
	}
	stopA()
	stopB()
	write(10)
	stop = run()
	defer stop()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	var recs []committed.Record
	testenv.CheckFor(t, 60*time.Second, func() error {
		var err error
		if recs, err = r.ReadAll(ctx, 0); err != nil {
			return err
		}
		if len(recs) < n {
			return fmt.Errorf("%d of %d entries in the topic", len(recs), n)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // a double would come now
	if recs, _ = r.ReadAll(ctx, 0); len(recs) != n {
		t.Fatalf("%d records for %d entries", len(recs), n)
	}
	seen := map[string]bool{}
	last := map[string]string{} // each source's order
	for _, rec := range recs {
		id, _ := rec.Header(auditkafka.HeaderID)
		if seen[string(id)] {
			t.Fatalf("%s sent twice", id)
		}
		seen[string(id)] = true
		var src, sid string
		for i := range id {
			if id[i] == '-' {
				src, sid = string(id[:i]), string(id[i+1:])
				break
			}
		}
		if prev := last[src]; prev != "" && !before(prev, sid) {
			t.Errorf("%s after %s-%s", id, src, prev)
		}
		last[src] = sid
		if e, err := audit.Decode(src, sid, string(rec.Value)); err != nil || e.ID != string(id) || e.Who != "w" {
			t.Errorf("record %s: %s (%v)", id, rec.Value, err)
		}
	}
}

func before(a, b string) bool {
	var am, as, bm, bs uint64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	return am < bm || (am == bm && as < bs)
}

// TestDispatchRefusesAnotherTrail: a deployment pointed at a topic another
// deployment's trail is in (another Redis prefix) sends nothing: the
// tail's positions are not its streams', and two trails in one topic
// could not be resumed.
func TestDispatchRefusesAnotherTrail(t *testing.T) {
	brokers := testenv.Kafka(t)
	rdb := testenv.RedisClient(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr}
	for i, name := range []string{"audit-a", "audit-b"} {
		prefix := testenv.RedisPrefix(t, name)
		l := audit.NewLog(rdb, audit.Sources(prefix, "pos", 1), time.Hour, nil)
		newProducer, tail := auditkafka.NewKafka(brokers, topic, producer.Config{DeliveryTimeout: 5 * time.Second, Logger: log})
		if err := l.Record(ctx, audit.Entry{Who: name, Action: audit.ActionTokenReload, Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
		d, err := auditkafka.New(auditkafka.Options{Redis: rdb, Sources: l.Sources(), NewProducer: newProducer, Tail: tail,
			Poll: 20 * time.Millisecond, Backoff: 50 * time.Millisecond, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = d.Run(c); close(done) }()
		if i == 0 {
			testenv.CheckFor(t, 30*time.Second, func() error {
				recs, err := r.ReadAll(ctx, 0)
				if err == nil && len(recs) != 1 {
					err = fmt.Errorf("%d records", len(recs))
				}
				return err
			})
		} else {
			time.Sleep(2 * time.Second)
		}
		cancel()
		<-done
	}
	recs, err := r.ReadAll(ctx, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v), want the first trail's one only", len(recs), err)
	}
}
