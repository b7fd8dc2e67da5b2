package httpguard

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func mustGuard(t *testing.T, c Config) *Guard {
	t.Helper()
	if c.Hostname == "" {
		c.Hostname = "ops-box"
	}
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHostileHostHeaders: the Host names a listener's address or name,
// localhost, the hostname or a public URL's host; anything else (the name
// a DNS-rebinding page was loaded from) is refused, on every kind of
// listener.
func TestHostileHostHeaders(t *testing.T) {
	pub := []string{"https://nofly.example.com", "http://10.9.9.9:8080/"}
	tests := []struct {
		listen string
		host   string
		want   bool
	}{
		// A loopback listener.
		{"127.0.0.1:9102", "127.0.0.1:9102", true},
		{"127.0.0.1:9102", "127.0.0.1", true},
		{"127.0.0.1:9102", "127.0.0.2:9102", true}, // any loopback literal
		{"127.0.0.1:9102", "[::1]:9102", true},
		{"127.0.0.1:9102", "localhost:9102", true},
		{"127.0.0.1:9102", "LOCALHOST.:9102", true},
		{"127.0.0.1:9102", "ops-box:9102", true},
		{"127.0.0.1:9102", "nofly.example.com", true},
		{"127.0.0.1:9102", "10.9.9.9:8080", true}, // a public URL's address
		{"127.0.0.1:9102", "attacker.example:9102", false},
		{"127.0.0.1:9102", "127.0.0.1.nip.io:9102", false},
		{"127.0.0.1:9102", "192.168.1.5:9102", false},
		{"127.0.0.1:9102", "", false},
		{"127.0.0.1:9102", "[fe80::1%25eth0]:9102", false},
		// Every address: any IP literal.
		{":9102", "192.168.1.5:9102", true},
		{"0.0.0.0:9102", "[2001:db8::1]:9102", true},
		{"[::]:9102", "10.0.0.1", true},
		{":9102", "attacker.example", false},
		{":9102", "alerter:9102", false},
		// A listener on one address.
		{"10.0.0.5:9102", "10.0.0.5:9102", true},
		{"10.0.0.5:9102", "10.0.0.6:9102", false},
		{"10.0.0.5:9102", "127.0.0.1:9102", false},
		// A listener by name: the name.
		{"alerter:9102", "alerter:9102", true},
		{"alerter:9102", "Alerter", true},
		{"alerter:9102", "other:9102", false},
	}
	for _, tt := range tests {
		g := mustGuard(t, Config{Listen: tt.listen, PublicURLs: pub})
		if got := g.HostAllowed(tt.host); got != tt.want {
			t.Errorf("listen %s, Host %q: allowed %v, want %v", tt.listen, tt.host, got, tt.want)
		}
	}
}

func TestPublicURLs(t *testing.T) {
	for _, s := range []string{"http://a", "https://a.example:8443", "http://[::1]:9102/", "HTTP://A.EXAMPLE"} {
		if _, err := ParsePublicURL(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "a.example", "ftp://a", "http://", "http://a/api", "http://a/?x", "http://a#f", "http://u:p@a", "http://a:99999", "http://:80"} {
		if _, err := ParsePublicURL(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if _, err := New(Config{PublicURLs: []string{"http://a/path"}}); err == nil || !strings.Contains(err.Error(), "http://a/path") {
		t.Errorf("New with a bad public URL: %v", err)
	}
	if _, err := New(Config{TrustedProxies: []string{"10.0.0.0/33"}}); err == nil {
		t.Error("a bad CIDR accepted")
	}
}

// TestHostileCrossSiteOrigins: a write from the request's own origin, a
// public URL's or a CORS origin passes; one from any other origin, with
// Sec-Fetch-Site cross-site or same-site (unless CORS allows the origin),
// or with two Origin headers, is refused. Reads are never refused here.
func TestHostileCrossSiteOrigins(t *testing.T) {
	g := mustGuard(t, Config{Listen: "127.0.0.1:9102", PublicURLs: []string{"https://nofly.example.com"},
		CORSOrigins: []string{"https://grafana.example.com"}, TrustedProxies: []string{"10.1.0.0/16"}})
	tests := []struct {
		name, method, host, remote string
		hdr                        []string
		tls                        bool
		ok                         bool
	}{
		{"no browser headers", "POST", "127.0.0.1:9102", "", nil, false, true},
		{"own origin", "POST", "127.0.0.1:9102", "", []string{"Origin", "http://127.0.0.1:9102", "Sec-Fetch-Site", "same-origin"}, false, true},
		{"own origin, default port", "PUT", "127.0.0.1", "", []string{"Origin", "http://127.0.0.1:80"}, false, true},
		{"own origin over TLS", "DELETE", "127.0.0.1:9102", "", []string{"Origin", "https://127.0.0.1:9102"}, true, true},
		{"scheme differs", "POST", "127.0.0.1:9102", "", []string{"Origin", "https://127.0.0.1:9102"}, false, false},
		{"public URL's origin", "POST", "nofly.example.com", "", []string{"Origin", "https://nofly.example.com"}, false, true},
		{"a trusted proxy says https", "POST", "nofly.internal", "10.1.2.3:5555", []string{"Origin", "https://nofly.internal", "X-Forwarded-Proto", "https"}, false, true},
		{"an untrusted peer says https", "POST", "nofly.internal", "10.2.2.3:5555", []string{"Origin", "https://nofly.internal", "X-Forwarded-Proto", "https"}, false, false},
		{"CORS origin", "POST", "127.0.0.1:9102", "", []string{"Origin", "https://grafana.example.com", "Sec-Fetch-Site", "cross-site"}, false, true},
		{"another site's form", "POST", "127.0.0.1:9102", "", []string{"Origin", "https://attacker.example", "Sec-Fetch-Site", "cross-site"}, false, false},
		{"another site, no fetch metadata", "POST", "127.0.0.1:9102", "", []string{"Origin", "https://attacker.example"}, false, false},
		{"cross-site without Origin", "POST", "127.0.0.1:9102", "", []string{"Sec-Fetch-Site", "cross-site"}, false, false},
		{"same-site sibling", "POST", "127.0.0.1:9102", "", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://localhost:9102"}, false, false},
		{"null origin", "POST", "127.0.0.1:9102", "", []string{"Origin", "null"}, false, false},
		{"two origins", "POST", "127.0.0.1:9102", "", []string{"Origin", "http://127.0.0.1:9102", "Origin", "https://attacker.example"}, false, false},
		{"a read from anywhere", "GET", "127.0.0.1:9102", "", []string{"Origin", "https://attacker.example", "Sec-Fetch-Site", "cross-site"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://"+tt.host+"/v1/x", nil)
			r.Host = tt.host
			if tt.remote != "" {
				r.RemoteAddr = tt.remote
			}
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				r.Header.Add(tt.hdr[i], tt.hdr[i+1])
			}
			err := g.CheckOrigin(r)
			if (err == nil) != tt.ok {
				t.Errorf("CheckOrigin: %v, want ok %v", err, tt.ok)
			}
		})
	}
	any := mustGuard(t, Config{CORSOrigins: []string{"*"}})
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Origin", "https://x.example")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	if err := any.CheckOrigin(r); err != nil {
		t.Errorf("CORS * refused %v", err)
	}
	r.Header.Set("Origin", "null")
	if err := any.CheckOrigin(r); err == nil {
		t.Error("CORS * let the null origin write")
	}
}

// TestHostileForwardedFor: only a trusted peer's forwarding headers count;
// the client is the rightmost untrusted entry, so an address a client
// wrote into the header itself (127.0.0.1 to pass a loopback check) is
// never taken; a broken chain is nobody.
func TestHostileForwardedFor(t *testing.T) {
	g := mustGuard(t, Config{TrustedProxies: []string{"127.0.0.1", "10.0.0.0/8", "::1"}})
	tests := []struct {
		name, remote string
		hdr          []string
		want         string
		forwarded    bool
	}{
		{"no proxy", "203.0.113.5:4000", []string{"X-Forwarded-For", "127.0.0.1"}, "203.0.113.5", false},
		{"trusted, no header", "127.0.0.1:4000", nil, "127.0.0.1", false},
		{"one hop", "127.0.0.1:4000", []string{"X-Forwarded-For", "203.0.113.5"}, "203.0.113.5", true},
		{"spoofed loopback left of the real client", "127.0.0.1:4000", []string{"X-Forwarded-For", "127.0.0.1, 203.0.113.5"}, "203.0.113.5", true},
		{"two trusted hops", "127.0.0.1:4000", []string{"X-Forwarded-For", "198.51.100.7, 203.0.113.5, 10.0.0.2"}, "203.0.113.5", true},
		{"headers joined", "127.0.0.1:4000", []string{"X-Forwarded-For", "198.51.100.7", "X-Forwarded-For", "203.0.113.5"}, "203.0.113.5", true},
		{"all trusted: the leftmost", "127.0.0.1:4000", []string{"X-Forwarded-For", "127.0.0.1"}, "127.0.0.1", true},
		{"with ports and brackets", "[::1]:4000", []string{"X-Forwarded-For", "[2001:db8::7]:1234"}, "2001:db8::7", true},
		{"broken chain", "127.0.0.1:4000", []string{"X-Forwarded-For", "203.0.113.5, unknown"}, "invalid IP", true},
		{"Forwarded", "10.1.1.1:4000", []string{"Forwarded", `for=198.51.100.7;proto=https, for="[2001:db8::9]:80";by=10.0.0.1`}, "2001:db8::9", true},
		{"Forwarded hidden", "10.1.1.1:4000", []string{"Forwarded", "for=_hidden"}, "invalid IP", true},
		{"X-Forwarded-For wins", "10.1.1.1:4000", []string{"Forwarded", "for=127.0.0.1", "X-Forwarded-For", "203.0.113.9"}, "203.0.113.9", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				r.Header.Add(tt.hdr[i], tt.hdr[i+1])
			}
			a, fw := g.Client(r)
			if a.String() != tt.want || fw != tt.forwarded {
				t.Errorf("client %s forwarded %v, want %s %v", a, fw, tt.want, tt.forwarded)
			}
			if tt.want == "203.0.113.5" && a.IsLoopback() {
				t.Error("a forged loopback address was taken")
			}
		})
	}
}

func TestClip(t *testing.T) {
	if got := Clip(strings.Repeat("é", 10), 3); got != "ééé…" {
		t.Errorf("%q", got)
	}
	if got := Clip("abc", 3); got != "abc" {
		t.Errorf("%q", got)
	}
	if got := Quote("a\xffb", 5); got != `"a\ufffdb"` && got != `"a�b"` {
		t.Errorf("%s", got)
	}
	if IsWrite(http.MethodGet) || !IsWrite(http.MethodPatch) || !IsWrite("PROPFIND") {
		t.Error("IsWrite")
	}
}
