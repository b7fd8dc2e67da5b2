package ingestd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/httpserve"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
)

func parseServe(args []string, env map[string]string) (Config, error) {
	cfg := DefaultConfig()
	fs := newFlagSet("test")
	fs.SetOutput(new(bytes.Buffer))
	fs.kafkaFlags(&cfg)
	fs.serveFlags(&cfg)
	if err := fs.Parse(args, func(k string) string { return env[k] }); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(Config) bool
		wantErr string // substring; "" = valid
	}{
		{name: "defaults", check: func(c Config) bool {
			return slices.Equal(c.Brokers, []string{"127.0.0.1:9092"}) && c.Topic == "telemetry.positions" &&
				c.Partitions == 12 && c.Addr == ":8080" && c.MaxRecords == 10_000
		}},
		{name: "env fallback", env: map[string]string{
			"NOFLY_KAFKA_BROKERS": "k1:9092, k2:9092", "NOFLY_TELEMETRY_TOPIC": "t.x", "NOFLY_TELEMETRY_PARTITIONS": "3",
			"NOFLY_INGEST_ADDR": ":9", "NOFLY_INGEST_MAX_BODY_BYTES": "1000", "NOFLY_INGEST_MAX_RECORDS": "5",
			"NOFLY_INGEST_MAX_LINE_BYTES": "500", "NOFLY_LOG_LEVEL": "debug", "NOFLY_INGEST_PRODUCE_TIMEOUT": "2s",
		}, check: func(c Config) bool {
			return slices.Equal(c.Brokers, []string{"k1:9092", "k2:9092"}) && c.Topic == "t.x" && c.Partitions == 3 &&
				c.Addr == ":9" && c.MaxBodyBytes == 1000 && c.MaxRecords == 5 && c.MaxLineBytes == 500 &&
				c.LogLevel == "debug" && c.ProduceTimeout == 2*time.Second
		}},
		{name: "flag wins over env", args: []string{"--partitions", "7", "--brokers=a:1"},
			env:   map[string]string{"NOFLY_TELEMETRY_PARTITIONS": "3", "NOFLY_KAFKA_BROKERS": "b:2"},
			check: func(c Config) bool { return c.Partitions == 7 && slices.Equal(c.Brokers, []string{"a:1"}) }},
		{name: "bad env value names the variable", env: map[string]string{"NOFLY_INGEST_MAX_RECORDS": "many"},
			wantErr: "NOFLY_INGEST_MAX_RECORDS"},
		{name: "bad broker", args: []string{"--brokers", "localhost"}, wantErr: "Brokers (--brokers, NOFLY_KAFKA_BROKERS)"},
		{name: "bad topic", args: []string{"--topic", "a b"}, wantErr: "Topic"},
		{name: "zero partitions", args: []string{"--partitions", "0"}, wantErr: "Partitions"},
		{name: "zero max records", env: map[string]string{"NOFLY_INGEST_MAX_RECORDS": "0"}, wantErr: "MaxRecords (--max-records, NOFLY_INGEST_MAX_RECORDS)"},
		{name: "tiny line limit", args: []string{"--max-line-bytes", "10"}, wantErr: "MaxLineBytes"},
		{name: "zero body", args: []string{"--max-body-bytes", "0"}, wantErr: "MaxBodyBytes"},
		{name: "sub-second retry-after", args: []string{"--retry-after", "100ms"}, wantErr: "RetryAfter"},
		{name: "shutdown shorter than produce", args: []string{"--shutdown-timeout", "1s"}, wantErr: "ShutdownTimeout"},
		{name: "bad level", env: map[string]string{"NOFLY_LOG_LEVEL": "loud"}, wantErr: "LogLevel"},
		{name: "replication zero", args: []string{"--replication", "0"}, wantErr: "Replication"},
		{name: "clock bounds default", check: func(c Config) bool { return c.MaxClockSkewAhead == 10*time.Minute && c.MaxRecordAge == 0 }},
		{name: "clock bounds from env and flags", args: []string{"--max-record-age", "48h"},
			env:   map[string]string{"NOFLY_INGEST_MAX_CLOCK_SKEW_AHEAD": "0"},
			check: func(c Config) bool { return c.MaxClockSkewAhead == 0 && c.MaxRecordAge == 48*time.Hour }},
		{name: "negative clock skew", args: []string{"--max-clock-skew-ahead", "-1s"}, wantErr: "MaxClockSkewAhead (--max-clock-skew-ahead, NOFLY_INGEST_MAX_CLOCK_SKEW_AHEAD)"},
		{name: "negative record age", env: map[string]string{"NOFLY_INGEST_MAX_RECORD_AGE": "-1h"}, wantErr: "MaxRecordAge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args, tt.env)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !tt.check(cfg) {
					t.Fatalf("config %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v, want one with %q wrapping ErrConfig", err, tt.wantErr)
			}
		})
	}
}

