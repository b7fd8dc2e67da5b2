package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLinks: every relative link, image and reference definition of every
// Markdown file of the repository points at a file or directory of the
// repository, and every #anchor into a Markdown file at one of its
// headings or explicit anchors. Web and mail links are not followed.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	files := repoFiles(t, root)
	problems, docs, links := checkLinks(root, files)
	for _, p := range problems {
		t.Error(p)
	}
	// Not vacuous: the repository has a dozen Markdown files and hundreds
	// of relative links; an empty listing must not pass.
	if docs < 10 || links < 100 {
		t.Errorf("checked %d Markdown files and %d relative links: the listing of the repository is wrong", docs, links)
	}
}

// link is one link target of a document.
type link struct {
	line int
	text string // what the reader sees: the link's Markdown
	dest string // the target as written, angle brackets removed
}

var (
	// [text](dest "title") and ![alt](dest); the text may hold one level
	// of brackets and span lines.
	inlineLinkRe = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"\n]*"|'[^'\n]*'|\([^)\n]*\)))?\s*\)`)
	refDefRe     = regexp.MustCompile(`(?m)^ {0,3}\[([^\]\n]+)\]:[ \t]*(<[^>\n]*>|\S+)`)
	// [text][label] and [text][]; a bare [label] cannot be told from
	// brackets in prose and is not read.
	refUseRe   = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[([^\[\]\n]*)\]`)
	htmlLinkRe = regexp.MustCompile(`(?i)<(?:a|img|source|video|audio|iframe)\b[^>]*?\s(?:href|src)\s*=\s*(?:"([^"]*)"|'([^']*)')`)
	schemeRe   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// refLabel normalises a reference label as CommonMark matches them: case
