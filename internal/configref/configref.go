// Package configref generates docs/configuration.md, the reference of every
// flag of every nofly command, from the commands themselves: it builds each
// command, runs `<command> help` to list its subcommands and
// `<command> <subcommand> -h` for each, and parses the flag package's
// PrintDefaults output — flag, type, usage, default, and the environment
// variable named by the "(env NAME)" that envflag appends to a fallback
// flag's usage. Nothing is imported from the commands (package main), so the
// reference follows the flags wherever their code lives.
//
//	bash scripts/config-reference.sh          # regenerate docs/configuration.md
//	go run ./internal/configref/gen -check     # exit 1 if it is stale
//
// The package's test regenerates the file in memory and fails when the
// committed one differs.
package configref

//go:generate go run ./gen -o ../../docs/configuration.md

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DocPath is the generated file, relative to the module root.
const DocPath = "docs/configuration.md"

// Regenerate is the command that rewrites DocPath, for messages.
const Regenerate = "bash scripts/config-reference.sh"

// Command is one command of the reference.
type Command struct {
	Name    string // the binary's name: the last element of Pkg
	Pkg     string // the package path relative to the module root
	Summary string // one line, Markdown
	// Default is the subcommand the command runs without one; "" means the
	// command has no subcommands (it parses its flags directly). With a
	// default, `<Name> help` must print "usage: <Name> [a|b|c] [flags]" naming
	// every subcommand.
	Default string
}

// Commands are the commands the reference lists, in its order.
var Commands = []Command{
	{Name: "ingest", Pkg: "./cmd/ingest", Default: "serve",
		Summary: "telemetry intake: HTTP (and MAVLink) in, idempotent Kafka producer out ([cmd/ingest/README.md](../cmd/ingest/README.md))"},
	{Name: "alerter", Pkg: "./cmd/alerter", Default: "serve",
		Summary: "the consumer group that raises and clears alarms, the outbox dispatch and the alert API ([cmd/alerter/README.md](../cmd/alerter/README.md))"},
	{Name: "simulate", Pkg: "./cmd/simulate",
		Summary: "a deterministic simulated fleet: posts to ingest or writes NDJSON"},
	{Name: "demo", Pkg: "./cmd/demo",
		Summary: "the whole pipeline on one machine (`make demo`)"},
}

// Volatile is a flag whose default is computed from the clock when the
// command starts, so -h prints another value on every run. The reference
// writes Doc instead; Generate checks that the printed default still is
// Prefix followed by a Unix time within a day of now, so an entry whose
// flag got a fixed default is noticed and removed.
type Volatile struct {
	Command, Sub, Flag string
	Prefix             string // before the Unix seconds, inside the quotes of a string default
	Doc                string // what the default column says
}

// Volatiles are the clock-dependent defaults.
var Volatiles = []Volatile{
	{Command: "ingest", Sub: "loadtest", Flag: "prefix", Prefix: "LOAD-", Doc: "`LOAD-<Unix seconds at start>`"},
	{Command: "demo", Flag: "seed", Doc: "the Unix seconds at start"},
}

// Flag is one flag as -h prints it.
type Flag struct {
	Name string // without dashes
	// Type is the value's name as PrintDefaults prints it: string, int,
	// uint, float, duration, value (any other flag.Value); "" for a bool.
	Type  string
	Usage string // without the "(env NAME)" and "(default …)" suffixes
	Env   string // the variable of "(env NAME)", or ""
	// Default is the default as -h prints it (a string's unquoted), or ""
	// when -h prints none because it is the type's zero value.
	Default    string
	HasDefault bool
	DocDefault string // Markdown for the default column when not derived from Default (Volatiles)
}

// Section is the flags of one command or subcommand.
type Section struct {
	Command Command
	Sub     string // "" for a command without subcommands
	Flags   []Flag
}

// Title is "ingest serve" or "simulate".
func (s Section) Title() string {
	if s.Sub == "" {
		return s.Command.Name
	}
	return s.Command.Name + " " + s.Sub
}

// Options of Generate.
type Options struct {
	Root       string   // the module root
	BinDir     string   // where the commands are built; a fresh temporary directory when ""
	BuildFlags []string // extra go build flags (the test passes -race when it runs with it)
	Now        func() time.Time
}

