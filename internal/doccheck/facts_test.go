package doccheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// oldReadme is the README as it was before issue 34 split it into docs/,
// kept verbatim: the facts a reader could find there, which the split
// promised not to lose.
const oldReadme = "testdata/README-before-issue-34.md"

// rewording is a fact of the old README that its new home says otherwise
// (a "below" that became a link, a corrected path), and where it says it.
type rewording struct {
	old  string // the fact as splitFacts cuts it from the old README
	file string // the new home, from the repository's root
	new  string // its Markdown there, links relative to file
}

// reworded is kept small on purpose: a moved fact keeps its words.
var reworded = []rewording{
	// issue 33: the token file is read again on SIGHUP, no restart needed.
	{
		old:  "# (the alerter reads tokens.txt at start: restart it after adding a token)",
		file: "docs/api.md",
		new:  "# (the alerter reads tokens.txt at start and again on SIGHUP: kill -HUP it after adding a token)",
	},
	// a row of the quick start: the Docker section is docs/docker.md now.
	{
		old:  "| the services in containers (Kafka, Redis, ingest, alerter) | `docker compose up --build` ([Docker](#docker)) |",
		file: "docs/demo.md",
		new:  "| the services in containers (Kafka, Redis, ingest, alerter) | `docker compose up --build` ([Docker](docker.md)) |",
	},
	// the commands' table: "above" was the README's demo section.
	{
		old:  "| `cmd/demo` | the README's first command: everything in one process, on the embedded default or (`--real`) the real services | above |",
		file: "docs/pipeline.md",
		new:  "| `cmd/demo` | the README's first command: everything in one process, on the embedded default or (`--real`) the real services | [`docs/demo.md`](demo.md) |",
	},
	// the deviations, now in design.md: "above" was the README's demo section.
	{
		old:  "**The demo** runs on an embedded broker and Redis by default (kfake and miniredis, \"The embedded default\" above), which keep nothing across restarts; `--real` or `NOFLY_KAFKA_BROKERS` / `NOFLY_REDIS_ADDR` run it on the real services. miniredis's `XINFO STREAM` is completed by a shim whose `entries-added` counts the XADDs it saw: an XADD that failed still counts, so the API may answer 410 (trimmed) where Redis would not, never the reverse.",
		file: "docs/design.md",
		new:  "**The demo** runs on an embedded broker and Redis by default (kfake and miniredis, [the embedded default](demo.md#the-embedded-default)), which keep nothing across restarts;",
	},
	// corrected: the tests that hold the table to the flags are in internal/ingestd and internal/alerterd.
	{
		old:  "The services' table (the commands' own READMEs say more about each; tests in `cmd/ingest` and `cmd/alerter` fail if a flag is missing here):",
		file: "docs/settings.md",
		new:  "The services' table (the commands' own READMEs say more about each; tests in `internal/ingestd` and `internal/alerterd` fail if a flag is missing here):",
	},
	// "the scripts above" were the README's services section.
	{
		old:  "No Docker engine runs on the machines this project is developed and tested on (only the client is installed), so the compose file is checked with `docker-compose config` and never run in CI; the tests use the scripts above.",
		file: "docs/docker.md",
		new:  "No Docker engine runs on the machines this project is developed and tested on (only the client is installed), so the compose file is checked with `docker-compose config` and never run in CI; the tests use the scripts of [testing.md](testing.md#services-real-kafka-and-redis-started-by-our-own-scripts).",
	},
	// the docs/ row names the index and the files the README's sections moved to.
	{
		old:  "| `docs/` | [`design.md`](docs/design.md) (the living design), [`exactly-once.md`](docs/exactly-once.md), [`redis-layout.md`](docs/redis-layout.md), [`operations.md`](docs/operations.md) (running it in production), [`configuration.md`](docs/configuration.md) (every flag, generated) |",
		file: "docs/layout.md",
		new:  "| `docs/` | [`README.md`](README.md) (the index: every document, one line each), [`design.md`](design.md) (the living design), [`exactly-once.md`](exactly-once.md), [`redis-layout.md`](redis-layout.md), [`operations.md`](operations.md) (running it in production), [`configuration.md`](configuration.md) (every flag, generated), and one file per topic of the README before issue 34: the demo, the pipeline, the dashboard, the alert API, the telemetry formats, the services' settings, testing, Docker and this layout |",
	},
	// fuzzing moved to scripts/fuzz.sh with a shorter time for stable
	// targets (issue 34), and the brokers gained KAFKA_JVM_OPTS.
	{
		old:  "The scripts read: `KAFKA_VERSION` (4.4.0), `KAFKA_PORT` (9092), `KAFKA_CONTROLLER_PORT` (port + 1), `KAFKA_DIR`, `KAFKA_HEAP_OPTS`, `KAFKA_EXTRA_PROPS` (lines added to `server.properties`; the broker logs to `$KAFKA_DIR/server.log`, appended across restarts), `REDIS_PORT` (6379), `REDIS_DIR`, `NOFLY_CACHE` (`~/.cache/nofly`); `scripts/test.sh` reads `FUZZTIME` (20s per fuzz target); `scripts/schemathesis.sh` (a live ingest against `internal/ingestd/openapi.yaml`) reads `SCHEMATHESIS_EXAMPLES` (200 per operation) and `SCHEMATHESIS_SEED`; `scripts/schemathesis-alerter.sh` (a live alerter, real Kafka and Redis, alarms from a recorded track, against `/openapi.json`) reads `SCHEMATHESIS_ALERTER_EXAMPLES` (50 per operation and phase) and `SCHEMATHESIS_SEED` (15).",
		file: "docs/testing.md",
		new:  "The scripts read: `KAFKA_VERSION` (4.4.0), `KAFKA_PORT` (9092), `KAFKA_CONTROLLER_PORT` (port + 1), `KAFKA_DIR`, `KAFKA_HEAP_OPTS`, `KAFKA_EXTRA_PROPS` (lines added to `server.properties`; the broker logs to `$KAFKA_DIR/server.log`, appended across restarts), `REDIS_PORT` (6379), `REDIS_DIR`, `NOFLY_CACHE` (`~/.cache/nofly`); `scripts/test.sh` and `scripts/fuzz.sh` (`make fuzz`, every fuzz target; `make fuzz FUZZ=FuzzHandler FUZZTIME=10m` for a long hunt) read `FUZZTIME` (20s per fuzz target) and `FUZZTIME_STABLE` (5s for the targets in `scripts/fuzz-stable.txt`, whose coverage stopped growing within seconds — the file gives the measurement); `KAFKA_JVM_OPTS` adds JVM flags to a broker; `scripts/schemathesis.sh` (a live ingest against `internal/ingestd/openapi.yaml`) reads `SCHEMATHESIS_EXAMPLES` (200 per operation) and `SCHEMATHESIS_SEED`; `scripts/schemathesis-alerter.sh` (a live alerter, real Kafka and Redis, alarms from a recorded track, against `/openapi.json`) reads `SCHEMATHESIS_ALERTER_EXAMPLES` (50 per operation and phase) and `SCHEMATHESIS_SEED` (15).",
	},
	// the commands' row gained approachreport (issue 28).
	{
		old:  "| `cmd/` | `ingest`, `alerter` (each only calls its `internal/…d` package's `Main`), `simulate`, `demo`, `bench` (end-to-end benchmark), `benchcompare` (nofly against Tile38) |",
		file: "docs/layout.md",
		new:  "| `cmd/` | `ingest`, `alerter` (each only calls its `internal/…d` package's `Main`), `simulate`, `demo`, `bench` (end-to-end benchmark), `benchcompare` (nofly against Tile38), `approachreport` (approaching warnings on the fleet) |",
	},
	// the positions stream became the map view's (issue 29).
	{
		old:  "**Live**: alarm events from `/v1/events/stream`, resumed with `Last-Event-ID` after a reconnect (nothing missed or shown twice); drone positions from `GET /v1/map/positions`, at most one update per drone per second whatever the telemetry rate; the header shows *live*, *reconnecting…* or *stale since T*, and the zone-set version in force (zones are redrawn when it changes).",
		file: "docs/dashboard.md",
		new:  "positions from `GET /v1/map/positions`, at most one update per drone per\n  second whatever the telemetry rate, for the map's view only",
	},
	// a drones page reads the drone indexes, not every hash (issue 29).
	{
		old:  "A list page reads every partition's drone hash (`HSCAN`, pipelined across partitions), so its cost grows with the number of drones.",
		file: "docs/api.md",
		new:  "A list page reads the\nnext ids by range, or the drones within `bbox` from the geo sets, then the\npage's states: its cost grows with the page, not with the drones known",
	},
	// the CI time measured after issue 34, with the steps' table below it;
	// measured again after issues 31-33.
	{
		old:  "`make test` is what CI runs (`.ci/run`); about 14–20 minutes on 2 cores.",
		file: "docs/testing.md",
		new:  "`make test` is what CI runs (`.ci/run`); about 19–21 minutes on 2 cores, over the 15 aimed at (the steps and their times below).",
	},
}

