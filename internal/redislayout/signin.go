package redislayout

// SignIn names the keys of single sign-on (api/oidc.go) under prefix: the
// sessions and the sign-ins under way, in their own hash tag
// {prefix:signin}, shared by every alerter of the deployment.
type SignIn struct{ tag string }

// SignInOf returns the sign-in keys under prefix.
func SignInOf(prefix string) SignIn { return SignIn{tag: "{" + prefix + ":signin}"} }

// Tag is the hash tag, {prefix:signin}.
func (k SignIn) Tag() string { return k.tag }

// Session is the string (JSON, expiring with the provider's token) of the
// session whose cookie value's SHA-256 is hash (hex): Redis never holds a
// session id itself.
func (k SignIn) Session(hash string) string { return k.tag + ":session:" + hash }

// Login is the string (JSON, expiring after 10 minutes) of the sign-in
// under way whose state's SHA-256 is hash (hex), read and deleted at once
// by its callback.
func (k SignIn) Login(hash string) string { return k.tag + ":login:" + hash }