// Generate builds the commands and returns the reference's Markdown.
func Generate(ctx context.Context, o Options) ([]byte, error) {
	if o.BinDir == "" {
		d, err := os.MkdirTemp("", "configref-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		o.BinDir = d
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := Build(ctx, o.Root, o.BinDir, o.BuildFlags); err != nil {
		return nil, err
	}
	var sections []Section
	for _, c := range Commands {
		s, err := Collect(ctx, filepath.Join(o.BinDir, c.Name), c)
		if err != nil {
			return nil, err
		}
		sections = append(sections, s...)
	}
	if err := applyVolatiles(sections, Volatiles, o.Now()); err != nil {
		return nil, err
	}
	return Render(sections), nil
}

// Build builds every command of Commands into dir with one go build.
func Build(ctx context.Context, root, dir string, flags []string) error {
	args := append([]string{"build", "-buildvcs=false", "-o", dir + string(filepath.Separator)}, flags...)
	for _, c := range Commands {
		args = append(args, c.Pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// run runs bin with args and an empty environment, so that no NOFLY_*
// variable of the caller's shows up as a default, and returns what it
// printed (stdout, then stderr).
func run(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{}
	cmd.Dir = os.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String() + stderr.String(), nil
}

// Collect returns the sections of one built command: one per subcommand
// named by `<bin> help`, or one for a command without subcommands.
func Collect(ctx context.Context, bin string, c Command) ([]Section, error) {
	if c.Default == "" {
		out, err := run(ctx, bin, "-h")
		if err != nil {
			return nil, err
		}
		flags, err := ParseUsage(out)
		if err != nil {
			return nil, fmt.Errorf("%s -h: %w", c.Name, err)
		}
		return []Section{{Command: c, Flags: flags}}, nil
	}
	help, err := run(ctx, bin, "help")
	if err != nil {
		return nil, err
	}
	subs, err := ParseSubcommands(c.Name, help)
	if err != nil {
		return nil, err
	}
	if !contains(subs, c.Default) {
		return nil, fmt.Errorf("%s help does not list the default subcommand %q: %q", c.Name, c.Default, help)
	}
	// Without a subcommand the command runs its default: its -h must be
	// the default's, flag for flag.
	bare, err := run(ctx, bin, "-h")
	if err != nil {
		return nil, err
	}
	bareFlags, err := ParseUsage(bare)
	if err != nil {
		return nil, fmt.Errorf("%s -h: %w", c.Name, err)
	}
	var out []Section
	for _, sub := range subs {
		text, err := run(ctx, bin, sub, "-h")
		if err != nil {
			return nil, err
		}
		flags, err := ParseUsage(text)
		if err != nil {
			return nil, fmt.Errorf("%s %s -h: %w", c.Name, sub, err)
		}
		if sub == c.Default && !sameFlags(flags, bareFlags) {
			return nil, fmt.Errorf("%s -h and %s %s -h list other flags: is %q still the default subcommand?", c.Name, c.Name, sub, sub)
		}
		out = append(out, Section{Command: c, Sub: sub, Flags: flags})
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func sameFlags(a, b []Flag) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// subcommandsRE is the first line of `<command> help`.
var subcommandsRE = regexp.MustCompile(`^usage: (\S+) \[([a-z0-9|-]+)\] \[flags\]`)

// ParseSubcommands reads the subcommands from the first line of
// `<name> help`: "usage: <name> [serve|send|...] [flags]...".
func ParseSubcommands(name, help string) ([]string, error) {
	line, _, _ := strings.Cut(help, "\n")
	m := subcommandsRE.FindStringSubmatch(line)
	if m == nil || m[1] != name {
		return nil, fmt.Errorf("%s help: want a first line \"usage: %s [a|b|...] [flags]...\", got %q", name, name, line)
	}
	subs := strings.Split(m[2], "|")
	for _, s := range subs {
		if s == "" {
			return nil, fmt.Errorf("%s help: an empty subcommand in %q", name, line)
		}
	}
	return subs, nil
}

var (
	flagLineRE = regexp.MustCompile(`^  -([^\s=]+)(?: (\S+))?(?:\t(.*))?$`)
	envRE      = regexp.MustCompile(`(?s)^(.*?)\s*\(env ([A-Za-z_][A-Za-z0-9_]*)\)$`)
)

// ParseUsage parses what a flag.FlagSet's default usage prints: a line
// "Usage of NAME:", then PrintDefaults — per flag "  -name type" and the
// usage on lines indented "    \t" (a one-letter bool flag's on the same
// line after a tab), followed by " (default X)" unless the default is the
// type's zero value. A command with a usage of its own (a description
// first) prints PrintDefaults after a line "Flags:". Any other line is an
// error: a command with another form must be taught here rather than be
// misread.
func ParseUsage(text string) ([]Flag, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	start := -1
	if len(lines) > 0 && strings.HasPrefix(lines[0], "Usage of ") && strings.HasSuffix(lines[0], ":") {
		start = 1
	} else if i := slices.Index(lines, "Flags:"); i >= 0 {
		start = i + 1
	}
	if start < 0 {
		return nil, fmt.Errorf("want the flag package's usage (\"Usage of NAME:\", or a description and \"Flags:\", then its flags), got %.200q", text)
	}
	var flags []Flag
	var usage [][]string
	for _, line := range lines[start:] {
		if rest, ok := strings.CutPrefix(line, "    \t"); ok {
			if len(flags) == 0 {
				return nil, fmt.Errorf("usage text before any flag: %q", line)
			}
			usage[len(usage)-1] = append(usage[len(usage)-1], rest)
			continue
		}
		m := flagLineRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("not a line of the flag package's usage: %q", line)
		}
		flags = append(flags, Flag{Name: m[1], Type: m[2]})
		usage = append(usage, nil)
		if m[3] != "" {
			usage[len(usage)-1] = append(usage[len(usage)-1], m[3])
		}
	}
	for i := range flags {
		if err := flags[i].setUsage(strings.Join(usage[i], "\n")); err != nil {
			return nil, fmt.Errorf("-%s: %w", flags[i].Name, err)
		}
	}
	return flags, nil
}

// setUsage splits the printed usage into the usage, the default and the
// environment variable.
func (f *Flag) setUsage(u string) error {
	const mark = " (default "
	if i := strings.LastIndex(u, mark); i >= 0 && strings.HasSuffix(u, ")") {
		def := u[i+len(mark) : len(u)-1]
		if f.Type == "string" && strings.HasPrefix(def, `"`) {
			s, err := strconv.Unquote(def)
			if err != nil {
				return fmt.Errorf("default %s: %w", def, err)
			}
			def = s
		}
		f.Default, f.HasDefault, u = def, true, u[:i]
	}
	if m := envRE.FindStringSubmatch(u); m != nil {
		u, f.Env = m[1], m[2]
	}
	f.Usage = strings.TrimSpace(u)
	return nil
}

// applyVolatiles replaces each volatile default with its Doc, after
// checking that -h printed a clock-derived value.
func applyVolatiles(sections []Section, vs []Volatile, now time.Time) error {
	for _, v := range vs {
		found := false
		for si := range sections {
			s := &sections[si]
			if s.Command.Name != v.Command || s.Sub != v.Sub {
				continue
			}
			for fi := range s.Flags {
				f := &s.Flags[fi]
				if f.Name != v.Flag {
					continue
				}
				found = true
				digits, ok := strings.CutPrefix(f.Default, v.Prefix)
				n, err := strconv.ParseInt(digits, 10, 64)
				if !ok || err != nil || n < now.Add(-24*time.Hour).Unix() || n > now.Add(24*time.Hour).Unix() {
					return fmt.Errorf("%s --%s: default %q is not %q and the Unix time: drop it from configref.Volatiles", s.Title(), f.Name, f.Default, v.Prefix)
				}
				f.DocDefault = v.Doc
			}
		}
		if !found {
			title := strings.TrimSpace(v.Command + " " + v.Sub)
			return fmt.Errorf("configref.Volatiles: %s has no flag --%s: drop the entry", title, v.Flag)
		}
	}
	return nil
}

// zero is what -h leaves out, by type.
func zero(typ string) string {
	switch typ {
	case "":
		return "false"
	case "int", "uint", "float":
		return "0"
	case "duration":
		return "0s"
	}
	return ""
}

// defaultCell is the Markdown of a flag's default.
func (f Flag) defaultCell() string {
	if f.DocDefault != "" {
		return f.DocDefault
	}
	v := f.Default
	if !f.HasDefault {
		v = zero(f.Type)
	}
	if v == "" {
		return "(empty)"
	}
	return code(v)
}

// typeName is the type column.
func (f Flag) typeName() string {
	switch f.Type {
	case "":
		return "bool"
	}
	return f.Type
}

// code is s as inline code, with a fence longer than any backtick run in s.
func code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// text escapes s for a table cell: pipes, and what Markdown would read as
// HTML or emphasis.
var textEscaper = strings.NewReplacer("\\", "\\\\", "|", "\\|", "<", "&lt;", ">", "&gt;", "*", "\\*", "`", "\\`", "\n", " ")

func text(s string) string { return textEscaper.Replace(s) }

// anchor is GitHub's heading anchor of a title made of lowercase words,
// digits and dashes.
func anchor(title string) string { return strings.ReplaceAll(title, " ", "-") }

// Render writes the reference.
func Render(sections []Section) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Configuration reference\n\n")
	p("<!-- Generated by `%s` (internal/configref) from every command's -h output. Do not edit: change the flag in the code and regenerate; internal/configref's test fails while this file is stale. -->\n\n", Regenerate)
	p("Every flag of every command and subcommand, as the command's `-h` prints it. How the settings fit together in production: [operations.md](operations.md).\n\n")
	p("- A flag given on the command line wins; otherwise its environment variable, when set and not empty; otherwise the default. A repeatable flag takes either its flags or its variable, never a mix.\n")
	p("- A bad value is refused at start, naming the field, its flag and its variable (exit status 2).\n")
	p("- Durations are Go durations (`1m30s`, `168h`); lists are comma separated.\n")
	p("- The type is the flag package's; `value` is a list or another structured value, written as its meaning says.\n")
	p("- Go's flag package takes `--flag value`, `--flag=value` and `-flag`; a bool is set by `--flag` alone or `--flag=false`.\n\n")

	p("| command | subcommands |\n| --- | --- |\n")
	for i := 0; i < len(sections); {
		c := sections[i].Command
		var links []string
		for ; i < len(sections) && sections[i].Command.Name == c.Name; i++ {
			if s := sections[i]; s.Sub != "" {
				l := fmt.Sprintf("[%s](#%s)", s.Sub, anchor(s.Title()))
				if s.Sub == c.Default {
					l += " (default)"
				}
				links = append(links, l)
			}
		}
		name := fmt.Sprintf("[`%s`](#%s)", c.Name, anchor(c.Name))
		if len(links) == 0 {
			links = []string{"—"}
		}
		p("| %s: %s | %s |\n", name, c.Summary, strings.Join(links, ", "))
	}
	p("\n")

	for i, s := range sections {
		if i == 0 || sections[i-1].Command.Name != s.Command.Name {
			p("## %s\n\n", s.Command.Name)
			if s.Command.Default != "" {
				p("`go run %s [subcommand] [flags]`; without a subcommand it runs `%s`.\n\n", s.Command.Pkg, s.Command.Default)
			} else {
				p("`go run %s [flags]`\n\n", s.Command.Pkg)
			}
		}
		if s.Sub != "" {
			p("### %s\n\n", s.Title())
		}
		if len(s.Flags) == 0 {
			p("No flags.\n\n")
			continue
		}
		p("| flag | environment | default | type | meaning |\n| --- | --- | --- | --- | --- |\n")
		for _, f := range s.Flags {
			env := ""
			if f.Env != "" {
				env = code(f.Env)
			}
			p("| %s | %s | %s | %s | %s |\n", code("--"+f.Name), env, f.defaultCell(), f.typeName(), text(f.Usage))
		}
		p("\n")
	}

	// The variables, each with the flags it fills.
	uses := map[string]map[string][]string{} // variable -> flag -> sections
	for _, s := range sections {
		for _, f := range s.Flags {
			if f.Env == "" {
				continue
			}
			if uses[f.Env] == nil {
				uses[f.Env] = map[string][]string{}
			}
			uses[f.Env][f.Name] = append(uses[f.Env][f.Name], fmt.Sprintf("[%s](#%s)", s.Title(), anchor(s.Title())))
		}
	}
	vars := make([]string, 0, len(uses))
	for v := range uses {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	p("## Environment variables\n\n")
	p("Each variable and the flags it is the fallback of.\n\n")
	p("| variable | flag (commands) |\n| --- | --- |\n")
	for _, v := range vars {
		names := make([]string, 0, len(uses[v]))
		for n := range uses[v] {
			names = append(names, n)
		}
		sort.Strings(names)
		var cells []string
		for _, n := range names {
			cells = append(cells, fmt.Sprintf("%s (%s)", code("--"+n), strings.Join(uses[v][n], ", ")))
		}
		p("| %s | %s |\n", code(v), strings.Join(cells, "; "))
	}
	return b.Bytes()
}

var moduleRE = regexp.MustCompile(`(?m)^module\s+github\.com/nofly-dev/nofly\s*$`)

// Root returns the module root at or above dir: the directory whose go.mod
// declares the nofly module.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && moduleRE.Match(b) {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of module github.com/nofly-dev/nofly at or above the working directory")
		}
		dir = parent
	}
}
