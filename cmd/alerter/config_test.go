package main

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
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

// TestReadmeTable keeps README.md's table in step with the flags.
func TestReadmeTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for field, f := range fieldFlags {
		if !strings.Contains(string(b), "| `--"+f.flag+"` | `"+f.env+"` |") {
			t.Errorf("README.md has no row for %s (--%s, %s)", field, f.flag, f.env)
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