// TestReadmeFactsHaveAHome: every fact of the old README (each sentence of
// prose, table row, heading and code line) is still written in some
// Markdown file of the repository, in the same words, or is reworded in
// the place the map above names.
func TestReadmeFactsHaveAHome(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(oldReadme)
	if err != nil {
		t.Fatal(err)
	}
	facts := splitFacts(string(b))
	if len(facts) < 300 {
		t.Fatalf("%s splits into %d facts: the splitter is broken", oldReadme, len(facts))
	}
	docs := map[string]string{}
	for _, f := range repoFiles(t, root) {
		if !isMarkdown(f) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	for _, p := range missingFacts(facts, docs, reworded) {
		t.Error(p)
	}
}

// fact is one statement of a document, as written.
type fact struct {
	line int
	text string
}

var (
	listMarker = regexp.MustCompile(`^(?:[-*+]|\d{1,9}[.)])\s+`)
	tableRule  = regexp.MustCompile(`^\|?[\s:|-]+\|?$`)
	boldLead   = regexp.MustCompile(`^\*\*(.+?)[.:]?\*\*$`)
)

// splitFacts cuts a Markdown document into facts: each sentence of a
// paragraph or list item (list markers dropped), each table row, each
// heading's text and each non-empty line of a code block. A bold lead
// such as "**Tokens.**" is a fact of its words alone ("Tokens"), so it may
// become a heading in its new home.
func splitFacts(src string) []fact {
	var facts []fact
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) == 0 {
			return
		}
		for _, s := range sentences(strings.Join(para, " ")) {
			if m := boldLead.FindStringSubmatch(s); m != nil {
				s = m[1]
			}
			facts = append(facts, fact{paraLine, s})
		}
		para = nil
	}
	var fence string
	for i, l := range strings.Split(src, "\n") {
		n := i + 1
		s := strings.TrimSpace(l)
		run := fenceRun(l)
		switch {
		case fence != "":
			if run != "" && run[0] == fence[0] && len(run) >= len(fence) && strings.Trim(s, run[:1]) == "" {
				fence = ""
			} else if s != "" {
				facts = append(facts, fact{n, s})
			}
		case run != "":
			flush()
			fence = run
		case s == "":
			flush()
		case atxHeading.MatchString(l):
			flush()
			if m := atxHeading.FindStringSubmatch(l); strings.TrimSpace(m[2]) != "" {
				facts = append(facts, fact{n, strings.TrimSpace(m[2])})
			}
		case strings.HasPrefix(s, "|"):
			flush()
			if !tableRule.MatchString(s) {
				facts = append(facts, fact{n, s})
			}
		case listMarker.MatchString(s):
			flush()
			para, paraLine = []string{listMarker.ReplaceAllString(s, "")}, n
		default:
			if len(para) == 0 {
				paraLine = n
			}
			para = append(para, s)
		}
	}
	flush()
	return facts
}

