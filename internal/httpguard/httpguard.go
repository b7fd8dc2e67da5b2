// Package httpguard holds the rules both HTTP services (ingest and the
// alerter's API) apply to every request before its route sees it, so that a
// web page the operator visits cannot use them (issue 26):
//
//   - Host: a request's Host must be a name or address of the listener
//     (Config.Listen), localhost, the machine's hostname, or the host of a
//     public URL (Config.PublicURLs). DNS rebinding, which lets a page on
//     attacker.example reach 127.0.0.1 with the browser's full
//     same-origin rights, always carries the attacker's hostname, so an IP
//     literal is never it: a listener on every address (":9102") accepts
//     any IP literal, one on a given IP that IP (and, on loopback, every
//     loopback address). localhost is accepted whatever the listener: a
//     browser sends it only to its own machine.
//   - Origin: a write (POST, PUT, PATCH, DELETE) whose Origin is not the
//     request's own (scheme and Host), nor a public URL's, nor one CORS
//     allows (Config.CORSOrigins), or that says Sec-Fetch-Site: cross-site
//     or same-site without such an origin, is cross-site: a form or fetch
//     of another page, which the services refuse. Clients that are not
//     browsers send neither header.
//   - Client address: the connection's peer, unless the peer is a trusted
//     proxy (Config.TrustedProxies): then the rightmost address of
//     X-Forwarded-For (or, without it, of Forwarded's for=) that is not a
//     trusted proxy. Rate limits, logs and the loopback checks use it.
//
// The services answer the refusals in their own error format; this package
// only decides.
package httpguard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// Config is what a Guard is made of. The zero value is a listener on every
// address with no public URL, no trusted proxy and no CORS origin: IP
// literals, localhost and the hostname are accepted, and every write from
// another origin is refused.
type Config struct {
	// Listen is the listener's address as configured (host:port; an empty
	// host, 0.0.0.0 or :: is every address). A host name is accepted as a
	// Host too.
	Listen string
	// PublicURLs are the URLs clients reach the service by (a proxy's, a
	// DNS name's, a compose service's): their hosts are accepted as Host,
	// their origins as a write's Origin. Each must pass ParsePublicURL.
	PublicURLs []string
	// TrustedProxies are the addresses (CIDRs, or single addresses) whose
	// forwarding headers name the client; ParseProxies reads them.
	TrustedProxies []string
	// CORSOrigins are the origins a browser may write from (the alerter's
	// --api-cors-origins; "*" is any origin but "null").
	CORSOrigins []string
	// Hostname is the machine's name, accepted as Host; empty: os.Hostname.
	Hostname string
}

// Guard applies a Config. It is safe for concurrent use.
type Guard struct {
	names    map[string]bool // host names accepted as Host (lower case, no trailing dot)
	anyIP    bool            // every IP literal is accepted
	ips      []netip.Addr    // else these
	loopback bool            // and every loopback address
	origins  map[string]bool // public URLs' origins
	cors     map[string]bool
	corsAny  bool
	proxies  []netip.Prefix
}

// New checks c and returns its Guard; an error names the bad value.
func New(c Config) (*Guard, error) {
	g := &Guard{names: map[string]bool{"localhost": true}, origins: map[string]bool{}, cors: map[string]bool{}}
	host := ""
	if c.Listen != "" {
		h, _, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen address %q is not host:port", c.Listen)
		}
		host = h
	}
	switch a, err := netip.ParseAddr(strings.Trim(host, "[]")); {
	case host == "":
		g.anyIP = true
	case err == nil && a.IsUnspecified():
		g.anyIP = true
	case err == nil:
		a = a.Unmap().WithZone("")
		g.ips = append(g.ips, a)
		g.loopback = a.IsLoopback()
	default:
		// A name: accepted itself; its addresses are IP literals, which
		// rebinding never sends.
		g.names[normHost(host)] = true
		g.anyIP = true
	}
	hn := c.Hostname
	if hn == "" {
		hn, _ = os.Hostname()
	}
	if hn != "" {
		g.names[normHost(hn)] = true
	}
	for _, s := range c.PublicURLs {
		u, err := ParsePublicURL(s)
		if err != nil {
			return nil, err
		}
		h := normHost(u.Hostname())
		if a, err := netip.ParseAddr(h); err == nil {
			g.ips = append(g.ips, a.Unmap())
		} else {
			g.names[h] = true
		}
		g.origins[originOf(u.Scheme, u.Host)] = true
	}
	ps, err := ParseProxies(c.TrustedProxies)
	if err != nil {
		return nil, err
	}
	g.proxies = ps
	for _, o := range c.CORSOrigins {
		if o == "*" {
			g.corsAny = true
			continue
		}
		n, ok := normOrigin(o)
		if !ok {
			return nil, fmt.Errorf("CORS origin %q is not scheme://host[:port]", o)
		}
		g.cors[n] = true
	}
	return g, nil
}

