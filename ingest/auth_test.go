package ingest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/ingest/feedkey"
)

// Keys of the test feeds. The file holds only their hashes.
const (
	keyUAV   = "nofly_test-key-uav-0123456789abcdefghijklmnopqrstu"
	keyRated = "nofly_test-key-rated-0123456789abcdefghijklmnopqr"
	keyAny   = "nofly_test-key-any-0123456789abcdefghijklmnopqrstu"
)

func testFeeds(t *testing.T) *feedkey.Set {
	t.Helper()
	line := func(name, key, opts string) string {
		f := feedkey.Feed{Name: name, Hash: feedkey.Hash(key)}
		return f.Line() + " " + opts + "\n"
	}
	s, err := feedkey.Parse("feeds.txt", strings.NewReader(
		line("uav-fleet", keyUAV, "prefixes=UAV-,DRN-")+
			line("rated", keyRated, "rate=10/m")+
			line("any", keyAny, "")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// authReq describes one request of the auth and body tests.
type authReq struct {
	method, path string
	remote       string // RemoteAddr; default a loopback one
	auth         string // Authorization header
	header       map[string]string
	body         []byte
}

type reqAnswer struct {
	code   int
	header http.Header
	body   errorBody
	raw    string
}

func sendReq(t *testing.T, h http.Handler, q authReq) reqAnswer {
	t.Helper()
	if q.method == "" {
		q.method = http.MethodPost
	}
	if q.path == "" {
		q.path = "/v1/telemetry"
	}
	r := httptest.NewRequest(q.method, "http://127.0.0.1"+q.path, bytes.NewReader(q.body))
	r.RemoteAddr = "127.0.0.1:40000"
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	if q.method == http.MethodPost {
		r.Header.Set("Content-Type", ndjson)
	}
	if q.auth != "" {
		r.Header.Set("Authorization", q.auth)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := reqAnswer{code: w.Code, header: w.Header(), raw: w.Body.String()}
	if w.Code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(w.Body.Bytes(), &a.body); err != nil {
			t.Fatalf("%d body %q: %v", w.Code, w.Body, err)
		}
	}
	return a
}

func ndjsonOf(ids ...string) []byte {
	var b strings.Builder
	for i, id := range ids {
		b.WriteString(rec(id, i+1))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func scrapeMetrics(t *testing.T, h http.Handler) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil))
	return w.Body.String()
}

func TestFeedAuth(t *testing.T) {
	tests := []struct {
		name        string
		req         authReq
		wantCode    int
		wantRecords int    // produced, on 202
		wantAuthHdr string // WWW-Authenticate, exactly, "" = absent
		wantErr     string // in the JSON error
		wantLines   []LineError
		wantMetric  []string
	}{
		{name: "no key", req: authReq{body: ndjsonOf("UAV-1")}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest"`, wantErr: "send Authorization: Bearer <key>",
			wantMetric: []string{`nofly_ingest_auth_failures_total{reason="no_key"} 1`}},
		{name: "another scheme is no key", req: authReq{auth: "Basic dXNlcjpwYXNz", body: ndjsonOf("UAV-1")}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest"`, wantMetric: []string{`nofly_ingest_auth_failures_total{reason="no_key"} 1`}},
		{name: "empty bearer", req: authReq{auth: "Bearer ", body: ndjsonOf("UAV-1")}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest"`},
		{name: "wrong key", req: authReq{auth: "Bearer nofly_not-a-key", body: ndjsonOf("UAV-1")}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest", error="invalid_token"`, wantErr: "not the key of any feed",
			wantMetric: []string{`nofly_ingest_auth_failures_total{reason="bad_key"} 1`, `nofly_ingest_auth_failures_total{reason="no_key"} 0`}},
		{name: "a feed's hash is not its key", req: authReq{auth: "Bearer sha256:" + strings.Repeat("0", 64), body: ndjsonOf("UAV-1")}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest", error="invalid_token"`},
		{name: "loopback is not exempt with keys", req: authReq{remote: "127.0.0.1:5", body: ndjsonOf("UAV-1")}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest"`},
		{name: "right key", req: authReq{auth: "Bearer " + keyUAV, remote: "198.51.100.7:4000", body: ndjsonOf("UAV-1", "DRN-2", "UAV-3")},
			wantCode: 202, wantRecords: 3, wantMetric: []string{
				`nofly_ingest_feed_requests_total{code="202",feed="uav-fleet"} 1`,
				`nofly_ingest_feed_records_accepted_total{feed="uav-fleet"} 3`,
				`nofly_ingest_feed_records_accepted_total{feed="rated"} 0`,
			}},
		{name: "scheme is case-insensitive", req: authReq{auth: "bearer  " + keyUAV, body: ndjsonOf("UAV-1")}, wantCode: 202, wantRecords: 1},
		{name: "record outside the prefixes refuses the request", req: authReq{auth: "Bearer " + keyUAV,
			body: ndjsonOf("UAV-1", "OGN-9", "UAV-3", "uav-4")}, wantCode: 403,
			wantErr: `2 of 4 records name drones feed "uav-fleet" may not write; nothing was accepted`,
			wantLines: []LineError{
				{Line: 2, Field: "drone_id", Error: `feed "uav-fleet" may not write drone "OGN-9" (its prefixes: UAV-, DRN-)`},
				{Line: 4, Field: "drone_id", Error: `feed "uav-fleet" may not write drone "uav-4" (its prefixes: UAV-, DRN-)`},
			}, wantMetric: []string{
				`nofly_ingest_auth_failures_total{reason="prefix"} 1`,
				`nofly_ingest_records_rejected_total{reason="prefix_refused"} 4`,
				`nofly_ingest_feed_requests_total{code="403",feed="uav-fleet"} 1`,
			}},
		{name: "a feed without prefixes writes any drone", req: authReq{auth: "Bearer " + keyAny, body: ndjsonOf("OGN-9", "X")},
			wantCode: 202, wantRecords: 2},
		{name: "invalid record is still a 400 for a keyed feed", req: authReq{auth: "Bearer " + keyUAV, body: []byte(`{"drone_id":"UAV-1"}`)},
			wantCode: 400},
		{name: "healthz without a key", req: authReq{method: http.MethodGet, path: "/healthz", remote: "203.0.113.1:1"}, wantCode: 200},
		{name: "readyz without a key", req: authReq{method: http.MethodGet, path: "/readyz", remote: "203.0.113.1:1"}, wantCode: 200},
		{name: "metrics without a key", req: authReq{method: http.MethodGet, path: "/metrics", remote: "203.0.113.1:1"}, wantCode: 200},
		{name: "unknown write route needs a key first", req: authReq{path: "/v1/other", remote: "203.0.113.1:1"}, wantCode: 401,
			wantAuthHdr: `Bearer realm="nofly-ingest"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProducer{}
			s, err := NewServer(Options{Producer: fp, Logger: slogDiscard(), Feeds: testFeeds(t)})
			if err != nil {
				t.Fatal(err)
			}
			a := sendReq(t, s, tt.req)
			if a.code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", a.code, tt.wantCode, a.raw)
			}
			if got := a.header.Get("WWW-Authenticate"); got != tt.wantAuthHdr {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.wantAuthHdr)
			}
			if n := len(fp.produced()); n != tt.wantRecords {
				t.Errorf("produced %d records, want %d", n, tt.wantRecords)
			}
			if tt.wantCode >= 400 && a.body.Error == "" {
				t.Errorf("no JSON error in the %d reqAnswer: %q", a.code, a.raw)
			}
			if !strings.Contains(a.body.Error, tt.wantErr) {
				t.Errorf("error %q lacks %q", a.body.Error, tt.wantErr)
			}
			if tt.wantLines != nil && !equalErrors(a.body.Errors, tt.wantLines) {
				t.Errorf("errors\n got %+v\nwant %+v", a.body.Errors, tt.wantLines)
			}
			m := scrapeMetrics(t, s)
			for _, w := range tt.wantMetric {
				if !strings.Contains(m, w) {
					t.Errorf("metrics lack %q", w)
				}
			}
		})
	}
}

// TestFeedRate: a feed of 10 records a minute (burst 10) writes 10 at once,
// then gets 429 with Retry-After: the 6 s one record takes to earn; a
// refused request costs nothing; other feeds are not affected; more than
// the burst in one request can never pass (413).
func TestFeedRate(t *testing.T) {
	fp := &fakeProducer{}
	s, err := NewServer(Options{Producer: fp, Logger: slogDiscard(), Feeds: testFeeds(t)})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "R-1"
		}
		return out
	}
	rated := "Bearer " + keyRated
	steps := []struct {
		name           string
		auth           string
		records        int
		wantCode       int
		wantRetryAfter string
	}{
		{"over the burst", rated, 11, 413, ""},
		{"the burst at once", rated, 10, 202, ""},
		{"one more", rated, 1, 429, "6"},
		{"the refusal cost nothing", rated, 1, 429, "6"},
		{"five more", rated, 5, 429, "30"},
		{"another feed", "Bearer " + keyAny, 10, 202, ""},
	}
	produced := 0
	for _, st := range steps {
		a := sendReq(t, s, authReq{auth: st.auth, body: ndjsonOf(ids(st.records)...)})
		if a.code != st.wantCode {
			t.Fatalf("%s: status %d, want %d: %s", st.name, a.code, st.wantCode, a.raw)
		}
		if got := a.header.Get("Retry-After"); got != st.wantRetryAfter {
			t.Errorf("%s: Retry-After %q, want %q", st.name, got, st.wantRetryAfter)
		}
		if st.wantCode == 202 {
			produced += st.records
		} else if !strings.Contains(a.body.Error, `feed "`) {
			t.Errorf("%s: error %q does not name the feed", st.name, a.body.Error)
		}
		if n := len(fp.produced()); n != produced {
			t.Fatalf("%s: %d records produced, want %d", st.name, n, produced)
		}
	}
	m := scrapeMetrics(t, s)
	for _, w := range []string{
		`nofly_ingest_auth_failures_total{reason="rate"} 3`,
		`nofly_ingest_records_rejected_total{reason="rate_limited"} 7`,
		`nofly_ingest_feed_requests_total{code="429",feed="rated"} 3`,
		`nofly_ingest_feed_requests_total{code="413",feed="rated"} 1`,
		`nofly_ingest_feed_records_accepted_total{feed="rated"} 10`,
		`nofly_ingest_feed_records_accepted_total{feed="any"} 10`,
	} {
		if !strings.Contains(m, w) {
			t.Errorf("metrics lack %q", w)
		}
	}
}

// TestIntakeWithoutKeys: without a key file only the loopback peer address
// may write, whatever X-Forwarded-For says; --insecure-open-intake lets
// everyone.
func TestIntakeWithoutKeys(t *testing.T) {
	tests := []struct {
		name     string
		open     bool
		remote   string
		header   map[string]string
		wantCode int
		wantErr  string
		wantFeed string // the feed label of the counted request
	}{
		{name: "127.0.0.1", remote: "127.0.0.1:1234", wantCode: 202, wantFeed: CallerLoopback},
		{name: "127.8.9.10", remote: "127.8.9.10:1234", wantCode: 202, wantFeed: CallerLoopback},
		{name: "::1", remote: "[::1]:1234", wantCode: 202, wantFeed: CallerLoopback},
		{name: "v4-mapped loopback", remote: "[::ffff:127.0.0.1]:1234", wantCode: 202, wantFeed: CallerLoopback},
		{name: "documentation address", remote: "192.0.2.1:1234", wantCode: 403,
			wantErr: "telemetry from 192.0.2.1 refused: without feed keys (--feed-keys) only loopback clients may write"},
		{name: "private address", remote: "10.1.2.3:1234", wantCode: 403},
		{name: "IPv6", remote: "[2001:db8::1]:1234", wantCode: 403},
		{name: "forwarding headers are not trusted", remote: "192.0.2.1:1234", wantCode: 403,
			header: map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1", "Forwarded": "for=127.0.0.1"}},
		{name: "unparsable peer", remote: "somewhere", wantCode: 403},
		{name: "a bearer key does not help", remote: "192.0.2.1:1234", wantCode: 403,
			header: map[string]string{"Authorization": "Bearer " + keyAny}},
		{name: "open intake", open: true, remote: "192.0.2.1:1234", wantCode: 202, wantFeed: CallerOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProducer{}
			var logs bytes.Buffer
			s, err := NewServer(Options{Producer: fp, InsecureOpenIntake: tt.open,
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			a := sendReq(t, s, authReq{remote: tt.remote, header: tt.header, body: ndjsonOf("UAV-1")})
			if a.code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", a.code, tt.wantCode, a.raw)
			}
			if !strings.Contains(a.body.Error, tt.wantErr) {
				t.Errorf("error %q lacks %q", a.body.Error, tt.wantErr)
			}
			m := scrapeMetrics(t, s)
			if tt.wantCode == 403 {
				if len(fp.produced()) != 0 {
					t.Error("a refused request produced records")
				}
				if !strings.Contains(m, `nofly_ingest_auth_failures_total{reason="not_loopback"} 1`) {
					t.Error("refusal not counted as not_loopback")
				}
				if !strings.Contains(logs.String(), `"reason":"not_loopback"`) || !strings.Contains(logs.String(), tt.remote) {
					t.Errorf("refusal not logged with reason and remote address:\n%s", logs.String())
				}
				return
			}
			if len(fp.produced()) != 1 {
				t.Errorf("produced %d records, want 1", len(fp.produced()))
			}
			if w := `nofly_ingest_feed_records_accepted_total{feed="` + tt.wantFeed + `"} 1`; !strings.Contains(m, w) {
				t.Errorf("metrics lack %q", w)
			}
		})
	}
	if _, err := NewServer(Options{Producer: &fakeProducer{}, Feeds: testFeeds(t), InsecureOpenIntake: true}); err == nil {
		t.Error("Feeds with InsecureOpenIntake accepted")
	}
}

// TestKeysNeverLogged: with every request logged (debug), no key, right or
// wrong, appears in the log; the feed's name does.
func TestKeysNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	s, err := NewServer(Options{Producer: &fakeProducer{}, Feeds: testFeeds(t),
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	wrong := "nofly_wrong-key-that-must-not-be-logged-0123456789"
	for _, q := range []authReq{
		{auth: "Bearer " + keyUAV, body: ndjsonOf("UAV-1")},                 // 202
		{auth: "Bearer " + keyUAV, body: ndjsonOf("OGN-1")},                 // 403 prefix
		{auth: "Bearer " + keyUAV, body: []byte("{}")},                      // 400
		{auth: "Bearer " + keyRated, body: ndjsonOf(make([]string, 11)...)}, // 400 (empty ids)
		{auth: "Bearer " + wrong, body: ndjsonOf("UAV-1")},                  // 401
		{auth: wrong, body: ndjsonOf("UAV-1")},                              // 401, no scheme
	} {
		sendReq(t, s, q)
	}
	out := logs.String()
	if strings.Count(out, `"msg":"request"`) != 6 {
		t.Fatalf("want 6 request lines in the log, got:\n%s", out)
	}
	for _, k := range []string{keyUAV, keyRated, wrong, wrong[:20]} {
		if strings.Contains(out, k) {
			t.Errorf("the log holds a key (%s…):\n%s", k[:10], out)
		}
	}
	if !strings.Contains(out, `"feed":"uav-fleet"`) {
		t.Errorf("the log does not name the feed:\n%s", out)
	}
}
