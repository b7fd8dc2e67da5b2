package alerterd

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// reloadBound is how long a SIGHUP's reload may take to show: the swap is
// immediate, so this only covers a slow machine.
const reloadBound = 5 * time.Second

// TestTokenReloadSIGHUP: a real `alerter serve` with a token file. After
// the file is rewritten without token A and with token B and the process
// gets SIGHUP, A gets 401 and B 200, A's open event stream ends and the
// stream of C (kept as it was) stays open; a file that does not parse
// keeps the tokens in use and logs its file and line. The log, counted and
// named, never holds a token or a token's hash.
func TestTokenReloadSIGHUP(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, testenv.Kafka(t), testenv.Redis(t), 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	toks := map[string]string{}
	line := func(name string, role api.Role) string {
		tok, err := api.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = tok
		return api.Token{Name: name, Role: role, Hash: api.HashToken(tok)}.Line() + "\n"
	}
	write := func(s string) {
		// As an editor saves: a new file renamed over the old, so the
		// process never reads half of it.
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	lineA, lineC := line("desk-a", api.RoleOperator), line("grafana-c", api.RoleViewer)
	write("# first\n" + lineA + lineC)
	cfg := p.config()
	cfg.APITokens = path
	pr := p.startProc("a", cfg)
	pr.up(60 * time.Second)

	get := func(name string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+pr.http+"/v1/alarms?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+toks[name])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	testenv.CheckFor(t, 60*time.Second, func() error {
		if c := get("desk-a"); c != 200 {
			return fmt.Errorf("desk-a: GET /v1/alarms %d", c)
		}
		return nil
	})
	// stream opens the event stream as name and returns a channel closed
	// when the stream ends.
	stream := func(name string) <-chan struct{} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+pr.http+"/v1/events/stream", nil)
		req.Header.Set("Authorization", "Bearer "+toks[name])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			t.Fatalf("%s: stream %s", name, res.Status)
		}
		ended := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, res.Body); res.Body.Close(); close(ended) }()
		t.Cleanup(func() { res.Body.Close(); <-ended })
		return ended
	}
	streamA, streamC := stream("desk-a"), stream("grafana-c")

	lineB := line("ci-b", api.RoleAdmin)
	write(lineC + lineB)
	sent := time.Now()
	pr.signal(syscall.SIGHUP)
	testenv.CheckFor(t, reloadBound, func() error {
		if a, b := get("desk-a"), get("ci-b"); a != 401 || b != 200 {
			return fmt.Errorf("after SIGHUP: desk-a %d (want 401), ci-b %d (want 200)", a, b)
		}
		return nil
	})
	took := time.Since(sent)
	select {
	case <-streamA:
	case <-time.After(reloadBound):
		t.Errorf("desk-a's event stream still open %v after its token was removed", reloadBound)
	}
	t.Logf("SIGHUP to desk-a refused and ci-b admitted: %v; desk-a's stream ended %v after the signal", took.Round(time.Millisecond), time.Since(sent).Round(time.Millisecond))
	select {
	case <-streamC:
		t.Error("grafana-c's stream ended, though its token did not change")
	default:
	}
	if c := get("grafana-c"); c != 200 {
		t.Errorf("grafana-c after the reload: %d", c)
	}
	testenv.CheckFor(t, reloadBound, func() error {
		if ls := pr.logLines("api tokens: reloaded"); len(ls) != 1 {
			return fmt.Errorf("%d reload log lines", len(ls))
		}
		return nil
	})
	l := pr.logLines("api tokens: reloaded")[0]
	if fmt.Sprint(l["added"]) != "[ci-b]" || fmt.Sprint(l["removed"]) != "[desk-a]" || l["changed"] != nil || l["tokens"] != 2.0 {
		t.Errorf("reload log line %v: want added [ci-b], removed [desk-a], none changed, 2 tokens", l)
	}
	for m, want := range map[string]float64{`nofly_api_tokens_reloads_total{result="ok"}`: 1, `nofly_api_tokens_reloads_total{result="error"}`: 0,
		`nofly_api_tokens_last_reload_successful`: 1, `nofly_api_tokens{role="admin"}`: 1, `nofly_api_tokens{role="viewer"}`: 1, `nofly_api_tokens{role="operator"}`: 0} {
		if v, err := pr.metric(m); err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", m, v, err, want)
		}
	}

	// A file that does not parse (a token pasted where its hash belongs,
	// on line 2) keeps B and C.
	toks["pasted"], _ = api.NewToken()
	write(lineC + "ci-b admin " + toks["pasted"] + "\n")
	pr.signal(syscall.SIGHUP)
	testenv.CheckFor(t, reloadBound, func() error {
		if v, _ := pr.metric(`nofly_api_tokens_reloads_total{result="error"}`); v != 1 {
			return fmt.Errorf("reload errors %v", v)
		}
		return nil
	})
	if v, err := pr.metric(`nofly_api_tokens_last_reload_successful`); err != nil || v != 0 {
		t.Errorf("nofly_api_tokens_last_reload_successful = %v (%v) after a failed reload, want 0", v, err)
	}
	if b, c := get("ci-b"), get("grafana-c"); b != 200 || c != 200 {
		t.Errorf("after a bad file: ci-b %d, grafana-c %d, want both 200", b, c)
	}
	if ls := pr.logLines("api tokens: reload failed"); len(ls) != 1 || !strings.Contains(fmt.Sprint(ls[0]["error"]), path+":2:") {
		t.Errorf("failed reload's log lines %v: want one naming %s:2", ls, path)
	}
	select {
	case <-streamC:
		t.Error("grafana-c's stream ended at a failed reload")
	default:
	}

	// Each reload is an entry of the audit trail, by the alerter itself.
	msgs, err := p.rc.XRange(context.Background(), audit.Stream(audit.Tag(p.prefix)), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var entries []audit.Entry
	var auditRaw strings.Builder
	for _, m := range msgs {
		raw, _ := m.Values[audit.FieldEntry].(string)
		auditRaw.WriteString(raw)
		e, err := audit.Decode("misc", m.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		if e.Action == audit.ActionTokenReload {
			entries = append(entries, e)
		}
	}
	if len(entries) != 2 {
		t.Fatalf("%d token_reload audit entries, want 2: %+v", len(entries), entries)
	}
	for i, want := range []struct {
		outcome string
		detail  []string
	}{
		{audit.OutcomeOK, []string{`"added":["ci-b"]`, `"removed":["desk-a"]`, `"changed":[]`, `"tokens":2`}},
		{audit.OutcomeFailed, []string{`"error":"api token file ` + path + `:2: `}},
	} {
		e := entries[i]
		if e.Outcome != want.outcome || e.Who != "alerter" || e.Via != audit.ViaSystem || e.Target != path {
			t.Errorf("audit entry %d: %+v, want outcome %s by alerter via system on %s", i, e, want.outcome, path)
		}
		for _, d := range want.detail {
			if !strings.Contains(string(e.Detail), d) {
				t.Errorf("audit entry %d's detail %s lacks %s", i, e.Detail, d)
			}
		}
	}

	// Nothing secret in the log nor the audit trail: no token, no token's
	// hash, not the random part of the pasted token.
	pr.stop()
	logb, err := os.ReadFile(pr.logPath)
	if err != nil {
		t.Fatal(err)
	}
	logb = append(logb, auditRaw.String()...)
	for name, tok := range toks {
		h := api.HashToken(tok)
		for _, s := range []string{tok, tok[len(api.TokenPrefix):], hex.EncodeToString(h[:])} {
			if strings.Contains(string(logb), s) {
				t.Errorf("the log holds %s's token or hash", name)
			}
		}
	}
}
