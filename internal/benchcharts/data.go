package benchcharts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/nofly-dev/nofly/internal/benchcompare"
)

// Tables is the JSON of benchmarks whose command writes none (`go test
// -bench`, a run timed by hand): their raw tables as BENCHMARKS.md shows
// them, transcribed, or as scripts/bench-replay.sh writes them. Source
// says where the figures come from; every table names its section,
// command and commit, so each charted number can be found in the text.
type Tables struct {
	Source string  `json:"source"`
	Tables []Table `json:"tables"`
}

// Table is one raw table. Columns[0] heads the row labels; each row has a
// cell per further column.
type Table struct {
	ID      string   `json:"id"`
	Section string   `json:"section"`
	Commit  string   `json:"commit,omitempty"`
	Command string   `json:"command"`
	Machine string   `json:"machine,omitempty"`
	Columns []string `json:"columns"`
	Rows    []Row    `json:"rows"`
}

// Row is a table's row.
type Row struct {
	Label string `json:"label"`
	Cells []Cell `json:"cells"`
}

// Cell is a figure: a number, a [min, max] range over runs, or null (not
// measured). The numbers keep their JSON text, so a chart prints 44.0 or
// 2.10 as the raw table does.
type Cell struct {
	Min, Max         float64
	MinText, MaxText string
	Set              bool
}

// UnmarshalJSON reads 12.5, [12.3, 15.2] or null.
func (c *Cell) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*c = Cell{}
		return nil
	}
	var ns []json.Number
	if len(b) > 0 && b[0] == '[' {
		if err := json.Unmarshal(b, &ns); err != nil || len(ns) != 2 {
			return fmt.Errorf("range %s: want [min, max]", b)
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil || b[0] == '"' {
			return fmt.Errorf("cell %s: want a number, [min, max] or null", b)
		}
		ns = []json.Number{n, n}
	}
	lo, err1 := ns[0].Float64()
	hi, err2 := ns[1].Float64()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("cell %s: %w", b, err)
	}
	if lo > hi {
		return fmt.Errorf("range %s: min above max", b)
	}
	*c = Cell{Min: lo, Max: hi, MinText: ns[0].String(), MaxText: ns[1].String(), Set: true}
	return nil
}

// MarshalJSON writes what UnmarshalJSON reads.
func (c Cell) MarshalJSON() ([]byte, error) {
	switch {
	case !c.Set:
		return []byte("null"), nil
	case c.MinText == c.MaxText:
		return []byte(c.MinText), nil
	default:
		return []byte("[" + c.MinText + ", " + c.MaxText + "]"), nil
	}
}

// Label is the cell as BENCHMARKS.md prints it: "12.3–15.2", "14.4", "–".
func (c Cell) Label() string {
	switch {
	case !c.Set:
		return "–"
	case c.MinText == c.MaxText:
		return commas(c.MinText)
	default:
		return commas(c.MinText) + "–" + commas(c.MaxText)
	}
}

// Bar is the cell as a bar: a range bar for a range.
func (c Cell) Bar(color, suffix string) Bar {
	return Span(c.Min, c.Max, color, c.Label()+suffix)
}

func (t *Tables) validate() error {
	if t.Source == "" {
		return errors.New("no source")
	}
	ids := map[string]bool{}
	for _, tb := range t.Tables {
		if tb.ID == "" || ids[tb.ID] {
			return fmt.Errorf("table id %q empty or repeated", tb.ID)
		}
		ids[tb.ID] = true
		if tb.Section == "" || tb.Command == "" || len(tb.Columns) < 2 {
			return fmt.Errorf("table %s: section, command and two columns at least are required", tb.ID)
		}
		for _, r := range tb.Rows {
			if len(r.Cells) != len(tb.Columns)-1 {
				return fmt.Errorf("table %s, row %q: %d cells for %d columns", tb.ID, r.Label, len(r.Cells), len(tb.Columns)-1)
			}
		}
	}
	return nil
}

// Table is the table with this id.
func (t *Tables) Table(id string) (*Table, error) {
	for i := range t.Tables {
		if t.Tables[i].ID == id {
			return &t.Tables[i], nil
		}
	}
	return nil, fmt.Errorf("no table %q", id)
}

// Cell is the cell of the row labelled row in column col.
func (tb *Table) Cell(row, col string) (Cell, error) {
	ci := slices.Index(tb.Columns[1:], col)
	if ci < 0 {
		return Cell{}, fmt.Errorf("table %s: no column %q", tb.ID, col)
	}
	for _, r := range tb.Rows {
		if r.Label == row {
			if !r.Cells[ci].Set {
				return Cell{}, fmt.Errorf("table %s: row %q, column %q is empty", tb.ID, row, col)
			}
			return r.Cells[ci], nil
		}
	}
	return Cell{}, fmt.Errorf("table %s: no row %q", tb.ID, row)
}

// Column is every row's cell of column col, in order.
func (tb *Table) Column(col string) ([]Cell, error) {
	out := make([]Cell, 0, len(tb.Rows))
	for _, r := range tb.Rows {
		cell, err := tb.Cell(r.Label, col)
		if err != nil {
			return nil, err
		}
		out = append(out, cell)
	}
	return out, nil
}

// Values is the figures of column col in the rows that have one (both
// ends of a range).
func (tb *Table) Values(col string) ([]float64, error) {
	ci := slices.Index(tb.Columns[1:], col)
	if ci < 0 {
		return nil, fmt.Errorf("table %s: no column %q", tb.ID, col)
	}
	var v []float64
	for _, r := range tb.Rows {
		if c := r.Cells[ci]; c.Set {
			v = append(v, c.Min)
			if c.Max != c.Min {
				v = append(v, c.Max)
			}
		}
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("table %s: column %q is empty", tb.ID, col)
	}
	return v, nil
}

// decodeFile reads dir/name into v, refusing fields v has not: a renamed
// field fails here, not as a silently empty chart.
func decodeFile(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("benchcharts: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("benchcharts: %s: %w", name, err)
	}
	return nil
}

func loadTables(dir, name string) (*Tables, error) {
	var t Tables
	if err := decodeFile(dir, name, &t); err != nil {
		return nil, err
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("benchcharts: %s: %w", name, err)
	}
	return &t, nil
}

func loadE2E(dir, name string) (*benchcompare.E2EResult, error) {
	var r benchcompare.E2EResult
	if err := decodeFile(dir, name, &r); err != nil {
		return nil, err
	}
	if r.Accepted == 0 || r.Latency.N == 0 {
		return nil, fmt.Errorf("benchcharts: %s: no accepted positions or no events", name)
	}
	return &r, nil
}

func loadCompare(dir, name string) (*benchcompare.Report, error) {
	var r benchcompare.Report
	if err := decodeFile(dir, name, &r); err != nil {
		return nil, err
	}
	if len(r.Rows) == 0 {
		return nil, fmt.Errorf("benchcharts: %s: no rows", name)
	}
	return &r, nil
}
