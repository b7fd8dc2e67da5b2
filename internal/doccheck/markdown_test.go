package doccheck

import (
	"errors"
	"html"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// fixtureDir holds saved documents (the README before issue 34) whose
// relative links were written for another place in the tree: they are
// read as data, never checked or searched as documentation.
const fixtureDir = "internal/doccheck/testdata/"

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// repoFiles lists the repository's files, slash-separated and relative to
// root: the tracked ones and the untracked ones git does not ignore, so a
// doc written but not yet added is checked, and a link to an ignored file
// (a local screenshot under .artifacts/) counts as broken, as it is on
// GitHub.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("git ls-files: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("git ls-files (the docs checks list the repository's files with git): %v", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		// A deleted but still tracked file is listed by --cached.
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err != nil {
			continue
		}
		files = append(files, f)
	}
	return files
}

// isMarkdown: the files the checks read as documentation.
func isMarkdown(f string) bool {
	if strings.HasPrefix(f, fixtureDir) {
		return false
	}
	for _, seg := range strings.Split(path.Dir(f), "/") {
		if seg == "vendor" || seg == "node_modules" || seg == ".git" {
			return false
		}
	}
	ext := strings.ToLower(path.Ext(f))
	return ext == ".md" || ext == ".markdown"
}

// blankFences returns src with every line of a fenced code block (the
// fences included) turned into spaces, so offsets and line numbers stay
// those of src and nothing inside a block is read as a link or heading.
// Fences may be indented (inside list items); a block ends at a fence of
// the same character at least as long as the one that opened it.
func blankFences(src string) string {
	lines := strings.Split(src, "\n")
	var open string // the opening fence's run, "" outside a block
	for i, l := range lines {
		run := fenceRun(l)
		switch {
		case open == "" && run != "":
			open = run
			lines[i] = strings.Repeat(" ", len(l))
		case open != "":
			if run != "" && run[0] == open[0] && len(run) >= len(open) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), run[:1])) == "" {
				open = ""
			}
			lines[i] = strings.Repeat(" ", len(l))
		}
	}
	return strings.Join(lines, "\n")
}

// fenceRun returns the run of ``` or ~~~ (three or more) that starts the
// trimmed line, or "".
func fenceRun(line string) string {
	s := strings.TrimSpace(line)
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(s) && s[n] == c {
			n++
		}
		if n >= 3 {
			return s[:n]
		}
	}
	return ""
}

// codeSpans returns the byte ranges [start, end) of the inline code spans
// of s, backticks included: a run of n backticks opens a span that the next
// run of exactly n closes.
func codeSpans(s string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		n := j - i
		end := -1
		for k := j; k < len(s); {
			if s[k] != '`' {
				k++
				continue
			}
			m := k
			for m < len(s) && s[m] == '`' {
				m++
			}
			if m-k == n {
				end = m
				break
			}
			k = m
		}
		if end < 0 {
			i = j // an unmatched run is literal backticks
			continue
		}
		spans = append(spans, [2]int{i, end})
		i = end
	}
	return spans
}

// maskCode replaces every byte of every code span with 'x', keeping
// offsets, so link patterns inside code are not links.
func maskCode(s string) string {
	b := []byte(s)
	for _, sp := range codeSpans(s) {
		for i := sp[0]; i < sp[1]; i++ {
			b[i] = 'x'
		}
	}
	return string(b)
}

var (
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	imageRe     = regexp.MustCompile(`!\[[^\]]*\]\([^)]*\)`)
	linkTextRe  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	refTextRe   = regexp.MustCompile(`\[([^\]]*)\]\[[^\]]*\]`)
	htmlTagRe   = regexp.MustCompile(`</?[A-Za-z][^>]*>`)
	escapeRe    = regexp.MustCompile("\\\\([!-/:-@\\[-`{-~])")
	underEmphRe = regexp.MustCompile(`(^|[\s(])_{1,2}([^_\s](?:[^_]*[^_\s])?)_{1,2}([\s).,:;!?]|$)`)
	anchorAttr  = regexp.MustCompile(`(?i)<[a-z][^>]*?\s(?:name|id)\s*=\s*(?:"([^"]*)"|'([^']*)')`)
)

// headingText is the text GitHub renders for a heading's Markdown: code
// spans as their content, links as their text, images and HTML tags
// dropped, escapes and entities resolved, _emphasis_ markers removed
// (other emphasis markers are punctuation the slug drops anyway).
func headingText(md string) string {
	var b strings.Builder
	plain := func(s string) {
		s = imageRe.ReplaceAllString(s, "")
		s = linkTextRe.ReplaceAllString(s, "$1")
		s = refTextRe.ReplaceAllString(s, "$1")
		s = htmlTagRe.ReplaceAllString(s, "")
		s = underEmphRe.ReplaceAllString(s, "$1$2$3")
		s = escapeRe.ReplaceAllString(s, "$1")
		b.WriteString(html.UnescapeString(s))
	}
	last := 0
	for _, sp := range codeSpans(md) {
		plain(md[last:sp[0]])
		code := strings.Trim(md[sp[0]:sp[1]], "`")
		if len(code) > 1 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.TrimSpace(code) != "" {
			code = code[1 : len(code)-1]
		}
		b.WriteString(code)
		last = sp[1]
	}
	plain(md[last:])
	// Not trimmed: GitHub slugs the text as rendered, so a heading ending
	// in an image or tag keeps the space before it ("a-link-and-").
	return b.String()
}

// slug is GitHub's anchor of a heading's rendered text: lowercased, every
// character but letters, marks, numbers, connector punctuation (_),
// hyphens and spaces dropped, then each space a hyphen. Runs of hyphens
// stay (an em dash between spaces leaves "--").
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-', unicode.IsLetter(r), unicode.IsMark(r), unicode.IsNumber(r), unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments a link may name in a Markdown document:
// each ATX heading's slug, the second and later of equal slugs suffixed
// -1, -2, … as GitHub numbers them, and every explicit name= or id= of an
// HTML tag. Setext headings (underlined) are not read: the repository does
// not use them, and a link to one fails rather than passing unchecked.
func anchors(src string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	text := blankFences(src)
	for _, line := range strings.Split(text, "\n") {
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			s := slug(headingText(m[2]))
			if n := seen[s]; n > 0 {
				out[s+"-"+strconv.Itoa(n)] = true
			} else {
				out[s] = true
			}
			seen[s]++
		}
	}
	for _, m := range anchorAttr.FindAllStringSubmatch(maskCode(text), -1) {
		out[m[1]+m[2]] = true
	}
	return out
}
