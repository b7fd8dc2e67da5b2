package alerterd

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestHostileAlerterFlags: --public-url (repeatable, or the variable's
// comma-separated list) and --trusted-proxies reach the API: a public
// URL's host passes the Host check that refuses any other name (421, in
// the loopback mode too), and a trusted proxy's X-Forwarded-For is the
// client logged; bad values stop the command at start naming the flag.
func TestHostileAlerterFlags(t *testing.T) {
	env := map[string]string{"NOFLY_ZONES": "z", "NOFLY_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}
	cfg, err := parseConfig([]string{"--http", "127.0.0.1:9102", "--public-url", "https://nofly.example.com", "--public-url", "http://alerter:9102,http://10.1.1.1:9102/"},
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://nofly.example.com", "http://alerter:9102", "http://10.1.1.1:9102/"}; !reflect.DeepEqual(cfg.PublicURLs, want) {
		t.Fatalf("PublicURLs %v, want %v", cfg.PublicURLs, want)
	}
	if want := []string{"127.0.0.1", "10.0.0.0/8"}; !reflect.DeepEqual(cfg.TrustedProxies, want) {
		t.Fatalf("TrustedProxies %v, want %v", cfg.TrustedProxies, want)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--public-url", "nofly.example.com"}, "PublicURLs (--public-url, NOFLY_ALERTER_PUBLIC_URLS)"},
		{[]string{"--public-url", "https://nofly.example.com/api"}, "PublicURLs (--public-url, NOFLY_ALERTER_PUBLIC_URLS)"},
		{[]string{"--public-url", "ftp://x"}, "PublicURLs"},
		{[]string{"--trusted-proxies", "10.0.0.0/40"}, "TrustedProxies (--trusted-proxies, NOFLY_TRUSTED_PROXIES)"},
		{[]string{"--trusted-proxies", "proxy.internal"}, "TrustedProxies"},
	} {
		if _, err := parseConfig(append([]string{"--zones", "z"}, tt.args...), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error naming %s", tt.args, err, tt.want)
		}
	}

	cfg.RedisAddr, cfg.RedisPrefix = testenv.Redis(t), testenv.RedisPrefix(t, "alerter-hostile")
	auth, err := cfg.loadAPIAuth()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := newAPI(ctx, cfg, auth, 2, newMetrics().reg, nil, nil, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	get := func(host, xff string) int {
		req := httptest.NewRequest(http.MethodGet, "/v1/alarms", nil)
		req.Host, req.RemoteAddr = host, "127.0.0.1:5000"
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for host, want := range map[string]int{"nofly.example.com": 200, "alerter:9102": 200, "10.1.1.1:9102": 200, "127.0.0.1:9102": 200,
		"localhost:9102": 200, "attacker.example:9102": 421, "10.9.9.9:9102": 421} {
		if got := get(host, ""); got != want {
			t.Errorf("Host %s: %d, want %d", host, got, want)
		}
	}
	if got := get("127.0.0.1:9102", "203.0.113.7"); got != 403 {
		t.Errorf("a remote client forwarded by the trusted loopback proxy, no token file: %d, want 403", got)
	}
	if !strings.Contains(logs.String(), `"remote":"203.0.113.7"`) {
		t.Errorf("the log does not name the forwarded client: %s", logs.String())
	}
}
