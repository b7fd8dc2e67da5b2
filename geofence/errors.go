package geofence

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every *ValidationError.
var ErrInvalid = errors.New("invalid zone set")

// Problem is one thing wrong with a zone file: an error, which rejects the
// file, or a warning (LoadReport.Warnings), which does not.
type Problem struct {
	File    string `json:"file,omitempty"`    // the file's path as given, if known
	Feature int    `json:"feature,omitempty"` // the feature's position in the file counted from 1 (as lines are); 0 for the file as a whole
	ID      string `json:"id,omitempty"`      // the feature's id, if known
	Field   string `json:"field,omitempty"`   // the field, as a JSON path (e.g. properties.floor_m)
	Msg     string `json:"message"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(": ")
	}
	if p.Feature > 0 {
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

// maxProblems bounds the lists, so a huge broken file does not produce a
// huge error or report.
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
func (e *ValidationError) setFile(name string) { nameFile(e.Problems, name) }

func nameFile(ps []Problem, name string) {
	for i := range ps {
		if ps[i].File == "" {
			ps[i].File = name
		}
	}
}

// DropNoRestriction is the reason a NO_RESTRICTION zone is not imported:
// it restricts nothing.
const DropNoRestriction = "NO_RESTRICTION"

// Drop is a zone of the file that was not imported, and why.
type Drop struct {
	Feature int    `json:"feature"` // counted from 1
	ID      string `json:"id,omitempty"`
	Reason  string `json:"reason"` // DropNoRestriction
}

// LoadReport says what a load did: zones loaded, zones dropped and why,
// and the warnings (each a Problem naming file, feature and field). Every
// parser fills it in ZoneSet.Report.
type LoadReport struct {
	File     string    `json:"file,omitempty"` // path as given, if loaded from a file
	Format   Format    `json:"format"`
	Zones    int       `json:"zones"` // zones loaded
	Dropped  []Drop    `json:"dropped"`
	Warnings []Problem `json:"warnings"`
	// Truncated counts warnings left out beyond the first 1000.
	Truncated int `json:"warnings_left_out,omitempty"`
}

// DroppedBy counts the dropped zones by reason.
func (r LoadReport) DroppedBy() map[string]int {
	m := make(map[string]int, 1)
	for _, d := range r.Dropped {
		m[d.Reason]++
	}
	return m
}

// Summary is the report in one line, e.g. "zones.json (ed269): 4 zones
// loaded, 1 dropped (NO_RESTRICTION 1), 2 warnings".
func (r LoadReport) Summary() string {
	var b strings.Builder
	if r.File != "" {
		b.WriteString(r.File)
		if r.Format != "" {
			fmt.Fprintf(&b, " (%s)", r.Format)
		}
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d zones loaded, %d dropped", r.Zones, len(r.Dropped))
	if by := r.DroppedBy(); len(by) > 0 {
		reasons := make([]string, 0, len(by))
		for k, n := range by {
			reasons = append(reasons, k+" "+strconv.Itoa(n))
		}
		sort.Strings(reasons)
		b.WriteString(" (" + strings.Join(reasons, ", ") + ")")
	}
	fmt.Fprintf(&b, ", %d warnings", len(r.Warnings)+r.Truncated)
	return b.String()
}

// problems collects errors and warnings during a parse.
type problems struct {
	list, warnings []Problem
	truncated      int
	dropped        []Drop
	opt            Loader
}

// add records an error at feature index i (0-based; -1 for the file).
func (ps *problems) add(i int, id, field, msg string) {
	if len(ps.list) < maxProblems {
		ps.list = append(ps.list, Problem{Feature: i + 1, ID: clipID(id), Field: field, Msg: msg})
	}
}

// warn records a warning at feature index i (0-based; -1 for the file).
func (ps *problems) warn(i int, id, field, msg string) {
	if len(ps.warnings) < maxProblems {
		ps.warnings = append(ps.warnings, Problem{Feature: i + 1, ID: clipID(id), Field: field, Msg: msg})
	} else {
		ps.truncated++
	}
}

func (ps *problems) drop(i int, id, reason string) {
	ps.dropped = append(ps.dropped, Drop{Feature: i + 1, ID: id, Reason: reason})
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps.list}
}

func asErr(err error, target any) bool { return errors.As(err, target) }
