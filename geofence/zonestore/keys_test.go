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
	keys := []string{k.Version(), k.Current(), k.History(), k.Times()}
	want := []string{"{nofly:zones}:version", "{nofly:zones}:current", "{nofly:zones}:history", "{nofly:zones}:times"}
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
		generic = append(generic, strings.Replace(key, k.Tag(), "<ztag>", 1))
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
