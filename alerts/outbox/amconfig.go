package outbox

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/internal/redislayout"
)

// Alertmanager configures the outputs to Prometheus Alertmanager: every
// active alarm is an alert there (docs/operations.md, "Alarms to people:
// Alertmanager"), and an ack in nofly silences it.
type Alertmanager struct {
	// URLs of the Alertmanagers, each the base its API is under
	// (http[s]://host:port[/route-prefix]); every one gets every alert (an
	// HA pair). Each is an output of its own, with its own cursor.
	URLs []string
	// Severity maps a zone category to the alert's severity label; "*"
	// names the rest. Default ParseSeverity(DefaultAlertmanagerSeverity).
	Severity map[string]string
	// Refresh is how often the active alarms are posted again (and at each
	// start): firing alerts carry endsAt = now + 4 × Refresh, so an alarm
	// that nobody refreshes (an alerter that stopped) resolves after that.
	// Default 1m.
	Refresh time.Duration
	// SilenceMax bounds an ack's silence: it ends at the clear (nofly
	// expires it) or this long after the ack. Default 24h.
	SilenceMax time.Duration
	// DashboardURL is where the dashboard is served (the first
	// --public-url): an alert's dashboard annotation and generatorURL are
	// DashboardURL/#alarm=<alarm_id>. Empty: no link.
	DashboardURL string
	// Timeout bounds one request. Default 10s.
	Timeout time.Duration
	// BackoffMax caps the pause between failed attempts (from
	// Config.Backoff, doubling). Default 10s: Alertmanager is a service
	// of one's own, and a short outage should not delay alarms long.
	BackoffMax time.Duration
	// MaxBacklog bounds the outbox entries an output may fall behind while
	// its Alertmanager fails: past it, the output drops them (counted,
	// nofly_alertmanager_drops_total{reason="backlog"}), moves its cursor to
	// the stream's end, and re-posts the active alarms and their silences
	// from the alarm index once the Alertmanager answers again (a dropped
	// clear is then resolved by that reconciliation, or by its endsAt).
	// Default 10000.
	MaxBacklog int64
}

// DefaultAlertmanagerSeverity is the default category=severity map.
const DefaultAlertmanagerSeverity = "restricted=critical,prohibited=critical,*=warning"

var labelValueRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// ParseSeverity reads "category=severity,...": "*" names every other
// category; a category or severity is 1-64 of [A-Za-z0-9_.:-]. Without "*"
// another category gets "warning".
func ParseSeverity(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		cat, sev, ok := strings.Cut(p, "=")
		cat, sev = strings.TrimSpace(cat), strings.TrimSpace(sev)
		if !ok || (cat != "*" && !labelValueRE.MatchString(cat)) || !labelValueRE.MatchString(sev) {
			return nil, fmt.Errorf("%q is not category=severity (1-64 of [A-Za-z0-9_.:-], or *=severity)", p)
		}
		if _, dup := m[cat]; dup {
			return nil, fmt.Errorf("category %q twice", cat)
		}
		m[cat] = sev
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%q names no category", s)
	}
	return m, nil
}

// FormatSeverity writes a map as ParseSeverity reads it, categories in
// order, "*" last.
func FormatSeverity(m map[string]string) string {
	var cats []string
	for c := range m {
		if c != "*" {
			cats = append(cats, c)
		}
	}
	sort.Strings(cats)
	if _, ok := m["*"]; ok {
		cats = append(cats, "*")
	}
	parts := make([]string, len(cats))
	for i, c := range cats {
		parts[i] = c + "=" + m[c]
	}
	return strings.Join(parts, ",")
}

// AlertmanagerName is the name of the output to the Alertmanager at u in
// metrics and Redis keys: its host, port and path ("am1:9093",
// "127.0.0.1:9093/am"), so a cursor stays with its Alertmanager whatever
// the order of the URLs.
func AlertmanagerName(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	return pu.Host + strings.TrimRight(pu.Path, "/")
}

// ValidateAlertmanagerURL reports why u is not an Alertmanager base URL.
func ValidateAlertmanagerURL(u string) error {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" || pu.User != nil {
		return fmt.Errorf("%q: want http[s]://host[:port][/route-prefix]", u)
	}
	return nil
}

func (a *Alertmanager) setDefaults() {
	if a.Severity == nil {
		a.Severity, _ = ParseSeverity(DefaultAlertmanagerSeverity)
	}
	if a.Refresh == 0 {
		a.Refresh = time.Minute
	}
	if a.SilenceMax == 0 {
		a.SilenceMax = 24 * time.Hour
	}
	if a.Timeout == 0 {
		a.Timeout = 10 * time.Second
	}
	if a.BackoffMax == 0 {
		a.BackoffMax = 10 * time.Second
	}
	if a.MaxBacklog == 0 {
		a.MaxBacklog = 10000
	}
	a.DashboardURL = strings.TrimRight(a.DashboardURL, "/")
}

func (a Alertmanager) validate() error {
	seen := map[string]bool{}
	for i, u := range a.URLs {
		if err := ValidateAlertmanagerURL(u); err != nil {
			return fieldError(fmt.Sprintf("Alertmanager.URLs[%d]", i), err.Error())
		}
		n := AlertmanagerName(u)
		if seen[n] {
			return fieldError(fmt.Sprintf("Alertmanager.URLs[%d]", i), fmt.Sprintf("%q names %s twice", u, n))
		}
		seen[n] = true
	}
	switch {
	case len(a.URLs) == 0:
		return nil
	case a.Refresh < time.Second:
		return fieldError("Alertmanager.Refresh", "must be at least 1s")
	case a.SilenceMax < time.Minute:
		return fieldError("Alertmanager.SilenceMax", "must be at least 1m")
	case a.Timeout < 0 || a.BackoffMax < 0 || a.MaxBacklog < 0:
		return fieldError("Alertmanager", "Timeout, BackoffMax and MaxBacklog must not be negative")
	}
	if a.DashboardURL != "" {
		if u, err := url.Parse(a.DashboardURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldError("Alertmanager.DashboardURL", fmt.Sprintf("%q: want an absolute http or https URL", a.DashboardURL))
		}
	}
	return nil
}

// outputName is the Redis and metrics name of the output to u.
func alertmanagerOutput(u string) string { return redislayout.AlertmanagerOutput(AlertmanagerName(u)) }
