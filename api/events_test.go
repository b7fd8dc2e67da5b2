package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// eventsEnv is a Server over a test's own keys on the real Redis, its
// events routes on an httptest server.
type eventsEnv struct {
	t   *testing.T
	rdb *redis.Client
	s   *Server
	e   *eventsAPI
	ts  *httptest.Server
	reg *prometheus.Registry
	n   int      // events added
	max streamID // the largest entry id added
}

func newEventsEnv(t *testing.T, partitions int, tune func(*eventsAPI)) *eventsEnv {
	t.Helper()
	rdb := testenv.RedisClient(t)
	reg := prometheus.NewRegistry()
	s, err := New(Options{Redis: rdb, Prefix: testenv.RedisPrefix(t, "api"), Topic: "telemetry.positions", Partitions: partitions, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	e := newEventsAPI(s)
	if tune != nil {
		tune(e)
	}
	r := chi.NewRouter()
	e.mount(r)
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	return &eventsEnv{t: t, rdb: rdb, s: s, e: e, ts: ts, reg: reg}
}

// add appends an event to partition p's outbox and returns its id.
func (env *eventsEnv) add(p int, typ, drone, zone, category string) string {
	env.t.Helper()
	env.n++
	alarm := alerts.AlarmID(drone, zone, int64(env.n))
	ev := alerts.Event{EventID: alerts.EventID(alarm, typ), AlarmID: alarm, Type: typ, DroneID: drone, ZoneID: zone,
		ZoneName: "Zone " + zone, Category: category, Seq: int64(env.n), TS: time.Date(2026, 12, 3, 10, 0, env.n, 0, time.UTC),
		Lat: 51.47, Lon: -0.45, Partition: p, Offset: int64(env.n), ZoneVersion: 1}
	k := redislayout.Of(env.s.o.Prefix, env.s.o.Topic, p)
	e := redislayout.Entry{EventID: ev.EventID, Event: ev.AppendJSON(nil)}
	id, err := env.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: k.Outbox(), Values: e.Values()}).Result()
	if err != nil {
		env.t.Fatal(err)
	}
	if sid, err := parseStreamID(id); err == nil && env.max.less(sid) {
		env.max = sid
	}
	return id
}

// settle waits until Redis's clock is past the millisecond of the last
// entry added: reads hold back the current one.
func (env *eventsEnv) settle() {
	env.t.Helper()
	for {
		now, err := env.rdb.Time(context.Background()).Result()
		if err != nil {
			env.t.Fatal(err)
		}
		if uint64(now.UnixMilli()) > env.max.ms {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// addMany adds n events round robin over the partitions, drones D0..D2,
// zones Z0..Z1, categories restricted / prohibited.
func (env *eventsEnv) addMany(n int) {
	for i := 0; i < n; i++ {
		env.add(i%env.s.o.Partitions, alerts.Raised, fmt.Sprintf("D%d", i%3), fmt.Sprintf("Z%d", i%2), []string{"restricted", "prohibited"}[i%2])
	}
}

// line is one NDJSON line or SSE data: the event and its cursor.
type line struct {
	EventID  string `json:"event_id"`
	Type     string `json:"type"`
	DroneID  string `json:"drone_id"`
	ZoneID   string `json:"zone_id"`
	Category string `json:"category"`
	Cursor   string `json:"cursor"`
	raw      string
}

func (env *eventsEnv) get(path string, hdr ...string) (*http.Response, []byte) {
	env.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.ts.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		env.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		env.t.Fatal(err)
	}
	return res, b
}

// events GETs /v1/events with query and parses the lines.
func (env *eventsEnv) events(query string) []line {
	env.t.Helper()
	env.settle()
	res, b := env.get("/v1/events?" + query)
	if res.StatusCode != http.StatusOK {
		env.t.Fatalf("GET /v1/events?%s: %s %s", query, res.Status, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		env.t.Errorf("Content-Type %q", ct)
	}
	var out []line
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			env.t.Fatalf("line %q: %v", sc.Text(), err)
		}
		l.raw = sc.Text()
		out = append(out, l)
	}
	return out
}

// outbox returns every stored event (JSON) in merge order: by entry id,
// then partition.
func (env *eventsEnv) outbox() []outboxEntry {
	env.t.Helper()
	var all []outboxEntry
	for p := 0; p < env.s.o.Partitions; p++ {
		msgs, err := env.rdb.XRange(context.Background(), redislayout.Of(env.s.o.Prefix, env.s.o.Topic, p).Outbox(), "-", "+").Result()
		if err != nil {
			env.t.Fatal(err)
		}
		for _, m := range msgs {
			e, ok := entryFrom(p, m)
			if !ok {
				env.t.Fatalf("bad entry %v", m)
			}
			all = append(all, e)
		}
	}
	slices.SortFunc(all, func(a, b outboxEntry) int { return entryLess(&a, &b) })
	return all
}

func eventIDs(ls []line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.EventID
	}
	return out
}

