package geofence

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every *ValidationError.
var ErrInvalid = errors.New("invalid zone set")

// Problem is one thing wrong with a zone file.
type Problem struct {
	File    string // file name, if known
	Feature int    // index of the feature in the file, -1 for the file as a whole
	ID      string // the feature's id, if known
	Field   string // the field, as a JSON path (e.g. properties.floor_m)
	Msg     string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(": ")
	}
	if p.Feature >= 0 {
		b.WriteString("feature ")
		b.WriteString(strconv.Itoa(p.Feature))
		if p.ID != "" {
			b.WriteString(" (id ")
			b.WriteString(strconv.Quote(p.ID))
			b.WriteString(")")
		}
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ValidationError lists every problem found in a zone set. A set with any
// problem is rejected whole.
type ValidationError struct {
	Problems []Problem
}

// maxProblems bounds the list, so a huge broken file does not produce a
// huge error.
const maxProblems = 1000

func (e *ValidationError) Error() string {
	if len(e.Problems) == 0 {
		return "invalid zone set"
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// setFile names the file in every problem that has none.
func (e *ValidationError) setFile(name string) {
	for i := range e.Problems {
		if e.Problems[i].File == "" {
			e.Problems[i].File = name
		}
	}
}

// problems collects problems during a parse.
type problems struct {
	list []Problem
}

func (ps *problems) add(feature int, id, field, msg string) {
	if len(ps.list) < maxProblems {
		ps.list = append(ps.list, Problem{Feature: feature, ID: id, Field: field, Msg: msg})
	}
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps.list}
}

func asErr(err error, target any) bool { return errors.As(err, target) }
