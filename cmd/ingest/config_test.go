package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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
// README.md's table with its default.
func TestReadmeTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	fs := newFlagSet("t")
	fs.kafkaFlags(&def)
	fs.serveFlags(&def)
	for field, ff := range fieldFlags {
		f := fs.Lookup(ff.flag)
		if f == nil {
			t.Errorf("%s: flag --%s not registered", field, ff.flag)
			continue
		}
		def := "`" + f.DefValue + "`"
		if f.DefValue == "" {
			def = "(none)"
		}
		row := "| `--" + ff.flag + "` | `" + ff.env + "` | " + def
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md lacks the row %q", row)
		}
	}
}

// TestTopReadmeTable keeps the repository README's one configuration table
// in step with this command's flags.
func TestTopReadmeTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for field, f := range fieldFlags {
		if !strings.Contains(string(b), "| `"+f.env+"` | `--"+f.flag+"` |") {
			t.Errorf("../../README.md has no row for %s (%s, --%s)", field, f.env, f.flag)
		}
	}
}
