package api

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func tokenLine(name string, role Role, token string) string {
	return Token{Name: name, Role: role, Hash: HashToken(token)}.Line() + "\n"
}

func TestDiffTokens(t *testing.T) {
	parse := func(s string) *Tokens {
		ts, err := ParseTokens("f", strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	base := tokenLine("a", RoleViewer, "ta") + tokenLine("b", RoleOperator, "tb") + tokenLine("c", RoleAdmin, "tc")
	for _, tt := range []struct {
		name string
		new  string
		want TokenChanges
	}{
		{"same", base, TokenChanges{}},
		{"added", base + tokenLine("d", RoleViewer, "td"), TokenChanges{Added: []string{"d"}}},
		{"removed", tokenLine("a", RoleViewer, "ta"), TokenChanges{Removed: []string{"b", "c"}}},
		{"role changed", tokenLine("a", RoleAdmin, "ta") + tokenLine("b", RoleOperator, "tb") + tokenLine("c", RoleAdmin, "tc"), TokenChanges{Changed: []string{"a"}}},
		{"rotated", tokenLine("a", RoleViewer, "ta2") + tokenLine("b", RoleOperator, "tb") + tokenLine("c", RoleAdmin, "tc"), TokenChanges{Changed: []string{"a"}}},
		{"all three", tokenLine("c", RoleAdmin, "tc2") + tokenLine("e", RoleViewer, "te") + tokenLine("b", RoleOperator, "tb"),
			TokenChanges{Added: []string{"e"}, Removed: []string{"a"}, Changed: []string{"c"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := DiffTokens(parse(base), parse(tt.new))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.None() != tt.want.None() {
				t.Errorf("None() %v", got.None())
			}
		})
	}
}

// TestTokenStoreReload: a good file is swapped in whole, a bad one changes
// nothing and its error names the file and line but no token or hash; a
// watched token is revoked at the swap that removes or changes it, and
// only then.
func TestTokenStoreReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tokenLine("a", RoleOperator, "secret-a") + tokenLine("c", RoleViewer, "secret-c"))
	ts, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	st := NewTokenStore(ts)
	watch := func(token string) <-chan struct{} {
		revoked := make(chan struct{})
		tok := st.Lookup(token)
		if tok == nil {
			t.Fatalf("%s not in use", token)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go st.watch(ctx, *tok, func() { close(revoked) })
		return revoked
	}
	revokedA, revokedC := watch("secret-a"), watch("secret-c")

	write(tokenLine("c", RoleViewer, "secret-c") + tokenLine("b", RoleAdmin, "secret-b"))
	_, ch, err := st.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if want := (TokenChanges{Added: []string{"b"}, Removed: []string{"a"}}); !reflect.DeepEqual(ch, want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	if st.Lookup("secret-a") != nil || st.Lookup("secret-b") == nil || st.Lookup("secret-c") == nil {
		t.Error("not the new set in use")
	}
	select {
	case <-revokedA:
	case <-time.After(5 * time.Second):
		t.Error("a's watch not revoked after a reload removed a")
	}

	bad := tokenLine("c", RoleViewer, "secret-c") + "b root sha256:" + strings.Repeat("0", 64) + "\n"
	write(bad)
	kept, _, err := st.Reload()
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("error %v, want one naming %s:2", err, path)
	}
	if kept != st.Tokens() || st.Lookup("secret-b") == nil {
		t.Error("a bad file changed the set in use")
	}
	for _, s := range []string{"secret-", hexHash("secret-b"), hexHash("secret-c")} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q holds %q", err, s)
		}
	}

	select {
	case <-revokedC:
		t.Fatal("c's watch revoked though c did not change")
	case <-time.After(50 * time.Millisecond):
	}
	write(tokenLine("c", RoleOperator, "secret-c")) // another role: its streams end
	if _, _, err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-revokedC:
	case <-time.After(5 * time.Second):
		t.Error("c's watch not revoked after its role changed")
	}
}

func hexHash(token string) string {
	h := HashToken(token)
	return hex.EncodeToString(h[:])
}

// TestTokenStoreSwapUnderLoad: lookups while sets are swapped see one set
// or the other, never a mix: in set 1 "x" is a viewer and "y" unknown, in
// set 2 "x" is an admin and "y" an operator. Run with -race.
func TestTokenStoreSwapUnderLoad(t *testing.T) {
	parse := func(s string) *Tokens {
		ts, err := ParseTokens("f", strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	one := parse(tokenLine("x", RoleViewer, "tx"))
	two := parse(tokenLine("x", RoleAdmin, "tx") + tokenLine("y", RoleOperator, "ty"))
	st := NewTokenStore(one)
	stop := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- ""
					return
				default:
				}
				ts := st.Tokens() // one set, read once
				x, y := ts.Lookup("tx"), ts.Lookup("ty")
				switch {
				case x == nil:
					errs <- "x unknown"
					return
				case x.Role == RoleViewer && y != nil, x.Role == RoleAdmin && (y == nil || y.Role != RoleOperator):
					errs <- "a mix of the two sets"
					return
				}
				if st.Lookup("tx") == nil {
					errs <- "x unknown through the store"
					return
				}
			}
		}()
	}
	for i := range 2000 {
		if i%2 == 0 {
			st.Swap(two)
		} else {
			st.Swap(one)
		}
	}
	close(stop)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
