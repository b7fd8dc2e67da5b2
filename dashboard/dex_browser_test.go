package dashboard_test

// Single sign-on against a real identity provider (issue 33, point 5):
// Dex, built and started by scripts/dex.sh, with its own login page. A
// person types into Dex's form, lands on the dashboard signed in, acks in
// their own name, is refused a zone change by role; an admin's zone
// change is in the audit trail with both versions; Dex's JWT access
// tokens are accepted as bearer tokens until they expire, and a tampered
// one is not.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// dexTTL is the ID and access tokens' lifetime in the Dex test: long
// enough for one person's part of the browser test, short enough that the
// first token has expired by the end.
const dexTTL = 60 * time.Second

// startDex runs scripts/dex.sh on a free port with the alerter's exact
// redirect URI (Dex wants it exact) and returns its issuer.
func startDex(t *testing.T, redirect, secretFile string) string {
	t.Helper()
	port := testenv.FreePort(t)
	dir := t.TempDir()
	env := append(os.Environ(), fmt.Sprintf("DEX_PORT=%d", port), "DEX_DIR="+dir, "DEX_REDIRECT_URIS="+redirect,
		"DEX_CLIENT_SECRET_FILE="+secretFile, "DEX_ID_TOKEN_TTL="+dexTTL.String())
	script := filepath.Join(testenv.RepoRoot(), "scripts", "dex.sh")
	run := func(arg string) error {
		cmd := exec.Command("bash", script, arg)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("scripts/dex.sh %s: %v\n%s", arg, err, out)
		}
		return nil
	}
	if err := run("start"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "dex.log"))
			t.Logf("dex log (last 3000 bytes):\n%s", b[max(0, len(b)-3000):])
		}
		if err := run("stop"); err != nil {
			t.Error(err)
		}
	})
	return fmt.Sprintf("http://127.0.0.1:%d/dex", port)
}

// dexPasswordToken is a real access token from Dex's password grant.
func dexPasswordToken(t *testing.T, issuer, secret, email, password string) string {
	t.Helper()
	form := url.Values{"grant_type": {"password"}, "username": {email}, "password": {password},
		"scope": {"openid profile email groups"}}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("nofly", secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&tok); err != nil || res.StatusCode != 200 || tok.AccessToken == "" {
		t.Fatalf("dex password grant for %s: %s (%v)", email, res.Status, err)
	}
	return tok.AccessToken
}

// bearerMe is GET /v1/me's status and body with token as the bearer.
func bearerMe(t *testing.T, base, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return res.StatusCode, string(body)
}

// jwtExp is a JWT's exp claim (unverified: only to wait for it).
func jwtExp(t *testing.T, jwt string) time.Time {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return time.Unix(c.Exp, 0)
}

