package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocRedisACL is the ACL rule list of docs/operations.md "Least privilege"
// (the line between its redis-acl markers, after `user NAME`), with the
// default prefix's key pattern made prefix's and >PASSWORD made password's,
// ready for ACL SETUSER: the tests grant exactly what operators are told.
func DocRedisACL(t testing.TB, prefix, password string) (user string, rules []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- redis-acl:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- redis-acl:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md: no redis-acl:begin/end block")
	}
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "user" {
			continue
		}
		for _, r := range f[2:] {
			switch {
			case r == ">PASSWORD":
				r = ">" + password
			case r == "~{nofly:*":
				r = "~{" + prefix + ":*"
			}
			rules = append(rules, r)
		}
		return f[1], rules
	}
	t.Fatal("docs/operations.md: no `user` line in the redis-acl block")
	return "", nil
}
