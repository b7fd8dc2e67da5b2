package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestPositionsOneProducer: five positions streams of one instance share
// one producer: each tick costs Redis one read of the zone version and of
// the drones changed since the last tick (3 × partitions + 1 commands
// here), not one per stream nor one per drone; every stream gets a full
// frame of every drone.
func TestPositionsOneProducer(t *testing.T) {
	const partitions, streams = 2, 5
	rdb := testenv.RedisClient(t)
	cc := &cmdCounter{}
	rdb.AddHook(cc)
	prefix := testenv.RedisPrefix(t, "api-posone")
	seedDrones(t, rdb, prefix, "pos", partitions, 300, time.Now().UTC())
	reg := prometheus.NewRegistry()
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: partitions, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	counter := func(name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	reads := func() float64 { return counter("nofly_api_positions_reads_total") }
	states := func() float64 { return counter("nofly_api_positions_states_read_total") }
	h := s.Handler()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fulls := make(chan string, streams)
	for range streams {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/map/positions", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("stream: %v %v", res, err)
		}
		go func() {
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if l, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var f posFrame
					if json.Unmarshal([]byte(l), &f) == nil && f.Full {
						fulls <- fmt.Sprint(f.At, len(f.Drones))
					}
				}
			}
		}()
	}
	for i := range streams {
		if f := <-fulls; !strings.HasSuffix(f, " 300") {
			t.Errorf("stream %d's full frame: %s, want 300 drones", i, f)
		}
	}
	r0, c0, s0 := reads(), cc.n.Load(), states()
	if s0 != 300 {
		t.Errorf("the producer's first tick read %v states, want the 300 drones once", s0)
	}
	testenv.CheckFor(t, 30*time.Second, func() error {
		if n := reads() - r0; n < 3 {
			return fmt.Errorf("%v ticks read", n)
		}
		return nil
	})
	cmds := cc.n.Load() - c0
	ticks := reads() - r0
	perTick := float64(cmds) / ticks
	t.Logf("%d streams: %d Redis commands in %v ticks, %.1f a tick", streams, cmds, ticks, perTick)
	// A tick is, per partition, the applied offset and the drone changes
	// since the last tick (none: the sky is quiet, no state is read) and
	// the clock (stale drones), and the zone version. Between the two loads a tick may be under way: a
	// tick's commands more.
	if n := states() - s0; n != 0 {
		t.Errorf("a quiet sky: %v states read after the first tick, want 0", n)
	}
	if want := 3*partitions + 1; perTick > float64(want)+float64(want)/ticks {
		t.Fatalf("%.1f Redis commands a tick with %d streams, want %d (one pass, whatever the streams)", perTick, streams, want)
	}
}

// TestPosSnapSince: a stream that missed ticks gets every drone that
// moved after the last snapshot it had; the delta is the frame of the
// drones that moved in the latest one.
func TestPosSnapSince(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	e := func(id string, changed uint64) *posEntry {
		return &posEntry{id: id, changed: changed, json: []byte(`{"drone_id":"` + id + `"}`)}
	}
	s := &posSnap{seq: 5, at: at, zv: 3, drones: []*posEntry{e("A", 1), e("B", 3), e("C", 4), e("D", 5)}}
	for _, tt := range []struct {
		had  uint64
		want string
	}{{4, "D"}, {3, "C,D"}, {2, "B,C,D"}, {0, "A,B,C,D"}} {
		b, n := s.since(tt.had)
		var f posFrame
		if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(string(b), "event: positions\ndata: "), "\n\n")), &f); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		var ids []string
		for _, d := range f.Drones {
			ids = append(ids, d.DroneID)
		}
		if got := strings.Join(ids, ","); got != tt.want || n != len(ids) || f.Full || f.ZoneVersion != 3 || !f.At.Equal(at) {
			t.Errorf("since %d: %s (%d) %+v, want %s", tt.had, got, n, f, tt.want)
		}
	}
	if !strings.Contains(string(s.fullFrame()), `"full":true`) {
		t.Errorf("full frame %s", s.fullFrame())
	}
}
