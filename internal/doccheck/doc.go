// Package doccheck holds the tests that keep the repository's Markdown
// honest, so they run in the plain `go test ./...` that `make test` runs:
//
//   - every relative link and image of every Markdown file points at a file
//     of the repository, and every #anchor at a heading (GitHub's slug) or
//     an explicit <a name/id> of its target (links_test.go);
//   - every fact of the README as it was before issue 34 moved its content
//     into docs/ still has a home in some Markdown file (facts_test.go).
//
// The package has no code outside its tests.
package doccheck
