package dashboard_test

// Single sign-on (issue 33) in a real browser: the dashboard offers "Sign
// in with <provider>" beside the token field, a person signs in through
// the provider (testenv's fake one, which signs in at once; the real login
// page is the Dex test's), acks an alarm in their own name with the
// session cookie and its CSRF token, and signs out.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nofly-dev/nofly/internal/testenv"
)

func TestDashboardOIDCSignIn(t *testing.T) {
	untimed(t)
	op := testenv.StartFakeOIDC(t)
	op.SetSecret("oidc-client-secret-browser")
	op.SetClaims(map[string]any{"preferred_username": "alice.smith", "groups": []string{"staff", "nofly-operators"}})
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte("oidc-client-secret-browser\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, testZones(), 1, "--oidc-issuer="+op.URL, "--oidc-client-id=nofly", "--oidc-client-secret-file="+secret,
		"--oidc-roles=nofly-admins=admin,nofly-operators=operator,nofly-viewers=viewer")
	b := openBrowser(t, s.alerter, "oidc")
	b.others = append(b.others, op.URL) // the provider's pages, and nothing else

	b.run("open the dashboard", chromedp.Navigate(s.alerter+"/"), chromedp.WaitVisible(chromedp.CSS("#tokenPane:not([hidden]) #oidcSignIn")))
	if txt := eval[string](b, `document.getElementById('oidcSignIn').textContent`); txt != "Sign in with 127.0.0.1" {
		t.Errorf("sign-in button %q", txt)
	}
	if !eval[bool](b, `!document.getElementById('token').closest('label').hidden`) {
		t.Error("the token field is gone; the token file is on, so it must stay")
	}
	b.shot("sign-in-offered")

	b.run("sign in through the provider", chromedp.Click(chromedp.CSS("#oidcSignIn")),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	if who := eval[string](b, `document.getElementById('who').textContent`); who != "alice.smith (operator)" {
		t.Errorf("who %q", who)
	}
	if so := eval[string](b, `document.getElementById('signout').textContent`); so != "Sign out" {
		t.Errorf("header button %q, want Sign out", so)
	}
	if eval[bool](b, `document.cookie.includes('nofly_session')`) {
		t.Error("the session cookie is readable by the page (HttpOnly missing)")
	}
	if eval[bool](b, `!!sessionStorage.getItem('nofly.token')`) {
		t.Error("a token was kept: the session needs none")
	}
	seen := op.Seen()
	if seen.ChallengeMethod != "S256" || seen.Verifier == "" || seen.Secret != "oidc-client-secret-browser" {
		t.Errorf("the provider saw %+v", seen)
	}

	// An alarm, acked by the person (the cookie and X-CSRF-Token).
	b.run("see the zones drawn", chromedp.WaitVisible(chromedp.CSS(`body[data-zones-drawn="4"]`)))
	s.send(pos("SSO-1", 1, time.Now(), 51.45, 0.45))
	sel := `#active li.alarm[data-state="active"][data-acked="false"]`
	b.run("see the alarm", chromedp.WaitVisible(chromedp.CSS(sel)))
	// In one evaluation (ackWithNote): a live update may redraw the item
	// between a query and a click.
	b.run("ack it", ackWithNote(sel, "patrol sent"),
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm[data-state="active"][data-acked="true"]`)))
	text := eval[string](b, `document.querySelector('#active li.alarm[data-acked="true"]').innerText`)
	if !strings.Contains(text, "acked by alice.smith") {
		t.Errorf("acked item %q does not name the person", text)
	}
	b.shot("acked-by-person")
	req, _ := http.NewRequest("GET", s.alerter+"/v1/alarms?state=all&drone=SSO-1", nil)
	req.Header.Set("Authorization", "Bearer "+s.viewer)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Alarms []struct {
			Ack *struct {
				By string `json:"by"`
			} `json:"ack"`
		} `json:"alarms"`
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil || len(list.Alarms) != 1 || list.Alarms[0].Ack == nil || list.Alarms[0].Ack.By != "alice.smith" {
		t.Errorf("the API's alarm: %+v (%v)", list, err)
	}

	// A write without the CSRF token, from the page with its cookie: 403.
	status := evalIn[float64](t, b.ctx, `fetch('v1/zones/SQUARE', {method: 'DELETE'}).then((r) => r.status)`)
	if status != 403 {
		t.Errorf("a DELETE with the cookie and no X-CSRF-Token: %v, want 403", status)
	}

	b.run("sign out", chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#tokenPane:not([hidden]) #oidcSignIn")))
	if op.Seen().LoggedOut != 1 {
		t.Errorf("the provider's end_session was visited %d times, want 1", op.Seen().LoggedOut)
	}
	status = evalIn[float64](t, b.ctx, `fetch('v1/me').then((r) => r.status)`)
	if status != 401 {
		t.Errorf("/v1/me after sign-out: %v, want 401", status)
	}
	b.shot("signed-out")
	log, _ := os.ReadFile(s.alerterLog)
	for _, secretText := range []string{"oidc-client-secret-browser", seen.Verifier} {
		if strings.Contains(string(log), secretText) {
			t.Errorf("the alerter's log holds a secret (%.6s…)", secretText)
		}
	}
}
