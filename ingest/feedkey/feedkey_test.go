package feedkey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func hashOf(key string) string {
	h := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(h[:])
}

func TestParse(t *testing.T) {
	ha, hb := hashOf("key-a"), hashOf("key-b")
	tests := []struct {
		name    string
		file    string
		want    []Feed // checked field by field when wantErr is ""
		wantErr string // the whole message after "feed key file "
	}{
		{name: "one feed, no options", file: "lab " + ha + "\n",
			want: []Feed{{Name: "lab", Hash: sha256.Sum256([]byte("key-a"))}}},
		{name: "options, comments, blanks, CRLF, BOM", file: "\uFEFF# feeds\n\n  ogn  sha256:" + strings.ToUpper(ha[7:]) +
			"  prefixes=OGN-,FLR-  rate=200/s # relay\r\nfleet\t" + hb + " rate=600/m burst=1000\n",
			want: []Feed{
				{Name: "ogn", Hash: sha256.Sum256([]byte("key-a")), Prefixes: []string{"OGN-", "FLR-"}, Rate: 200, Per: time.Second, Burst: 200},
				{Name: "fleet", Hash: sha256.Sum256([]byte("key-b")), Rate: 600, Per: time.Minute, Burst: 1000},
			}},
		{name: "per hour", file: "h " + ha + " rate=36/h",
			want: []Feed{{Name: "h", Hash: sha256.Sum256([]byte("key-a")), Rate: 36, Per: time.Hour, Burst: 36}}},

		{name: "empty file", file: "# nothing\n\n", wantErr: "keys.txt: no feed defined"},
		{name: "bad name", file: "# c\nbad/name " + ha, wantErr: `keys.txt:2: feed name "bad/name" must be 1-64 characters of [A-Za-z0-9._-]`},
		{name: "hash missing", file: "lab", wantErr: `keys.txt:1: feed "lab": the key hash (sha256:<64 hex digits>) is missing`},
		{name: "a key where the hash belongs is not quoted whole", file: "lab nofly_s3cr3tvalue123456",
			wantErr: `keys.txt:1: feed "lab": second field "nofly_…" is not sha256:<64 hex digits> (the file holds the key's hash, never the key)`},
		{name: "short hash", file: "lab sha256:abcd", wantErr: `keys.txt:1: feed "lab": sha256: needs 64 hex digits, got 4 characters`},
		{name: "non-hex hash", file: "lab sha256:" + strings.Repeat("zz", 32), wantErr: `keys.txt:1: feed "lab": sha256: needs 64 hex digits, got 64 characters`},
		{name: "duplicate name", file: "a " + ha + "\n\na " + hb, wantErr: `keys.txt:3: feed "a" already defined on line 1`},
		{name: "duplicate hash", file: "a " + ha + "\nb " + ha, wantErr: `keys.txt:2: feed "b" has the same key hash as line 1; every feed needs its own key`},
		{name: "unknown option", file: "a " + ha + " prefix=UAV-", wantErr: `keys.txt:1: feed "a": unknown option "prefix" (prefixes=, rate=, burst=)`},
		{name: "not an option", file: "a " + ha + " UAV-", wantErr: `keys.txt:1: feed "a": "UAV-" is not an option (prefixes=, rate=, burst=)`},
		{name: "option twice", file: "a " + ha + " rate=1/s rate=2/s", wantErr: `keys.txt:1: feed "a": option rate given twice`},
		{name: "empty prefixes", file: "a " + ha + " prefixes=", wantErr: `keys.txt:1: feed "a": prefixes: "" is not a drone-id prefix (1-64 of [A-Za-z0-9._:-], comma-separated, no blanks)`},
		{name: "empty prefix in list", file: "a " + ha + " prefixes=UAV-,,X", wantErr: `keys.txt:1: feed "a": prefixes: "" is not a drone-id prefix`},
		{name: "bad prefix char", file: "a " + ha + " prefixes=UAV*", wantErr: `keys.txt:1: feed "a": prefixes: "UAV*" is not a drone-id prefix`},
		{name: "rate unit", file: "a " + ha + " rate=5/d", wantErr: `keys.txt:1: feed "a": rate: "5/d" is not N/s, N/m or N/h with N a positive integer (records)`},
		{name: "rate zero", file: "a " + ha + " rate=0/s", wantErr: `keys.txt:1: feed "a": rate: "0/s" is not N/s`},
		{name: "rate fraction", file: "a " + ha + " rate=1.5/s", wantErr: `keys.txt:1: feed "a": rate: "1.5/s" is not N/s`},
		{name: "burst without rate", file: "a " + ha + " burst=5", wantErr: `keys.txt:1: feed "a": burst= needs rate=`},
		{name: "burst zero", file: "a " + ha + " rate=1/s burst=0", wantErr: `keys.txt:1: feed "a": burst: "0" is not a positive integer (records)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("keys.txt", strings.NewReader(tt.file))
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrSyntax) || !strings.HasPrefix(err.Error(), "feed key file "+tt.wantErr) {
					t.Fatalf("error %v, want ErrSyntax starting %q", err, "feed key file "+tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Feeds) != len(tt.want) {
				t.Fatalf("%d feeds, want %d", len(s.Feeds), len(tt.want))
			}
			for i, w := range tt.want {
				g := s.Feeds[i]
				if g.Name != w.Name || g.Hash != w.Hash || !slices.Equal(g.Prefixes, w.Prefixes) ||
					g.Rate != w.Rate || g.Per != w.Per || g.Burst != w.Burst {
					t.Errorf("feed %d\n got %+v\nwant %+v", i, g, w)
				}
			}
		})
	}
}

// TestLineRoundTrip: the line Feed.Line writes parses back to the same feed.
func TestLineRoundTrip(t *testing.T) {
	for _, f := range []Feed{
		{Name: "a", Hash: Hash("k1")},
		{Name: "b.c-d_e", Hash: Hash("k2"), Prefixes: []string{"UAV-", "OGN:"}},
		{Name: "r", Hash: Hash("k3"), Rate: 500, Per: time.Second, Burst: 500},
		{Name: "r2", Hash: Hash("k4"), Rate: 10, Per: time.Minute, Burst: 100, Prefixes: []string{"X"}},
	} {
		s, err := Parse("t", strings.NewReader(f.Line()))
		if err != nil {
			t.Fatalf("%q: %v", f.Line(), err)
		}
		g := s.Feeds[0]
		if g.Name != f.Name || g.Hash != f.Hash || !slices.Equal(g.Prefixes, f.Prefixes) || g.Rate != f.Rate || g.Per != f.Per || g.Burst != f.Burst {
			t.Errorf("%q parsed to %+v", f.Line(), g)
		}
	}
}

func TestLookup(t *testing.T) {
	s, err := Parse("t", strings.NewReader("a "+hashOf("key-a")+"\nb "+hashOf("key-b")+"\nc "+hashOf("key-c")))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ key, want string }{
		{"key-a", "a"}, {"key-b", "b"}, {"key-c", "c"},
		{"key-d", ""}, {"", ""}, {"key-a ", ""}, {"KEY-A", ""},
		{hashOf("key-a"), ""}, // the stored hash is not a key
	}
	for _, tt := range tests {
		f := s.Lookup(tt.key)
		got := ""
		if f != nil {
			got = f.Name
		}
		if got != tt.want {
			t.Errorf("Lookup(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestAllows(t *testing.T) {
	f := Feed{Prefixes: []string{"UAV-", "OGN-"}}
	for id, want := range map[string]bool{"UAV-1": true, "OGN-DD1234": true, "uav-1": false, "FLR-1": false, "UAV": false, "X-UAV-1": false} {
		if f.Allows(id) != want {
			t.Errorf("prefixes %v: Allows(%q) = %v", f.Prefixes, id, !want)
		}
	}
	if !(&Feed{}).Allows("anything") {
		t.Error("a feed without prefixes refused a drone")
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(k, KeyPrefix) || len(k) != len(KeyPrefix)+43 || seen[k] {
			t.Fatalf("key %q: wrong form or repeated", k)
		}
		seen[k] = true
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("missing file: %v, want an error naming %s", err, p)
	}
	if err := os.WriteFile(p, []byte("x "+hashOf("k")+" rate=1/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p+":1:") {
		t.Fatalf("bad file: %v, want an error naming %s:1", err, p)
	}
}
