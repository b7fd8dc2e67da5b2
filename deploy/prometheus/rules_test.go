package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// promtool runs promtool (Debian's, from scripts/prometheus.sh) in this
// directory and fails the test, with its output, when it fails.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.PrometheusBinary(t, "promtool"), args...)
	cmd.Dir = "."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheck: the rules parse, and so does the sample configuration
// that loads them (scripts/prometheus.sh's default).
func TestPromtoolCheck(t *testing.T) {
	out := promtool(t, "check", "rules", "nofly-rules.yml")
	t.Log(strings.TrimSpace(out))
	n := len(testenv.NoflyRules(t))
	if !strings.Contains(out, "SUCCESS: "+strconv.Itoa(n)+" rules found") {
		t.Errorf("promtool found another count of rules than the %d of the file", n)
	}
	promtool(t, "check", "config", "prometheus.yml")
}

// TestPromtoolUnitTests runs nofly-rules.test.yml.
func TestPromtoolUnitTests(t *testing.T) {
	t.Log(strings.TrimSpace(promtool(t, "test", "rules", "nofly-rules.test.yml")))
}

// TestRulesShape: every rule is an alert with a for (an explicit 0m for
// those that fire at once), a severity of critical or warning, a summary
// and a description, and a runbook_url at an anchor of docs/operations.md
// (a heading's GitHub slug); and the unit tests have, for every alert, a
// time it fires and a time it does not.
func TestRulesShape(t *testing.T) {
	rules := testenv.NoflyRules(t)
	anchors := headingSlugs(t, filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	const runbooks = "https://github.com/nofly-dev/nofly/blob/main/docs/operations.md#"
	var names []string
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("a recording rule (%s): this file holds alerts", r.Record)
			continue
		}
		if slices.Contains(names, r.Alert) {
			t.Errorf("%s: two rules of that name", r.Alert)
		}
		names = append(names, r.Alert)
		if r.For == nil {
			t.Errorf("%s: no for: (write for: 0m for one that fires at once)", r.Alert)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		u := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(u, runbooks)
		switch {
		case !ok:
			t.Errorf("%s: runbook_url %q is not an anchor of %s", r.Alert, u, runbooks)
		case !anchors[anchor]:
			t.Errorf("%s: runbook_url's anchor #%s is no heading of docs/operations.md", r.Alert, anchor)
		case anchor != strings.ToLower(r.Alert):
			t.Errorf("%s: runbook anchor #%s, want the alert's own heading #%s", r.Alert, anchor, strings.ToLower(r.Alert))
		}
	}

	b, err := os.ReadFile("nofly-rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, g := range tests.Tests {
		for _, a := range g.AlertRuleTest {
			if !slices.Contains(names, a.Alertname) {
				t.Errorf("the unit tests test %s, which no rule is", a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, n := range names {
		if !fires[n] || !silent[n] {
			t.Errorf("%s: the unit tests must see it fire and not fire (fire: %v, not: %v)", n, fires[n], silent[n])
		}
	}
}

// headingSlugs returns the GitHub anchors of a Markdown file's headings
// (lower case, spaces to dashes, punctuation but - and _ dropped).
func headingSlugs(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	out := map[string]bool{}
	fence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		h = strings.ReplaceAll(h, "`", "")
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}
