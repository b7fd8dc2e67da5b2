package configref

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/envflag"
)

// TestDocIsCurrent regenerates docs/configuration.md from the commands'
// -h output and fails when the committed file differs. The build is a
// plain one even under -race: scripts/test.sh's go vet ./... has compiled
// every dependency already, so only the four main packages are compiled
// and linked (a few seconds; a race build would compile them all again).
func TestDocIsCurrent(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	got, err := Generate(ctx, Options{Root: root, BinDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d commands and read their -h in %v", len(Commands), time.Since(start).Round(time.Millisecond))
	want, err := os.ReadFile(filepath.Join(root, DocPath))
	if err != nil {
		t.Fatalf("%v: run %s", err, Regenerate)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale (the commands' flags changed): run %s and commit the file\n%s", DocPath, Regenerate, firstDiff(want, got))
	}
}

// firstDiff names the first line where have and want differ.
func firstDiff(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(h) || i < len(w); i++ {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return "first difference, line " + strconv.Itoa(i+1) + ":\n  committed: " + hl + "\n  generated: " + wl
		}
	}
	return "(the files differ only in their last newline)"
}

// usageOf is what a flag set with name and flags prints for -h: the input
// ParseUsage reads, printed by the flag package itself.
func usageOf(t *testing.T, name string, define func(fs *flag.FlagSet)) string {
	t.Helper()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	define(fs)
	if err := fs.Parse([]string{"-h"}); err != flag.ErrHelp {
		t.Fatalf("-h: %v", err)
	}
	return out.String()
}

func TestParseUsage(t *testing.T) {
	cases := []struct {
		name   string
		define func(fs *flag.FlagSet)
		want   []Flag
	}{
		{"string with env and default", func(fs *flag.FlagSet) {
			fs.String("addr", ":8080", "HTTP listen address (env NOFLY_INGEST_ADDR)")
		}, []Flag{{Name: "addr", Type: "string", Usage: "HTTP listen address", Env: "NOFLY_INGEST_ADDR", Default: ":8080", HasDefault: true}}},
		{"zero defaults are not printed", func(fs *flag.FlagSet) {
			fs.Bool("keep", false, "leave it")
			fs.Int("n", 0, "how many")
			fs.Duration("age", 0, "bound; 0 = none")
			fs.String("file", "", "input (required)")
		}, []Flag{
			{Name: "age", Type: "duration", Usage: "bound; 0 = none"},
			{Name: "file", Type: "string", Usage: "input (required)"},
			{Name: "keep", Usage: "leave it"},
			{Name: "n", Type: "int", Usage: "how many"},
		}},
		{"a true bool prints its default", func(fs *flag.FlagSet) {
			fs.Bool("hold", true, "keep running")
		}, []Flag{{Name: "hold", Usage: "keep running", Default: "true", HasDefault: true}}},
		{"one-letter bool: usage on the flag's line", func(fs *flag.FlagSet) {
			fs.Bool("v", false, "verbose (env X_V)")
		}, []Flag{{Name: "v", Usage: "verbose", Env: "X_V"}}},
		{"multi-line usage", func(fs *flag.FlagSet) {
			fs.Int("batch", 3, "first line\nsecond line (env X_BATCH)")
		}, []Flag{{Name: "batch", Type: "int", Usage: "first line\nsecond line", Env: "X_BATCH", Default: "3", HasDefault: true}}},
		{"a flag.Value prints its default unquoted", func(fs *flag.FlagSet) {
			l := envflag.List{"127.0.0.1:9092", "b:2"}
			fs.Var(&l, "brokers", "bootstrap brokers (env X_BROKERS)")
		}, []Flag{{Name: "brokers", Type: "value", Usage: "bootstrap brokers", Env: "X_BROKERS", Default: "127.0.0.1:9092,b:2", HasDefault: true}}},
		{"a quoted default with parentheses and quotes", func(fs *flag.FlagSet) {
			fs.String("zones", `a "b" (c).geojson`, "zone set")
		}, []Flag{{Name: "zones", Type: "string", Usage: "zone set", Default: `a "b" (c).geojson`, HasDefault: true}}},
		{"prose that looks like a default is usage", func(fs *flag.FlagSet) {
			fs.Bool("hold", false, "stay up (default: when stdout is a terminal)")
		}, []Flag{{Name: "hold", Usage: "stay up (default: when stdout is a terminal)"}}},
		{"a variable named inside the usage is no fallback", func(fs *flag.FlagSet) {
			fs.String("zone-history", "", "a file, or a URL (bearer token from NOFLY_API_TOKEN)")
		}, []Flag{{Name: "zone-history", Type: "string", Usage: "a file, or a URL (bearer token from NOFLY_API_TOKEN)"}}},
		{"numbers", func(fs *flag.FlagSet) {
			fs.Float64("rate", 1.5, "per second")
			fs.Uint64("seed", 7, "seed")
			fs.Int("partition", -1, "partition")
		}, []Flag{
			{Name: "partition", Type: "int", Usage: "partition", Default: "-1", HasDefault: true},
			{Name: "rate", Type: "float", Usage: "per second", Default: "1.5", HasDefault: true},
			{Name: "seed", Type: "uint", Usage: "seed", Default: "7", HasDefault: true},
		}},
		{"no flags", func(fs *flag.FlagSet) {}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := usageOf(t, "cmd sub", c.define)
			got, err := ParseUsage(text)
			if err != nil {
				t.Fatalf("%v\ninput:\n%s", err, text)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v\ninput:\n%s", got, c.want, text)
			}
		})
	}
}

// TestParseUsageEnvflag: the "(env NAME)" that envflag.Field.Register
// appends is what ParseUsage takes as the variable.
func TestParseUsageEnvflag(t *testing.T) {
	type cfg struct{ Topic string }
	fields := envflag.Fields[cfg]{{Name: "Topic", Flag: "topic", Env: "NOFLY_TELEMETRY_TOPIC", Usage: "telemetry topic"}}
	fs := envflag.New("x")
	var out bytes.Buffer
	fs.SetOutput(&out)
	c := cfg{Topic: "telemetry.positions"}
	fields.Register(fs, &c)
	if err := fs.Parse([]string{"-h"}, func(string) string { return "" }); err != flag.ErrHelp {
		t.Fatal(err)
	}
	got, err := ParseUsage(out.String())
	want := []Flag{{Name: "topic", Type: "string", Usage: "telemetry topic", Env: "NOFLY_TELEMETRY_TOPIC", Default: "telemetry.positions", HasDefault: true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v\ninput:\n%s", got, err, want, out.String())
	}
}

// TestParseUsageAfterDescription: a command's own usage (a description,
// then "Flags:" and PrintDefaults) is read from its flags on; a description
// without that line is refused.
func TestParseUsageAfterDescription(t *testing.T) {
	got, err := ParseUsage("Usage: simulate [flags]\n\nFlies drones.\n  -not a flag line\n\nFlags:\n  -drones int\n    \tnumber of drones (default 20)\n")
	want := []Flag{{Name: "drones", Type: "int", Usage: "number of drones", Default: "20", HasDefault: true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	if _, err := ParseUsage("Usage: simulate [flags]\n  -drones int\n"); err == nil {
		t.Fatal("a usage with neither \"Usage of\" nor \"Flags:\" was accepted")
	}
}

func TestParseUsageRefuses(t *testing.T) {
	cases := []struct{ name, text, msg string }{
		{"not a usage", `{"openapi": "3.1.0"}`, "want the flag package's usage"},
		{"empty", "", "want the flag package's usage"},
		{"a line of another shape", "Usage of x:\n  -a string\n    \tfine\nExamples:\n", `not a line of the flag package's usage: "Examples:"`},
		{"usage before a flag", "Usage of x:\n    \tdangling\n", "usage text before any flag"},
		{"a bad quoted default", "Usage of x:\n  -a string\n    \tu (default \"open)\n", "-a: default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseUsage(c.text)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want one with %q", err, c.msg)
			}
		})
	}
}

func TestParseSubcommands(t *testing.T) {
	cases := []struct {
		name, cmd, help string
		want            []string
		err             string
	}{
		{"alerter", "alerter", "usage: alerter [serve|replay|redrive|api-token|openapi] [flags]; alerter <command> -h for its flags\n",
			[]string{"serve", "replay", "redrive", "api-token", "openapi"}, ""},
		{"one", "x", "usage: x [serve] [flags]\n", []string{"serve"}, ""},
		{"another command's name", "ingest", "usage: alerter [serve] [flags]\n", nil, "want a first line"},
		{"no [flags] after the list", "x", "usage: x [serve|send]\n", nil, "want a first line"},
		{"no list", "ingest", "usage: ingest [flags]\n", nil, "want a first line"},
		{"an empty name", "x", "usage: x [serve||send] [flags]\n", nil, "an empty subcommand"},
		{"prose", "x", "x runs things\n", nil, "want a first line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSubcommands(c.cmd, c.help)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestApplyVolatiles(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	sec := func(name, sub, def string) []Section {
		return []Section{{Command: Command{Name: name}, Sub: sub, Flags: []Flag{
			{Name: "prefix", Type: "string", Default: def, HasDefault: true},
			{Name: "other", Type: "int", Default: "5", HasDefault: true},
		}}}
	}
	v := []Volatile{{Command: "ingest", Sub: "loadtest", Flag: "prefix", Prefix: "LOAD-", Doc: "`LOAD-<t>`"}}
	cases := []struct {
		name     string
		sections []Section
		err      string
	}{
		{"the clock, now", sec("ingest", "loadtest", "LOAD-1800000000"), ""},
		{"the clock, an hour ago", sec("ingest", "loadtest", "LOAD-1799996400"), ""},
		{"a fixed default now", sec("ingest", "loadtest", "LOAD-1"), "is not \"LOAD-\" and the Unix time"},
		{"another prefix", sec("ingest", "loadtest", "RUN-1800000000"), "is not \"LOAD-\" and the Unix time"},
		{"the flag is gone", sec("ingest", "send", "LOAD-1800000000"), "ingest loadtest has no flag --prefix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := applyVolatiles(c.sections, v, now)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.sections[0].Flags[0].defaultCell(); got != "`LOAD-<t>`" {
				t.Fatalf("default cell %q", got)
			}
			if got := c.sections[0].Flags[1].defaultCell(); got != "`5`" {
				t.Fatalf("another flag's default cell changed: %q", got)
			}
		})
	}
}

