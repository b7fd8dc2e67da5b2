package alerterd

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/redisconn"
)

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(Config) bool
		wantErr string
	}{
		{"zones required", nil, nil, nil, "Zones (--zones, NOFLY_ZONES)"},
		{"defaults", []string{"--zones", "z.geojson"}, nil, func(c Config) bool {
			d := DefaultConfig()
			d.Zones = "z.geojson"
			return reflect.DeepEqual(c, d)
		}, ""},
		{"env fills", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_KAFKA_BROKERS": "a:1,b:2", "NOFLY_ALERTER_BATCH": "7", "NOFLY_ALERTER_LINGER": "5ms"},
			func(c Config) bool {
				return c.Zones == "z" && reflect.DeepEqual(c.Brokers, []string{"a:1", "b:2"}) && c.Batch == 7 && c.Linger == 5*time.Millisecond
			}, ""},
		{"flag beats env", []string{"--batch", "9"}, map[string]string{"NOFLY_ZONES": "z", "NOFLY_ALERTER_BATCH": "7"},
			func(c Config) bool { return c.Batch == 9 }, ""},
		{"bad batch", []string{"--zones", "z", "--batch", "0"}, nil, nil, "Batch (--batch, NOFLY_ALERTER_BATCH)"},
		{"bad env value", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_ALERTER_BATCH": "x"}, nil, "NOFLY_ALERTER_BATCH"},
		{"bad broker", []string{"--zones", "z", "--brokers", "nohost"}, nil, nil, "Brokers"},
		{"prefix without braces", []string{"--zones", "z", "--redis-prefix", "a{b"}, nil, nil, "RedisPrefix"},
		{"session vs heartbeat", []string{"--zones", "z", "--session-timeout", "2s", "--heartbeat", "1s"}, nil, nil, "SessionTimeout"},
		{"http off", []string{"--zones", "z", "--http", ""}, nil, func(c Config) bool { return c.HTTPAddr == "" }, ""},
		{"zone options", []string{"--zones", "z", "--strict-zones", "--conservative-zones", "--allow-empty-zones"}, nil, func(c Config) bool {
			s := c.zoneSource()
			return c.StrictZones && c.ConservativeZones && c.AllowEmptyZones && s.loader.Strict && s.loader.Conservative && s.allowEmpty
		}, ""},
		{"zone options from env", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_STRICT_ZONES": "true", "NOFLY_CONSERVATIVE_ZONES": "1", "NOFLY_ALLOW_EMPTY_ZONES": "false"},
			func(c Config) bool { return c.StrictZones && c.ConservativeZones && !c.AllowEmptyZones }, ""},
		{"bad bool env", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_STRICT_ZONES": "maybe"}, nil, "NOFLY_STRICT_ZONES"},
		{"approach settings", []string{"--zones", "z", "--approach-before", "restricted=45s, *=0s", "--approach-buffer", "80"}, nil, func(c Config) bool {
			a := c.approach()
			return a.Before["restricted"] == 45*time.Second && a.Before["*"] == 0 && len(a.Before) == 2 && a.BufferM == 80
		}, ""},
		{"approach off", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_APPROACH_BEFORE": "off"}, func(c Config) bool { return !c.approach().On() }, ""},
		{"approach without a duration", []string{"--zones", "z", "--approach-before", "restricted"}, nil, nil, "ApproachBefore (--approach-before"},
		{"approach over an hour", []string{"--zones", "z", "--approach-before", "*=2h"}, nil, nil, "ApproachBefore"},
		{"approach category twice", []string{"--zones", "z", "--approach-before", "a=1s,a=2s"}, nil, nil, "category \"a\" twice"},
		{"approach buffer negative", []string{"--zones", "z", "--approach-buffer", "-1"}, nil, nil, "ApproachBufferM"},
		{"alertmanagers", []string{"--zones", "z", "--alertmanager", "http://am1:9093", "--alertmanager", "http://am2:9093/", "--public-url", "https://nofly.example/",
			"--alertmanager-severity", "restricted=page, *=info", "--alertmanager-refresh", "20s", "--alertmanager-silence-max", "1h"}, nil, func(c Config) bool {
			a := c.dispatchConfig().Alertmanager
			return c.dispatching() && reflect.DeepEqual(a.URLs, []string{"http://am1:9093", "http://am2:9093/"}) &&
				reflect.DeepEqual(a.Severity, map[string]string{"restricted": "page", "*": "info"}) &&
				a.Refresh == 20*time.Second && a.SilenceMax == time.Hour && a.DashboardURL == "https://nofly.example/"
		}, ""},
		{"alertmanagers from env", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_ALERTMANAGER": "http://a:1, http://b:2"},
			func(c Config) bool { return reflect.DeepEqual(c.Alertmanagers, []string{"http://a:1", "http://b:2"}) }, ""},
		{"alertmanager default severity", []string{"--zones", "z"}, nil, func(c Config) bool {
			return reflect.DeepEqual(c.alertmanager().Severity, map[string]string{"restricted": "critical", "prohibited": "critical", "*": "warning"})
		}, ""},
		{"alertmanager not a URL", []string{"--zones", "z", "--alertmanager", "am1:9093"}, nil, nil, "Alertmanagers (--alertmanager, NOFLY_ALERTMANAGER)"},
		{"alertmanager twice", []string{"--zones", "z", "--alertmanager", "http://am1:9093", "--alertmanager", "http://am1:9093/"}, nil, nil, "given twice"},
		{"alertmanager severity bad", []string{"--zones", "z", "--alertmanager-severity", "restricted"}, nil, nil, "AlertmanagerSeverity"},
		{"alertmanager refresh at resolve_timeout", []string{"--zones", "z", "--alertmanager-refresh", "5m"}, nil, nil, "AlertmanagerRefresh"},
		{"alertmanager silence too short", []string{"--zones", "z", "--alertmanager-silence-max", "30s"}, nil, nil, "AlertmanagerSilenceMax"},
		{"zone limits by default", []string{"--zones", "z"}, nil, func(c Config) bool {
			return c.ZoneHistoryMaxBytes == 512<<20 && c.APIZoneSetMaxBytes == 128<<20
		}, ""},
		{"zone limits set", []string{"--zones", "z", "--zone-history-max-bytes", "2097152"}, map[string]string{"NOFLY_API_ZONE_SET_MAX_BYTES": "67108864"},
			func(c Config) bool { return c.ZoneHistoryMaxBytes == 2<<20 && c.APIZoneSetMaxBytes == 64<<20 }, ""},
		{"zone history under 1 MiB", []string{"--zones", "z", "--zone-history-max-bytes", "1000"}, nil, nil, "ZoneHistoryMaxBytes (--zone-history-max-bytes"},
		{"zone set body over 1 GiB", []string{"--zones", "z", "--api-zone-set-max-bytes", "2147483648"}, nil, nil, "APIZoneSetMaxBytes (--api-zone-set-max-bytes"},
		{"map tiles", []string{"--zones", "z", "--map-tiles", "https://tiles.example:8443/osm/{z}/{x}/{y}.png?key=k", "--map-attribution", "© OpenStreetMap contributors"}, nil,
			func(c Config) bool { return c.tileOrigin() == "https://tiles.example:8443" }, ""},
		{"map tiles without y", []string{"--zones", "z", "--map-tiles", "https://tiles.example/{z}/{x}.png", "--map-attribution", "x"}, nil, nil, "MapTiles (--map-tiles, NOFLY_MAP_TILES)"},
		{"map tiles not http", []string{"--zones", "z", "--map-tiles", "file:///tiles/{z}/{x}/{y}.png", "--map-attribution", "x"}, nil, nil, "must be an http(s)"},
		{"map tiles host varies", []string{"--zones", "z", "--map-tiles", "https://{z}.tiles.example/{x}/{y}.png", "--map-attribution", "x"}, nil, nil, "one origin"},
		{"map tiles without credit", nil, map[string]string{"NOFLY_ZONES": "z", "NOFLY_MAP_TILES": "https://t.example/{z}/{x}/{y}.png"}, nil, "MapAttribution (--map-attribution"},
		{"map attribution alone", []string{"--zones", "z", "--map-attribution", "x"}, nil, nil, "give --map-tiles or --map-pmtiles with it"},
		{"map attribution too long", []string{"--zones", "z", "--map-tiles", "https://t.example/{z}/{x}/{y}.png", "--map-attribution", strings.Repeat("x", 301)}, nil, nil, "at most 300"},
		{"map pmtiles missing", []string{"--zones", "z", "--map-pmtiles", "/nonexistent/map.pmtiles"}, nil, nil, "MapPMTiles (--map-pmtiles, NOFLY_MAP_PMTILES): /nonexistent/map.pmtiles"},
		{"map both", []string{"--zones", "z", "--map-pmtiles", "a.pmtiles", "--map-tiles", "https://t.example/{z}/{x}/{y}.png", "--map-attribution", "x"}, nil, nil, "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrConfig naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("config = %+v", c)
			}
		})
	}
}

