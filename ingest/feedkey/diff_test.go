package feedkey

import (
	"reflect"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	line := func(name, key, opts string) string {
		return (&Feed{Name: name, Hash: Hash(key)}).Line() + " " + opts + "\n"
	}
	parse := func(s string) *Set {
		set, err := Parse("f", strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	base := line("a", "ka", "") + line("b", "kb", "prefixes=B-") + line("c", "kc", "rate=10/s")
	for _, tt := range []struct {
		name string
		new  string
		want Changes
	}{
		{"same", base, Changes{}},
		{"same, reordered", line("c", "kc", "rate=10/s") + line("a", "ka", "") + line("b", "kb", "prefixes=B-"), Changes{}},
		{"added and removed", line("a", "ka", "") + line("d", "kd", ""), Changes{Added: []string{"d"}, Removed: []string{"b", "c"}}},
		{"rotated key", line("a", "ka2", "") + line("b", "kb", "prefixes=B-") + line("c", "kc", "rate=10/s"), Changes{Changed: []string{"a"}}},
		{"prefixes and rate", line("a", "ka", "") + line("b", "kb", "prefixes=B-,C-") + line("c", "kc", "rate=10/s burst=20"), Changes{Changed: []string{"b", "c"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(parse(base), parse(tt.new)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
