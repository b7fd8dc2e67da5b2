package envflag

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"default", nil, nil, "127.0.0.1:9092", ""},
		{"environment", nil, map[string]string{"X_BROKERS": "a:1, b:2"}, "a:1,b:2", ""},
		{"flag wins", []string{"--brokers", "c:3"}, map[string]string{"X_BROKERS": "a:1"}, "c:3", ""},
		{"empty variable is unset", nil, map[string]string{"X_BROKERS": ""}, "127.0.0.1:9092", ""},
		{"bad variable named", nil, map[string]string{"X_N": "many"}, "", `X_N="many"`},
		{"positional refused", []string{"extra"}, nil, "", `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("t")
			brokers := List{"127.0.0.1:9092"}
			n := 0
			f.Var(&brokers, "brokers", "")
			f.IntVar(&n, "n", 0, "")
			f.Fallback("brokers", "X_BROKERS")
			f.Fallback("n", "X_N")
			err := f.Parse(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrConfig with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := brokers.String(); got != tc.want {
				t.Fatalf("brokers = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFieldError(t *testing.T) {
	err := FieldError("Batch", "batch", "NOFLY_ALERTER_BATCH", "must be at least 1")
	if !errors.Is(err, ErrConfig) || err.Error() != "invalid configuration: Batch (--batch, NOFLY_ALERTER_BATCH): must be at least 1" {
		t.Fatalf("got %v", err)
	}
}

func TestCheckBrokers(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"127.0.0.1:9092", "k:1"}, ""},
		{nil, "at least one host:port is required"},
		{[]string{"k:1", "nohost"}, `"nohost" is not host:port`},
	}
	for _, tc := range tests {
		if got := CheckBrokers(tc.in); got != tc.want {
			t.Errorf("CheckBrokers(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