// and runs of whitespace do not count.
func refLabel(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// extractLinks returns the link targets of a Markdown document outside code
// (inline links, images, reference definitions, href/src of HTML tags) and
// the reference-style uses whose label has no definition.
func extractLinks(src string) (links, undefined []link) {
	text := maskCode(blankFences(src))
	lineOf := func(off int) int { return strings.Count(text[:off], "\n") + 1 }
	for _, m := range inlineLinkRe.FindAllStringSubmatchIndex(text, -1) {
		dest := strings.TrimSuffix(strings.TrimPrefix(text[m[4]:m[5]], "<"), ">")
		links = append(links, link{lineOf(m[0]), src[m[0]:m[1]], dest})
	}
	defs := map[string]bool{}
	for _, m := range refDefRe.FindAllStringSubmatchIndex(text, -1) {
		label := text[m[2]:m[3]]
		if strings.HasPrefix(label, "^") { // a footnote
			continue
		}
		defs[refLabel(label)] = true
		dest := strings.TrimSuffix(strings.TrimPrefix(text[m[4]:m[5]], "<"), ">")
		links = append(links, link{lineOf(m[0]), src[m[0]:m[1]], dest})
	}
	for _, m := range refUseRe.FindAllStringSubmatchIndex(text, -1) {
		label := text[m[4]:m[5]]
		if label == "" {
			label = text[m[2]:m[3]]
		}
		if !defs[refLabel(label)] {
			undefined = append(undefined, link{lineOf(m[0]), src[m[0]:m[1]], label})
		}
	}
	for _, m := range htmlLinkRe.FindAllStringSubmatchIndex(text, -1) {
		v := m[2:4]
		if v[0] < 0 {
			v = m[4:6]
		}
		links = append(links, link{lineOf(m[0]), src[m[0]:m[1]], text[v[0]:v[1]]})
	}
	slices.SortStableFunc(links, func(a, b link) int { return a.line - b.line })
	return links, undefined
}

// checkLinks checks the links of the Markdown files among files (paths
// relative to root, slash-separated; the only files that count as being
// in the repository) and returns a message per broken one, with how many
// documents and relative links it checked.
func checkLinks(root string, files []string) (problems []string, docs, relative int) {
	exists := map[string]bool{".": true}
	for _, f := range files {
		exists[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			exists[d] = true
		}
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(f string) map[string]bool {
		if a, ok := cache[f]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			problems = append(problems, err.Error())
		}
		cache[f] = anchors(string(b))
		return cache[f]
	}
	for _, f := range files {
		if !isMarkdown(f) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		docs++
		links, undefined := extractLinks(string(b))
		for _, u := range undefined {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: no reference definition [%s]:", f, u.line, oneLine(u.text), u.dest))
		}
		for _, l := range links {
			msg, rel := checkLink(root, f, l.dest, exists, anchorsOf)
			if rel {
				relative++
			}
			if msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", f, l.line, oneLine(l.text), msg))
			}
		}
	}
	return problems, docs, relative
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkLink returns why dest, a link of file from, is broken ("" if it is
// not) and whether it is a link into the repository.
func checkLink(root, from, dest string, exists map[string]bool, anchorsOf func(string) map[string]bool) (string, bool) {
	if dest == "" {
		return "empty link target", false
	}
	if strings.HasPrefix(dest, "//") {
		return "", false // scheme-relative: another host
	}
	if s := schemeRe.FindString(dest); s != "" {
		switch strings.ToLower(s) {
		case "http:", "https:", "mailto:":
			return "", false
		}
		return fmt.Sprintf("scheme %q: only http, https and mailto links may leave the repository", s), false
	}
	p, frag, _ := strings.Cut(dest, "#")
	p, _, _ = strings.Cut(p, "?")
	p, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("bad escape in the path: %v", err), true
	}
	if frag, err = url.PathUnescape(frag); err != nil {
		return fmt.Sprintf("bad escape in the anchor: %v", err), true
	}
	var target string
	switch {
	case p == "":
		target = from
	case strings.HasPrefix(p, "/"): // GitHub reads it from the repository's root
		target = path.Clean(strings.TrimLeft(p, "/"))
	default:
		target = path.Join(path.Dir(from), p)
	}
	if target == ".." || strings.HasPrefix(target, "../") {
		return fmt.Sprintf("%s leaves the repository", p), true
	}
	if !exists[target] {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err == nil {
			return fmt.Sprintf("%s (%s) is ignored by git: not in the repository", p, target), true
		}
		return fmt.Sprintf("%s: no file %s in the repository", p, target), true
	}
	if frag != "" && strings.EqualFold(path.Ext(target), ".md") && !anchorsOf(target)[frag] {
		return fmt.Sprintf("no heading or anchor #%s in %s", frag, target), true
	}
	return "", true
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"What `make demo` does", "what-make-demo-does"},
		{"8. Browsers and proxies", "8-browsers-and-proxies"},
		{"Kafka version: 4.4.0", "kafka-version-440"},
		{"HTTP alert API (`api/`)", "http-alert-api-api"},
		{"Drone state (`<tag>:drones` values)", "drone-state-tagdrones-values"},
		{"Browsers, in every mode — the loopback one too", "browsers-in-every-mode--the-loopback-one-too"},
		{"`signal_lost` and snake_case stay", "signal_lost-and-snake_case-stay"},
		{"__Bold__ and _emphasis_ lose their markers", "bold-and-emphasis-lose-their-markers"},
		{"*Stars* and **more**", "stars-and-more"},
		{"[A link](other.md#x) and ![an image](p.png)", "a-link-and-"},
		{"A <kbd>tag</kbd> and &amp; an entity", "a-tag-and--an-entity"},
		{`Escaped \_ and \# characters`, "escaped-_-and--characters"},
		{"Zürich, Émigré — ünïcode", "zürich-émigré--ünïcode"},
		{"C++ & Go!", "c--go"},
		{"Trailing  spaces  inside", "trailing--spaces--inside"},
		{"already-hyphenated-words", "already-hyphenated-words"},
		{"1.2.3", "123"},
	} {
		if got := slug(headingText(tc.heading)); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	doc := "# Title #\n\n## Setup\n\n### Setup\n\n```sh\n# Setup\n## Not a heading\n```\n\n" +
		"## Setup\n\n   ## Indented three\n\n    ## indented four is code\n\n#NoSpace\n\n" +
		"<a name=\"explicit\"></a>\n<span id='by-id'>x</span>\n`<a name=\"in-code\">`\n"
	got := anchors(doc)
	want := []string{"title", "setup", "setup-1", "setup-2", "indented-three", "explicit", "by-id"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no anchor %q in %v", w, got)
		}
	}
	for _, no := range []string{"not-a-heading", "setup-3", "indented-four-is-code", "nospace", "in-code"} {
		if got[no] {
			t.Errorf("anchor %q should not exist", no)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors = %v, want exactly %v", got, want)
	}
}

