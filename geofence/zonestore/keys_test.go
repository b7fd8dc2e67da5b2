package zonestore

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestKeysDocumented: the key strings are pinned (stored sets must stay
// readable) and docs/redis-layout.md's "Zone store" table lists exactly
// them.
func TestKeysDocumented(t *testing.T) {
	k := KeysOf("nofly")
	keys := []string{k.Version(), k.Current(), k.History(), k.Times(), k.Entry(7), k.Staging("0123abcd")}
	want := []string{"{nofly:zones}:version", "{nofly:zones}:current", "{nofly:zones}:history", "{nofly:zones}:times",
		"{nofly:zones}:entry:7", "{nofly:zones}:staging:0123abcd"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "redis-layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(<ztag>:[^`]*)` \\|").FindAllStringSubmatch(string(doc), -1) {
		rows = append(rows, m[1])
	}
	var generic []string
	for _, key := range keys {
		key = strings.Replace(key, k.Tag(), "<ztag>", 1)
		key = strings.Replace(strings.Replace(key, ":entry:7", ":entry:<version>", 1), ":staging:0123abcd", ":staging:<id>", 1)
		generic = append(generic, key)
	}
	slices.Sort(rows)
	slices.Sort(generic)
	if !slices.Equal(rows, generic) {
		t.Errorf("docs/redis-layout.md's zone store rows %v, the package's keys %v", rows, generic)
	}
	if !strings.Contains(string(doc), "ztag = {<prefix>:zones}") {
		t.Error("docs/redis-layout.md does not give the zone store's tag")
	}
}