// dexSignIn follows "Sign in with …" to Dex's own login page and types
// the person's email and password into its form.
func dexSignIn(b *browser, email, password, shot string) {
	b.t.Helper()
	b.run("open the dashboard", chromedp.Navigate(b.origin+"/"), chromedp.WaitVisible(chromedp.CSS("#tokenPane:not([hidden]) #oidcSignIn")))
	b.run("go to Dex's login page", chromedp.Click(chromedp.CSS("#oidcSignIn")), chromedp.WaitVisible(chromedp.CSS("#login")))
	if loc := eval[string](b, `location.href`); !strings.Contains(loc, "/dex/auth/local") {
		b.t.Errorf("the login page is %s, not Dex's password page", loc)
	}
	b.run("type into Dex's form", chromedp.SendKeys(chromedp.CSS("#login"), email), chromedp.SendKeys(chromedp.CSS("#password"), password))
	if shot != "" {
		b.shot(shot)
	}
	b.run("submit Dex's form and land on the dashboard", chromedp.Click(chromedp.CSS("#submit-login")),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
}

func TestDashboardDexSignIn(t *testing.T) {
	untimed(t)
	const secret = "dex-client-secret-e2e"
	secretFile := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ap := testenv.FreePort(t)
	alerter := fmt.Sprintf("http://127.0.0.1:%d", ap)
	issuer := startDex(t, alerter+"/auth/callback", secretFile)
	dexOrigin := strings.TrimSuffix(issuer, "/dex")

	s := startStackOn(t, ap, testZones(), 1, "--oidc-issuer="+issuer, "--oidc-client-id=nofly", "--oidc-client-secret-file="+secretFile,
		"--oidc-roles=nofly-admins=admin,nofly-operators=operator,nofly-viewers=viewer")
	// A machine's token from Dex, taken once the stack is up (its start,
	// with a cold build, can outlast the token): it has expired by the end.
	early := dexPasswordToken(t, issuer, secret, "olivia@example.org", "olivia-sso-test")

	// Point 2: Dex's JWT access token as a bearer token, its role from the
	// groups claim; tampered (the groups made nofly-admins) or with a broken
	// signature, 401.
	if code, body := bearerMe(t, s.alerter, early); code != 200 || !strings.Contains(body, `"olivia"`) || !strings.Contains(body, `"operator"`) {
		t.Errorf("GET /v1/me with Dex's access token: %d %s", code, body)
	}
	// Vera's groups map to viewer: she reads and may not ack.
	vera := dexPasswordToken(t, issuer, secret, "vera@example.org", "vera-sso-test")
	if code, body := bearerMe(t, s.alerter, vera); code != 200 || !strings.Contains(body, `"vera"`) || !strings.Contains(body, `"viewer"`) {
		t.Errorf("GET /v1/me with vera's access token: %d %s", code, body)
	}
	parts := strings.Split(early, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(claims), `"nofly-operators"`, `"nofly-admins"`, 1)
	if forged == string(claims) {
		t.Fatalf("the access token has no nofly-operators group: %s", claims)
	}
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[len(sig)/2] ^= 0x01
	badSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	for name, tok := range map[string]string{"tampered claims": tampered, "broken signature": badSig} {
		if code, body := bearerMe(t, s.alerter, tok); code != http.StatusUnauthorized {
			t.Errorf("%s: GET /v1/me %d %s, want 401", name, code, body)
		}
	}

	// Olivia (operator) signs in through Dex's login page.
	b := openBrowser(t, s.alerter, "olivia")
	b.others = append(b.others, dexOrigin) // Dex's pages, and nothing else
	dexSignIn(b, "olivia@example.org", "olivia-sso-test", "dex-login-page")
	if who := eval[string](b, `document.getElementById('who').textContent`); who != "olivia (operator)" {
		t.Errorf("who %q, want olivia (operator)", who)
	}
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)),
		chromedp.Sleep(time.Second)) // the map's fit animation ends
	b.shot("signed-in-olivia")

	// She acks an alarm: the ack names her.
	s.send(pos("DEX-1", 1, time.Now(), 51.45, 0.45))
	sel := `#active li.alarm[data-state="active"][data-acked="false"]`
	b.run("see the alarm", chromedp.WaitVisible(chromedp.CSS(sel)))
	b.run("ack it", ackWithNote(sel, "patrol sent by olivia"),
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm[data-state="active"][data-acked="true"]`)))
	if text := eval[string](b, `document.querySelector('#active li.alarm[data-acked="true"]').innerText`); !strings.Contains(text, "acked by olivia") {
		t.Errorf("acked item %q does not name olivia", text)
	}
	b.shot("acked-by-olivia")
	var alarms struct {
		Alarms []struct {
			Ack *struct {
				By   string `json:"by"`
				Note string `json:"note"`
			} `json:"ack"`
		} `json:"alarms"`
	}
	bearerJSON(t, s.alerter+"/v1/alarms?state=all&drone=DEX-1", s.viewer, &alarms)
	if len(alarms.Alarms) != 1 || alarms.Alarms[0].Ack == nil || alarms.Alarms[0].Ack.By != "olivia" {
		t.Errorf("the API's alarm: %+v", alarms)
	}

	// A zone change with her session and its CSRF token: 403 by role.
	status := evalIn[float64](t, b.ctx, `fetch('v1/zones/PAST', {method: 'DELETE', headers: nofly.headers({'If-Match': '"1"'})}).then((r) => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("olivia's DELETE /v1/zones/PAST: %v, want 403", status)
	}
	b.run("sign out", chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#tokenPane:not([hidden]) #oidcSignIn")))
	if status := evalIn[float64](t, b.ctx, `fetch('v1/me').then((r) => r.status)`); status != http.StatusUnauthorized {
		t.Errorf("/v1/me after sign-out: %v, want 401", status)
	}

	// Adam (admin) signs in, in the same browser: Dex asks again.
	b.who = "adam"
	dexSignIn(b, "adam@example.org", "adam-sso-test", "")
	adamIn := time.Now() // his session ends by dexTTL from here: its ID token was issued before
	if who := eval[string](b, `document.getElementById('who').textContent`); who != "adam (admin)" {
		t.Errorf("who %q, want adam (admin)", who)
	}
	status = evalIn[float64](t, b.ctx, `fetch('v1/zones/PAST', {method: 'DELETE', headers: nofly.headers({'If-Match': '"1"'})}).then((r) => r.status)`)
	if status != http.StatusOK {
		t.Fatalf("adam's DELETE /v1/zones/PAST: %v, want 200", status)
	}

	// The audit trail: adam's zone change with both versions, olivia's ack
	// and refused change, both sign-ins, each naming the person.
	var trail struct {
		Entries []struct {
			Who           string `json:"who"`
			Role          string `json:"role"`
			Via           string `json:"via"`
			Action        string `json:"action"`
			Target        string `json:"target"`
			BeforeVersion *int64 `json:"before_version"`
			AfterVersion  *int64 `json:"after_version"`
			Outcome       string `json:"outcome"`
		} `json:"entries"`
	}
	raw := evalIn[string](t, b.ctx, `fetch('v1/audit?limit=100', {headers: nofly.headers()}).then((r) => r.text())`)
	if err := json.Unmarshal([]byte(raw), &trail); err != nil {
		t.Fatalf("GET /v1/audit as adam: %v: %.300s", err, raw)
	}
	found := map[string]bool{}
	for _, e := range trail.Entries {
		key := e.Action + " " + e.Who + " " + e.Outcome
		switch {
		case e.Action == "zone_delete" && e.Target == "PAST" && e.Who == "adam" && e.Role == "admin" && e.Outcome == "ok":
			if e.BeforeVersion == nil || e.AfterVersion == nil || *e.BeforeVersion != 1 || *e.AfterVersion != 2 {
				t.Errorf("adam's zone change has versions %v→%v, want 1→2", e.BeforeVersion, e.AfterVersion)
			}
			found[key] = true
		case e.Who == "olivia" || e.Who == "adam":
			found[key] = true
		}
	}
	for _, want := range []string{"zone_delete adam ok", "sign_in adam ok", "sign_in olivia ok", "ack olivia ok", "request olivia denied"} {
		if !found[want] {
			t.Errorf("the audit trail lacks %q; it has %v", want, found)
		}
	}

	// The audit view shows the change, naming adam.
	b.run("open the audit view", chromedp.WaitVisible(chromedp.CSS(`#auditOpen:not([hidden])`)),
		chromedp.Click(chromedp.CSS(`#auditOpen`)),
		chromedp.WaitVisible(chromedp.CSS(`#auditList li.auditrow[data-action="zone_delete"]`)))
	row := eval[string](b, `document.querySelector('#auditList li.auditrow[data-action="zone_delete"]').innerText.replace(/\s+/g, ' ')`)
	if !strings.Contains(row, "adam (admin)") || !strings.Contains(row, "v1→v2") {
		t.Errorf("the audit view's zone change %q lacks adam (admin) or v1→v2", row)
	}
	b.shot("audit-view-adam")

	// The first token has expired by now (wait for it if not): 401.
	if d := time.Until(jwtExp(t, early)); d > -time.Second {
		t.Logf("waiting %v for the first access token to expire", (d + 2*time.Second).Round(time.Second))
		time.Sleep(d + 2*time.Second)
	}
	if code, body := bearerMe(t, s.alerter, early); code != http.StatusUnauthorized {
		t.Errorf("an expired access token: GET /v1/me %d %s, want 401", code, body)
	}

	// Adam's session ends with his ID token: the page's next request is 401.
	if d := time.Until(adamIn.Add(dexTTL)); d > -time.Second {
		t.Logf("waiting %v for adam's session to end", (d + 2*time.Second).Round(time.Second))
		time.Sleep(d + 2*time.Second)
	}
	if status := evalIn[float64](t, b.ctx, `fetch('v1/me', {headers: nofly.headers()}).then((r) => r.status)`); status != http.StatusUnauthorized {
		t.Errorf("/v1/me after adam's ID token expired: %v, want 401", status)
	}

	// Nothing secret in the alerter's log.
	log, _ := os.ReadFile(s.alerterLog)
	for _, sec := range []string{secret, early, parts[2], vera, "olivia-sso-test", "adam-sso-test"} {
		if strings.Contains(string(log), sec) {
			t.Errorf("the alerter's log holds a secret (%.6s…)", sec)
		}
	}
}

// bearerJSON GETs u with token as the bearer into v, wanting 200.
func bearerJSON(t *testing.T, u, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %s", u, res.Status)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
