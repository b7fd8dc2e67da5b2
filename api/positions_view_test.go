package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// viewFrame is a viewport's positions frame as the page reads it.
type viewFrameJSON struct {
	Full      bool         `json:"full"`
	Clustered bool         `json:"clustered"`
	InView    int          `json:"in_view"`
	Drones    []posDrone   `json:"drones"`
	Gone      []string     `json:"gone"`
	Clusters  []posCluster `json:"clusters"`
}

// followFrames opens a positions stream at query and sends its frames.
func followFrames(t *testing.T, ctx context.Context, url string) <-chan viewFrameJSON {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("stream %s: %v %v", url, res, err)
	}
	out := make(chan viewFrameJSON, 64)
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var f viewFrameJSON
				if json.Unmarshal([]byte(l), &f) == nil {
					out <- f
				}
			}
		}
	}()
	return out
}

// TestPositionsViewport: a stream with a viewport gets the drones inside
// it only, then deltas: a drone that moves in is sent, one that moves out
// is named in "gone"; a view holding more than maxViewDrones gets
// clusters whose counts add up to the drones in it, with the alarmed
// drones one by one; bad viewports get a 400 naming the parameter. The
// gauge counts the open streams.
func TestPositionsViewport(t *testing.T) {
	const partitions = 2
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "api-posview")
	now := time.Now().UTC()
	// 1,500 drones: UAV-i at lat 51 + (i mod 1000)/1000, lon -1 + (i div 1000)/1000.
	seedDrones(t, rdb, prefix, "pos", partitions, 1500, now)
	reg := prometheus.NewRegistry()
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: partitions, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	for _, tt := range []struct{ query, field string }{
		{"?zoom=abc&bbox=-1,51,0,52", "zoom"},
		{"?zoom=23&bbox=-1,51,0,52", "zoom"},
		{"?zoom=5", "zoom"},
		{"?bbox=-1,51,0", "bbox"},
		{"?bbox=1,51,0,52", "bbox"},
	} {
		res, err := http.Get(srv.URL + "/v1/map/positions" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		_ = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.HasPrefix(body.Error, tt.field+":") {
			t.Errorf("%s: %d %+v, want 400 naming %s", tt.query, res.StatusCode, body, tt.field)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	small := followFrames(t, ctx, srv.URL+"/v1/map/positions?bbox=-1.0005,51,-0.9995,51.1&zoom=14")
	wide := followFrames(t, ctx, srv.URL+"/v1/map/positions?bbox=-2,50,0,52&zoom=8")
	next := func(c <-chan viewFrameJSON, what string, ok func(viewFrameJSON) bool) viewFrameJSON {
		t.Helper()
		for {
			select {
			case f := <-c:
				if ok(f) {
					return f
				}
			case <-ctx.Done():
				t.Fatalf("%s: no frame", what)
			}
		}
	}
	ids := func(ds []posDrone) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.DroneID)
		}
		slices.Sort(out)
		return out
	}
	f := next(small, "small view's first frame", func(f viewFrameJSON) bool { return f.Full })
	if f.Clustered || len(f.Drones) != 101 || f.InView != 101 {
		t.Errorf("small view: clustered %v, %d drones, in_view %d; want the 101 drones of lon -1, lat 51..51.1", f.Clustered, len(f.Drones), f.InView)
	}
	for _, d := range f.Drones {
		if d.Lon > -0.9995 || d.Lat > 51.1 {
			t.Errorf("small view got %s at %v,%v", d.DroneID, d.Lat, d.Lon)
		}
	}
	w := next(wide, "wide view's first frame", func(f viewFrameJSON) bool { return f.Full })
	n := 0
	for _, c := range w.Clusters {
		n += c.N
	}
	if !w.Clustered || n != 1500 || w.InView != 1500 || len(w.Drones) != 0 || len(w.Clusters) > maxClusters || len(w.Clusters) < 2 {
		t.Errorf("wide view: clustered %v, %d clusters of %d drones, in_view %d, %d drones one by one; want the 1,500 counted", w.Clustered, len(w.Clusters), n, w.InView, len(w.Drones))
	}
	if g := gauge(reg, "nofly_api_positions_streams"); g != 2 {
		t.Errorf("nofly_api_positions_streams = %v, want 2", g)
	}

	// UAV-000005 leaves the small view, UAV-000500 comes in, UAV-000007
	// raises an alarm where it is: one batch.
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	state := func(id string, lat, lon float64, alarm bool) []byte {
		st := alerts.DroneState{Seq: 2, Pos: alerts.Fix{TS: now.Add(time.Second), Lat: lat, Lon: lon}}
		if alarm {
			st.Alarms = []alerts.ActiveAlarm{{Zone: "Z", Alarm: "a7", FP: "f", Name: "Zone", Category: "prohibited", RaisedSeq: 2}}
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	byP := map[int]dedup.Batch{}
	for _, m := range []struct {
		i        int
		lat, lon float64
		alarm    bool
	}{{5, 53, -1, false}, {500, 51.05, -1, false}, {7, 51.007, -1, true}} {
		id := fmt.Sprintf("UAV-%06d", m.i)
		p := m.i % partitions
		b := byP[p]
		if b.Drones == nil {
			b.Drones = map[string][]byte{}
		}
		b.Drones[id] = state(id, m.lat, m.lon, m.alarm)
		b.Placed = append(b.Placed, dedup.Placed{ID: id, Lon: m.lon, Lat: m.lat})
		byP[p] = b
	}
	for p, b := range byP {
		b.Applied = 1
		if _, err := ds.Commit(ctx, p, dedup.NoVersion, b); err != nil {
			t.Fatal(err)
		}
	}
	f = next(small, "small view's delta", func(f viewFrameJSON) bool { return !f.Full && (len(f.Drones) > 0 || len(f.Gone) > 0) })
	if got := ids(f.Drones); !slices.Equal(got, []string{"UAV-000007", "UAV-000500"}) || !slices.Equal(f.Gone, []string{"UAV-000005"}) {
		t.Errorf("small view's delta: drones %v gone %v; want UAV-000007 (alarmed) and UAV-000500 in, UAV-000005 gone", got, f.Gone)
	}
	w = next(wide, "wide view after the batch", func(f viewFrameJSON) bool { return f.Full && len(f.Drones) > 0 })
	n, alarmed := 0, 0
	for _, c := range w.Clusters {
		n += c.N
		alarmed += c.Alarmed
	}
	if got := ids(w.Drones); !slices.Equal(got, []string{"UAV-000007"}) || n != 1498 || alarmed != 0 || w.InView != 1499 {
		t.Errorf("wide view: drones %v, %d in clusters (%d alarmed), in_view %d; want UAV-000007 one by one, 1,498 counted (UAV-000005 left)", got, n, alarmed, w.InView)
	}
	cancel()
	testenv.CheckFor(t, 10*time.Second, func() error {
		if g := gauge(reg, "nofly_api_positions_streams"); g != 0 {
			return fmt.Errorf("nofly_api_positions_streams = %v after the streams closed", g)
		}
		return nil
	})
}

func gauge(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
