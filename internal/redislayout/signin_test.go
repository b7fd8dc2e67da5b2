package redislayout

import (
	"os"
	"strings"
	"testing"
)

// TestSignInKeysPinned pins the sign-in keys and their rows in
// docs/redis-layout.md: sessions live across restarts and instances, so
// their names cannot drift.
func TestSignInKeysPinned(t *testing.T) {
	k := SignInOf("nofly")
	tests := []struct{ name, got, want string }{
		{"tag", k.Tag(), "{nofly:signin}"},
		{"session", k.Session("ab12"), "{nofly:signin}:session:ab12"},
		{"login", k.Login("cd34"), "{nofly:signin}:login:cd34"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	b, err := os.ReadFile("../../docs/redis-layout.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"    sitag = {<prefix>:signin}", "| `<sitag>:session:<sha256>` |", "| `<sitag>:login:<sha256>` |"} {
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/redis-layout.md has no %q", row)
		}
	}
}
