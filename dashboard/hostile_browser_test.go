package dashboard_test

// The browser protections of issue 26 in a real browser (Debian's
// chromium): a workstation runs ingest and the alerter in the loopback
// mode (no token file, no feed keys), and the operator, with the dashboard
// open, visits another site.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// startLoopbackStack is startStack in the loopback mode: no --api-tokens,
// no --feed-keys, both services on 127.0.0.1.
func startLoopbackStack(t *testing.T, zones []byte) *stack {
	t.Helper()
	brokers := testenv.Kafka(t)
	redisAddr := testenv.Redis(t)
	bin := binaries(t)
	dir := t.TempDir()
	s := &stack{t: t, dir: dir}
	zf := filepath.Join(dir, "zones.geojson")
	if err := os.WriteFile(zf, zones, 0o600); err != nil {
		t.Fatal(err)
	}
	run := testenv.UniqueName("dash-hostile")
	topic := testenv.CreateTopic(t, brokers, 2)
	ip, ap := testenv.FreePort(t), testenv.FreePort(t)
	s.ingest, s.alerter = fmt.Sprintf("http://127.0.0.1:%d", ip), fmt.Sprintf("http://127.0.0.1:%d", ap)
	common := []string{"--brokers=" + strings.Join(brokers, ","), "--topic=" + topic, "--partitions=2", "--log-level=info"}
	s.start("ingest", bin+"/ingest", append([]string{"serve", fmt.Sprintf("--addr=127.0.0.1:%d", ip)}, common...))
	s.alerterLog = s.start("alerter", bin+"/alerter", append([]string{"serve", "--redis=" + redisAddr, "--redis-prefix=" + testenv.RedisPrefix(t, run),
		"--group=" + run, "--zones=" + zf, "--events-topic=" + topic + ".events", fmt.Sprintf("--http=127.0.0.1:%d", ap)}, common...))
	testenv.CheckFor(t, 60*time.Second, func() error { return getOK(s.ingest + "/readyz") })
	testenv.CheckFor(t, 60*time.Second, func() error { return getOK(s.alerter + "/readyz") })
	return s
}

// getJSON GETs u (Host: its own address) into v.
func getJSON(u string, v any) (int, error) {
	res, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode == 200 {
		return 200, json.Unmarshal(b, v)
	}
	return res.StatusCode, nil
}

// hostileBrowser is a headless chromium in which rebind.test resolves to
// 127.0.0.1, as the name of a DNS-rebinding attacker does once rebound.
func hostileBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not on PATH (scripts/chromium.sh install puts Debian's there): %v", err)
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1200, 800),
		chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"),
		chromedp.Flag("disable-features", "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable"))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	// The first action on ctx starts the browser, which lives as long as
	// the context that action ran with: this one, not a step's timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func evalIn[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// TestHostileBrowserCrossSiteAndRebinding: in the loopback mode, a page of
