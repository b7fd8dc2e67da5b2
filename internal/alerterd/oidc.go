package alerterd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/internal/envflag"
	"github.com/nofly-dev/nofly/internal/secretfile"
)

// OIDCSettings are the single sign-on flags (api/oidc.go): people sign in
// to the dashboard through the provider, machines may send its JWT access
// tokens. Off without OIDCIssuer.
type OIDCSettings struct {
	OIDCIssuer           string
	OIDCClientID         string
	OIDCClientSecretFile string // first line the secret (never a flag: process listings show flags)
	OIDCRoleClaim        string
	OIDCRoles            string // claim value=role, comma separated
	OIDCNameClaim        string
	OIDCAudience         string
}

// oidcRows are the single sign-on rows of configFields.
func oidcRows[C any]() envflag.Fields[C] {
	return envflag.Fields[C]{
		{Name: "OIDCIssuer", Flag: "oidc-issuer", Env: "NOFLY_OIDC_ISSUER", Usage: "OpenID Connect issuer URL (https; http only on loopback): people sign in to the dashboard through it (authorization code flow with PKCE; the redirect URL is <first --public-url>/auth/callback) and its JWT access tokens are accepted as bearer tokens; discovered at start (retried for 30s)"},
		{Name: "OIDCClientID", Flag: "oidc-client-id", Env: "NOFLY_OIDC_CLIENT_ID", Usage: "nofly's client id at the provider (and the ID token's audience)"},
		{Name: "OIDCClientSecretFile", Flag: "oidc-client-secret-file", Env: "NOFLY_OIDC_CLIENT_SECRET_FILE", Usage: "file whose first line is the client secret (never a flag); empty: a public client, PKCE only"},
		{Name: "OIDCRoleClaim", Flag: "oidc-role-claim", Env: "NOFLY_OIDC_ROLE_CLAIM", Usage: "the token claim --oidc-roles maps (a string or a list; a dotted name reads into objects, e.g. realm_access.roles)"},
		{Name: "OIDCRoles", Flag: "oidc-roles", Env: "NOFLY_OIDC_ROLES", Usage: "claim value=viewer|operator|admin, comma separated (nofly-admins=admin,nofly-operators=operator); several mapped values: the highest role; none: 403"},
		{Name: "OIDCNameClaim", Flag: "oidc-name-claim", Env: "NOFLY_OIDC_NAME_CLAIM", Usage: "the claim that names the person (an ack's and a zone change's by); missing: preferred_username, then email, then sub"},
		{Name: "OIDCAudience", Flag: "oidc-audience", Env: "NOFLY_OIDC_AUDIENCE", Usage: "what a JWT access token's aud must hold; empty: --oidc-client-id"},
	}
}

// oidcDefaults are the defaults of the single sign-on flags.
func oidcDefaults() OIDCSettings {
	return OIDCSettings{OIDCRoleClaim: "groups", OIDCNameClaim: "preferred_username"}
}

// checkOIDC validates the single sign-on flags, naming the flag.
func (c Config) checkOIDC() error {
	o := c.OIDCSettings
	if o.OIDCIssuer == "" {
		for _, f := range [][2]string{{"OIDCClientID", o.OIDCClientID}, {"OIDCClientSecretFile", o.OIDCClientSecretFile},
			{"OIDCRoles", o.OIDCRoles}, {"OIDCAudience", o.OIDCAudience}} {
			if f[1] != "" {
				return badField(f[0], "is set but --oidc-issuer is not (single sign-on is off without it)")
			}
		}
		return nil
	}
	u, err := url.Parse(o.OIDCIssuer)
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return badField("OIDCIssuer", fmt.Sprintf("%q is not an issuer URL (https://host[:port][/path])", o.OIDCIssuer))
	case u.Scheme != "https" && !(u.Scheme == "http" && loopbackAddr(hostPort(u))):
		return badField("OIDCIssuer", fmt.Sprintf("%q must be https (http only for a provider on loopback)", o.OIDCIssuer))
	case o.OIDCClientID == "":
		return badField("OIDCClientID", "required with --oidc-issuer")
	case o.OIDCRoleClaim == "":
		return badField("OIDCRoleClaim", "required with --oidc-issuer (the claim --oidc-roles maps, e.g. groups)")
	case o.OIDCRoles == "":
		return badField("OIDCRoles", "required with --oidc-issuer: claim value=role pairs, e.g. nofly-admins=admin,nofly-operators=operator")
	case o.OIDCNameClaim == "":
		return badField("OIDCNameClaim", "required with --oidc-issuer (e.g. preferred_username)")
	}
	if _, err := api.ParseOIDCRoles(o.OIDCRoles); err != nil {
		return badField("OIDCRoles", err.Error())
	}
	if len(c.PublicURLs) == 0 && !loopbackAddr(c.HTTPAddr) {
		return badField("PublicURLs", "--oidc-issuer needs a --public-url when --http is not a loopback address: the provider sends browsers back to <public-url>/auth/callback")
	}
	return nil
}

// hostPort is u's host with its scheme's port, for loopbackAddr.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return u.Host + ":80"
}

// openOIDC discovers the provider (nil without --oidc-issuer). The client
// secret is read from its file here and never logged.
func (c Config) openOIDC(ctx context.Context, log *slog.Logger) (*api.OIDC, error) {
	o := c.OIDCSettings
	if o.OIDCIssuer == "" {
		return nil, nil
	}
	roles, err := api.ParseOIDCRoles(o.OIDCRoles)
	if err != nil {
		return nil, badField("OIDCRoles", err.Error())
	}
	secret := ""
	if o.OIDCClientSecretFile != "" {
		if secret, err = secretfile.Read(o.OIDCClientSecretFile); err != nil {
			return nil, badField("OIDCClientSecretFile", err.Error())
		}
	}
	redirect := ""
	if len(c.PublicURLs) > 0 {
		redirect = strings.TrimSuffix(c.PublicURLs[0], "/") + "/auth/callback"
	}
	p, err := api.NewOIDC(ctx, api.OIDCConfig{Issuer: o.OIDCIssuer, ClientID: o.OIDCClientID, ClientSecret: secret,
		RoleClaim: o.OIDCRoleClaim, Roles: roles, NameClaim: o.OIDCNameClaim, Audience: o.OIDCAudience,
		RedirectURL: redirect, DiscoveryTimeout: 30 * time.Second, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%w: --oidc-issuer: %w", ErrConfig, err)
	}
	log.Info("api: single sign-on", "issuer", o.OIDCIssuer, "client_id", o.OIDCClientID, "role_claim", o.OIDCRoleClaim,
		"roles", len(roles), "redirect_url", redirect, "client_secret", o.OIDCClientSecretFile != "")
	return p, nil
}
