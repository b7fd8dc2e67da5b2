package envflag

import (
	"flag"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Field is one row of a command's configuration table: a field of its
// Config struct C, the flag and environment variable that set it, and the
// flag's usage. Flag parsing, the environment fallback, usage text, error
// messages, the README check and Environ all come from the table, so adding
// a flag is one row.
type Field[C any] struct {
	Name  string // the Config field, as errors name it
	Flag  string // without the dashes
	Env   string
	Usage string
	// Value, when set, turns the address of the field into its flag value;
	// without it the field's type decides: string, int, int64, bool,
	// time.Duration, or []string (a comma-separated List). Set("") must
	// give the value whose String is "" (Environ relies on it).
	Value func(field any) flag.Value
}

// Fields is a command's configuration table.
type Fields[C any] []Field[C]

// Field returns the row of the named Config field; an unknown name is a
// programming error and panics.
func (t Fields[C]) Field(name string) Field[C] {
	for _, f := range t {
		if f.Name == name {
			return f
		}
	}
	panic("envflag: no field " + name + " in the table")
}

// Error is a configuration error naming the field, its flag and variable.
func (t Fields[C]) Error(name, msg string) error {
	f := t.Field(name)
	return FieldError(f.Name, f.Flag, f.Env, msg)
}

// Register registers every field of the table on fs, bound to c.
func (t Fields[C]) Register(fs *FlagSet, c *C) {
	for _, f := range t {
		f.Register(fs, c, f.Usage)
	}
}

// RegisterOnly registers the named fields (a subcommand's subset).
func (t Fields[C]) RegisterOnly(fs *FlagSet, c *C, names ...string) {
	for _, n := range names {
		f := t.Field(n)
		f.Register(fs, c, f.Usage)
	}
}

// Register registers the field on fs bound to c, with its environment
// fallback, and usage (a subcommand may word it for itself) followed by
// "(env NAME)". The flag's default is the field's value in c.
func (f Field[C]) Register(fs *FlagSet, c *C, usage string) {
	fs.Fallback(f.Flag, f.Env)
	fs.Var(f.value(c), f.Flag, usage+" (env "+f.Env+")")
}

// value is the field of c as a flag value: the flag package's own value
// types, so defaults, help and parse errors read as with IntVar and the
// rest.
func (f Field[C]) value(c *C) flag.Value {
	rv := reflect.ValueOf(c).Elem().FieldByName(f.Name)
	if !rv.IsValid() {
		panic(fmt.Sprintf("envflag: %T has no field %s", *c, f.Name))
	}
	p := rv.Addr().Interface()
	if f.Value != nil {
		return f.Value(p)
	}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	switch p := p.(type) {
	case *string:
		fs.StringVar(p, "v", *p, "")
	case *int:
		fs.IntVar(p, "v", *p, "")
	case *int64:
		fs.Int64Var(p, "v", *p, "")
	case *bool:
		fs.BoolVar(p, "v", *p, "")
	case *time.Duration:
		fs.DurationVar(p, "v", *p, "")
	case *[]string:
		return (*List)(p)
	default:
		panic(fmt.Sprintf("envflag: field %s is a %T: give the row a Value", f.Name, p))
	}
	return fs.Lookup("v").Value
}

// Environ returns what starts the command as a subprocess with exactly c:
// env, NAME=value for every field whose value is not empty, in table order,
// and flags, --flag= for every field whose value is empty. An empty
// variable counts as unset (Parse), so no variable can clear a field whose
// default is not empty (an empty --events-topic, say); its flag can, and a
// flag also wins over a variable the subprocess inherits. The caller puts
// env after the inherited environment (os/exec keeps the last of a
// duplicate) and flags among the arguments.
func (t Fields[C]) Environ(c C) (env, flags []string) {
	for _, f := range t {
		if v := f.value(&c).String(); v != "" {
			env = append(env, f.Env+"="+v)
		} else {
			flags = append(flags, "--"+f.Flag+"=")
		}
	}
	return env, flags
}

// Missing returns the fields of C the table has no row for, and the rows
// naming no field of C, so a test can hold the table to the struct.
func (t Fields[C]) Missing() []string {
	var missing []string
	rt := reflect.TypeFor[C]()
	rows := map[string]bool{}
	for _, f := range t {
		rows[f.Name] = true
		if _, ok := rt.FieldByName(f.Name); !ok {
			missing = append(missing, "row "+f.Name+" names no field")
		}
	}
	// An embedded struct's fields are the command's own (a shared block
	// of settings such as kafkaconn.Security): each needs its row.
	for _, f := range reflect.VisibleFields(rt) {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue
		}
		if !rows[f.Name] {
			missing = append(missing, "field "+f.Name+" has no row")
		}
	}
	return missing
}

// CheckReadme returns how the Markdown tables of readme differ from the
// table, so a test keeps the documentation of every flag in step with the
// code. A field's row is a table line with the cells `--flag` and `ENV`;
// every field must have one, every row naming a field's variable must name
// its flag, and the row's cell number defaultCell (from 0) must be the
// field's value in defaults: written `value` (what follows in the cell is
// prose, e.g. "`8388608` (8 MiB)") and read as the flag reads it, so "168h"
// and "168h0m0s" both document 168 hours; or in words without backticks,
// e.g. "(none)" or "(required)", when the default is empty.
func (t Fields[C]) CheckReadme(readme string, defaults C, defaultCell int) []string {
	var rows [][]string
	for _, line := range strings.Split(readme, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	var diffs []string
	for _, f := range t {
		flagCell, envCell := "`--"+f.Flag+"`", "`"+f.Env+"`"
		found := false
		for _, cells := range rows {
			hasFlag, hasEnv := false, false
			for _, c := range cells {
				hasFlag = hasFlag || c == flagCell
				hasEnv = hasEnv || c == envCell
			}
			switch {
			case hasEnv && !hasFlag:
				diffs = append(diffs, fmt.Sprintf("%s: the row of %s names another flag than --%s: %q", f.Name, f.Env, f.Flag, strings.Join(cells, " | ")))
			case hasEnv && hasFlag:
				found = true
				if defaultCell >= len(cells) {
					diffs = append(diffs, fmt.Sprintf("%s: the row of --%s has no cell %d", f.Name, f.Flag, defaultCell))
				} else if msg := f.checkDefault(cells[defaultCell], defaults); msg != "" {
					diffs = append(diffs, fmt.Sprintf("%s: the row of --%s gives the default %q: %s", f.Name, f.Flag, cells[defaultCell], msg))
				}
			}
		}
		if !found {
			diffs = append(diffs, fmt.Sprintf("%s: no row with %s and %s", f.Name, flagCell, envCell))
		}
	}
	return diffs
}

// checkDefault returns why cell does not document the field's value in
// defaults, or "".
func (f Field[C]) checkDefault(cell string, defaults C) string {
	want := f.value(&defaults).String()
	doc, ok := strings.CutPrefix(cell, "`")
	if !ok {
		if want != "" {
			return fmt.Sprintf("the default is `%s`", want)
		}
		return ""
	}
	doc, _, _ = strings.Cut(doc, "`")
	var got C
	if err := f.value(&got).Set(doc); err != nil {
		return fmt.Sprintf("not a value of the flag: %v", err)
	}
	gv := reflect.ValueOf(got).FieldByName(f.Name).Interface()
	if dv := reflect.ValueOf(defaults).FieldByName(f.Name).Interface(); !reflect.DeepEqual(gv, dv) {
		return fmt.Sprintf("the default is `%s`", want)
	}
	return ""
}