// another site the operator visits (http://localhost:<port>, cross-site to
// http://127.0.0.1) acks nothing and writes no telemetry — neither by a
// no-cors text/plain fetch nor by a form post, which the browser sends
// without asking — and a DNS-rebinding page (rebind.test, resolved to
// 127.0.0.1) can neither read the API nor write to it, though it is
// same-origin to itself; the dashboard itself, same-origin, still acks.
func TestHostileBrowserCrossSiteAndRebinding(t *testing.T) {
	untimed(t)
	s := startLoopbackStack(t, testZones())
	s.send(pos("UAV-7", 1, time.Now(), 51.45, 0.45))
	var list struct {
		Alarms []struct {
			AlarmID string `json:"alarm_id"`
			Ack     any    `json:"ack"`
		} `json:"alarms"`
	}
	testenv.CheckFor(t, 30*time.Second, func() error {
		if _, err := getJSON(s.alerter+"/v1/alarms", &list); err != nil {
			return err
		}
		if len(list.Alarms) != 1 {
			return fmt.Errorf("%d alarms", len(list.Alarms))
		}
		return nil
	})
	id := list.Alarms[0].AlarmID
	acked := func() bool {
		var a struct{ Ack any }
		if code, err := getJSON(s.alerter+"/v1/alarms/"+id, &a); code != 200 || err != nil {
			t.Fatalf("GET the alarm: %d %v", code, err)
		}
		return a.Ack != nil
	}
	accepted := func() string {
		res, err := http.Get(s.ingest + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "nofly_ingest_records_accepted_total ") {
				return l
			}
		}
		return ""
	}
	before := accepted()

	// The other site: it posts the ack and a position both ways a page can
	// without a preflight, then says it is done.
	record := fmt.Sprintf(`{"drone_id":"EVIL-1","seq":1,"ts":%q,"lat":51.5,"lon":0.5}`, time.Now().UTC().Format(time.RFC3339))
	page := `<!doctype html><title>cat pictures</title>
<iframe name="sink" style="display:none"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="` + s.alerter + `/v1/alarms/` + id + `/ack"><input name='{"note":"pwned by a form","x":"' value='"}'></form>
<script>
(async () => {
  const opts = (body) => ({method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body});
  await fetch(` + strconv.Quote(s.alerter+"/v1/alarms/"+id+"/ack") + `, opts('{"note":"pwned by fetch"}')).catch(() => {});
  await fetch(` + strconv.Quote(s.ingest+"/v1/telemetry") + `, opts(` + strconv.Quote(record) + `)).catch(() => {});
  const sink = document.querySelector('iframe');
  await new Promise((ok) => { sink.onload = ok; document.getElementById('f').submit(); setTimeout(ok, 10000); });
  await fetch('/done');
})();
</script>`
	done := make(chan struct{})
	var once sync.Once
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			once.Do(func() { close(done) })
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, page)
	}))
	defer evil.Close()
	ctx := hostileBrowser(t)
	evilURL := "http://localhost:" + strings.TrimPrefix(evil.URL, "http://127.0.0.1:")
	run(t, ctx, "visit the other site", chromedp.Navigate(evilURL))
	select {
	case <-done: // the page says it sent all three
	case <-time.After(30 * time.Second):
		t.Fatal("the other site's page did not finish its requests in 30s")
	}
	// The browser did send them: each service logged its 403.
	testenv.CheckFor(t, 10*time.Second, func() error {
		for name, log := range map[string]string{"alerter": s.alerterLog, "ingest": filepath.Join(s.dir, "ingest.log")} {
			b, _ := os.ReadFile(log)
			want := 1
			if name == "alerter" {
				want = 2 // the fetch and the form
			}
			if n := strings.Count(string(b), `"status":403`); n < want {
				return fmt.Errorf("%s logged %d 403s, want %d", name, n, want)
			}
		}
		return nil
	})
	if acked() {
		t.Fatal("the other site's page acked the alarm")
	}
	if after := accepted(); after != before {
		t.Fatalf("the other site's page wrote telemetry: %q, then %q", before, after)
	}

	// DNS rebinding: a page of rebind.test, its name now resolving to
	// 127.0.0.1, is same-origin with the services as far as the browser
	// knows; its Host gives it away.
	for _, svc := range []struct{ name, base string }{{"alerter", s.alerter}, {"ingest", s.ingest}} {
		port := svc.base[strings.LastIndex(svc.base, ":")+1:]
		run(t, ctx, "open rebind.test on the "+svc.name+"'s port", chromedp.Navigate("http://rebind.test:"+port+"/healthz"))
		statuses := evalIn[[]int](t, ctx, `Promise.all([
  fetch('/v1/alarms').then((r) => r.status),
  fetch('/metrics').then((r) => r.status),
  fetch('/v1/alarms/`+id+`/ack', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"note":"rebound"}'}).then((r) => r.status),
  fetch('/v1/telemetry', {method: 'POST', headers: {'Content-Type': 'application/x-ndjson'}, body: `+strconv.Quote(record)+`}).then((r) => r.status),
])`)
		for i, st := range statuses {
			if st != http.StatusMisdirectedRequest {
				t.Errorf("%s through rebind.test: request %d answered %d, want 421", svc.name, i, st)
			}
		}
	}
	if acked() {
		t.Fatal("the rebinding page acked the alarm")
	}
	if after := accepted(); after != before {
		t.Fatalf("the rebinding page wrote telemetry: %q, then %q", before, after)
	}

	// The dashboard, in the same browser, on the service's own origin.
	run(t, ctx, "open the dashboard", chromedp.Navigate(s.alerter+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	sel := `#active li.alarm[data-state="active"][data-acked="false"]`
	run(t, ctx, "ack from the dashboard", chromedp.WaitVisible(chromedp.CSS(sel+` button.ack`)),
		ackWithNote(sel, "seen"),
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm[data-acked="true"]`)))
	if !acked() {
		t.Fatal("the dashboard's ack did not ack")
	}
}