// TestReadmeTable keeps README.md's table in step with the flags: a row
// per field with its flag, variable and default (configFields).
func TestReadmeTable(t *testing.T) {
	b, err := os.ReadFile("../../cmd/alerter/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range configFields.CheckReadme(string(b), DefaultConfig(), 2) {
		t.Errorf("cmd/alerter/README.md: %s", d)
	}
}

// TestSettingsTable keeps docs/settings.md's one table of the services'
// settings (variable, flag, commands, default), which was the repository
// README's until issue 34, in step with this command's flags.
func TestSettingsTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range configFields.CheckReadme(string(b), DefaultConfig(), 3) {
		t.Errorf("docs/settings.md: %s", d)
	}
}

// TestConfigFieldsCoverConfig: every Config field has a row in the table,
// and every row names a field, so a new field cannot miss its flag.
func TestConfigFieldsCoverConfig(t *testing.T) {
	for _, m := range configFields.Missing() {
		t.Error(m)
	}
}

// TestEnvironRoundTrip: a configuration unlike the defaults in every field,
// turned into variables and parsed back, is itself; so is one that empties
// what can be empty, through flags (no variable can clear a default).
func TestEnvironRoundTrip(t *testing.T) {
	c := Config{
		Brokers: []string{"k1:1", "k2:2"}, Topic: "t.x", Partitions: 3, Group: "g",
		Security: kafkaconn.Security{KafkaTLS: true, KafkaTLSCA: "ca.pem", KafkaTLSCert: "c.pem", KafkaTLSKey: "k.pem",
			KafkaSASL: "SCRAM-SHA-512", KafkaSASLUser: "u", KafkaSASLPasswordFile: "pw"},
		RedisAddr: "redis-cluster://r:1",
		Access: redisconn.Access{RedisUser: "ru", RedisPasswordFile: "rpw", RedisTLS: true, RedisTLSCA: "rca.pem",
			RedisTLSCert: "rc.pem", RedisTLSKey: "rk.pem"},
		RedisPrefix: "p", EventTTL: 2 * time.Hour, RedisMinReplicas: 2, RedisReplicaTimeout: 500 * time.Millisecond,
		Zones: "z.geojson", StrictZones: true, ConservativeZones: true, AllowEmptyZones: true,
		Batch: 7, Linger: 5 * time.Millisecond, LingerIdle: 3 * time.Millisecond,
		SessionTimeout: 9 * time.Second, HeartbeatInterval: 2 * time.Second, RebalanceTimeout: 4 * time.Second,
		EventsTopic: "e.x", Webhooks: []WebhookURL{{"a", "http://h:1/a"}, {"b", "https://h/b?q=1"}},
		WebhookMaxAttempts: 2, WebhookTimeout: 3 * time.Second, OutboxRetention: time.Minute,
		Alertmanagers: []string{"http://am1:9093", "https://am2.example/am"}, AlertmanagerSeverity: "restricted=page,*=info",
		AlertmanagerRefresh: 30 * time.Second, AlertmanagerSilenceMax: 2 * time.Hour,
		HTTPAddr: "127.0.0.1:9", LogLevel: "debug",
		APITokens: "tokens.txt", APICORSOrigins: []string{"https://a.example", "https://b.example"},
		PublicURLs: []string{"https://nofly.example", "http://alerter:9102"}, TrustedProxies: []string{"10.0.0.0/8", "127.0.0.1"},
		APIRatePerToken: 7, APIRatePerAddr: 9, AlarmRetention: 3 * time.Hour, ZoneHistoryMaxBytes: 2 << 20, APIZoneSetMaxBytes: 3 << 20,
		SignalLostAfter: 45 * time.Second, DroneTTL: 2 * time.Hour, ApproachBefore: "restricted=10s,*=0s", ApproachBufferM: 70,
		Limits: httpserve.Limits{HTTPReadHeaderTimeout: time.Second, HTTPReadTimeout: 2 * time.Second, HTTPWriteTimeout: 3 * time.Second,
			HTTPIdleTimeout: 4 * time.Second, HTTPMaxHeaderBytes: 5000, HTTPMinBodyRate: 6000, HTTPMaxConns: 7},
		APIMaxStreams: 8, APIMaxStreamsPerToken: 3, APIMaxBulkRequests: 2,
		AuditTopic: "audit.test", AuditRetention: 48 * time.Hour,
		MapTiles: "https://tiles.example/{z}/{x}/{y}.png", MapAttribution: "© tiles",
		OIDCSettings: OIDCSettings{OIDCIssuer: "https://idp.example/realms/nofly", OIDCClientID: "nofly", OIDCClientSecretFile: "oidc.secret",
			OIDCRoleClaim: "roles", OIDCRoles: "a=admin,o=operator", OIDCNameClaim: "email", OIDCAudience: "nofly-api"},
	}
	d := DefaultConfig()
	cv, dv := reflect.ValueOf(c), reflect.ValueOf(d)
	for i := range cv.NumField() {
		if cv.Type().Field(i).Name == "MapPMTiles" { // it and MapTiles exclude each other
			continue
		}
		if reflect.DeepEqual(cv.Field(i).Interface(), dv.Field(i).Interface()) {
			t.Fatalf("field %s is its default: the round trip would not test it", cv.Type().Field(i).Name)
		}
	}
	vars, flags := c.Environ()
	if len(vars) != len(configFields)-1 || len(flags) != 1 || flags[0] != "--map-pmtiles=" {
		t.Fatalf("Environ gave %d variables and flags %v, want %d variables and only --map-pmtiles=: %v", len(vars), flags, len(configFields)-1, vars)
	}
	env := map[string]string{}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("parsed back\n%+v\nwant\n%+v", got, c)
	}

	empty := DefaultConfig()
	empty.Zones = "z"
	empty.EventsTopic, empty.HTTPAddr = "", ""
	vars, flags = empty.Environ()
	if want := []string{"--kafka-tls-ca=", "--kafka-tls-cert=", "--kafka-tls-key=", "--kafka-sasl=", "--kafka-sasl-user=", "--kafka-sasl-password-file=",
		"--redis-user=", "--redis-password-file=", "--redis-tls-ca=", "--redis-tls-cert=", "--redis-tls-key=",
		"--events-topic=", "--webhook=", "--alertmanager=", "--http=", "--api-tokens=", "--api-cors-origins=", "--public-url=", "--trusted-proxies=",
		"--map-tiles=", "--map-pmtiles=", "--map-attribution=", "--oidc-issuer=", "--oidc-client-id=", "--oidc-client-secret-file=", "--oidc-roles=", "--oidc-audience="}; !reflect.DeepEqual(flags, want) {
		t.Fatalf("flags %v, want %v", flags, want)
	}
	env = map[string]string{}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// The variables an operator's shell might hold lose to the flags.
	env["NOFLY_EVENTS_TOPIC"], env["NOFLY_ALERTER_HTTP"] = "other.events", ":1"
	if got, err = parseConfig(flags, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, empty) {
		t.Fatalf("parsed back\n%+v\nwant\n%+v", got, empty)
	}
}

// TestRetentionReachesStores: --alarm-retention is the alarm index's
// retention in the batch script and the zone store's history length.
func TestRetentionReachesStores(t *testing.T) {
	c := DefaultConfig()
	c.AlarmRetention = 5 * time.Hour
	if got := c.groupOptions(nil, nil, nil).AlarmRetention; got != c.AlarmRetention {
		t.Errorf("consume.Options.AlarmRetention = %v, want %v", got, c.AlarmRetention)
	}
	if got := c.zoneRetention(); got != c.AlarmRetention {
		t.Errorf("zone retention = %v, want %v", got, c.AlarmRetention)
	}
}