func entryIDs(es []outboxEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		var v struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal(e.json, &v)
		out[i] = v.EventID
	}
	return out
}

func TestEventsNDJSON(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 3, nil)
	if got := env.events(""); len(got) != 0 {
		t.Fatalf("no events yet, got %d lines", len(got))
	}
	// Skewed so that one partition fills a read (readCount) while the
	// others do not: the merge must hold back what is past the full one.
	for i := 0; i < 2*readCount+150; i++ {
		p := 0
		if i%10 == 0 {
			p = 1 + i%20/10
		}
		env.add(p, []string{alerts.Raised, alerts.Cleared, alerts.Acked}[i%3], fmt.Sprintf("D%d", i%3), fmt.Sprintf("Z%d", i%2), "restricted")
	}
	want := env.outbox()
	all := env.events("limit=10000")
	if !slices.Equal(eventIDs(all), entryIDs(want)) {
		t.Fatalf("from the start: %d events, want the %d of the outboxes in merge order", len(all), len(want))
	}
	for i, l := range all {
		// The line is the stored event with its cursor added last.
		if got, exp := l.raw, string(want[i].json[:len(want[i].json)-1])+`,"cursor":"`+l.Cursor+`"}`; got != exp {
			t.Fatalf("line %d = %s, want %s", i, got, exp)
		}
	}
	if def := env.events(""); len(def) != defaultEventsLimit || def[len(def)-1].Cursor != all[defaultEventsLimit-1].Cursor {
		t.Errorf("default limit: %d lines, want %d", len(def), defaultEventsLimit)
	}

	t.Run("after a cursor", func(t *testing.T) {
		for _, k := range []int{0, 1, 499, 500, 777, len(all) - 2, len(all) - 1} {
			got := env.events("limit=10000&after=" + all[k].Cursor)
			if !slices.Equal(eventIDs(got), eventIDs(all[k+1:])) {
				t.Errorf("after event %d: %d events, want the %d after it", k, len(got), len(all)-k-1)
			}
			for i := range got {
				if got[i].Cursor != all[k+1+i].Cursor {
					t.Fatalf("after event %d: cursor of line %d differs from the same event's from the start", k, i)
				}
			}
		}
	})
	t.Run("pages of limit", func(t *testing.T) {
		var paged []line
		after := ""
		for range 100 {
			page := env.events("limit=97" + after)
			if len(page) == 0 {
				break
			}
			if len(page) > 97 {
				t.Fatalf("page of %d lines, limit 97", len(page))
			}
			paged = append(paged, page...)
			after = "&after=" + page[len(page)-1].Cursor
		}
		if !slices.Equal(eventIDs(paged), eventIDs(all)) {
			t.Errorf("paging by 97: %d events, want %d, in the same order", len(paged), len(all))
		}
	})
	t.Run("filters", func(t *testing.T) {
		tests := []struct {
			query string
			keep  func(line) bool
		}{
			{"zone=Z1", func(l line) bool { return l.ZoneID == "Z1" }},
			{"drone=D2", func(l line) bool { return l.DroneID == "D2" }},
			{"category=restricted", func(l line) bool { return true }},
			{"category=prohibited", func(l line) bool { return false }},
			{"zone=Z0&drone=D1&category=restricted", func(l line) bool { return l.ZoneID == "Z0" && l.DroneID == "D1" }},
			{"zone=nowhere", func(l line) bool { return false }},
		}
		for _, tt := range tests {
			got := env.events("limit=10000&" + tt.query)
			var exp []line
			for _, l := range all {
				if tt.keep(l) {
					exp = append(exp, l)
				}
			}
			if !slices.Equal(eventIDs(got), eventIDs(exp)) {
				t.Errorf("%s: %d events, want %d", tt.query, len(got), len(exp))
			}
		}
		// The cursor moves past the events filtered out: resuming without
		// the filter after a filtered line gives what follows it.
		z1 := env.events("zone=Z1&drone=D0&limit=3")
		if len(z1) != 3 {
			t.Fatalf("zone=Z1&drone=D0&limit=3: %d lines", len(z1))
		}
		k := slices.IndexFunc(all, func(l line) bool { return l.EventID == z1[2].EventID })
		if z1[2].Cursor != all[k].Cursor {
			t.Errorf("a filtered line's cursor is not the unfiltered line's of the same event")
		}
		if rest := env.events("limit=10000&after=" + z1[2].Cursor); !slices.Equal(eventIDs(rest), eventIDs(all[k+1:])) {
			t.Errorf("after a filtered line: %d events, want %d", len(rest), len(all)-k-1)
		}
	})
}

