// Package envflag is the flag plumbing every nofly command shares: flags
// that fall back to environment variables (a flag on the command line wins),
// comma-separated list values, and configuration errors that name the field,
// its flag and its variable.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"sort"
	"strings"
)

// ErrConfig is wrapped by every configuration error; commands exit with
// status 2 on it.
var ErrConfig = errors.New("invalid configuration")

// FieldError reports a bad configuration field by its name, flag and
// environment variable, so the operator can find where it was set.
func FieldError(field, flagName, env, msg string) error {
	return fmt.Errorf("%w: %s (--%s, %s): %s", ErrConfig, field, flagName, env, msg)
}

// FlagSet is a flag.FlagSet whose flags may fall back to an environment
// variable.
type FlagSet struct {
	*flag.FlagSet
	env map[string]string // flag name -> variable
}

// New returns an empty set that reports errors instead of exiting.
func New(name string) *FlagSet {
	return &FlagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), env: map[string]string{}}
}

// Fallback makes the flag flagName take env's value when it is not on the
// command line and env is set to a non-empty value.
func (f *FlagSet) Fallback(flagName, env string) { f.env[flagName] = env }

// Parse parses args, refuses positional arguments, then fills every flag not
// given on the command line from its environment variable. Flags are applied
// once each, so a repeatable flag never mixes command-line and environment
// values.
func (f *FlagSet) Parse(args []string, getenv func(string) string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrConfig, f.Arg(0))
	}
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	names := make([]string, 0, len(f.env))
	for n := range f.env {
		names = append(names, n)
	}
	sort.Strings(names) // the first bad variable reported is always the same one
	for _, name := range names {
		env := f.env[name]
		if set[name] {
			continue
		}
		if v := getenv(env); v != "" {
			if err := f.Set(name, v); err != nil {
				return fmt.Errorf("%w: %s=%q: %v", ErrConfig, env, v, err)
			}
		}
	}
	return nil
}

// List is a comma-separated list flag; blanks around items are dropped.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the items of s.
func (l *List) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// CheckBrokers returns why a bootstrap broker list is unusable, or "".
func CheckBrokers(brokers []string) string {
	if len(brokers) == 0 {
		return "at least one host:port is required"
	}
	for _, b := range brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Sprintf("%q is not host:port", b)
		}
	}
	return ""
}
