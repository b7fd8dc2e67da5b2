package api

// The hostile-client suite of the alert API (issue 26, parts 3 and 4):
// each test sends what a web page the operator visits, or a client that
// escapes, repeats or forges, can send, and checks the refusal and that
// nothing changed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/httpguard"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// hostileEnv is the whole alerter router (Handler) on a test's own keys of
// the real Redis: 6 alarms on 3 partitions and a zone set of version 1.
type hostileEnv struct {
	t      *testing.T
	h      http.Handler
	o      Options
	alarms []alerts.Event
	logs   *syncBuffer
}

// syncBuffer is a log sink handlers write to concurrently.
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

func newHostileEnv(t *testing.T, mod func(*Options)) *hostileEnv {
	t.Helper()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "api-hostile")
	logs := &syncBuffer{}
	o := Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 3, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Web:    webOptions("127.0.0.1:9102"),
		Dashboard: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<!doctype html><title>nofly</title>"))
		})}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e := &hostileEnv{t: t, h: s.Handler(), o: o, logs: logs}
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i := range 6 {
		ev := storetest.Raised(i%3, fmt.Sprintf("UAV-%d", i), "EGLL-ATZ", "restricted", int64(10+i), base.Add(time.Duration(i)*time.Second))
		w.Add(ev)
		e.alarms = append(e.alarms, ev)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// webOptions is a listener's Web options with a fixed hostname.
func webOptions(listen string) httpguard.Config {
	return httpguard.Config{Listen: listen, Hostname: "ops-box"}
}

// hreq is a request as the tests send it: Host testHost, peer 127.0.0.1,
// and the headers in pairs ("Host" and "RemoteAddr" set those).
func hreq(method, target, body string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Host, r.RemoteAddr = testHost, "127.0.0.1:40000"
	for i := 0; i+1 < len(hdr); i += 2 {
		switch hdr[i] {
		case "Host":
			r.Host = hdr[i+1]
		case "RemoteAddr":
			r.RemoteAddr = hdr[i+1]
		default:
			r.Header.Add(hdr[i], hdr[i+1])
		}
	}
	return r
}

type hanswer struct {
	code int
	hdr  http.Header
	raw  string
	body errorBody
}

func (e *hostileEnv) do(r *http.Request) hanswer {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	a := hanswer{code: rec.Code, hdr: rec.Header(), raw: rec.Body.String()}
	if rec.Code >= 400 {
		if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil || a.body.Code == "" || a.body.Details == nil {
			e.t.Errorf("%s %s: %d is not the error body: %q", r.Method, r.URL, rec.Code, rec.Body.String())
		}
	}
	return a
}

// acked reports whether the alarm has an ack.
func (e *hostileEnv) acked(id string) bool {
	e.t.Helper()
	a := e.do(hreq("GET", "/v1/alarms/"+id, ""))
	if a.code != 200 {
		e.t.Fatalf("GET alarm %s: %d %s", id, a.code, a.raw)
	}
	var al struct{ Ack any }
	if err := json.Unmarshal([]byte(a.raw), &al); err != nil {
		e.t.Fatal(err)
	}
	return al.Ack != nil
}

// zoneVersion is the zone set's version, from GET /v1/zones's ETag.
func (e *hostileEnv) zoneVersion() string {
	e.t.Helper()
	a := e.do(hreq("GET", "/v1/zones", ""))
	if a.code != 200 {
		e.t.Fatalf("GET /v1/zones: %d %s", a.code, a.raw)
	}
	var doc any
	if err := json.Unmarshal([]byte(a.raw), &doc); err != nil {
		e.t.Fatalf("GET /v1/zones is not JSON: %v", err)
	}
	return a.hdr.Get("ETag")
}

func (e *hostileEnv) putZones(body string) hanswer {
	e.t.Helper()
	return e.do(hreq("PUT", "/v1/zones", body, "Content-Type", "application/json"))
}

// TestHostileDNSRebindingRefused: a request whose Host is a name a
// DNS-rebinding page was loaded from gets 421 on every route, reads (the
// data a page would steal) and writes alike, and changes nothing; the
// listener's address, localhost, the hostname and a public URL's host are
// served; the probes answer whatever the Host.
func TestHostileDNSRebindingRefused(t *testing.T) {
	e := newHostileEnv(t, func(o *Options) { o.Web.PublicURLs = []string{"https://nofly.example.com"} })
	if a := e.putZones(collection(feature("A", 7))); a.code != 200 {
		t.Fatalf("seed zones: %d %s", a.code, a.raw)
	}
	version := e.zoneVersion()
	id := e.alarms[0].AlarmID
	routes := []struct{ method, path, body string }{
		{"GET", "/v1/alarms", ""},
		{"GET", "/v1/alarms/" + id, ""},
		{"GET", "/v1/events", ""},
		{"GET", "/v1/zones", ""},
		{"GET", "/v1/drones", ""},
		{"GET", "/v1/me", ""},
		{"GET", "/v1/map/zones", ""},
		{"GET", "/", ""},
		{"GET", "/metrics", ""},
		{"GET", "/openapi.json", ""},
		{"GET", "/v1/no-such-route", ""},
		{"POST", "/v1/alarms/" + id + "/ack", `{"note":"rebound"}`},
		{"PUT", "/v1/zones", collection(feature("EVIL", 7))},
		{"DELETE", "/v1/zones/A", ""},
	}
	for _, host := range []string{"attacker.example:9102", "rebind.attacker.example", "127.0.0.1.nip.io:9102", "192.168.1.20:9102", "localhost.attacker.example"} {
		for _, rt := range routes {
			a := e.do(hreq(rt.method, rt.path, rt.body, "Host", host, "Content-Type", "application/json"))
			if a.code != http.StatusMisdirectedRequest || a.body.Code != "misdirected_request" || a.body.Details["host"] != host ||
				!strings.Contains(a.body.Error, "--public-url") {
				t.Errorf("Host %s: %s %s: %d %s, want 421 misdirected_request naming the host and --public-url", host, rt.method, rt.path, a.code, a.raw)
			}
		}
	}
	if e.acked(id) || e.zoneVersion() != version {
		t.Fatal("a request with a foreign Host changed something")
	}
	for _, host := range []string{"127.0.0.1:9102", "127.0.0.1", "localhost:9102", "ops-box:9102", "nofly.example.com", "[::1]:9102"} {
		for _, p := range []string{"/v1/alarms", "/", "/metrics", "/openapi.json"} {
			if a := e.do(hreq("GET", p, "", "Host", host)); a.code != 200 {
				t.Errorf("Host %s: GET %s: %d %s", host, p, a.code, a.raw)
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if a := e.do(hreq("GET", p, "", "Host", "10.1.2.3:9102")); a.code != 200 {
			t.Errorf("probe %s by another name: %d %s", p, a.code, a.raw)
		}
	}
	// A listener on every address serves any IP literal, but still no name
	// of another's.
	any := newHostileEnv(t, func(o *Options) { o.Web.Listen = ":9102" })
	if a := any.do(hreq("GET", "/v1/alarms", "", "Host", "10.1.2.3:9102")); a.code != 200 {
		t.Errorf("wildcard listener, IP Host: %d", a.code)
	}
	if a := any.do(hreq("GET", "/v1/alarms", "", "Host", "attacker.example:9102")); a.code != 421 {
		t.Errorf("wildcard listener, foreign name: %d", a.code)
	}
}

// TestHostileCrossSiteAckRefused: in the loopback mode (no token file), a
// cross-site ack — a form post or a no-cors fetch of another page, whose
// Origin is that page's — is refused with 403 and leaves the alarm
// unacked; the same ack from the server's own origin (the dashboard) and
// from an origin --api-cors-origins names goes through.
func TestHostileCrossSiteAckRefused(t *testing.T) {
	e := newHostileEnv(t, func(o *Options) { o.CORSOrigins = []string{"https://ops.example.com"} })
	id := e.alarms[1].AlarmID
	path := "/v1/alarms/" + id + "/ack"
	for _, tt := range []struct {
		name string
		hdr  []string
	}{
		{"form post", []string{"Content-Type", "text/plain", "Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}},
		{"no-cors fetch", []string{"Content-Type", "text/plain;charset=UTF-8", "Origin", "https://attacker.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}},
		{"JSON from another origin", []string{"Content-Type", "application/json", "Origin", "https://attacker.example"}},
		{"fetch metadata only", []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}},
		{"a sibling site", []string{"Content-Type", "application/json", "Origin", "http://localhost:8000", "Sec-Fetch-Site", "same-site"}},
		{"sandboxed frame", []string{"Content-Type", "application/json", "Origin", "null"}},
		{"the dashboard's port on another scheme", []string{"Content-Type", "application/json", "Origin", "https://127.0.0.1:9102"}},
	} {
		a := e.do(hreq("POST", path, `{"note":"from attacker"}`, tt.hdr...))
		if a.code != http.StatusForbidden || a.body.Code != "cross_site" {
			t.Errorf("%s: %d %s, want 403 cross_site", tt.name, a.code, a.raw)
		}
	}
	if e.acked(id) {
		t.Fatal("a cross-site ack acked the alarm")
	}
	// The zone routes likewise.
	if a := e.do(hreq("PUT", "/v1/zones", collection(feature("EVIL", 7)), "Content-Type", "application/json",
		"Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site")); a.code != 403 || a.body.Code != "cross_site" {
		t.Errorf("cross-site zone PUT: %d %s", a.code, a.raw)
	}
	if a := e.do(hreq("GET", "/v1/zones", "")); !strings.Contains(a.raw, `"features":[]`) {
		t.Errorf("the zone set changed: %s", a.raw)
	}
	// The dashboard's own call (Chrome sends Origin on a same-origin POST).
	a := e.do(hreq("POST", path, `{"note":"seen"}`, "Content-Type", "application/json", "Origin", "http://127.0.0.1:9102",
		"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"))
	if a.code != 200 || !e.acked(id) {
		t.Fatalf("same-origin ack: %d %s", a.code, a.raw)
	}
	// An origin CORS allows.
	other := e.alarms[2].AlarmID
	if a := e.do(hreq("POST", "/v1/alarms/"+other+"/ack", `{}`, "Content-Type", "application/json", "Origin", "https://ops.example.com",
		"Sec-Fetch-Site", "cross-site")); a.code != 200 || !e.acked(other) {
		t.Fatalf("ack from a CORS origin: %d %s", a.code, a.raw)
	}
}

// TestHostileTextPlainWriteRefused: a write's body is JSON (the zone
// routes: also GeoJSON) or absent; anything else — the text/plain a page
// may post without a preflight, a form, no Content-Type with a body — is
// a 415 naming the accepted types, and changes nothing.
func TestHostileTextPlainWriteRefused(t *testing.T) {
	e := newHostileEnv(t, nil)
	if a := e.putZones(collection(feature("A", 7), feature("B", 7.1))); a.code != 200 {
		t.Fatalf("seed zones: %d %s", a.code, a.raw)
	}
	id := e.alarms[0].AlarmID
	ack := "/v1/alarms/" + id + "/ack"
	tests := []struct {
		name, method, path, body string
		ct                       []string // Content-Type headers
		code                     int
	}{
		{"ack text/plain", "POST", ack, `{"note":"x"}`, []string{"text/plain"}, 415},
		{"ack text/plain, empty", "POST", ack, ``, []string{"text/plain"}, 415},
		{"ack form", "POST", ack, `note=x`, []string{"application/x-www-form-urlencoded"}, 415},
		{"ack multipart", "POST", ack, "--b\r\n\r\n--b--", []string{"multipart/form-data; boundary=b"}, 415},
		{"ack body without a type", "POST", ack, `{"note":"x"}`, nil, 415},
		{"ack JSON in Latin-1", "POST", ack, `{"note":"x"}`, []string{"application/json; charset=iso-8859-1"}, 415},
		{"ack two types", "POST", ack, `{"note":"x"}`, []string{"application/json", "text/plain"}, 415},
		{"ack not a media type", "POST", ack, `{"note":"x"}`, []string{"json"}, 415},
		{"zone set text/plain", "PUT", "/v1/zones", collection(feature("A", 7)), []string{"text/plain"}, 415},
		{"zone text/plain", "PUT", "/v1/zones/C", feature("C", 7.2), []string{"text/plain"}, 415},
		{"zone delete form", "DELETE", "/v1/zones/B", `x=1`, []string{"application/x-www-form-urlencoded"}, 415},
	}
	for _, tt := range tests {
		hdr := []string{}
		for _, ct := range tt.ct {
			hdr = append(hdr, "Content-Type", ct)
		}
		a := e.do(hreq(tt.method, tt.path, tt.body, hdr...))
		if a.code != tt.code || a.body.Code != "unsupported_media_type" || a.body.Details["field"] != "Content-Type" || a.body.Details["accepted"] == nil {
			t.Errorf("%s: %d %s, want %d unsupported_media_type naming the accepted types", tt.name, a.code, a.raw, tt.code)
		}
	}
	if e.acked(id) || e.zoneVersion() != `"1"` {
		t.Fatal("a refused write changed something")
	}
	for _, tt := range []struct {
		name, method, path, body string
		ct                       string
	}{
		{"ack without a body or a type", "POST", ack, "", ""},
		{"ack JSON, UTF-8", "POST", "/v1/alarms/" + e.alarms[1].AlarmID + "/ack", `{"note":"x"}`, "application/json; charset=utf-8"},
		{"zone GeoJSON", "PUT", "/v1/zones/C", feature("C", 7.2), "application/geo+json"},
		{"zone delete without a body", "DELETE", "/v1/zones/B", "", ""},
	} {
		hdr := []string{}
		if tt.ct != "" {
			hdr = []string{"Content-Type", tt.ct}
		}
		if a := e.do(hreq(tt.method, tt.path, tt.body, hdr...)); a.code != 200 {
			t.Errorf("%s: %d %s", tt.name, a.code, a.raw)
		}
	}
}

// TestHostilePercentEncodedIDs: a path id is the same id however the
// client escapes it (%c3%9c and %C3%9C, %2F and %2f), every id a zone set
// can hold is addressable (a "/" in it too), and the id "history", which
// GET could not reach, cannot be stored.
func TestHostilePercentEncodedIDs(t *testing.T) {
	e := newHostileEnv(t, nil)
	ids := []string{"Ü-zone", "a/b", "50%", "sp ace", "x?y#z", "日本"}
	var fs []string
	for i, id := range ids {
		fs = append(fs, feature(id, 7+float64(i)/100))
	}
	if a := e.putZones(collection(fs...)); a.code != 200 {
		t.Fatalf("seed zones: %d %s", a.code, a.raw)
	}
	gets := []struct{ path, id string }{
		{"/v1/zones/%C3%9C-zone", "Ü-zone"},
		{"/v1/zones/%c3%9c-zone", "Ü-zone"},
		{"/v1/zones/%c3%9C-zone", "Ü-zone"},
		{"/v1/zones/a%2Fb", "a/b"},
		{"/v1/zones/a%2fb", "a/b"},
		{"/v1/zones/%61%2Fb", "a/b"},
		{"/v1/zones/50%25", "50%"},
		{"/v1/zones/sp%20ace", "sp ace"},
		{"/v1/zones/x%3Fy%23z", "x?y#z"},
		{"/v1/zones/%e6%97%a5%e6%9c%ac", "日本"},
	}
	for _, g := range gets {
		a := e.do(hreq("GET", g.path, ""))
		var f struct {
			Properties struct{ ID string } `json:"properties"`
		}
		if a.code != 200 || json.Unmarshal([]byte(a.raw), &f) != nil || f.Properties.ID != g.id {
			t.Errorf("GET %s: %d %s, want zone %q", g.path, a.code, a.raw, g.id)
		}
	}
	if a := e.do(hreq("PUT", "/v1/zones/a%2fb", feature("a/b", 8), "Content-Type", "application/json")); a.code != 200 || !strings.Contains(a.raw, `"changed":["a/b"]`) {
		t.Errorf("PUT /v1/zones/a%%2fb: %d %s", a.code, a.raw)
	}
	if a := e.do(hreq("DELETE", "/v1/zones/%c3%9c-zone", "")); a.code != 200 || !strings.Contains(a.raw, `"removed":["Ü-zone"]`) {
		t.Errorf("DELETE /v1/zones/%%c3%%9c-zone: %d %s", a.code, a.raw)
	}
	if a := e.putZones(collection(feature("history", 7))); a.code != 400 || a.body.Details["field"] != "properties.id" {
		t.Errorf("a zone with the id history: %d %s, want 400 naming properties.id", a.code, a.raw)
	}
	if a := e.do(hreq("PUT", "/v1/zones/%68istory", feature("history", 7), "Content-Type", "application/json")); a.code != 405 {
		t.Errorf("PUT /v1/zones/%%68istory: %d %s, want 405", a.code, a.raw)
	}
	// Alarm and drone ids, escaped.
	id := e.alarms[0].AlarmID
	esc := "%" + fmt.Sprintf("%02x", id[0]) + id[1:]
	if a := e.do(hreq("GET", "/v1/alarms/"+esc, "")); a.code != 200 {
		t.Errorf("GET /v1/alarms/%s: %d %s", esc, a.code, a.raw)
	}
	if a := e.do(hreq("GET", "/v1/drones/UAV%2D7", "")); a.code != 404 || a.body.Details["drone_id"] != "UAV-7" {
		t.Errorf("GET /v1/drones/UAV%%2D7: %d %s, want 404 for drone UAV-7", a.code, a.raw)
	}
}

// TestHostileZoneDocumentInvalidUTF8AndDeepNesting: a zone document with
// a byte that is not UTF-8, or arrays nested 9,000 deep, is refused with
// 400 naming the field and the byte before anything is stored; the set
// served stays parseable JSON.
func TestHostileZoneDocumentInvalidUTF8AndDeepNesting(t *testing.T) {
	e := newHostileEnv(t, nil)
	if a := e.putZones(collection(feature("A", 7))); a.code != 200 {
		t.Fatalf("seed zones: %d %s", a.code, a.raw)
	}
	badName := strings.Replace(feature("B", 7.1), `"radius_m"`, `"name":"Bad `+"\xff\xfe"+`","radius_m"`, 1)
	deep := strings.Replace(feature("C", 7.2), `"radius_m"`, `"extra":`+strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+`,"radius_m"`, 1)
	ed269Deep := `[{"identifier":"X","extension":` + strings.Repeat(`{"a":`, 9000) + `1` + strings.Repeat(`}`, 9000) + `}]`
	tests := []struct {
		name, method, path, body string
		field, msg               string
	}{
		{"invalid UTF-8 in a set", "PUT", "/v1/zones", collection(feature("A", 7), badName), "features[1].properties.name", "invalid UTF-8 at byte"},
		{"invalid UTF-8 in a key", "PUT", "/v1/zones", collection(strings.Replace(feature("B", 7.1), `"radius_m"`, `"k`+"\xc3"+`":1,"radius_m"`, 1)), "features[0].properties", "(a key)"},
		{"9,000-deep arrays in a set", "PUT", "/v1/zones", collection(feature("A", 7), deep), "features[1].properties.extra", "nested deeper than 64"},
		{"9,000-deep objects in ED-269", "PUT", "/v1/zones", ed269Deep, "[0].extension.a", "nested deeper than 64"},
		{"invalid UTF-8 in one zone", "PUT", "/v1/zones/B", badName, "properties.name", "invalid UTF-8 at byte"},
		{"deep nesting in one zone", "PUT", "/v1/zones/C", deep, "properties.extra", "nested deeper than 64"},
	}
	for _, tt := range tests {
		a := e.do(hreq(tt.method, tt.path, tt.body, "Content-Type", "application/json"))
		field, _ := a.body.Details["field"].(string)
		if a.code != 400 || !strings.HasPrefix(field, tt.field) || !strings.Contains(a.body.Error, tt.msg) || len(a.raw) > 8<<10 {
			t.Errorf("%s: %d %.300s, want 400 naming %s and %q", tt.name, a.code, a.raw, tt.field, tt.msg)
		}
	}
	if v := e.zoneVersion(); v != `"1"` {
		t.Errorf("version %s after refused documents, want 1", v)
	}
	// 64 levels are fine (an extension object may nest).
	ok := strings.Replace(feature("D", 7.3), `"radius_m"`, `"name":"`+"Zürich"+`","radius_m"`, 1)
	if a := e.do(hreq("PUT", "/v1/zones/D", ok, "Content-Type", "application/json")); a.code != 200 {
		t.Errorf("a valid UTF-8 zone: %d %s", a.code, a.raw)
	}
}

// TestHostileInternalErrorsHidden: a 500 says "internal" and a request id,
// never the error chain (Redis's address, "dial tcp"); the probes' 503s
// say what failed in general only; the log has each detail, the 500's
// under its request id.
func TestHostileInternalErrorsHidden(t *testing.T) {
	logs := &syncBuffer{}
	s, err := New(Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), Topic: "pos", Partitions: 2,
		Web:     webOptions("127.0.0.1:9102"),
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Healthy: func(context.Context) error { return fmt.Errorf("redis 10.0.0.7:6379: %w", context.DeadlineExceeded) },
		Ready: func(context.Context) error {
			return fmt.Errorf("no Kafka broker reachable: dial tcp 10.0.0.3:9092: connect: connection refused")
		}})
	if err != nil {
		t.Fatal(err)
	}
	e := &hostileEnv{t: t, h: s.Handler()}
	secrets := []string{"127.0.0.1:1", "10.0.0.7", "10.0.0.3", "dial", "connect", "refused", "redis"}
	for _, p := range []string{"/v1/zones", "/v1/zones/history", "/v1/zones/A", "/v1/map/zones", "/v1/alarms", "/v1/alarms/" + unknownAlarm, "/v1/drones", "/v1/events"} {
		a := e.do(hreq("GET", p, ""))
		if a.code != 500 || a.body.Code != "internal" {
			t.Errorf("GET %s: %d %s, want 500 internal", p, a.code, a.raw)
			continue
		}
		rid, _ := a.body.Details["request_id"].(string)
		if len(rid) != 16 || a.hdr.Get("X-Request-Id") != rid || !strings.Contains(a.body.Error, rid) {
			t.Errorf("GET %s: request id %q, header %q: %s", p, rid, a.hdr.Get("X-Request-Id"), a.raw)
		}
		for _, sec := range secrets {
			if strings.Contains(strings.ToLower(a.raw), sec) {
				t.Errorf("GET %s: the 500 says %q: %s", p, sec, a.raw)
			}
		}
		if !strings.Contains(logs.String(), `"request_id":"`+rid+`"`) {
			t.Errorf("GET %s: no log line holds request id %s", p, rid)
		}
	}
	if !strings.Contains(logs.String(), "127.0.0.1:1") {
		t.Errorf("the log does not hold the detail: %s", logs.String())
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		a := e.do(hreq("GET", p, ""))
		if a.code != 503 {
			t.Errorf("%s: %d", p, a.code)
		}
		for _, sec := range secrets {
			if strings.Contains(strings.ToLower(a.raw), sec) {
				t.Errorf("%s: the 503 says %q: %s", p, sec, a.raw)
			}
		}
	}
	if l := logs.String(); !strings.Contains(l, "10.0.0.3:9092") || !strings.Contains(l, "10.0.0.7:6379") {
		t.Errorf("the probes' detail is not logged: %s", l)
	}
}

// TestHostileCacheAndSniffHeaders: every /v1 answer, errors included, is
// Cache-Control: no-store (the ETag routes too: a client that keeps its
// copy revalidates it with If-None-Match, which still answers 304); every
// answer of the listener is nosniff.
func TestHostileCacheAndSniffHeaders(t *testing.T) {
	e := newHostileEnv(t, nil)
	if a := e.putZones(collection(feature("A", 7))); a.code != 200 {
		t.Fatalf("seed zones: %d %s", a.code, a.raw)
	}
	for _, p := range []string{"/v1/alarms", "/v1/alarms/" + e.alarms[0].AlarmID, "/v1/zones", "/v1/zones/A", "/v1/zones/history",
		"/v1/map/zones", "/v1/me", "/v1/drones", "/v1/events", "/v1/nope", "/v1/alarms?limit=0", "/v1/alarms/" + unknownAlarm} {
		a := e.do(hreq("GET", p, ""))
		if a.hdr.Get("Cache-Control") != "no-store" || a.hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s (%d): Cache-Control %q, X-Content-Type-Options %q", p, a.code, a.hdr.Get("Cache-Control"), a.hdr.Get("X-Content-Type-Options"))
		}
	}
	if a := e.do(hreq("GET", "/v1/map/zones", "", "If-None-Match", `"1"`)); a.code != 304 || a.hdr.Get("ETag") != `"1"` {
		t.Errorf("If-None-Match: %d %s", a.code, a.hdr.Get("ETag"))
	}
	for _, p := range []string{"/", "/openapi.json", "/metrics", "/healthz"} {
		if a := e.do(hreq("GET", p, "")); a.hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
	}
}

// TestHostileDuplicateQueryParams: one rule on every route: a described
// parameter given twice is a 400 naming it (before, some routes took the
// first value and others refused); an undescribed one is ignored.
func TestHostileDuplicateQueryParams(t *testing.T) {
	e := newHostileEnv(t, nil)
	for _, tt := range []struct{ path, field string }{
		{"/v1/alarms?limit=1&limit=2", "limit"},
		{"/v1/alarms?state=active&state=all", "state"},
		{"/v1/alarms?acked=true&acked=false", "acked"},
		{"/v1/alarms?drone=A&drone=A", "drone"},
		{"/v1/alarms?since=2026-01-01T00:00:00Z&since=2026-01-02T00:00:00Z", "since"},
		{"/v1/drones?bbox=0,0,1,1&bbox=1,1,2,2", "bbox"},
		{"/v1/drones?limit=5&cursor=x&cursor=y", "cursor"},
		{"/v1/drones?active_since=2026-01-01T00:00:00Z&active_since=2026-01-01T00:00:00Z", "active_since"},
		{"/v1/events?zone=A&zone=B", "zone"},
		{"/v1/events?limit=1&limit=1", "limit"},
		{"/v1/events/stream?category=restricted&category=warning", "category"},
	} {
		a := e.do(hreq("GET", tt.path, ""))
		if a.code != 400 || a.body.Details["field"] != tt.field || !strings.Contains(a.body.Error, "more than once") {
			t.Errorf("%s: %d %s, want 400 naming %s", tt.path, a.code, a.raw, tt.field)
		}
	}
	if a := e.do(hreq("GET", "/v1/alarms?x=1&x=2", "")); a.code != 200 {
		t.Errorf("an undescribed parameter twice: %d %s", a.code, a.raw)
	}
	if a := e.do(hreq("GET", "/v1/alarms?limit=%zz", "")); a.code != 400 || a.body.Details["field"] != "query" {
		t.Errorf("a query that does not parse: %d %s", a.code, a.raw)
	}
}

// TestHostileBBoxPattern: the server takes exactly the bboxes the
// description's pattern allows (each min not above its max, which a
// pattern cannot say): values that round into range as floats
// (180.00000000000000000001) are refused as the pattern refuses them.
func TestHostileBBoxPattern(t *testing.T) {
	e := newDronesEnv(t)
	schema := described(t, "GET", "/v1/drones", "query", "bbox")
	for _, v := range []string{
		"0,0,180.00000000000000000001,1", "-180.000000000000000000001,0,0,1", "0,0,1,90.0000000000000000001",
		"0,-90.00000000000000000001,1,1", "179.99999999999999999999,0,180,1", "-0.0000000000000000000001,0,0,1",
		"0,0,180,90", "0,0,1,1\n", "\n0,0,1,1", "0,0,1,1,",
	} {
		a := e.do(t, "GET", "/v1/drones?bbox="+url.QueryEscape(v), testTokens["viewer"], "")
		if desc := conforms(t, schema, v, false); desc != (a.code == 200) {
			t.Errorf("bbox=%q: the description allows it: %v, the server: %d %s", v, desc, a.code, a.raw)
		}
	}
	// The events cursor likewise: base64url only (the decoder would skip a
	// line break the pattern does not allow).
	env := newEventsEnv(t, 2, nil)
	env.addMany(2)
	env.settle()
	c := env.events("limit=1")[0].Cursor
	after := described(t, "GET", "/v1/events", "query", "after")
	for _, v := range []string{c, c[:4] + "\n" + c[4:], c + "\r\n", " " + c} {
		res, b := env.get("/v1/events?after=" + url.QueryEscape(v))
		if desc := conforms(t, after, v, false); desc != (res.StatusCode == 200) {
			t.Errorf("after=%q: the description allows it: %v, the server: %s %s", v, desc, res.Status, b)
		}
	}
}

// TestHostileIDBounds: every id parameter is bounded as described — a
// 10,000-character id is a 400 naming the parameter, not a lookup — and
// no error echoes more than a short prefix of what was sent.
func TestHostileIDBounds(t *testing.T) {
	e := newHostileEnv(t, nil)
	huge := strings.Repeat("x", 10000)
	for _, tt := range []struct{ path, field string }{
		{"/v1/alarms/" + huge, "alarm_id"},
		{"/v1/alarms/" + huge + "/ack", "alarm_id"},
		{"/v1/alarms/" + strings.ToUpper(e.alarms[0].AlarmID), "alarm_id"},
		{"/v1/alarms/" + e.alarms[0].AlarmID + "0", "alarm_id"},
		{"/v1/drones/" + huge, "drone_id"},
		{"/v1/drones/UAV%207", "drone_id"},
		{"/v1/zones/" + huge, "id"},
		{"/v1/zones/" + strings.Repeat("é", 257), "id"},
		{"/v1/zones/a%0Ab", "id"},
		{"/v1/alarms?zone=" + huge, "zone"},
		{"/v1/alarms?drone=" + huge, "drone"},
		{"/v1/alarms?drone=UAV%207", "drone"},
		{"/v1/alarms?category=" + huge, "category"},
		{"/v1/events?zone=" + huge, "zone"},
		{"/v1/events?drone=" + huge, "drone"},
	} {
		method := "GET"
		if strings.HasSuffix(tt.path, "/ack") {
			method = "POST"
		}
		a := e.do(hreq(method, tt.path, ""))
		if a.code != 400 || a.body.Details["field"] != tt.field {
			t.Errorf("%s %.60s…: %d %.200s, want 400 naming %s", method, tt.path, a.code, a.raw, tt.field)
		}
		if len(a.raw) > 1024 {
			t.Errorf("%.60s…: a %d-byte answer echoes what was sent", tt.path, len(a.raw))
		}
	}
	// The longest ids that can be stored are looked up (404).
	for _, p := range []string{"/v1/zones/" + strings.Repeat("é", 256), "/v1/drones/" + strings.Repeat("D", 64), "/v1/alarms/" + unknownAlarm} {
		if a := e.do(hreq("GET", p, "")); a.code != 404 {
			t.Errorf("%.40s…: %d %.200s, want 404", p, a.code, a.raw)
		}
	}
	// Nor do a 404, a 405, a zone set's problems, or the Host and Origin
	// refusals echo what was sent whole.
	for _, r := range []*http.Request{hreq("GET", "/v1/"+huge, ""), hreq("PATCH", "/v1/zones/"+strings.Repeat("é", 200), ""),
		hreq("PUT", "/v1/zones", collection(feature(huge, 7)), "Content-Type", "application/json")} {
		if a := e.do(r); a.code < 400 || len(a.raw) > 2048 {
			t.Errorf("%s %.40s…: %d, a %d-byte answer", r.Method, r.URL.Path, a.code, len(a.raw))
		}
	}
	if a := e.do(hreq("GET", "/v1/alarms", "", "Host", huge)); a.code != 421 || len(a.raw) > 1024 {
		t.Errorf("a huge Host: %d, %d bytes", a.code, len(a.raw))
	}
	if a := e.do(hreq("POST", "/v1/alarms/"+unknownAlarm+"/ack", "", "Origin", "http://"+huge)); a.code != 403 || len(a.raw) > 1024 {
		t.Errorf("a huge Origin: %d, %d bytes", a.code, len(a.raw))
	}
}

// TestHostileFutureCursor: a cursor whose position is past a stream's last
// id and, in milliseconds, ahead of Redis's clock was never handed out: a
// 400 naming the parameter (after or Last-Event-ID), on both routes, not
// the 410 of a cursor of another history (TestEventsGone).
func TestHostileFutureCursor(t *testing.T) {
	env := newEventsEnv(t, 2, nil)
	env.addMany(4)
	env.settle()
	future := cursor{{uint64(time.Now().Add(time.Hour).UnixMilli()), 0}, {0, 0}}.String()
	far := cursor{{1 << 50, 0}, {0, 0}}.String()
	for _, c := range []string{future, far} {
		for _, tt := range []struct {
			path  string
			hdr   []string
			field string
		}{
			{"/v1/events?after=" + c, nil, "after"},
			{"/v1/events/stream?after=" + c, nil, "after"},
			{"/v1/events/stream", []string{"Last-Event-ID", c}, "Last-Event-ID"},
		} {
			res, b := env.get(tt.path, tt.hdr...)
			var body errorBody
			if res.StatusCode != 400 || json.Unmarshal(b, &body) != nil || body.Details["field"] != tt.field || body.Code != "bad_request" {
				t.Errorf("%s %v: %s %s, want 400 naming %s", tt.path, tt.hdr, res.Status, b, tt.field)
			}
		}
	}
}

// TestHostileDuplicateAuthorization: two Authorization headers are a 400
// naming the header, whichever of them is valid (before, the first won).
func TestHostileDuplicateAuthorization(t *testing.T) {
	e := newAuthEnv(t, nil)
	for _, pair := range [][2]string{
		{testTokens["viewer"], "nope"},
		{"nope", testTokens["admin"]},
		{testTokens["admin"], testTokens["admin"]},
	} {
		req := hreq("GET", "/v1/alarms", "", "Authorization", "Bearer "+pair[0], "Authorization", "Bearer "+pair[1])
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		var body errorBody
		if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Details["field"] != "Authorization" {
			t.Errorf("two Authorization headers: %d %s", rec.Code, rec.Body)
		}
	}
	// Without a token file too.
	n := newHostileEnv(t, nil)
	if a := n.do(hreq("GET", "/v1/alarms", "", "Authorization", "Bearer a", "Authorization", "Bearer b")); a.code != 400 {
		t.Errorf("loopback mode, two Authorization headers: %d", a.code)
	}
}

// TestHostileTrustedProxies: behind a trusted proxy each forwarded client
// has its own per-address limit and is the one logged; without trust the
// forwarding headers are ignored (a client could write them). In the
// loopback mode a trusted proxy does not make its clients loopback: the
// forwarded client decides, and an address a client wrote into
// X-Forwarded-For itself is never taken.
func TestHostileTrustedProxies(t *testing.T) {
	proxied := newHostileEnv(t, func(o *Options) {
		o.RatePerAddr = 2
		o.Web.TrustedProxies = []string{"127.0.0.1", "10.0.0.0/8"}
	})
	get := func(e *hostileEnv, xff string) int {
		return e.do(hreq("GET", "/v1/alarms?limit=1", "", "X-Forwarded-For", xff)).code
	}
	// Two loopback clients of the proxy (the proxy's machine) share
	// nothing with each other.
	if a, b, c := get(proxied, "127.0.0.5"), get(proxied, "127.0.0.5"), get(proxied, "127.0.0.5"); a != 200 || b != 200 || c != 429 {
		t.Errorf("one forwarded client: %d %d %d, want 200 200 429", a, b, c)
	}
	if c := get(proxied, "127.0.0.6"); c != 200 {
		t.Errorf("another forwarded client: %d, want 200 (its own limit)", c)
	}
	if !strings.Contains(proxied.logs.String(), `"remote":"127.0.0.5"`) {
		t.Errorf("the log does not name the forwarded client: %s", proxied.logs.String())
	}
	// Not trusted: one peer, one limit, whatever the header says.
	direct := newHostileEnv(t, func(o *Options) { o.RatePerAddr = 2 })
	if a, b, c := get(direct, "127.0.0.5"), get(direct, "127.0.0.6"), get(direct, "127.0.0.7"); a != 200 || b != 200 || c != 429 {
		t.Errorf("untrusted forwarding headers: %d %d %d, want 200 200 429", a, b, c)
	}
	// The loopback mode behind a loopback proxy.
	loop := newHostileEnv(t, func(o *Options) { o.Web.TrustedProxies = []string{"127.0.0.1"} })
	for _, tt := range []struct {
		xff  string
		code int
	}{
		{"203.0.113.5", 403},
		{"127.0.0.1, 203.0.113.5", 403}, // the client wrote 127.0.0.1, the proxy appended its address
		{"unknown", 403},
		{"127.0.0.1", 200}, // a client on the proxy's own machine
	} {
		a := loop.do(hreq("GET", "/v1/alarms", "", "X-Forwarded-For", tt.xff))
		if a.code != tt.code || (tt.code == 403 && a.body.Code != "not_loopback") {
			t.Errorf("no token file, X-Forwarded-For %q: %d %s, want %d", tt.xff, a.code, a.raw, tt.code)
		}
	}
	if a := loop.do(hreq("POST", "/v1/alarms/"+loop.alarms[0].AlarmID+"/ack", "", "X-Forwarded-For", "203.0.113.5")); a.code != 403 || loop.acked(loop.alarms[0].AlarmID) {
		t.Errorf("a forwarded remote client acked in the loopback mode: %d %s", a.code, a.raw)
	}
}

// TestHostileRefusalsDescribed: the description states every refusal the
// hostile-client checks add, with the error schema: 421 on every operation
// but the probes, 400 on every /v1 one, 403 and 415 on every write; every
// path id has a bounded schema, and every write's media types are the ones
// the server enforces (it reads them from the description).
func TestHostileRefusalsDescribed(t *testing.T) {
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var want []int
			if path != "/healthz" && path != "/readyz" {
				want = append(want, 421)
			}
			if strings.HasPrefix(path, "/v1/") {
				want = append(want, 400)
			}
			if method != "GET" {
				want = append(want, 403, 415)
			}
			for _, code := range want {
				r := op.Responses.Status(code)
				if r == nil || r.Value == nil || r.Value.Content.Get("application/json") == nil ||
					r.Value.Content.Get("application/json").Schema.Ref != "#/components/schemas/Error" {
					t.Errorf("%s %s: no %d with the Error schema", method, path, code)
				}
			}
			params := append(openapi3.Parameters{}, item.Parameters...)
			params = append(params, op.Parameters...)
			for _, p := range params {
				s := p.Value.Schema.Value
				if p.Value.In == "path" && (s.MaxLength == nil || s.Pattern == "") {
					t.Errorf("%s %s: path parameter %s is not bounded", method, path, p.Value.Name)
				}
			}
		}
	}
	s, err := New(Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Topic: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		op    string
		types []string
	}{
		{"POST /v1/alarms/{alarm_id}/ack", []string{"application/json"}},
		{"PUT /v1/zones", []string{"application/geo+json", "application/json"}},
		{"PUT /v1/zones/{id}", []string{"application/geo+json", "application/json"}},
		{"DELETE /v1/zones/{id}", nil},
	} {
		rr := s.rules[tt.op]
		if rr == nil || fmt.Sprint(rr.bodyTypes) != fmt.Sprint(tt.types) {
			t.Errorf("%s: body types %v, want %v", tt.op, rr, tt.types)
		}
	}
	for _, op := range []string{"GET /v1/alarms/{alarm_id}", "GET /v1/drones/{drone_id}", "GET /v1/zones/{id}"} {
		for name, p := range s.rules[op].path {
			if p.pattern == nil || p.maxLen < 0 {
				t.Errorf("%s: the server does not check %s's pattern and length", op, name)
			}
		}
	}
}
