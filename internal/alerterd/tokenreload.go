package alerterd

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/audit"
	"github.com/nofly-dev/nofly/internal/reloadstat"
)

// tokenReloader reads --api-tokens again on SIGHUP and swaps the set the
// API checks requests against (api.TokenStore): the next request sees the
// new set, and a stream of a removed or changed token is ended. A file that
// does not parse is logged (file and line, never a token or hash) and
// counted, and the tokens in use stay. Only SIGHUP reloads: the file is not
// watched, so a half-written file is never read by surprise.
type tokenReloader struct {
	store  *api.TokenStore
	audit  audit.Recorder // nil: not audited (a test)
	log    *slog.Logger
	stat   *reloadstat.Stat
	tokens *prometheus.GaugeVec
}

const (
	tokenReloadsHelp = "Reads of the --api-tokens file on SIGHUP, by result: ok (the file's tokens are in use) or error (it did not parse or read; the tokens in use stayed)."
	tokenLastHelp    = "1 if the last SIGHUP's read of --api-tokens took the file (or there was none), 0 if it failed and the tokens before it are still in use (NoflyTokenReloadFailed)."
)

// newTokenReloader is nil without a token file (nothing to reload).
func newTokenReloader(store *api.TokenStore, reg prometheus.Registerer, log *slog.Logger) *tokenReloader {
	if store == nil {
		reloadstat.None(reg, "nofly_api_tokens", tokenLastHelp)
		return nil
	}
	r := &tokenReloader{
		store: store, log: log,
		stat: reloadstat.New(reg, "nofly_api_tokens", tokenReloadsHelp, tokenLastHelp),
		tokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nofly_api_tokens",
			Help: "API tokens in use, by role (viewer, operator, admin).",
		}, []string{"role"}),
	}
	reg.MustRegister(r.tokens)
	r.count(store.Tokens())
	return r
}

// withAudit makes every reload an entry of rec's audit trail; safe on a
// nil reloader.
func (r *tokenReloader) withAudit(rec audit.Recorder) *tokenReloader {
	if r != nil {
		r.audit = rec
	}
	return r
}

// count sets the gauge of every role, a role without tokens to 0.
func (r *tokenReloader) count(ts *api.Tokens) {
	n := map[api.Role]int{}
	for _, t := range ts.Tokens {
		n[t.Role]++
	}
	for _, role := range []api.Role{api.RoleViewer, api.RoleOperator, api.RoleAdmin} {
		r.tokens.WithLabelValues(role.String()).Set(float64(n[role]))
	}
}

// reload reads the file again; it is safe on a nil reloader.
func (r *tokenReloader) reload(ctx context.Context) {
	if r == nil {
		return
	}
	ts, ch, err := r.store.Reload()
	r.stat.Done(err)
	if err != nil {
		r.log.Error("api tokens: reload failed, the tokens in use are unchanged", "api_tokens", ts.Path, "error", err)
		r.auditTokenReload(ctx, ts.Path, 0, ch, err)
		return
	}
	r.count(ts)
	r.log.Info("api tokens: reloaded", "api_tokens", ts.Path, "tokens", len(ts.Tokens),
		"added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
	r.auditTokenReload(ctx, ts.Path, len(ts.Tokens), ch, nil)
}

// auditTokenReload is where a reload joins the audit trail: action
// token_reload by the alerter itself (via system), target the file, the
// detail the counts and names added, removed and changed (at most
// auditNames of each, so the entry stays within audit.MaxDetail), or the
// error (file and line, never a token or hash). An entry that cannot be
// written is logged; the reload stands.
func (r *tokenReloader) auditTokenReload(ctx context.Context, path string, n int, ch api.TokenChanges, rerr error) {
	if r.audit == nil {
		return
	}
	host, _ := os.Hostname()
	d := map[string]any{"instance": host}
	e := audit.Entry{Who: "alerter", Via: audit.ViaSystem, Action: audit.ActionTokenReload, Target: path, Outcome: audit.OutcomeOK}
	if rerr != nil {
		e.Outcome = audit.OutcomeFailed
		d["error"] = audit.Clip(rerr.Error())
	} else {
		d["tokens"] = n
		for k, names := range map[string][]string{"added": ch.Added, "removed": ch.Removed, "changed": ch.Changed} {
			d[k+"_count"] = len(names)
			d[k] = append([]string{}, names[:min(len(names), auditNames)]...) // [] rather than null
		}
	}
	e.Detail, _ = json.Marshal(d)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.audit.Record(ctx, e); err != nil {
		r.log.Warn("api tokens: the reload's audit entry was not written", "error", err)
	}
}

// auditNames is the most names of each kind an audit entry lists (64
// bytes a name: 3 × 30 of them stay under audit.MaxDetail).
const auditNames = 30