// ParsePublicURL reads a public URL: http or https, a host, an optional
// port, and no path beyond "/", query, fragment or user.
func ParsePublicURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("public URL %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("public URL %q: the scheme must be http or https", s)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("public URL %q: no host", s)
	case u.User != nil:
		return nil, fmt.Errorf("public URL %q: no user:password@ part", s)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return nil, fmt.Errorf("public URL %q: nothing after the host and port but /", s)
	}
	if p := u.Port(); p != "" {
		if _, err := netip.ParseAddrPort("127.0.0.1:" + p); err != nil {
			return nil, fmt.Errorf("public URL %q: bad port %q", s, p)
		}
	}
	return u, nil
}

// ParseProxies reads trusted proxies: CIDRs (10.0.0.0/8) or single
// addresses (127.0.0.1, ::1).
func ParseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("trusted proxy %q is neither a CIDR (10.0.0.0/8) nor an address", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// normHost lower-cases a host name and drops a trailing dot.
func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// HostAllowed reports whether a request's Host header (host[:port]) names
// this service.
func (g *Guard) HostAllowed(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "" {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return false
		}
		a = a.Unmap()
		return g.anyIP || slices.Contains(g.ips, a) || (g.loopback && a.IsLoopback())
	}
	return g.names[normHost(h)]
}