// sentences splits a paragraph after '.', '!' or '?' (and any closing
// ')', '*', '"' or '`') where a space and then a capital, a backtick, an
// asterisk, a bracket or a quote follow. Abbreviations ("e.g. the") stay
// whole; a split too many only makes two facts of one.
func sentences(p string) []string {
	p = strings.Join(strings.Fields(p), " ")
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if c := p[i]; c != '.' && c != '!' && c != '?' {
			continue
		}
		j := i + 1
		for j < len(p) && strings.IndexByte(")*\"`", p[j]) >= 0 {
			j++
		}
		if j+1 >= len(p) || p[j] != ' ' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(p[j+1:])
		if unicode.IsUpper(r) || strings.ContainsRune("`*[(\"", r) {
			out = append(out, p[start:j])
			start = j + 1
			i = j
		}
	}
	return append(out, p[start:])
}

// normalise makes text of the document file comparable wherever it moves:
// whitespace runs become one space, and every link target becomes the
// repository path it points at (a "#anchor" alone names file), so
// [x](docs/a.md) in the README and [x](a.md) in docs/ are the same fact.
func normalise(text, file string) string {
	text = strings.Join(strings.Fields(text), " ")
	var b strings.Builder
	last := 0
	for _, m := range inlineLinkRe.FindAllStringSubmatchIndex(text, -1) {
		dest := strings.TrimSuffix(strings.TrimPrefix(text[m[4]:m[5]], "<"), ">")
		b.WriteString(text[last:m[3]]) // up to the end of the link's text
		b.WriteString("](" + resolve(file, dest) + ")")
		last = m[1]
	}
	b.WriteString(text[last:])
	return b.String()
}

