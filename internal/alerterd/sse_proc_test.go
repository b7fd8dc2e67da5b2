package alerterd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// sseEvent is one event read from GET /v1/events/stream.
type sseEvent struct {
	id        string // the SSE id: the cursor
	eventID   string
	partition int
	from      string // the instance it came from
}

// sseFollower follows the event stream, reconnecting with Last-Event-ID
// to the instance next() names when the one it reads from goes away.
type sseFollower struct {
	t    *testing.T
	next func() *proc

	mu       sync.Mutex
	events   []sseEvent
	connects []string
	err      error
}

func (f *sseFollower) snapshot() ([]sseEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events), f.err
}

func (f *sseFollower) lastID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		return ""
	}
	return f.events[len(f.events)-1].id
}

// run follows until ctx ends.
func (f *sseFollower) run(ctx context.Context) {
	for ctx.Err() == nil {
		pr := f.next()
		err := f.follow(ctx, pr)
		if ctx.Err() != nil {
			return
		}
		evs, _ := f.snapshot()
		f.t.Logf("stream from %s ended (%v) after %d events; reconnecting", pr.name, err, len(evs))
		var status statusError
		if errors.As(err, &status) {
			f.mu.Lock()
			f.err = err // a refusal (410, 400) is a failure, not a reconnect
			f.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type statusError struct{ msg string }

func (e statusError) Error() string { return e.msg }

// follow reads the stream from pr until it ends.
func (f *sseFollower) follow(ctx context.Context, pr *proc) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pr.http+"/v1/events/stream", nil)
	last := f.lastID()
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		return statusError{fmt.Sprintf("%s: GET /v1/events/stream (Last-Event-ID %q): %s %s", pr.name, last, res.Status, b.String())}
	}
	f.mu.Lock()
	f.connects = append(f.connects, pr.name)
	f.mu.Unlock()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var id, data string
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" && data != "":
			var ev struct {
				EventID   string `json:"event_id"`
				Partition int    `json:"partition"`
				Cursor    string `json:"cursor"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Cursor != id || id == "" {
				return statusError{fmt.Sprintf("bad SSE event id %q data %s (%v)", id, data, err)}
			}
			f.mu.Lock()
			f.events = append(f.events, sseEvent{id: id, eventID: ev.EventID, partition: ev.Partition, from: pr.name})
			f.mu.Unlock()
			id, data = "", ""
		case strings.HasPrefix(l, "id: "):
			id = l[4:]
		case strings.HasPrefix(l, "data: "):
			data = l[6:]
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("EOF")
}

// TestSSEReconnectProof: an SSE client reads the event stream through
// alerter A, which is SIGKILLed mid-stream; it reconnects to alerter B with
// Last-Event-ID, and the events it got in total equal alerts.events read
// committed exactly: per partition the same event ids in the same order,
// none missing, none twice.
func TestSSEReconnectProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	p := newPipeline(t, brokers, raddr, 6).withEvents()
	cfg := p.config()
	alerterBinary(t)
	a, b := p.startProc("a", cfg), p.startProc("b", cfg)
	for _, pr := range []*proc{a, b} {
		testenv.CheckFor(t, 60*time.Second, func() error {
			res, err := http.Get("http://" + pr.http + "/v1/events?limit=1")
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: GET /v1/events: %s", pr.name, res.Status)
			}
			return nil
		})
	}
	// The stream starts at new events: connected before any record, it
	// must get every event.
	f := &sseFollower{t: t}
	killed := make(chan struct{})
	f.next = func() *proc {
		select {
		case <-killed:
			return b
		default:
			return a
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() { defer close(followed); f.run(ctx) }()
	t.Cleanup(func() { cancel(); <-followed })
	testenv.CheckFor(t, 10*time.Second, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.connects) == 0 {
			return errors.New("not connected to a yet")
		}
		return nil
	})

	produced := p.produceInBackground(sc.Records, sc.Received, 2500)
	// Kill A once the client has events from it, while records still flow.
	testenv.CheckFor(t, 90*time.Second, func() error {
		evs, err := f.snapshot()
		if err != nil {
			return err
		}
		if len(evs) < 100 {
			return fmt.Errorf("%d events streamed from a", len(evs))
		}
		return nil
	})
	close(killed)
	a.kill()
	at, _ := p.appliedTotal()
	if at >= int64(len(sc.Records)) {
		t.Fatalf("a killed after all %d records were applied: not mid-stream", at)
	}
	evs, _ := f.snapshot()
	t.Logf("a SIGKILLed with %d of %d records applied, %d events streamed", at, len(sc.Records), len(evs))

	select {
	case <-produced:
	case <-time.After(120 * time.Second):
		t.Fatal("producer did not finish within 120s")
	}
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	total := p.checkEventsTopic() // alerts.events holds every outbox event once
	testenv.CheckFor(t, 60*time.Second, func() error {
		evs, err := f.snapshot()
		if err != nil {
			return err
		}
		if len(evs) < total {
			return fmt.Errorf("%d of %d events streamed", len(evs), total)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // anything extra (a repeat) would come now
	cancel()
	<-followed
	got, err := f.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := p.eventsTopic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]string, p.partitions)
	for _, r := range recs {
		want[r.partition] = append(want[r.partition], r.eventID) // offset order
	}
	have := make([][]string, p.partitions)
	from := map[string]int{}
	for _, e := range got {
		have[e.partition] = append(have[e.partition], e.eventID)
		from[e.from]++
	}
	for part := range want {
		if !slices.Equal(have[part], want[part]) {
			i := 0
			for i < min(len(have[part]), len(want[part])) && have[part][i] == want[part][i] {
				i++
			}
			t.Errorf("partition %d: streamed %d events, alerts.events %d; first difference at %d", part, len(have[part]), len(want[part]), i)
		}
	}
	if from["a"] == 0 || from["b"] == 0 {
		t.Errorf("events from a %d, from b %d: want both", from["a"], from["b"])
	}
	if len(got) != len(recs) {
		t.Errorf("streamed %d events, alerts.events holds %d", len(got), len(recs))
	}
	if !t.Failed() {
		t.Logf("streamed %d events (%d from a, %d from b after Last-Event-ID; connections %v) = alerts.events read committed, per partition, in order, 0 missing, 0 repeated",
			len(got), from["a"], from["b"], f.connects)
	}
	b.stop()
}
