package alerterd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOIDCFlags: the single sign-on flags are checked at start, each error
// naming its flag.
func TestOIDCFlags(t *testing.T) {
	base := []string{"--zones", "z", "--http", "127.0.0.1:9102"}
	sso := append(append([]string{}, base...), "--oidc-issuer", "https://idp.example/realms/nofly", "--oidc-client-id", "nofly",
		"--oidc-roles", "nofly-admins=admin,nofly-operators=operator")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"off", base, ""},
		{"on", sso, ""},
		{"client id without issuer", append(append([]string{}, base...), "--oidc-client-id", "nofly"), "--oidc-client-id"},
		{"roles without issuer", append(append([]string{}, base...), "--oidc-roles", "a=admin"), "--oidc-roles"},
		{"http issuer beyond loopback", append(append([]string{}, sso...), "--oidc-issuer", "http://idp.example"), "--oidc-issuer"},
		{"http issuer on loopback", append(append([]string{}, sso...), "--oidc-issuer", "http://127.0.0.1:5556/dex"), ""},
		{"not a URL", append(append([]string{}, sso...), "--oidc-issuer", "idp.example"), "--oidc-issuer"},
		{"no client id", append(append([]string{}, sso...), "--oidc-client-id", ""), "--oidc-client-id"},
		{"no roles", append(append([]string{}, sso...), "--oidc-roles", ""), "--oidc-roles"},
		{"bad role", append(append([]string{}, sso...), "--oidc-roles", "g=root"), "--oidc-roles"},
		{"empty role claim", append(append([]string{}, sso...), "--oidc-role-claim", ""), "--oidc-role-claim"},
		{"beyond loopback without public url", append(append([]string{}, sso...), "--http", ":9102"), "--public-url"},
		{"beyond loopback with public url", append(append([]string{}, sso...), "--http", ":9102", "--public-url", "https://nofly.example"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, func(string) string { return "" })
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.OIDCRoleClaim != "groups" || c.OIDCNameClaim != "preferred_username" {
					t.Errorf("defaults %+v", c.OIDCSettings)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}

// TestOpenOIDC: an unreachable issuer fails the start naming it after the
// bounded retries; the client secret file's content is never logged.
func TestOpenOIDC(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("oidc-client-secret-xyz\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := DefaultConfig()
	c.Zones, c.HTTPAddr = "z", "127.0.0.1:9102"
	c.OIDCIssuer, c.OIDCClientID, c.OIDCRoles, c.OIDCClientSecretFile = "http://127.0.0.1:1/dex", "nofly", "g=admin", secret
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.openOIDC(ctx, log)
	if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1/dex") {
		t.Fatalf("err %v, want one naming the issuer", err)
	}
	if strings.Contains(logs.String()+err.Error(), "oidc-client-secret-xyz") {
		t.Error("the client secret was logged")
	}
	c.OIDCClientSecretFile = filepath.Join(dir, "missing")
	if _, err := c.openOIDC(ctx, log); err == nil || !strings.Contains(err.Error(), "--oidc-client-secret-file") {
		t.Errorf("missing secret file: %v", err)
	}
}
