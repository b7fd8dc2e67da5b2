package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/alerts/alarmstore/storetest"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/dedup"
)

// auditList is GET /v1/audit?query as admin, following next_cursor to the end.
func auditList(t *testing.T, e *authEnv, query string) []audit.Entry {
	t.Helper()
	var all []audit.Entry
	cursor := ""
	for range 100 {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		a := e.do(t, "GET", "/v1/audit?"+q, testTokens["admin"], "")
		if a.code != 200 {
			t.Fatalf("GET /v1/audit?%s: %d %s", q, a.code, a.raw)
		}
		for _, tok := range testTokens {
			if strings.Contains(a.raw, tok) {
				t.Fatalf("GET /v1/audit holds a token: %s", a.raw)
			}
		}
		var p auditPage
		if err := json.Unmarshal([]byte(a.raw), &p); err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Entries...)
		if p.NextCursor == nil {
			return all
		}
		cursor = *p.NextCursor
	}
	t.Fatal("GET /v1/audit: no end after 100 pages")
	return nil
}

// TestAuditTrail: each change through the API is one entry naming who,
// role, via, client and the versions; a retried ack adds none; refused
// writes and refused reads of the trail are audited as denied; only an
// admin reads the trail, with filters and paging.
func TestAuditTrail(t *testing.T) {
	ctx := context.Background()
	var o Options
	e := newAuthEnv(t, func(opt *Options) { o = *opt })
	ds, err := dedup.NewRedis(o.Redis, dedup.RedisOptions{Prefix: o.Prefix, Topic: "pos"})
	if err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWriter(ds)
	ev := storetest.Raised(1, "UAV-1", "LHR", "restricted", 7, time.Now().Add(-time.Minute))
	w.Add(ev)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	admin, operator, viewer := testTokens["admin"], testTokens["operator"], testTokens["viewer"]
	steps := []struct {
		method, path, token, body string
		hdr                       []string
		code                      int
	}{
		{"POST", "/v1/alarms/" + ev.AlarmID + "/ack", viewer, `{"note":"no"}`, nil, 403},
		{"POST", "/v1/alarms/" + ev.AlarmID + "/ack", operator, `{"note":"patrol sent"}`, nil, 200},
		{"POST", "/v1/alarms/" + ev.AlarmID + "/ack", operator, `{"note":"patrol sent"}`, nil, 200}, // a client's retry
		{"POST", "/v1/alarms/" + ev.AlarmID + "/ack", admin, ``, nil, 200},                          // acked before: nothing written
		{"GET", "/v1/audit", operator, ``, nil, 403},
		{"GET", "/v1/audit", viewer, ``, nil, 403},
		{"PUT", "/v1/zones", admin, collection(feature("Z1", 6), feature("Z2", 7)), []string{"If-Match", "0"}, 200},
		{"PUT", "/v1/zones/Z1", operator, feature("Z1", 6.5), nil, 403},
		{"PUT", "/v1/zones/Z1", admin, feature("Z1", 6.5), []string{"If-Match", "1"}, 200},
		{"PUT", "/v1/zones/Z2", admin, feature("Z2", 6.5), []string{"If-Match", "1"}, 412}, // stale: nothing written
		{"DELETE", "/v1/zones/Z2", admin, ``, nil, 200},
		{"POST", "/v1/authorizations", admin, authBody(t, nil), []string{"If-Match", "0"}, 201},
	}
	for i, s := range steps {
		if a := e.do(t, s.method, s.path, s.token, s.body, s.hdr...); a.code != s.code {
			t.Fatalf("step %d %s %s: %d, want %d: %s", i, s.method, s.path, a.code, s.code, a.raw)
		}
		// Entries of different streams are ordered by their ids'
		// milliseconds: one step per millisecond, so the order is the steps'.
		time.Sleep(2 * time.Millisecond)
	}
	all := auditList(t, e, "limit=2")
	type row struct{ who, role, action, target, outcome, request string }
	var got []row
	for _, en := range all {
		got = append(got, row{en.Who, en.Role, en.Action, en.Target, en.Outcome, en.Request})
		if en.Via != audit.ViaToken || en.Client != "192.0.2.1" || en.ID == "" || time.Since(en.TS) > time.Minute {
			t.Errorf("entry %+v: want via token, client 192.0.2.1, an id and a recent ts", en)
		}
	}
	authID := all[0].Target
	want := []row{ // newest first
		{"admin-tok", "admin", audit.ActionAuthorizationCreate, authID, "ok", "POST /v1/authorizations"},
		{"admin-tok", "admin", audit.ActionZoneDelete, "Z2", "ok", "DELETE /v1/zones/Z2"},
		{"admin-tok", "admin", audit.ActionZonePut, "Z1", "ok", "PUT /v1/zones/Z1"},
		{"operator-tok", "operator", audit.ActionRequest, "", "denied", "PUT /v1/zones/Z1"},
		{"admin-tok", "admin", audit.ActionZonesPut, "", "ok", "PUT /v1/zones"},
		{"viewer-tok", "viewer", audit.ActionRequest, "", "denied", "GET /v1/audit"},
		{"operator-tok", "operator", audit.ActionRequest, "", "denied", "GET /v1/audit"},
		{"operator-tok", "operator", audit.ActionAck, ev.AlarmID, "ok", "POST /v1/alarms/" + ev.AlarmID + "/ack"},
		{"viewer-tok", "viewer", audit.ActionRequest, "", "denied", "POST /v1/alarms/" + ev.AlarmID + "/ack"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	versions := map[string][2]int64{audit.ActionZonesPut: {0, 1}, audit.ActionZonePut: {1, 2}, audit.ActionZoneDelete: {2, 3}, audit.ActionAuthorizationCreate: {0, 1}}
	for _, en := range all {
		v, ok := versions[en.Action]
		if !ok {
			if en.BeforeVersion != nil || en.AfterVersion != nil {
				t.Errorf("%s has versions", en.Action)
			}
			continue
		}
		if en.BeforeVersion == nil || en.AfterVersion == nil || *en.BeforeVersion != v[0] || *en.AfterVersion != v[1] {
			t.Errorf("%s %s: versions %v %v, want %v", en.Action, en.Target, en.BeforeVersion, en.AfterVersion, v)
		}
	}
	if d := string(all[len(all)-2].Detail); d != `{"note":"patrol sent"}` {
		t.Errorf("ack detail %s", d)
	}
	if d := string(all[0].Detail); !strings.Contains(d, `"drone":"POLICE-*"`) {
		t.Errorf("authorisation detail %s", d)
	}

	for _, c := range []struct {
		query string
		n     int
	}{
		{"action=ack", 1},
		{"who=operator-tok", 3},
		{"outcome=denied", 4},
		{"target=Z1", 1},
		{"who=operator-tok&action=request&limit=1", 2},
		{"since=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), 0},
		{"until=" + url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339)), 0},
		{"since=" + url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339)) + "&until=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), len(want)},
	} {
		if n := len(auditList(t, e, c.query)); n != c.n {
			t.Errorf("?%s: %d entries, want %d", c.query, n, c.n)
		}
	}
	for _, c := range []struct{ query, field string }{
		{"action=nope", "action"}, {"limit=0", "limit"}, {"limit=501", "limit"}, {"cursor=zzzz", "cursor"},
		{"since=yesterday", "since"}, {"outcome=maybe", "outcome"}, {"who=", "who"}, {"who=" + strings.Repeat("a", 257), "who"},
		{"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "until"},
	} {
		a := e.do(t, "GET", "/v1/audit?"+c.query, admin, "")
		if a.code != 400 || a.body.Details["field"] != c.field {
			t.Errorf("?%s: %d %s, want 400 naming %s", c.query, a.code, a.raw, c.field)
		}
	}
}
