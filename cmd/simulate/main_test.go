package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/fleet"
	"github.com/nofly-dev/nofly/telemetry"
)

func testConfig() config {
	c := defaults()
	c.redraw, c.logged, c.poll = 5*time.Millisecond, 20*time.Millisecond, 5*time.Millisecond
	c.drones, c.batch, c.dupRate, c.strayShare, c.seed = 3, 4, 0.1, 0.3, 1
	c.duration = 0
	return c
}

// syncBuffer is a bytes.Buffer safe for the display's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func runWith(t *testing.T, c config, tty bool) (string, error) {
	t.Helper()
	var out syncBuffer
	con := &console{w: &out, tty: tty}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, c, slog.New(slog.NewTextHandler(con, nil)), con)
	return out.String(), err
}

// checkRecords decodes NDJSON and checks it is what a feed sends: valid
// records, each drone's seq rising by one, duplicates right after their
// original. With gaps (a batch was refused), seq only has to rise.
func checkRecords(t *testing.T, r io.Reader, gaps bool) int {
	t.Helper()
	last := map[string]string{}
	seq := map[string]int64{}
	n := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p, err := telemetry.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", sc.Bytes(), err)
		}
		n++
		switch {
		case p.Seq == seq[p.DroneID] && sc.Text() == last[p.DroneID]:
		case p.Seq == seq[p.DroneID]+1, gaps && p.Seq > seq[p.DroneID]:
		default:
			t.Fatalf("%s: seq %d after %d", p.DroneID, p.Seq, seq[p.DroneID])
		}
		seq[p.DroneID], last[p.DroneID] = p.Seq, sc.Text()
	}
	return n
}

func TestWriteFile(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			c := testConfig()
			c.out, c.steps = filepath.Join(t.TempDir(), "fleet.ndjson"), 50
			log, err := runWith(t, c, tty)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(c.out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n := checkRecords(t, f, false)
			if n < c.drones*c.steps {
				t.Fatalf("%d records, want at least %d", n, c.drones*c.steps)
			}
			want := fmt.Sprintf("records_sent=%d ", n)
			if tty {
				want = fmt.Sprintf("] 100%%  0s  written %d  ", n)
			}
			if !strings.Contains(log, want) || !strings.HasSuffix(log, "\n") {
				t.Errorf("output %q, want it to hold %q", log, want)
			}
		})
	}
}

