package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/authorization/authstore"
)

// authBody is a valid POST /v1/authorizations body with fields replaced
// (a nil value removes the field).
func authBody(t *testing.T, over map[string]any) string {
	t.Helper()
	m := map[string]any{
		"drone": "POLICE-*", "zones": map[string]any{"ids": []string{"LHR-1"}, "categories": []string{"warning"}},
		"from": "2026-12-06T08:00:00Z", "until": "2026-12-06T12:00:00Z", "reason": "perimeter patrol", "reference": "MPS-7",
	}
	for k, v := range over {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuthorizationsAPI walks the authorisation routes in order on one
// store, at a fixed server clock: each step's status, ETag, error code and
// field, what the answer holds, and the set's version after it — a refused
// change (400, 403, 404, 409, 412) makes no version.
func TestAuthorizationsAPI(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var o Options
	e := newAuthEnv(t, func(opt *Options) {
		opt.Now = func() time.Time { return now }
		o = *opt
	})
	store := authstore.New(o.Redis, authstore.Options{Prefix: o.Prefix})
	ids := map[string]string{} // {a}, {b}: the ids the creates answered
	admin, viewer, operator := testTokens["admin"], testTokens["viewer"], testTokens["operator"]
	upcoming := map[string]any{"drone": "FILM-1", "zones": "all", "from": "2026-12-06T13:00:00Z", "until": "2026-12-06T14:00:00Z", "reference": nil}
	steps := []struct {
		name, method, path, token, body string
		hdr                             []string
		code                            int
		etag                            string   // "" = not checked
		errCode, field                  string   // of an error answer
		has                             []string // in the raw answer
		list                            string   // the ids a list answers, in order ("" = not a list)
		capture                         string   // the answer's id is kept under this name
		version                         int64    // the store's version after the step
	}{
		{name: "empty store", method: "GET", path: "/v1/authorizations", token: viewer, code: 200, etag: `"0"`, has: []string{`"version":0`}, list: "[]"},
		{name: "viewer may not create", method: "POST", path: "/v1/authorizations", token: viewer, body: authBody(t, nil), code: 403, errCode: "forbidden"},
		{name: "operator may not create", method: "POST", path: "/v1/authorizations", token: operator, body: authBody(t, nil), code: 403, errCode: "forbidden"},
		{name: "no token", method: "GET", path: "/v1/authorizations", code: 401, errCode: "missing_token"},
		{name: "create", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, nil), hdr: []string{"If-Match", `"0"`},
			code: 201, etag: `"1"`, capture: "a", version: 1,
			has: []string{`"drone":"POLICE-*"`, `"state":"active"`, `"by":"admin-tok"`, `"zones":{"ids":["LHR-1"],"categories":["warning"]}`, `"reference":"MPS-7"`}},
		{name: "get", method: "GET", path: "/v1/authorizations/{a}", token: viewer, code: 200, etag: `"1"`, version: 1,
			has: []string{`"id":"{a}"`, `"reason":"perimeter patrol"`, `"from":"2026-12-06T08:00:00Z"`, `"until":"2026-12-06T12:00:00Z"`, `"state":"active"`}},
		{name: "create upcoming, no If-Match", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, upcoming),
			code: 201, etag: `"2"`, capture: "b", version: 2, has: []string{`"zones":"all"`, `"state":"upcoming"`, `"reference":""`}},
		{name: "stale If-Match", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, nil), hdr: []string{"If-Match", "1"},
			code: 412, etag: `"2"`, errCode: "version_mismatch", has: []string{`"current_version":2`}, version: 2},
		{name: "bad If-Match", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, nil), hdr: []string{"If-Match", "two"},
			code: 400, field: "If-Match", version: 2},
		// 400 naming each field, checked before If-Match (stale here).
		{name: "no drone", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"drone": nil}), hdr: []string{"If-Match", "0"},
			code: 400, errCode: "invalid_authorization", field: "drone", version: 2},
		{name: "a bare * drone", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"drone": "*"}),
			code: 400, errCode: "invalid_authorization", field: "drone", version: 2},
		{name: "a drone id too long", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"drone": strings.Repeat("d", 65)}),
			code: 400, field: "drone", version: 2},
		{name: "no zones", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"zones": nil}), code: 400, field: "zones", version: 2},
		{name: "zones some", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"zones": "some"}), code: 400, field: "zones", version: 2},
		{name: "zones naming none", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"zones": map[string]any{"ids": []string{}}}),
			code: 400, field: "zones", version: 2},
		{name: "a zone id with a control character", method: "POST", path: "/v1/authorizations", token: admin,
			body: authBody(t, map[string]any{"zones": map[string]any{"ids": []string{"A", "B\n"}}}), code: 400, field: "zones.ids[1]", version: 2},
		{name: "a category unknown", method: "POST", path: "/v1/authorizations", token: admin,
			body: authBody(t, map[string]any{"zones": map[string]any{"categories": []string{"prohibited"}}}), code: 400, field: "zones.categories[0]", version: 2},
		{name: "too many zone ids", method: "POST", path: "/v1/authorizations", token: admin,
			body: authBody(t, map[string]any{"zones": map[string]any{"ids": manyIDs(257)}}), code: 400, field: "zones.ids", version: 2},
		{name: "no from", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"from": nil}), code: 400, field: "from", version: 2},
		{name: "from without a zone", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"from": "2026-12-06T08:00:00"}),
			code: 400, field: "from", version: 2},
		{name: "no until: no open-ended permit", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"until": nil}),
			code: 400, field: "until", has: []string{"open-ended"}, version: 2},
		{name: "until before from", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"until": "2026-12-06T07:00:00Z"}),
			code: 400, field: "until", version: 2},
		{name: "more than 366 days", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"until": "2027-12-08T08:00:00Z"}),
			code: 400, field: "until", version: 2},
		{name: "blank reason", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"reason": "  "}), code: 400, field: "reason", version: 2},
		{name: "reason a number", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"reason": 7}), code: 400, field: "reason", version: 2},
		{name: "reference too long", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"reference": strings.Repeat("r", 129)}),
			code: 400, field: "reference", version: 2},
		{name: "by is the server's", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, map[string]any{"by": "mallory"}),
			code: 400, field: "by", has: []string{"unknown field"}, version: 2},
		{name: "not JSON", method: "POST", path: "/v1/authorizations", token: admin, body: `{"drone":`, code: 400, field: "body", version: 2},
		{name: "two objects", method: "POST", path: "/v1/authorizations", token: admin, body: authBody(t, nil) + "{}", code: 400, field: "body", version: 2},
		{name: "not UTF-8", method: "POST", path: "/v1/authorizations", token: admin, body: strings.Replace(authBody(t, nil), "patrol", "patr\xffl", 1),
			code: 400, field: "body", version: 2},
		{name: "blank body", method: "POST", path: "/v1/authorizations", token: admin, body: " ", code: 400, field: "body", version: 2},
		{name: "too large", method: "POST", path: "/v1/authorizations", token: admin, body: strings.Repeat(" ", maxAuthorizationBody) + authBody(t, nil),
			code: 413, field: "body", version: 2},
		// Lists, newest first.
		{name: "list", method: "GET", path: "/v1/authorizations", token: viewer, code: 200, etag: `"2"`, list: "[{b} {a}]", version: 2},
		{name: "active", method: "GET", path: "/v1/authorizations?state=active", token: viewer, code: 200, list: "[{a}]", version: 2},
		{name: "upcoming", method: "GET", path: "/v1/authorizations?state=upcoming", token: viewer, code: 200, list: "[{b}]", version: 2},
		{name: "two states", method: "GET", path: "/v1/authorizations?state=active,upcoming", token: viewer, code: 200, list: "[{b} {a}]", version: 2},
		{name: "ended", method: "GET", path: "/v1/authorizations?state=ended", token: viewer, code: 200, list: "[]", version: 2},
		{name: "bad state", method: "GET", path: "/v1/authorizations?state=gone", token: viewer, code: 400, field: "state", version: 2},
		{name: "state twice", method: "GET", path: "/v1/authorizations?state=active&state=ended", token: viewer, code: 400, field: "state", version: 2},
		{name: "a drone of the prefix", method: "GET", path: "/v1/authorizations?drone=POLICE-7", token: viewer, code: 200, list: "[{a}]", version: 2},
		{name: "another drone", method: "GET", path: "/v1/authorizations?drone=FILM-2", token: viewer, code: 200, list: "[]", version: 2},
		{name: "a zone", method: "GET", path: "/v1/authorizations?zone=LHR-1", token: viewer, code: 200, list: "[{b} {a}]", version: 2},
		{name: "another zone: only all", method: "GET", path: "/v1/authorizations?zone=LGW-1", token: viewer, code: 200, list: "[{b}]", version: 2},
		{name: "a category", method: "GET", path: "/v1/authorizations?category=restricted", token: viewer, code: 200, list: "[{b}]", version: 2},
		{name: "bad category", method: "GET", path: "/v1/authorizations?category=red", token: viewer, code: 400, field: "category", version: 2},
		{name: "a page", method: "GET", path: "/v1/authorizations?limit=1", token: viewer, code: 200, list: "[{b}]", has: []string{`"next_cursor":"{b}"`}, version: 2},
		{name: "the next page", method: "GET", path: "/v1/authorizations?limit=1&cursor={b}", token: viewer, code: 200, list: "[{a}]", has: []string{`"next_cursor":null`}, version: 2},
		{name: "bad cursor", method: "GET", path: "/v1/authorizations?cursor=x", token: viewer, code: 400, field: "cursor", version: 2},
		{name: "bad limit", method: "GET", path: "/v1/authorizations?limit=1001", token: viewer, code: 400, field: "limit", version: 2},
		// Revocation.
		{name: "viewer may not revoke", method: "DELETE", path: "/v1/authorizations/{a}", token: viewer, code: 403, errCode: "forbidden", version: 2},
		{name: "revoke, stale If-Match", method: "DELETE", path: "/v1/authorizations/{a}", token: admin, hdr: []string{"If-Match", "1"},
			code: 412, errCode: "version_mismatch", etag: `"2"`, version: 2},
		{name: "revoke", method: "DELETE", path: "/v1/authorizations/{a}", token: admin, hdr: []string{"If-Match", `W/"2"`}, code: 200, etag: `"3"`, version: 3,
			has: []string{`"state":"ended"`, `"revoked_at":"2026-12-06T09:00:00Z"`, `"revoked_by":"admin-tok"`}},
		{name: "revoked is kept", method: "GET", path: "/v1/authorizations?state=ended", token: viewer, code: 200, etag: `"3"`, list: "[{a}]", version: 3},
		{name: "revoke again", method: "DELETE", path: "/v1/authorizations/{a}", token: admin, code: 409, errCode: "already_ended", version: 3},
		{name: "revoke unknown", method: "DELETE", path: "/v1/authorizations/0123456789abcdef", token: admin, code: 404, errCode: "not_found", version: 3},
		{name: "get unknown", method: "GET", path: "/v1/authorizations/0123456789abcdef", token: viewer, code: 404, errCode: "not_found", version: 3},
		{name: "not an id", method: "GET", path: "/v1/authorizations/NOPE", token: viewer, code: 400, field: "authorization_id", version: 3},
		{name: "the history is no id to revoke", method: "DELETE", path: "/v1/authorizations/history", token: admin, code: 405, errCode: "method_not_allowed", version: 3},
		{name: "history", method: "GET", path: "/v1/authorizations/history", token: viewer, code: 200, etag: `"3"`, version: 3,
			has: []string{`"current_version":3`, `"switches":{"0":[],"1":[]}`, `"action":"create","authorization_id":"{a}"`, `"action":"revoke","authorization_id":"{a}"`}},
	}
	for _, st := range steps {
		path := st.path
		for k, v := range ids {
			path = strings.ReplaceAll(path, "{"+k+"}", v)
		}
		a := e.do(t, st.method, path, st.token, st.body, st.hdr...)
		if a.code != st.code {
			t.Fatalf("%s: status %d, want %d: %s", st.name, a.code, st.code, a.raw)
		}
		if st.etag != "" && a.hdr.Get("ETag") != st.etag {
			t.Errorf("%s: ETag %q, want %q", st.name, a.hdr.Get("ETag"), st.etag)
		}
		if st.errCode != "" && a.body.Code != st.errCode {
			t.Errorf("%s: code %q, want %q: %s", st.name, a.body.Code, st.errCode, a.raw)
		}
		if st.field != "" && a.body.Details["field"] != st.field {
			t.Errorf("%s: details.field %v, want %q: %s", st.name, a.body.Details["field"], st.field, a.raw)
		}
		for _, h := range st.has {
			for k, v := range ids {
				h = strings.ReplaceAll(h, "{"+k+"}", v)
			}
			if !strings.Contains(a.raw, h) {
				t.Errorf("%s: the answer does not hold %s: %s", st.name, h, a.raw)
			}
		}
		if st.capture != "" {
			var au struct{ ID string }
			if err := json.Unmarshal([]byte(a.raw), &au); err != nil || au.ID == "" {
				t.Fatalf("%s: no id in %s", st.name, a.raw)
			}
			ids[st.capture] = au.ID
			if loc := a.hdr.Get("Location"); loc != "/v1/authorizations/"+au.ID {
				t.Errorf("%s: Location %q", st.name, loc)
			}
		}
		if st.list != "" {
			var l authorizationList
			if err := json.Unmarshal([]byte(a.raw), &l); err != nil {
				t.Fatalf("%s: %v: %s", st.name, err, a.raw)
			}
			var got []string
			for _, au := range l.Authorizations {
				got = append(got, au.ID)
			}
			want := st.list
			for k, v := range ids {
				want = strings.ReplaceAll(want, "{"+k+"}", v)
			}
			if fmt.Sprint(got) != want && !(want == "[]" && got == nil) {
				t.Errorf("%s: listed %v, want %s", st.name, got, want)
			}
		}
		if v, err := store.Version(context.Background()); err != nil || v != st.version {
			t.Fatalf("%s: the store is at version %d (%v), want %d", st.name, v, err, st.version)
		}
	}
	// The history without the sets, and each version's change.
	a := e.do(t, "GET", "/v1/authorizations/history?authorizations=false&after=1", viewer, "")
	var h authstore.History
	if err := json.Unmarshal([]byte(a.raw), &h); err != nil || a.code != 200 || len(h.Versions) != 2 || strings.Contains(a.raw, `"authorizations":[`) {
		t.Fatalf("history ?authorizations=false&after=1: %d %s", a.code, a.raw)
	}
	if h.Versions[0].Action != authstore.ActionCreate || h.Versions[0].AuthorizationID != ids["b"] || h.Versions[1].Action != authstore.ActionRevoke {
		t.Errorf("history: %+v", h.Versions)
	}
	if a := e.do(t, "GET", "/v1/authorizations/history?authorizations=maybe", viewer, ""); a.code != 400 || a.body.Details["field"] != "authorizations" {
		t.Errorf("?authorizations=maybe: %d %s", a.code, a.raw)
	}
	// The store holds what the API answered: the set decides with it.
	set, err := store.Set(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Covering("POLICE-7", "LHR-1", "restricted", now.Add(-30*time.Minute)); !ok {
		t.Error("before its revocation, a covered POLICE-7 in LHR-1")
	}
	if _, ok := set.Covering("POLICE-7", "LHR-1", "restricted", now); ok {
		t.Error("revoked, it still covers")
	}
	if au, ok := set.Covering("FILM-1", "ANY", "restricted", time.Date(2026, 12, 6, 13, 30, 0, 0, time.UTC)); !ok || au.ID != ids["b"] || au.By != "admin-tok" {
		t.Errorf("the upcoming one, in its window: %+v %v", au, ok)
	}
}

func manyIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("Z", i)
	}
	return out
}

// TestAuthorizationCreatesRace: creates without If-Match racing each other
// all land (each retried on the version it lost to), one version each.
func TestAuthorizationCreatesRace(t *testing.T) {
	var o Options
	e := newAuthEnv(t, func(opt *Options) {
		opt.Now = func() time.Time { return time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC) }
		o = *opt
	})
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			codes[i] = e.do(t, "POST", "/v1/authorizations", testTokens["admin"],
				authBody(t, map[string]any{"drone": fmt.Sprint("D", i)})).code
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != 201 {
			t.Errorf("create %d: %d", i, c)
		}
	}
	set, err := authstore.New(o.Redis, authstore.Options{Prefix: o.Prefix}).Set(context.Background())
	if err != nil || set.Version != n || len(set.All()) != n {
		t.Fatalf("version %d with %d (%v), want %d", set.Version, len(set.All()), err, n)
	}
	// Paging through every one, with a filter, lists each once.
	seen := map[string]bool{}
	q := url.Values{"limit": {"3"}, "state": {"active"}}
	for range n {
		var l authorizationList
		a := e.do(t, "GET", "/v1/authorizations?"+q.Encode(), testTokens["viewer"], "")
		if err := json.Unmarshal([]byte(a.raw), &l); err != nil || a.code != 200 {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		for _, au := range l.Authorizations {
			if seen[au.ID] {
				t.Errorf("%s listed twice", au.ID)
			}
			seen[au.ID] = true
		}
		if l.NextCursor == nil {
			break
		}
		q.Set("cursor", *l.NextCursor)
	}
	if len(seen) != n {
		t.Errorf("paged through %d, want %d", len(seen), n)
	}
}