func TestEventsBadRequests(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 3, nil)
	other := cursor{{1, 0}, {2, 0}}.String() // 2 partitions, the topic 3
	good := cursor{{1, 0}, {2, 0}, {0, 0}}.String()
	tests := []struct {
		name, path, field string
		hdr               []string
	}{
		{"garbage cursor", "/v1/events?after=not*a*cursor", "after", nil},
		{"stream id as cursor", "/v1/events?after=1764806400123-0", "after", nil},
		{"empty cursor", "/v1/events?after=", "after", nil},
		{"cursor of another partition count", "/v1/events?after=" + other, "after", nil},
		{"two cursors", "/v1/events?after=" + good + "&after=" + good, "after", nil},
		{"limit 0", "/v1/events?limit=0", "limit", nil},
		{"limit too large", "/v1/events?limit=10001", "limit", nil},
		{"limit not a number", "/v1/events?limit=ten", "limit", nil},
		{"limit negative", "/v1/events?limit=-5", "limit", nil},
		{"empty zone", "/v1/events?zone=", "zone", nil},
		{"drone with a control character", "/v1/events?drone=" + url.QueryEscape("D\n1"), "drone", nil},
		{"category too long", "/v1/events?category=" + strings.Repeat("x", maxFilterLen+1), "category", nil},
		{"two zones", "/v1/events?zone=a&zone=b", "zone", nil},
		{"stream: garbage Last-Event-ID", "/v1/events/stream", "Last-Event-ID", []string{"Last-Event-ID", "xyz!"}},
		{"stream: Last-Event-ID of another partition count", "/v1/events/stream?after=" + good, "Last-Event-ID", []string{"Last-Event-ID", other}},
		{"stream: bad after", "/v1/events/stream?after=%00", "after", nil},
		{"stream: bad filter", "/v1/events/stream?drone=", "drone", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, b := env.get(tt.path, tt.hdr...)
			var body struct {
				Error, Code string
				Details     map[string]any
			}
			if res.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &body) != nil || body.Error == "" || body.Code == "" {
				t.Fatalf("%s: %s %s, want 400 with the error body", tt.path, res.Status, b)
			}
			if body.Details["field"] != tt.field {
				t.Errorf("details.field = %v, want %q (%s)", body.Details["field"], tt.field, body.Error)
			}
		})
	}
}

// TestEventsFilterLength: a filter's bound is in characters, as the
// description's maxLength, not in bytes (the drone filter is a drone id,
// 1-64 of [A-Za-z0-9._:-]: TestEventsFiltersAsDescribed).
func TestEventsFilterLength(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 2, nil)
	tests := []struct {
		name, value string
		status      int
	}{
		{"256 ASCII", strings.Repeat("x", maxFilterLen), http.StatusOK},
		{"256 two-byte", strings.Repeat("é", maxFilterLen), http.StatusOK},
		{"256 four-byte", strings.Repeat("😀", maxFilterLen), http.StatusOK},
		{"257 two-byte", strings.Repeat("é", maxFilterLen+1), http.StatusBadRequest},
	}
	for _, tt := range tests {
		for _, p := range []string{"zone", "category"} {
			res, b := env.get("/v1/events?" + p + "=" + url.QueryEscape(tt.value))
			if res.StatusCode != tt.status {
				t.Errorf("%s %s: %s %s, want %d", tt.name, p, res.Status, b, tt.status)
			}
		}
	}
}

// TestEventsFiltersAsDescribed: a filter value the description allows is
// accepted, one it does not is refused with 400.
func TestEventsFiltersAsDescribed(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 2, nil)
	values := []string{"a", "UAV-0042", "é", strings.Repeat("é", maxFilterLen), strings.Repeat("x", maxFilterLen+1),
		"\rj+5", "a\x7fb", "tab\there", " spaced "}
	for _, p := range []string{"zone", "drone", "category"} {
		schema := described(t, "GET", "/v1/events", "query", p)
		for _, v := range values {
			res, b := env.get("/v1/events?" + p + "=" + url.QueryEscape(v))
			if desc := conforms(t, schema, v, false); desc != (res.StatusCode == http.StatusOK) {
				t.Errorf("%s=%q: the description allows it: %v, the server: %s %s", p, v, desc, res.Status, b)
			}
		}
	}
}

