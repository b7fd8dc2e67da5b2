package alerterd

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/audit"
)

type recorded []audit.Entry

func (r *recorded) Record(_ context.Context, e audit.Entry) error { *r = append(*r, e); return nil }

// TestAuditAuth: a sign-in and a sign-out of the single sign-on become
// entries naming the person, the role, oidc and the client.
func TestAuditAuth(t *testing.T) {
	var rec recorded
	f := auditAuth(&rec, slog.New(slog.DiscardHandler))
	f(context.Background(), api.AuthEvent{Action: audit.ActionSignIn, Name: "jane@example.org", Role: "operator", Via: audit.ViaOIDC, Remote: "10.0.0.7"})
	f(context.Background(), api.AuthEvent{Action: audit.ActionSignOut, Name: "jane@example.org", Role: "operator", Via: audit.ViaOIDC, Remote: "10.0.0.7"})
	f(context.Background(), api.AuthEvent{Action: audit.ActionSignIn, Name: "mallory", Via: audit.ViaOIDC, Remote: "10.0.0.9", Outcome: audit.OutcomeDenied, Status: 403})
	if len(rec) != 3 {
		t.Fatalf("%d entries, want 3", len(rec))
	}
	if e := rec[2]; e.Action != audit.ActionSignIn || e.Who != "mallory" || e.Outcome != audit.OutcomeDenied || e.Status != 403 || e.Role != "" {
		t.Errorf("refused sign-in: %+v", e)
	}
	for i, action := range []string{audit.ActionSignIn, audit.ActionSignOut} {
		if e := rec[i]; e.Action != action || e.Who != "jane@example.org" || e.Role != "operator" || e.Via != audit.ViaOIDC || e.Client != "10.0.0.7" || e.Outcome != audit.OutcomeOK {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
}