func TestExtractLinks(t *testing.T) {
	doc := strings.Join([]string{
		"See [the design](docs/design.md#data-flow) and ![shot](docs/a.png \"title\").", // 1
		"Code `[not](a-link.md)` and [`code text`](code.md).",                           // 2
		"```",                            // 3
		"[fenced](fenced.md)",            // 4
		"```",                            // 5
		"A [link whose text",             // 6
		"wraps](wrapped.md) and <x.md>.", // 7
		"[ref text][ref] and [Ref][] and [missing][nowhere].", // 8
		"",                                  // 9
		"[ref]: <docs/ref target.md>",       // 10
		`<img src="docs/b.png" width="10">`, // 11
		"[angle](<with space.md>) [parens](f(1).md)", // 12
	}, "\n")
	links, undefined := extractLinks(doc)
	var got []string
	for _, l := range links {
		got = append(got, fmt.Sprintf("%d %s", l.line, l.dest))
	}
	want := []string{
		"1 docs/design.md#data-flow", "1 docs/a.png", "2 code.md", "6 wrapped.md",
		"10 docs/ref target.md", "11 docs/b.png", "12 with space.md", "12 f(1).md",
	}
	if !slices.Equal(got, want) {
		t.Errorf("links:\n got %q\nwant %q", got, want)
	}
	if len(undefined) != 1 || undefined[0].dest != "nowhere" || undefined[0].line != 8 {
		t.Errorf("undefined references = %+v, want [missing][nowhere] on line 8", undefined)
	}
}

// TestCheckLinks runs the checker on a made-up tree: it must report each
// kind of broken link and nothing else.
func TestCheckLinks(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md": "# Top\n\n[docs](docs/) [guide](docs/guide.md#second-part) [self](#top)\n" +
			"[root-relative](/docs/guide.md) [web](https://example.com/x.md) [mail](mailto:a@b.c)\n" +
			"[gone](docs/gone.md) [bad anchor](docs/guide.md#no-such) [out](../outside.md)\n" +
			"[ftp](ftp://example.com/f) [ignored](local.png) [empty]() [code](main.go#L3)\n" +
			"[escaped](docs/with%20space.md) [undefined][nope]\n",
		"docs/guide.md":          "# Guide\n\n## Second part\n\n[up](../README.md#top) [img](pic.png) <img src=\"missing.png\">\n[far](../../../etc/passwd)\n",
		"docs/pic.png":           "",
		"docs/with space.md":     "",
		"main.go":                "",
		fixtureDir + "old.md":    "[not checked](nowhere.md)\n",
		"vendor/x/README.md":     "[not checked](nowhere.md)\n",
		"local.png":              "", // on disk, not in the file list: ignored by git
		"node_modules/y/read.md": "[not checked](nowhere.md)\n",
	}
	var list []string
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if name != "local.png" {
			list = append(list, name)
		}
	}
	slices.Sort(list)
	problems, docs, _ := checkLinks(root, list)
	want := []string{
		"README.md:5: [gone](docs/gone.md): docs/gone.md: no file docs/gone.md in the repository",
		"README.md:5: [bad anchor](docs/guide.md#no-such): no heading or anchor #no-such in docs/guide.md",
		"README.md:5: [out](../outside.md): ../outside.md leaves the repository",
		"README.md:6: [ftp](ftp://example.com/f): scheme \"ftp:\": only http, https and mailto links may leave the repository",
		"README.md:6: [ignored](local.png): local.png (local.png) is ignored by git: not in the repository",
		"README.md:6: [empty](): empty link target",
		"README.md:7: [undefined][nope]: no reference definition [nope]:",
		"docs/guide.md:5: <img src=\"missing.png\": missing.png: no file docs/missing.png in the repository",
		"docs/guide.md:6: [far](../../../etc/passwd): ../../../etc/passwd leaves the repository",
	}
	slices.Sort(problems)
	slices.Sort(want)
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if docs != 3 {
		t.Errorf("checked %d documents, want 3 (fixtures, vendor and node_modules skipped)", docs)
	}
}