// TestEventsGone: a cursor after which entries were trimmed gets 410, on
// both routes; one at or past the trim point does not.
func TestEventsGone(t *testing.T) {
	t.Parallel()
	env := newEventsEnv(t, 2, nil)
	env.addMany(10)
	all := env.events("")
	k0 := redislayout.Of(env.s.o.Prefix, env.s.o.Topic, 0).Outbox()
	var idx0 []int // where partition 0's entries are in all
	var ids []string
	for i, e := range env.outbox() {
		if e.part == 0 {
			idx0, ids = append(idx0, i), append(ids, e.id.String())
		}
	}
	// Trim partition 0 through its third entry (MINID keeps the fourth).
	if err := env.rdb.XTrimMinID(context.Background(), k0, ids[3]).Err(); err != nil {
		t.Fatal(err)
	}
	// At the last trimmed entry nothing was lost, but XINFO cannot tell it
	// from an earlier one unless no id lies between it and the oldest
	// retained: refused (conservative) unless adjacent.
	atLast := http.StatusGone
	if id2, _ := parseStreamID(ids[2]); id2.next().String() == ids[3] {
		atLast = http.StatusOK
	}
	// Past partition 0's last id, but not past Redis's clock: a cursor of
	// another history (another Redis, a deleted stream), not a forged one
	// (TestHostileFutureCursor).
	last0, _ := parseStreamID(ids[len(ids)-1])
	for _, tt := range []struct {
		name   string
		after  string
		status int
	}{
		{"before the trimmed entries", all[idx0[0]].Cursor, http.StatusGone},
		{"among them", all[idx0[1]].Cursor, http.StatusGone},
		{"at the last trimmed", all[idx0[2]].Cursor, atLast},
		{"after it", all[idx0[3]].Cursor, http.StatusOK},
		{"ahead of the stream (another history)", cursor{{last0.ms, last0.seq + 1000}, {0, 0}}.String(), http.StatusGone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/events?after=" + url.QueryEscape(tt.after), "/v1/events/stream?after=" + url.QueryEscape(tt.after)} {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.ts.URL+path, nil)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				if res.StatusCode != tt.status {
					t.Errorf("%s: %s, want %d", path, res.Status, tt.status)
				}
				if tt.status == http.StatusGone {
					var body struct{ Code string }
					b, _ := io.ReadAll(res.Body)
					if json.Unmarshal(b, &body) != nil || body.Code != "cursor_expired" || res.Header.Get("Content-Type") != "application/json" {
						t.Errorf("%s: 410 body %s", path, b)
					}
				}
				res.Body.Close()
				cancel()
			}
		})
	}
	// Without a cursor: from the oldest retained, and that cursor resumes.
	var retained []line
	for i, l := range all {
		if !slices.Contains(idx0[:3], i) {
			retained = append(retained, l)
		}
	}
	got := env.events("")
	if !slices.Equal(eventIDs(got), eventIDs(retained)) {
		t.Fatalf("from the start after the trim: %d events, want the %d retained", len(got), len(retained))
	}
	// Each line's cursor resumes, also the first, whose position in the
	// other partition is just before that partition's oldest retained.
	for k := range got {
		if rest := env.events("after=" + got[k].Cursor); !slices.Equal(eventIDs(rest), eventIDs(got[k+1:])) {
			t.Errorf("resuming after retained event %d: %d events, want %d", k, len(rest), len(got)-k-1)
		}
	}
}

// TestScanMeta: the hub's field scan agrees with encoding/json on event
// JSON, also when other fields hold the keys' text or escapes.
func TestScanMeta(t *testing.T) {
	for _, ev := range []alerts.Event{
		{EventID: "a:raised", Type: alerts.Raised, DroneID: "D1", ZoneID: "Z1", Category: "restricted"},
		{Type: alerts.Cleared, DroneID: `D"2`, ZoneID: "Z\\2", ZoneName: `x","type":"acked","zone_id":"bad`, Category: "prohibited", Reason: "exited"},
		{Type: alerts.Acked, DroneID: "Ü-δρόνος", ZoneID: "Z\n3", Category: "", By: `"category":"no"`, Note: `,"drone_id":"no"`},
	} {
		b := ev.AppendJSON(nil)
		var want eventMeta
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		e, ok := entryFrom(0, redis.XMessage{ID: "1-1", Values: map[string]any{redislayout.FieldEvent: string(b)}})
		if !ok || e.meta != want {
			t.Errorf("%s: meta %+v (ok %v), want %+v", b, e.meta, ok, want)
		}
	}
	for _, bad := range []string{"", "{", "[1]", `{"type":"raised"`} {
		if _, ok := entryFrom(0, redis.XMessage{ID: "1-1", Values: map[string]any{redislayout.FieldEvent: bad}}); ok {
			t.Errorf("entry %q accepted", bad)
		}
	}
}
