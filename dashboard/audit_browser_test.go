package dashboard_test

// The audit trail's view (issue 33) in a real browser against a running
// cmd/ingest and cmd/alerter on the real Kafka and Redis.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestDashboardAuditTrail: an operator acks an alarm with a note and
// finds no Audit button (and GET /v1/audit answers its token 403); an
// admin changes a zone through the API, opens the Audit panel and sees
// the zone change (with both versions), the ack (the operator's name and
// note) and the operator's refused read, newest first; the action filter
// narrows it to the ack.
func TestDashboardAuditTrail(t *testing.T) {
	untimed(t)
	auditTopic := testenv.UniqueName("audit")
	s := startStack(t, testZones(), 2, "--audit-topic="+auditTopic)
	s.send(pos("UAV-7", 1, time.Now(), 51.5, 0.5))
	sel := `#active li.alarm[data-state="active"]`

	op := openBrowser(t, s.alerter, "operator")
	op.signIn(s.operator)
	op.run("operator acks with a note", chromedp.WaitVisible(chromedp.CSS(sel+` button.ack`)),
		chromedp.SendKeys(chromedp.CSS(sel+` .ackrow input`), "patrol sent to gate 4\r"),
		chromedp.WaitVisible(chromedp.CSS(`#active li.alarm[data-acked="true"]`)))
	if n := eval[int](op, `document.querySelectorAll('#auditOpen:not([hidden])').length`); n != 0 {
		t.Errorf("the operator's page shows the Audit button")
	}
	if code := evalIn[int](t, op.ctx, `fetch('/v1/audit', {headers: nofly.headers()}).then((r) => r.status)`); code != http.StatusForbidden {
		t.Errorf("GET /v1/audit as operator: %d, want 403", code)
	}
	op.shot("operator-no-audit")

	// An admin's zone change through the API: version 1 -> 2.
	req, _ := http.NewRequest(http.MethodDelete, s.alerter+"/v1/zones/PAST", nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("If-Match", `"1"`)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /v1/zones/PAST: %d", res.StatusCode)
	}

	admin := openBrowser(t, s.alerter, "admin")
	admin.signIn(s.admin)
	admin.run("the admin opens the audit trail", chromedp.WaitVisible(chromedp.CSS(`#auditOpen:not([hidden])`)),
		chromedp.Click(chromedp.CSS(`#auditOpen`)),
		chromedp.WaitVisible(chromedp.CSS(`#auditList li.auditrow[data-action="ack"]`)))
	rows := eval[[]string](admin, `[...document.querySelectorAll('#auditList li.auditrow')].map((li) => li.dataset.action + ' | ' + li.innerText.replace(/\s+/g, ' '))`)
	t.Logf("audit rows:\n%s", strings.Join(rows, "\n"))
	want := []struct{ action, has string }{
		{"zone_delete", "zone delete PAST v1→v2"},
		{"request", "denied 403"},
		{"ack", "patrol sent to gate 4"},
	}
	if len(rows) < len(want) {
		t.Fatalf("%d rows, want at least %d", len(rows), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w.action+" |") || !strings.Contains(rows[i], w.has) {
			t.Errorf("row %d %q: want %s with %q", i, rows[i], w.action, w.has)
		}
	}
	for i, who := range []string{"security-admin (admin)", "ops-desk (operator)", "ops-desk (operator)"} {
		if !strings.Contains(rows[i], who) {
			t.Errorf("row %d %q does not name %s", i, rows[i], who)
		}
	}
	for _, tok := range []string{s.admin, s.operator, s.viewer} {
		if html := eval[string](admin, `document.getElementById('auditPanel').innerHTML`); strings.Contains(html, tok) {
			t.Error("the audit panel shows a token")
		}
	}
	admin.shot("audit-trail")
	admin.run("filter to acks", chromedp.SetValue(chromedp.CSS(`#auditForm select[name="action"]`), "ack"),
		chromedp.Click(chromedp.CSS(`#auditForm button[type="submit"]`)), chromedp.Sleep(500*time.Millisecond))
	if acts := eval[[]string](admin, `[...document.querySelectorAll('#auditList li.auditrow')].map((li) => li.dataset.action)`); len(acts) != 1 || acts[0] != "ack" {
		t.Errorf("filtered to acks: %v", acts)
	}
	admin.shot("audit-acks")

	// The same entries reach the audit topic, each once, for a
	// read_committed reader (the instance owning partition 0 sends them).
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r := &committed.Reader{Addr: kafka.TCP(testenv.Kafka(t)...), Topic: auditTopic, Transport: tr}
	var recs []committed.Record
	testenv.CheckFor(t, 30*time.Second, func() error {
		var err error
		if recs, err = r.ReadAll(context.Background(), 0); err == nil && len(recs) < len(rows) {
			err = fmt.Errorf("%d records in %s, %d entries listed", len(recs), auditTopic, len(rows))
		}
		return err
	})
	seen := map[string]bool{}
	acks := 0
	for _, rec := range recs {
		id, _ := rec.Header("nofly-audit-id")
		if seen[string(id)] {
			t.Errorf("audit entry %s twice in the topic", id)
		}
		seen[string(id)] = true
		var e struct{ Who, Action string }
		if err := json.Unmarshal(rec.Value, &e); err != nil {
			t.Fatal(err)
		}
		if e.Action == "ack" && e.Who == "ops-desk" {
			acks++
		}
	}
	if acks != 1 {
		t.Errorf("%d ack entries of ops-desk in the audit topic, want 1", acks)
	}
	// The alerter made the topic to keep what Redis keeps (--audit-retention).
	kc := &kafka.Client{Addr: kafka.TCP(testenv.Kafka(t)...), Transport: tr}
	dc, err := kc.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: auditTopic, ConfigNames: []string{"retention.ms"}}}})
	if err != nil || len(dc.Resources) != 1 || len(dc.Resources[0].ConfigEntries) != 1 {
		t.Fatalf("describe %s: %+v %v", auditTopic, dc, err)
	}
	if v := dc.Resources[0].ConfigEntries[0].ConfigValue; v != "34560000000" {
		t.Errorf("%s retention.ms = %s, want 34560000000 (400 days, --audit-retention)", auditTopic, v)
	}
}