// TestRunExitCodes: bad configuration is exit status 2 with the field named.
func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		args     []string
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{[]string{"serve", "--partitions", "0"}, nil, 2, "Partitions"},
		{[]string{"frobnicate"}, nil, 2, "unknown command"},
		{[]string{"send"}, nil, 2, "--file is required"},
		{[]string{"send", "--file", "x", "--rate", "-1"}, nil, 2, "--rate"},
		{[]string{"loadtest", "--clients", "0"}, nil, 2, "--clients"},
		{[]string{"help"}, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestReadmeTable: every flag and environment variable of Config is in
// README.md's table with its default (configFields).
func TestReadmeTable(t *testing.T) {
	readme, err := os.ReadFile("../../cmd/ingest/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range configFields.CheckReadme(string(readme), DefaultConfig(), 2) {
		t.Errorf("cmd/ingest/README.md: %s", d)
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

// TestSubcommandFlags: kafkaFlags and serveFlags register every row of the
// table between them, each once.
func TestSubcommandFlags(t *testing.T) {
	var c Config
	kafka, serve := newFlagSet("kafka"), newFlagSet("serve")
	kafka.kafkaFlags(&c)
	serve.serveFlags(&c)
	for _, f := range configFields {
		if (kafka.Lookup(f.Flag) != nil) == (serve.Lookup(f.Flag) != nil) {
			t.Errorf("--%s: registered by kafkaFlags %v, by serveFlags %v; want exactly one", f.Flag, kafka.Lookup(f.Flag) != nil, serve.Lookup(f.Flag) != nil)
		}
	}
}

// TestEnvironRoundTrip: a configuration unlike the defaults in every field,
// turned into variables and parsed back, is itself; so is one that empties
// what can be empty, through flags (no variable can clear a default).
func TestEnvironRoundTrip(t *testing.T) {
	full := Config{
		Brokers: []string{"k1:1", "k2:2"}, Topic: "t.x", Partitions: 3, Replication: 2,
		Security: kafkaconn.Security{KafkaTLS: true, KafkaTLSCA: "ca.pem", KafkaTLSCert: "c.pem", KafkaTLSKey: "k.pem",
			KafkaSASL: "PLAIN", KafkaSASLUser: "u", KafkaSASLPasswordFile: "pw"},
		Addr: ":9", MaxBodyBytes: 1000, MaxRecords: 5, MaxLineBytes: 500,
		ProduceTimeout: 2 * time.Second, RetryAfter: 3 * time.Second, ShutdownTimeout: 4 * time.Second,
		MaxClockSkewAhead: time.Minute, MaxRecordAge: 48 * time.Hour, TickInterval: 500 * time.Millisecond, LagGroups: []string{"g1", "g2"},
		FeedKeys: "keys", LogLevel: "debug",
		PublicURLs: []string{"https://ingest.example", "http://ingest:8080"}, TrustedProxies: []string{"10.0.0.0/8", "::1"},
		Limits: httpserve.Limits{HTTPReadHeaderTimeout: time.Second, HTTPReadTimeout: 5 * time.Second, HTTPWriteTimeout: 6 * time.Second,
			HTTPIdleTimeout: 7 * time.Second, HTTPMaxHeaderBytes: 5000, HTTPMinBodyRate: 6000, HTTPMaxConns: 7},
	}
	open := full
	open.FeedKeys, open.InsecureOpenIntake = "", true
	noKeys := DefaultConfig()
	noKeys.Addr = "127.0.0.1:0"
	// The defaults leave every TLS and SASL file empty: only flags clear them.
	noSecurity := []string{"--kafka-tls-ca=", "--kafka-tls-cert=", "--kafka-tls-key=", "--kafka-sasl=", "--kafka-sasl-user=", "--kafka-sasl-password-file="}
	tests := []struct {
		name      string
		c         Config
		wantFlags []string
	}{
		{"every field set", full, nil},
		{"open intake", open, []string{"--feed-keys="}},
		{"defaults", noKeys, append(noSecurity, "--feed-keys=", "--public-url=", "--trusted-proxies=")},
	}
	d := DefaultConfig()
	for i, v := 0, reflect.ValueOf(full); i < v.NumField(); i++ {
		if name := v.Type().Field(i).Name; name != "InsecureOpenIntake" && reflect.DeepEqual(v.Field(i).Interface(), reflect.ValueOf(d).Field(i).Interface()) {
			t.Fatalf("field %s is its default: the round trip would not test it", name)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars, flags := tc.c.Environ()
			if !slices.Equal(flags, tc.wantFlags) || len(vars)+len(flags) != len(configFields) {
				t.Fatalf("Environ = %v, %v; want a variable per field but flags %v", vars, flags, tc.wantFlags)
			}
			env := map[string]string{"NOFLY_INGEST_FEED_KEYS": "inherited"} // loses to --feed-keys=
			for _, kv := range vars {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			got, err := parseServe(flags, env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.c) {
				t.Fatalf("parsed back\n%+v\nwant\n%+v", got, tc.c)
			}
		})
	}
}