func TestDefaultCell(t *testing.T) {
	cases := []struct {
		f    Flag
		want string
	}{
		{Flag{Type: "string", Default: ":8080", HasDefault: true}, "`:8080`"},
		{Flag{Type: "string"}, "(empty)"},
		{Flag{Type: "value"}, "(empty)"},
		{Flag{}, "`false`"},
		{Flag{Default: "true", HasDefault: true}, "`true`"},
		{Flag{Type: "int"}, "`0`"},
		{Flag{Type: "float"}, "`0`"},
		{Flag{Type: "duration"}, "`0s`"},
		{Flag{Type: "string", Default: "a`b", HasDefault: true}, "``a`b``"},
		{Flag{Type: "string", Default: "x", HasDefault: true, DocDefault: "the time"}, "the time"},
	}
	for _, c := range cases {
		if got := c.f.defaultCell(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
}

func TestRender(t *testing.T) {
	ing := Command{Name: "ingest", Pkg: "./cmd/ingest", Default: "serve", Summary: "intake"}
	sim := Command{Name: "simulate", Pkg: "./cmd/simulate", Summary: "fleet"}
	doc := string(Render([]Section{
		{Command: ing, Sub: "serve", Flags: []Flag{
			{Name: "brokers", Type: "value", Usage: "brokers, a|b", Env: "NOFLY_KAFKA_BROKERS", Default: "127.0.0.1:9092", HasDefault: true},
			{Name: "feed-keys", Type: "string", Usage: "needs Authorization: Bearer <key>; * any", Env: "NOFLY_INGEST_FEED_KEYS"},
		}},
		{Command: ing, Sub: "feed-key"},
		{Command: sim, Flags: []Flag{{Name: "ingest", Type: "string", Usage: "base URL", Env: "NOFLY_INGEST_URL", Default: "http://x", HasDefault: true},
			{Name: "brokers", Type: "string", Usage: "brokers", Env: "NOFLY_KAFKA_BROKERS", Default: "k:1", HasDefault: true}}},
	}))
	for _, want := range []string{
		"| [`ingest`](#ingest): intake | [serve](#ingest-serve) (default), [feed-key](#ingest-feed-key) |\n",
		"| [`simulate`](#simulate): fleet | — |\n",
		"## ingest\n\n`go run ./cmd/ingest [subcommand] [flags]`; without a subcommand it runs `serve`.\n\n### ingest serve\n\n",
		"| `--brokers` | `NOFLY_KAFKA_BROKERS` | `127.0.0.1:9092` | value | brokers, a\\|b |\n",
		"| `--feed-keys` | `NOFLY_INGEST_FEED_KEYS` | (empty) | string | needs Authorization: Bearer &lt;key&gt;; \\* any |\n",
		"### ingest feed-key\n\nNo flags.\n\n",
		"## simulate\n\n`go run ./cmd/simulate [flags]`\n\n| flag |",
		"| `NOFLY_KAFKA_BROKERS` | `--brokers` ([ingest serve](#ingest-serve), [simulate](#simulate)) |\n",
		"| `NOFLY_INGEST_URL` | `--ingest` ([simulate](#simulate)) |\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the reference lacks %q\n---\n%s", want, doc)
		}
	}
	// Variables are listed in order.
	_, vars, _ := strings.Cut(doc, "## Environment variables")
	if i, j := strings.Index(vars, "| `NOFLY_INGEST_FEED_KEYS` |"), strings.Index(vars, "| `NOFLY_KAFKA_BROKERS` |"); i < 0 || j < i {
		t.Errorf("variables out of order (%d, %d)", i, j)
	}
}

func TestRoot(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "configref", "configref.go")); err != nil {
		t.Fatalf("root %s: %v", root, err)
	}
	if _, err := Root(t.TempDir()); err == nil {
		t.Fatal("a directory outside the module has no root")
	}
}
