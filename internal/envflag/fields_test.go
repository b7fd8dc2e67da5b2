package envflag

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type testConfig struct {
	Addr    string
	N       int
	Max     int64
	On      bool
	Wait    time.Duration
	Brokers []string
}

var testFields = Fields[testConfig]{
	{Name: "Addr", Flag: "addr", Env: "T_ADDR", Usage: "address"},
	{Name: "N", Flag: "n", Env: "T_N", Usage: "count"},
	{Name: "Max", Flag: "max", Env: "T_MAX", Usage: "bytes"},
	{Name: "On", Flag: "on", Env: "T_ON", Usage: "switch"},
	{Name: "Wait", Flag: "wait", Env: "T_WAIT", Usage: "wait"},
	{Name: "Brokers", Flag: "brokers", Env: "T_BROKERS", Usage: "brokers"},
}

func parseFields(args []string, env map[string]string) (testConfig, error) {
	c := testConfig{Addr: ":1", N: 1, Wait: time.Second, Brokers: []string{"d:1"}}
	fs := New("t")
	testFields.Register(fs, &c)
	return c, fs.Parse(args, func(k string) string { return env[k] })
}

func TestFieldsParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    testConfig
		wantErr string
	}{
		{"defaults", nil, nil, testConfig{Addr: ":1", N: 1, Wait: time.Second, Brokers: []string{"d:1"}}, ""},
		{"environment", nil, map[string]string{"T_ADDR": ":2", "T_N": "3", "T_MAX": "4", "T_ON": "true", "T_WAIT": "5ms", "T_BROKERS": "a:1, b:2"},
			testConfig{Addr: ":2", N: 3, Max: 4, On: true, Wait: 5 * time.Millisecond, Brokers: []string{"a:1", "b:2"}}, ""},
		{"flag wins, empty variable unset", []string{"--n", "9", "--on"}, map[string]string{"T_N": "3", "T_ON": "false", "T_ADDR": ""},
			testConfig{Addr: ":1", N: 9, On: true, Wait: time.Second, Brokers: []string{"d:1"}}, ""},
		{"bad variable named", nil, map[string]string{"T_WAIT": "soon"}, testConfig{}, `T_WAIT="soon"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFields(tc.args, tc.env)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrConfig with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, tc.want) {
				t.Fatalf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}

func TestFieldsUsageAndError(t *testing.T) {
	fs := New("t")
	var c testConfig
	testFields.RegisterOnly(fs, &c, "N")
	if fs.Lookup("addr") != nil {
		t.Error("RegisterOnly registered a field it was not given")
	}
	if f := fs.Lookup("n"); f == nil || f.Usage != "count (env T_N)" {
		t.Fatalf("flag n = %+v", f)
	}
	err := testFields.Error("N", "must be at least 1")
	if err.Error() != "invalid configuration: N (--n, T_N): must be at least 1" {
		t.Fatalf("got %v", err)
	}
}

func TestFieldsEnviron(t *testing.T) {
	tests := []struct {
		name      string
		c         testConfig
		wantEnv   int
		wantFlags []string
	}{
		{"every field set", testConfig{Addr: ":7", N: 2, Max: 3, On: true, Wait: 90 * time.Second, Brokers: []string{"x:1", "y:2"}}, 6, nil},
		// Addr and Brokers are empty: no variable can clear a default
		// (":1", "d:1" here), their flags do; 0, false and 0s are values.
		{"zero config", testConfig{}, 4, []string{"--addr=", "--brokers="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, flags := testFields.Environ(tc.c)
			if len(env) != tc.wantEnv || !reflect.DeepEqual(flags, tc.wantFlags) {
				t.Fatalf("Environ = %v, %v; want %d variables and flags %v", env, flags, tc.wantEnv, tc.wantFlags)
			}
			vars := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = v
			}
			got, err := parseFields(flags, vars)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.c) {
				t.Fatalf("parsed back %+v, want %+v", got, tc.c)
			}
		})
	}
}

func TestFieldsCheckReadme(t *testing.T) {
	defaults := testConfig{Addr: ":1", N: 1, Wait: 168 * time.Hour, Brokers: []string{"d:1", "e:2"}}
	good := "| `--addr` | `T_ADDR` | `:1` | address |\n" +
		"| `--n` | `T_N` | `1` | count |\n" +
		"|`--max`|`T_MAX`|`0` (no bound)|bytes|\n" +
		"| `--on` | `T_ON` | `false` | switch |\n" +
		"| `--wait` | `T_WAIT` | `168h` | wait, also `168h0m0s` |\n" +
		"| `--brokers` | `T_BROKERS` | `d:1,e:2` | brokers |\n"
	tests := []struct {
		name, readme string
		want         []string
	}{
		{"in step", good, nil},
		{"duration long form", strings.Replace(good, "`168h`", "`168h0m0s`", 1), nil},
		{"row missing", strings.Replace(good, "| `--n` | `T_N` | `1` | count |\n", "", 1),
			[]string{"N: no row with `--n` and `T_N`"}},
		{"flag renamed", strings.Replace(good, "`--n`", "`--count`", 1),
			[]string{`N: the row of T_N names another flag than --n: "` + "`--count` | `T_N` | `1` | count" + `"`, "N: no row with `--n` and `T_N`"}},
		{"wrong default", strings.Replace(good, "`168h`", "`24h`", 1),
			[]string{`Wait: the row of --wait gives the default "` + "`24h`" + `": the default is ` + "`168h0m0s`"}},
		{"empty default in words", strings.Replace(good, "`:1`", "(none)", 1),
			[]string{`Addr: the row of --addr gives the default "(none)": the default is ` + "`:1`"}},
		{"not a value", strings.Replace(good, "`false`", "`no`", 1),
			[]string{`On: the row of --on gives the default "` + "`no`" + `": not a value of the flag: parse error`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := testFields.CheckReadme(tc.readme, defaults, 2); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	empty := testConfig{N: 1}
	if got := testFields.Field("Addr").checkDefault("(required)", empty); got != "" {
		t.Errorf("an empty default in words: %q", got)
	}
}

func TestFieldsMissing(t *testing.T) {
	if m := testFields.Missing(); m != nil {
		t.Fatalf("complete table: %v", m)
	}
	short := append(Fields[testConfig]{{Name: "Nope", Flag: "nope", Env: "T_NOPE"}}, testFields[1:]...)
	if m := short.Missing(); !reflect.DeepEqual(m, []string{"row Nope names no field", "field Addr has no row"}) {
		t.Fatalf("got %v", m)
	}
}
