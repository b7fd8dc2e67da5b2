// Package prometheus holds the tests of nofly's Prometheus rules
// (nofly-rules.yml, beside them): promtool's syntax check and its unit
// tests (nofly-rules.test.yml) run in the plain `go test ./...` that
// `make test` runs, so a rule that no longer parses, fires where it must
// not or stays silent where it must fire fails the build, and so does a
// rule without its severity, annotations or runbook in
// docs/operations.md. That the rules' metrics are ones nofly exports, and
// that a real Prometheus fires the lag rule when the alerter stops, is
// proven where running alerters are at hand (internal/alerterd,
// TestPrometheusLagRule).
//
// The package has no code outside its tests.
package prometheus