// resolve returns the repository path a link target of file points at,
// with its anchor; web links as they are.
func resolve(file, dest string) string {
	if dest == "" || schemeRe.MatchString(dest) || strings.HasPrefix(dest, "//") {
		return dest
	}
	p, frag, hasFrag := strings.Cut(dest, "#")
	switch {
	case p == "":
		p = file
	case strings.HasPrefix(p, "/"):
		p = path.Clean(strings.TrimLeft(p, "/"))
	default:
		p = path.Join(path.Dir(file), p)
	}
	if hasFrag {
		return p + "#" + frag
	}
	return p
}

// missingFacts returns a message per fact of the old README that no
// document holds, and per entry of the rewording map that is wrong: its
// old text is not a fact of the old README, is still found as it was (the
// entry is not needed), or its new text is not in its file.
func missingFacts(facts []fact, docs map[string]string, rw []rewording) []string {
	norm := map[string]string{}
	for f, src := range docs {
		norm[f] = normalise(src, f)
	}
	files := make([]string, 0, len(norm))
	for f := range norm {
		files = append(files, f)
	}
	slices.Sort(files)
	found := func(text string) bool {
		want := normalise(text, "README.md")
		for _, f := range files {
			if strings.Contains(norm[f], want) {
				return true
			}
		}
		return false
	}
	byOld := map[string]rewording{}
	for _, r := range rw {
		byOld[r.old] = r
	}
	isFact := map[string]bool{}
	var problems []string
	for _, f := range facts {
		isFact[f.text] = true
		_, mapped := byOld[f.text]
		switch {
		case found(f.text) && mapped:
			problems = append(problems, fmt.Sprintf("rewording of %q: the old text is still in the docs; drop the entry", f.text))
		case !found(f.text) && !mapped:
			problems = append(problems, fmt.Sprintf("%s:%d: no Markdown file says: %s", oldReadme, f.line, f.text))
		}
	}
	for _, r := range rw {
		if !isFact[r.old] {
			problems = append(problems, fmt.Sprintf("rewording of %q: not a fact of %s", r.old, oldReadme))
		}
		if src, ok := norm[r.file]; !ok {
			problems = append(problems, fmt.Sprintf("rewording of %q: no Markdown file %s", r.old, r.file))
		} else if !strings.Contains(src, normalise(r.new, r.file)) {
			problems = append(problems, fmt.Sprintf("rewording of %q: %s does not say %q", r.old, r.file, r.new))
		}
	}
	return problems
}

