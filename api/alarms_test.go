package api

import (
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

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// alarmsEnv is a Server's alarms routes over a test's own keys on the real
// Redis, with 30 alarms over 3 partitions: every third cleared.
type alarmsEnv struct {
	t       *testing.T
	srv     *httptest.Server
	reg     *prometheus.Registry
	raised  []alerts.Event // newest last
	cleared map[string]bool
}

func newAlarmsEnv(t *testing.T) *alarmsEnv {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.RedisClient(t)
	prefix := testenv.RedisPrefix(t, "api-alarms")
	ds, err := dedup.NewRedis(rdb, dedup.RedisOptions{Prefix: prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s, err := New(Options{Redis: rdb, Prefix: prefix, Topic: "pos", Partitions: 3, Registerer: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	s.mountAlarms(r)
	e := &alarmsEnv{t: t, srv: httptest.NewServer(r), reg: reg, cleared: map[string]bool{}}
	t.Cleanup(e.srv.Close)
	w := storetest.NewWriter(ds)
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 30; i++ {
		ev := storetest.Raised(i%3, fmt.Sprintf("D%d", i%6), fmt.Sprintf("Z%d", i%2), []string{"restricted", "prohibited"}[i%3%2], int64(10+i), base.Add(time.Duration(i)*time.Second))
		w.Add(ev)
		e.raised = append(e.raised, ev)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, ev := range e.raised {
		if i%3 == 0 {
			w.Add(storetest.ClearedOf(ev, ev.Seq+100, ev.TS.Add(time.Minute), alerts.ReasonZoneRemoved))
			e.cleared[ev.AlarmID] = true
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *alarmsEnv) do(method, path, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

// ids lists the alarm ids of a list answer, following next_cursor to the end.
func (e *alarmsEnv) walk(query string) []string {
	e.t.Helper()
	var ids []string
	q, _ := url.ParseQuery(query)
	for range 100 {
		status, m := e.do("GET", "/v1/alarms?"+q.Encode(), "")
		if status != 200 {
			e.t.Fatalf("GET /v1/alarms?%s: %d %v", q.Encode(), status, m)
		}
		for _, a := range m["alarms"].([]any) {
			ids = append(ids, a.(map[string]any)["alarm_id"].(string))
		}
		next, ok := m["next_cursor"].(string)
		if !ok {
			if m["next_cursor"] != nil {
				e.t.Fatalf("next_cursor = %v", m["next_cursor"])
			}
			return ids
		}
		q.Set("cursor", next)
	}
	e.t.Fatal("more than 100 pages")
	return nil
}

func (e *alarmsEnv) want(keep func(i int, ev alerts.Event) bool) []string {
	var ids []string
	for i := len(e.raised) - 1; i >= 0; i-- {
		if keep(i, e.raised[i]) {
			ids = append(ids, e.raised[i].AlarmID)
		}
	}
	return ids
}

func TestAlarmsList(t *testing.T) {
	e := newAlarmsEnv(t)
	acked := e.raised[4].AlarmID
	if status, m := e.do("POST", "/v1/alarms/"+acked+"/ack", ""); status != 200 || m["already_acked"] != false {
		t.Fatalf("ack: %d %v", status, m)
	}
	base := e.raised[0].TS
	tests := []struct {
		query string
		keep  func(i int, ev alerts.Event) bool
	}{
		{"", func(i int, ev alerts.Event) bool { return i%3 != 0 }},
		{"state=active&limit=4", func(i int, ev alerts.Event) bool { return i%3 != 0 }},
		{"state=cleared&limit=3", func(i int, ev alerts.Event) bool { return i%3 == 0 }},
		{"state=all&limit=7", func(i int, ev alerts.Event) bool { return true }},
		{"state=all&limit=1000", func(i int, ev alerts.Event) bool { return true }},
		{"state=all&acked=true", func(i int, ev alerts.Event) bool { return i == 4 }},
		{"acked=false&limit=5", func(i int, ev alerts.Event) bool { return i%3 != 0 && i != 4 }},
		{"state=all&drone=D1&limit=2", func(i int, ev alerts.Event) bool { return i%6 == 1 }},
		{"state=all&zone=Z0&category=prohibited", func(i int, ev alerts.Event) bool { return i%2 == 0 && i%3%2 == 1 }},
		{"drone=none", func(i int, ev alerts.Event) bool { return false }},
		{"state=all&limit=3&since=" + base.Add(10*time.Second).Format(time.RFC3339) + "&until=" + base.Add(20*time.Second).Format(time.RFC3339),
			func(i int, ev alerts.Event) bool { return i >= 10 && i <= 20 }},
		{"state=all&since=" + base.Add(25*time.Second).Format(time.RFC3339Nano), func(i int, ev alerts.Event) bool { return i >= 25 }},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got, want := e.walk(tt.query), e.want(tt.keep); !slices.Equal(got, want) {
				t.Errorf("listed %q\nwant   %q", got, want)
			}
		})
	}
}

func TestAlarmsBadInput(t *testing.T) {
	e := newAlarmsEnv(t)
	tests := []struct {
		query, field string
	}{
		{"state=open", "state"},
		{"state=", "state"},
		{"acked=yes", "acked"},
		{"acked=1", "acked"},
		{"authorized=1", "authorized"},
		{"drone=", "drone"},
		{"since=yesterday", "since"},
		{"until=2026-12-02", "until"},
		{"since=2026-12-03T00:00:00Z&until=2026-12-02T00:00:00Z", "until"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"cursor=!!", "cursor"},
		{"cursor=MTIz", "cursor"},
	}
	for _, tt := range tests {
		status, m := e.do("GET", "/v1/alarms?"+tt.query, "")
		if status != 400 || m["code"] != "bad_request" || m["details"].(map[string]any)["field"] != tt.field || m["error"] == "" {
			t.Errorf("GET /v1/alarms?%s = %d %v, want 400 naming %s", tt.query, status, m, tt.field)
		}
	}
}

func TestAlarmGet(t *testing.T) {
	e := newAlarmsEnv(t)
	cleared, active := e.raised[3], e.raised[4]
	status, m := e.do("GET", "/v1/alarms/"+cleared.AlarmID, "")
	if status != 200 {
		t.Fatalf("%d %v", status, m)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if got, want := keys(m), []string{"ack", "alarm_id", "authorization", "category", "cleared", "drone_id", "operator", "operator_latest", "raised", "signal_lost_since", "state", "zone_id", "zone_name", "zone_version"}; !slices.Equal(got, want) {
		t.Errorf("alarm keys = %q, want %q", got, want)
	}
	point := []string{"alt_m", "alt_ref", "event_id", "height_assumed", "lat", "lon", "seq", "ts"}
	if got := keys(m["raised"].(map[string]any)); !slices.Equal(got, point) {
		t.Errorf("raised keys = %q, want %q", got, point)
	}
	if got, want := keys(m["cleared"].(map[string]any)), append(slices.Clone(point), "reason"); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("cleared keys = %q", got)
	}
	raised := m["raised"].(map[string]any)
	if m["alarm_id"] != cleared.AlarmID || m["drone_id"] != cleared.DroneID || m["state"] != "cleared" || m["ack"] != nil ||
		raised["event_id"] != cleared.EventID || raised["ts"] != cleared.TS.Format(time.RFC3339Nano) || raised["seq"] != float64(cleared.Seq) ||
		m["cleared"].(map[string]any)["reason"] != "zone_removed" || m["zone_version"] != float64(3) {
		t.Errorf("cleared alarm = %v", m)
	}
	if status, m := e.do("GET", "/v1/alarms/"+active.AlarmID, ""); status != 200 || m["state"] != "active" || m["cleared"] != nil {
		t.Errorf("active alarm = %d %v", status, m)
	}
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "nope"} {
		status, m := e.do("GET", "/v1/alarms/"+id, "")
		if status != 404 || m["code"] != "not_found" || m["details"].(map[string]any)["alarm_id"] != id {
			t.Errorf("GET unknown %s = %d %v", id, status, m)
		}
	}
}

func TestAlarmAck(t *testing.T) {
	e := newAlarmsEnv(t)
	id := e.raised[7].AlarmID
	path := "/v1/alarms/" + id + "/ack"
	status, m := e.do("POST", path, `{"note":"looking"}`)
	if status != 200 || m["already_acked"] != false || m["alarm_id"] != id {
		t.Fatalf("first ack: %d %v", status, m)
	}
	ack := m["ack"].(map[string]any)
	if ack["by"] != "anonymous" || ack["note"] != "looking" || ack["at"] != "2026-12-03T12:00:00Z" {
		t.Errorf("ack = %v", ack)
	}
	status, m = e.do("POST", path, `{"note":"again"}`)
	if status != 200 || m["already_acked"] != true || m["ack"].(map[string]any)["note"] != "looking" {
		t.Errorf("second ack: %d %v, want the first ack kept", status, m)
	}
	if status, m := e.do("POST", "/v1/alarms/"+e.raised[8].AlarmID+"/ack", ""); status != 200 || m["ack"].(map[string]any)["note"] != "" {
		t.Errorf("ack without a body: %d %v", status, m)
	}
	tests := []struct {
		name, id, body string
		status         int
		code, field    string
	}{
		{"note too long", e.raised[9].AlarmID, `{"note":"` + strings.Repeat("x", 1025) + `"}`, 400, "bad_request", "note"},
		{"note not a string", e.raised[9].AlarmID, `{"note":5}`, 400, "bad_request", "note"},
		{"not an object", e.raised[9].AlarmID, `[1]`, 400, "bad_request", "body"},
		{"not JSON", e.raised[9].AlarmID, `note`, 400, "bad_request", "body"},
		{"null", e.raised[9].AlarmID, `null`, 400, "bad_request", "body"},
		{"a string", e.raised[9].AlarmID, ` "note"`, 400, "bad_request", "body"},
		{"body too large", e.raised[9].AlarmID, `{"note":"` + strings.Repeat("x", 9000) + `"}`, 413, "too_large", ""},
		{"unknown alarm", "0123456789abcdef0123456789abcdef", "", 404, "not_found", ""},
	}
	for _, tt := range tests {
		status, m := e.do("POST", "/v1/alarms/"+tt.id+"/ack", tt.body)
		if status != tt.status || m["code"] != tt.code || (tt.field != "" && m["details"].(map[string]any)["field"] != tt.field) {
			t.Errorf("%s: %d %v, want %d %s naming %q", tt.name, status, m, tt.status, tt.code, tt.field)
		}
	}
	if status, m := e.do("GET", "/v1/alarms/"+e.raised[9].AlarmID, ""); status != 200 || m["ack"] != nil {
		t.Errorf("a refused ack acked: %v", m)
	}
	for res, want := range map[string]float64{"acked": 2, "already_acked": 1, "bad_request": 7, "not_found": 1, "error": 0} {
		if got := ackCount(t, e.reg, res); got != want {
			t.Errorf("nofly_api_acks_total{result=%q} = %v, want %v", res, got, want)
		}
	}
}

// ackCount is nofly_api_acks_total{result} in reg.
func ackCount(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nofly_api_acks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no nofly_api_acks_total{result=%q}", result)
	return 0
}

// described returns the schema of the operation's parameter name (in is
// query, header or path), or of its JSON request body when in is "body".
func described(t *testing.T, method, path, in, name string) *openapi3.Schema {
	t.Helper()
	op := loadOpenAPI(t).Paths.Find(path).GetOperation(method)
	if op == nil {
		t.Fatalf("%s %s is not described", method, path)
	}
	if in == "body" {
		return op.RequestBody.Value.Content.Get("application/json").Schema.Value
	}
	for _, p := range op.Parameters {
		if p.Value.In == in && p.Value.Name == name {
			return p.Value.Schema.Value
		}
	}
	t.Fatalf("%s %s has no %s parameter %s", method, path, in, name)
	return nil
}

// conforms says whether v (a JSON text when raw) is valid for schema.
func conforms(t *testing.T, schema *openapi3.Schema, v any, raw bool) bool {
	t.Helper()
	if raw {
		var j any
		if err := json.Unmarshal([]byte(v.(string)), &j); err != nil {
			return false
		}
		v = j
	}
	return schema.VisitJSON(v, openapi3.EnableJSONSchema2020()) == nil
}

// TestAckBodyAsDescribed: an ack body the description allows is accepted,
// one it does not is refused with 400 (what schemathesis checks).
func TestAckBodyAsDescribed(t *testing.T) {
	e := newAlarmsEnv(t)
	schema := described(t, "POST", "/v1/alarms/{alarm_id}/ack", "body", "")
	tests := []struct {
		body string
		ok   bool
	}{
		{`{}`, true},
		{`{"note":"x"}`, true},
		{`{"note":null}`, true},
		{`{"other":1}`, true},
		{`{"note":5}`, false},
		{`null`, false},
		{`[]`, false},
		{`"note"`, false},
		{`3`, false},
	}
	for i, tt := range tests {
		if got := conforms(t, schema, tt.body, true); got != tt.ok {
			t.Errorf("the description says %s is valid: %v, want %v", tt.body, got, tt.ok)
		}
		want := 400
		if tt.ok {
			want = 200
		}
		if status, m := e.do("POST", "/v1/alarms/"+e.raised[i].AlarmID+"/ack", tt.body); status != want {
			t.Errorf("ack %s: %d %v, want %d", tt.body, status, m, want)
		}
	}
}