// Trusted reports whether a is a trusted proxy.
func (g *Guard) Trusted(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range g.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Proxies reports whether any proxy is trusted.
func (g *Guard) Proxies() bool { return len(g.proxies) > 0 }

// PeerAddr is the address of a request's connection peer (RemoteAddr
// without its port); invalid when RemoteAddr is not an address.
func PeerAddr(remoteAddr string) netip.Addr {
	h := remoteAddr
	if hh, _, err := net.SplitHostPort(remoteAddr); err == nil {
		h = hh
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// Client is who sent r. Without a trusted peer it is the peer, and
// forwarded is false. With one it is the rightmost address of the
// forwarding chain (X-Forwarded-For, else Forwarded's for=) that is not a
// trusted proxy, or the leftmost when all are; forwarded is then true, and
// the address is invalid when the chain is broken (an entry that is not an
// address, such as "unknown", before any untrusted one): such a client is
// nobody's, never loopback.
func (g *Guard) Client(r *http.Request) (client netip.Addr, forwarded bool) {
	peer := PeerAddr(r.RemoteAddr)
	if !peer.IsValid() || !g.Trusted(peer) {
		return peer, false
	}
	chain := forwardedFor(r.Header)
	if len(chain) == 0 {
		return peer, false
	}
	for i := len(chain) - 1; i >= 0; i-- {
		a, ok := parseNode(chain[i])
		if !ok {
			return netip.Addr{}, true
		}
		if !g.Trusted(a) || i == 0 {
			return a, true
		}
	}
	return netip.Addr{}, true // unreachable: i == 0 returns
}

// forwardedFor is the forwarding chain of h, oldest first: the
// X-Forwarded-For entries of every such header in order, or, when there is
// none, the for= of every Forwarded element.
func forwardedFor(h http.Header) []string {
	var out []string
	for _, v := range h.Values("X-Forwarded-For") {
		for _, e := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(e))
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, el := range forwardedElements(h) {
		out = append(out, el["for"])
	}
	return out
}

// forwardedElements parses every Forwarded header (RFC 7239) into its
// elements, each a map of lower-cased parameter names to unquoted values.
func forwardedElements(h http.Header) []map[string]string {
	var out []map[string]string
	for _, v := range h.Values("Forwarded") {
		el := map[string]string{}
		key, val, inKey, quoted, escaped := "", "", true, false, false
		flush := func() {
			if k := strings.ToLower(strings.TrimSpace(key)); k != "" {
				el[k] = strings.TrimSpace(val)
			}
			key, val, inKey = "", "", true
		}
		for _, c := range v {
			switch {
			case escaped:
				val += string(c)
				escaped = false
			case quoted && c == '\\':
				escaped = true
			case c == '"' && !inKey:
				quoted = !quoted
			case quoted:
				val += string(c)
			case c == ';':
				flush()
			case c == ',':
				flush()
				out = append(out, el)
				el = map[string]string{}
			case c == '=' && inKey:
				inKey = false
			case inKey:
				key += string(c)
			default:
				val += string(c)
			}
		}
		flush()
		out = append(out, el)
	}
	return out
}

// parseNode reads one forwarding entry: an address, with or without a
// port, IPv6 in brackets or not.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// scheme is the scheme r was sent with: https over TLS; a trusted proxy's
// X-Forwarded-Proto or Forwarded proto= (its last) when it says one.
func (g *Guard) scheme(r *http.Request) string {
	s := "http"
	if r.TLS != nil {
		s = "https"
	}
	if !g.Trusted(PeerAddr(r.RemoteAddr)) {
		return s
	}
	if vs := r.Header.Values("X-Forwarded-Proto"); len(vs) > 0 {
		parts := strings.Split(vs[len(vs)-1], ",")
		if p := strings.ToLower(strings.TrimSpace(parts[len(parts)-1])); p == "http" || p == "https" {
			return p
		}
		return s
	}
	if els := forwardedElements(r.Header); len(els) > 0 {
		if p := strings.ToLower(els[len(els)-1]["proto"]); p == "http" || p == "https" {
			return p
		}
	}
	return s
}

// originOf is scheme://host[:port] lower-cased, the scheme's default port
// left out, as browsers write Origin.
func originOf(scheme, hostport string) string {
	scheme, hostport = strings.ToLower(scheme), strings.ToLower(hostport)
	if h, p, err := net.SplitHostPort(hostport); err == nil && ((scheme == "http" && p == "80") || (scheme == "https" && p == "443")) {
		hostport = h
		if strings.Contains(h, ":") {
			hostport = "[" + h + "]"
		}
	}
	return scheme + "://" + strings.TrimSuffix(hostport, ".")
}

// normOrigin normalizes an Origin value; false when it is not one (null
// included).
func normOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return originOf(u.Scheme, u.Host), true
}

// IsWrite reports whether method changes something: POST, PUT, PATCH,
// DELETE (and any method not known to be safe).
func IsWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// ErrCrossSite is wrapped by every refusal of CheckOrigin.
var ErrCrossSite = errors.New("cross-site write refused")

// CheckOrigin refuses a write a browser sent from another site: an Origin
// that is neither the request's own origin, nor a public URL's, nor one
// CORS allows; a second Origin; or Sec-Fetch-Site cross-site or same-site
// without an origin CORS allows. Reads are not its business (a browser
// keeps another origin's page from reading them, unless CORS allows it).
func (g *Guard) CheckOrigin(r *http.Request) error {
	if !IsWrite(r.Method) {
		return nil
	}
	origins := r.Header.Values("Origin")
	if len(origins) > 1 {
		return fmt.Errorf("%w: more than one Origin header", ErrCrossSite)
	}
	origin := ""
	if len(origins) == 1 {
		origin = origins[0]
	}
	norm, valid := normOrigin(origin)
	allowed := valid && (g.corsAny || g.cors[norm])
	switch site := strings.ToLower(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site"))); site {
	case "cross-site", "same-site":
		if !allowed {
			return fmt.Errorf("%w: Sec-Fetch-Site: %s from origin %s, which no CORS origin of this server allows", ErrCrossSite, site, Quote(origin, 100))
		}
	}
	if origin == "" || allowed {
		return nil
	}
	if valid && (norm == originOf(g.scheme(r), r.Host) || g.origins[norm]) {
		return nil
	}
	return fmt.Errorf("%w: origin %s is not this server's (%s) nor a --public-url's", ErrCrossSite, Quote(origin, 100), originOf(g.scheme(r), r.Host))
}

// Quote quotes at most the first n runes of s (an ellipsis marks the cut)
// for an error message: what a client sent is never echoed whole.
func Quote(s string, n int) string { return fmt.Sprintf("%q", Clip(s, n)) }

// Clip is at most the first n runes of s, "…" appended when cut; invalid
// UTF-8 is replaced.
func Clip(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	i, k := 0, 0
	for i < len(s) && k < n {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		k++
	}
	if i < len(s) {
		return s[:i] + "…"
	}
	return s
}