// fakeIngest answers POST /v1/telemetry: with status[i] for the i-th
// request (counted from 1) when set, else 202, keeping what it accepted.
type fakeIngest struct {
	mu       sync.Mutex
	status   map[int]int
	reqs     int
	accepted bytes.Buffer
	refused  int // records
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs++
	if r.URL.Path != "/v1/telemetry" || r.Header.Get("Content-Type") != "application/x-ndjson" {
		http.Error(w, "wrong request", http.StatusNotFound)
		return
	}
	if s, ok := f.status[f.reqs]; ok {
		if s == http.StatusBadRequest {
			f.refused += bytes.Count(body, []byte{'\n'})
		}
		http.Error(w, `{"error":"no"}`, s)
		return
	}
	f.accepted.Write(body)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"accepted":%d}`, bytes.Count(body, []byte{'\n'}))
}

// fakeAlerter serves an alerter's event counters, raising one more alarm
// at each read, from 100 on (alarms of earlier runs).
type fakeAlerter struct{ reads atomic.Int64 }

func (f *fakeAlerter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	n := f.reads.Add(1)
	fmt.Fprintf(w, "# HELP x\nnofly_alerter_events_raised_total_other 5\nnofly_alerter_events_raised_total %d\nnofly_alerter_events_cleared_total %d\n", 99+n, n/2)
}

func TestPostsToIngest(t *testing.T) {
	ing := &fakeIngest{status: map[int]int{1: http.StatusServiceUnavailable, 4: http.StatusBadRequest}}
	srv := httptest.NewServer(ing)
	defer srv.Close()
	al := &fakeAlerter{}
	asrv := httptest.NewServer(al)
	defer asrv.Close()

	c := testConfig()
	c.ingest, c.alerter, c.rate, c.steps = srv.URL, asrv.URL+"/", 50, 10
	log, err := runWith(t, c, false)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("ingest rejected %d records", ing.refused)) || ing.refused == 0 {
		t.Fatalf("run: %v; want the %d records ingest refused", err, ing.refused)
	}
	n := checkRecords(t, &ing.accepted, true)
	done := regexp.MustCompile(`msg=done .*records_sent=(\d+) \S+ http_errors=1 rejected=(\d+) alarms_raised=(\d+) alarms_cleared=\d+`).FindStringSubmatch(log)
	if done == nil {
		t.Fatalf("no done line with the counts in\n%s", log)
	}
	if done[1] != fmt.Sprint(n) || done[2] != fmt.Sprint(ing.refused) {
		t.Errorf("done line %q: want %d sent, %d rejected", done[0], n, ing.refused)
	}
	if raised := done[3]; raised == "0" || len(raised) > 2 {
		t.Errorf("alarms_raised=%s: want the increase since the start, not the alerter's total", raised)
	}
	if !strings.Contains(log, "msg=progress") || !strings.Contains(log, `msg="ingest refused records" status="400 Bad Request"`) {
		t.Errorf("no progress or refusal lines in\n%s", log)
	}
}

func TestProgressLineOnTerminal(t *testing.T) {
	ing := &fakeIngest{}
	srv := httptest.NewServer(ing)
	defer srv.Close()
	asrv := httptest.NewServer(&fakeAlerter{})
	defer asrv.Close()
	c := testConfig()
	c.ingest, c.alerter, c.rate, c.steps = srv.URL, asrv.URL, 100, 20
	out, err := runWith(t, c, true)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\r")
	last := lines[len(lines)-1]
	if len(lines) < 3 || !regexp.MustCompile(`^\[█{16}\] 100%  0s  sent \d+  \d+ rec/s  errors 0  alarms [1-9]\d*\x1b\[K\n$`).MatchString(last) {
		t.Errorf("%d redraws, the last %q", len(lines)-1, last)
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("the progress line is not redrawn in place: %q", out)
	}
}

func TestFatalAnswer(t *testing.T) {
	ing := &fakeIngest{status: map[int]int{1: http.StatusUnauthorized}}
	srv := httptest.NewServer(ing)
	defer srv.Close()
	c := testConfig()
	c.ingest, c.rate, c.steps = srv.URL, 0, 5
	_, err := runWith(t, c, false)
	if err == nil || !strings.Contains(err.Error(), "401") || ing.reqs != 1 {
		t.Fatalf("run: %v after %d requests; want it to stop at the 401", err, ing.reqs)
	}
}

func TestLine(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name          string
		done          float64
		file, alerter bool
		set           func(*counters)
		want          string
	}{
		{"half way, no alerter", 0.5, false, false, func(c *counters) { c.sent.Store(1200) },
			"[████████░░░░░░░░]  50%  1m0s  sent 1200  20 rec/s  errors 0  alarms –"},
		{"unbounded, errors, alarms stale", -1, false, true, func(c *counters) {
			c.sent.Store(5)
			c.httpErrs.Store(2)
			c.rejected.Store(40)
			c.raised.Store(7)
			c.alarmsOK.Store(true)
			c.alarmsStale.Store(true)
		}, "1m0s  sent 5  20 rec/s  errors: 2 http, 40 rejected  alarms 7?"},
		{"alerter not read yet", 0, false, true, func(c *counters) {}, "[░░░░░░░░░░░░░░░░]   0%  1m0s  sent 0  20 rec/s  errors 0  alarms –"},
		{"writing a file", 1, true, false, func(c *counters) { c.sent.Store(300) }, "[████████████████] 100%  1m0s  written 300  20 rec/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cnt counters
			tt.set(&cnt)
			d := &display{cnt: &cnt, done: func() float64 { return tt.done }, start: t0, file: tt.file, alerter: tt.alerter}
			if got := d.line(t0.Add(time.Minute), 20); got != tt.want {
				t.Errorf("\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestParseCounts(t *testing.T) {
	tests := []struct {
		name            string
		in              string
		raised, cleared float64
		err             bool
	}{
		{"plain", "# TYPE nofly_alerter_events_raised_total counter\nnofly_alerter_events_raised_total 12\nnofly_alerter_events_cleared_total 9\n", 12, 9, false},
		{"labels summed", "nofly_alerter_events_raised_total{p=\"0\"} 2\nnofly_alerter_events_raised_total{p=\"1\"} 3 1733130000000\n", 5, 0, false},
		{"a longer name is another metric", "nofly_alerter_events_raised_totals 4\nnofly_alerter_events_raised_total 1\n", 1, 0, false},
		{"not an alerter", "nofly_ingest_records_accepted_total 10\n", 0, 0, true},
		{"bad value", "nofly_alerter_events_raised_total x\n", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c, err := parseCounts(strings.NewReader(tt.in))
			if (err != nil) != tt.err || r != tt.raised || c != tt.cleared {
				t.Errorf("got %v, %v, %v; want %v, %v, error %v", r, c, err, tt.raised, tt.cleared, tt.err)
			}
		})
	}
}

func TestIncrease(t *testing.T) {
	var c increase
	for i, tt := range []struct{ v, want float64 }{{100, 0}, {103, 3}, {103, 3}, {2, 5}, {4, 7}} {
		if got := c.add(tt.v); got != tt.want {
			t.Errorf("reading %d (%v): %v, want %v", i, tt.v, got, tt.want)
		}
	}
}

func TestStrayShareZeroIsNone(t *testing.T) {
	for _, tt := range []struct {
		share  float64
		strays int
	}{{0, 0}, {0.5, 5}, {1, 10}} {
		c := testConfig()
		c.strayShare = tt.share
		n := 0
		for _, d := range fleet.New(10, 1, time.Now(), fleetOptions(c)).Drones() {
			if d.Kind != fleet.Clear {
				n++
			}
		}
		if n != tt.strays {
			t.Errorf("--stray-share %v: %d strays, want %d", tt.share, n, tt.strays)
		}
	}
}