func TestSplitFacts(t *testing.T) {
	doc := strings.Join([]string{
		"# Title",                     // 1
		"",                            // 2
		"First sentence, e.g. this",   // 3
		"one. Second `x. Y` one!",     // 4
		"**Lead.** Then the body.",    // 5
		"",                            // 6
		"- **Item** one: `a` (b).",    // 7
		"  continued. Next",           // 8
		"2. numbered",                 // 9
		"",                            // 10
		"| a | b |",                   // 11
		"| --- | :-: |",               // 12
		"| [x](docs/x.md) | 2 |",      // 13
		"",                            // 14
		"```sh",                       // 15
		"make   demo  # run",          // 16
		"",                            // 17
		"```",                         // 18
		"**Drones: where they are.**", // 19
	}, "\n")
	var got []string
	for _, f := range splitFacts(doc) {
		got = append(got, fmt.Sprintf("%d %s", f.line, f.text))
	}
	want := []string{
		"1 Title",
		"3 First sentence, e.g. this one.",
		"3 Second `x.",
		"3 Y` one!",
		"3 Lead",
		"3 Then the body.",
		"7 **Item** one: `a` (b). continued.",
		"7 Next",
		"9 numbered",
		"11 | a | b |",
		"13 | [x](docs/x.md) | 2 |",
		"16 make   demo  # run",
		"19 Drones: where they are",
	}
	if !slices.Equal(got, want) {
		t.Errorf("facts:\n got %q\nwant %q", got, want)
	}
}

func TestNormalise(t *testing.T) {
	for _, tc := range []struct{ text, file, want string }{
		{"see [the\n  guide](docs/a.md#x)", "README.md", "see [the guide](docs/a.md#x)"},
		{"see [the guide](a.md#x)", "docs/b.md", "see [the guide](docs/a.md#x)"},
		{"see [the guide](../docs/a.md#x)", "cmd/README.md", "see [the guide](docs/a.md#x)"},
		{"[here](#docker) and ![s](p.png \"t\")", "docs/docker.md", "[here](docs/docker.md#docker) and ![s](docs/p.png)"},
		{"[web](https://example.com/a.md) [root](/BENCHMARKS.md)", "docs/x.md", "[web](https://example.com/a.md) [root](BENCHMARKS.md)"},
	} {
		if got := normalise(tc.text, tc.file); got != tc.want {
			t.Errorf("normalise(%q, %q) = %q, want %q", tc.text, tc.file, got, tc.want)
		}
	}
}

// TestMissingFacts: a fact no document holds is reported, a moved one
// (its link rewritten for its new place) is not, and each way the
// rewording map can go wrong is reported.
func TestMissingFacts(t *testing.T) {
	facts := []fact{
		{1, "Read [the guide](docs/guide.md#setup) first."},
		{2, "A fact that was deleted."},
		{3, "See [Docker](#docker)."},
		{4, "Still here."},
	}
	docs := map[string]string{
		"README.md":      "Still\nhere.",
		"docs/guide.md":  "# Guide\nRead [the guide](#setup) first.",
		"docs/docker.md": "See [the Docker page](docker.md).",
	}
	rw := []rewording{
		{"See [Docker](#docker).", "docs/docker.md", "See [the Docker page](docker.md)."},
		{"Still here.", "README.md", "Still here."},
		{"Never said.", "docs/guide.md", "Anything."},
		{"A fact that was deleted.", "docs/nowhere.md", "x"},
	}
	want := []string{
		`rewording of "Still here.": the old text is still in the docs; drop the entry`,
		`rewording of "Never said.": not a fact of ` + oldReadme,
		`rewording of "Never said.": docs/guide.md does not say "Anything."`,
		`rewording of "A fact that was deleted.": no Markdown file docs/nowhere.md`,
	}
	got := missingFacts(facts, docs, rw)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = missingFacts(facts, docs, rw[:1])
	want = []string{oldReadme + ":2: no Markdown file says: A fact that was deleted."}
	if !slices.Equal(got, want) {
		t.Errorf("without the map's bad entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
