package benchcharts

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	dataDir = filepath.Join("..", "..", "benchmarks")
	mdPath  = filepath.Join("..", "..", "BENCHMARKS.md")
)

// The committed SVGs are what the committed JSON gives: a chart cannot
// drift from its data, nor be edited by hand.
func TestCommittedChartsAreGenerated(t *testing.T) {
	outs, err := Generate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		got, err := os.ReadFile(filepath.Join(dataDir, o.Name))
		if err != nil {
			t.Errorf("%v: run `go run ./cmd/benchcharts` from the repository root", err)
			continue
		}
		if !bytes.Equal(got, o.SVG) {
			t.Errorf("benchmarks/%s is not what benchmarks/*.json gives: run `go run ./cmd/benchcharts` from the repository root and commit the result", o.Name)
		}
	}
	// And nothing else: an SVG no chart writes is a stale one.
	svgs, _ := filepath.Glob(filepath.Join(dataDir, "*.svg"))
	for _, p := range svgs {
		if !slices.ContainsFunc(outs, func(o Output) bool { return o.Name == filepath.Base(p) }) {
			t.Errorf("benchmarks/%s is written by no chart of internal/benchcharts", filepath.Base(p))
		}
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].SVG, b[i].SVG) {
			t.Errorf("%s: two renderings differ", a[i].Name)
		}
	}
}

// Every figure printed on a chart is in BENCHMARKS.md (its raw tables):
// nothing charted is invented. Commas are ignored on both sides, since
// some raw tables print 88004 where a chart prints 88,004.
func TestChartedFiguresAreInBenchmarksMD(t *testing.T) {
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(md), ",", "")
	numRE := regexp.MustCompile(`\d[\d,]*(\.\d+)?`)
	outs, err := Generate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if len(o.Measured) == 0 {
			t.Errorf("%s prints no figure", o.Name)
		}
		for _, label := range o.Measured {
			for _, n := range numRE.FindAllString(label, -1) {
				if !strings.Contains(text, strings.ReplaceAll(n, ",", "")) {
					t.Errorf("%s: %q (of %q) is not in BENCHMARKS.md", o.Name, n, label)
				}
			}
		}
	}
}

// BENCHMARKS.md shows every chart.
func TestBenchmarksMDShowsEveryChart(t *testing.T) {
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range Charts {
		if !bytes.Contains(md, []byte("](benchmarks/"+ch.Name+")")) {
			t.Errorf("BENCHMARKS.md has no image of benchmarks/%s", ch.Name)
		}
	}
}

// wellFormed parses svg as XML to the end and returns its root element.
func wellFormed(t *testing.T, svg []byte) xml.StartElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var root xml.StartElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root.Name.Local == "" {
			root = se.Copy()
		}
	}
	return root
}

func attr(se xml.StartElement, name string) string {
	for _, a := range se.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func TestChartsAreWellFormedSVG(t *testing.T) {
	outs, err := Generate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		t.Run(o.Name, func(t *testing.T) {
			root := wellFormed(t, o.SVG)
			if root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
				t.Fatalf("root %v", root.Name)
			}
			w, err1 := strconv.ParseFloat(attr(root, "width"), 64)
			h, err2 := strconv.ParseFloat(attr(root, "height"), 64)
			if err1 != nil || err2 != nil || w != 880 || h < 200 || h > 1000 {
				t.Errorf("size %q × %q", attr(root, "width"), attr(root, "height"))
			}
			// A white card under everything, for GitHub's dark theme.
			if !bytes.Contains(o.SVG, []byte(`fill="#ffffff" rx="6"`)) {
				t.Error("no background card")
			}
			if bytes.Contains(o.SVG, []byte("NaN")) || bytes.Contains(o.SVG, []byte("Inf")) {
				t.Error("NaN or Inf in the SVG")
			}
		})
	}
}

type barRect struct {
	class        string
	x, w, value  float64
	fillOpacity  string
	dataValueRaw string
}

func bars(t *testing.T, svg []byte) []barRect {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []barRect
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "rect" || !strings.HasPrefix(attr(se, "class"), "bar") {
			continue
		}
		f := func(k string) float64 {
			v, err := strconv.ParseFloat(attr(se, k), 64)
			if err != nil {
				t.Fatalf("rect %s=%q: %v", k, attr(se, k), err)
			}
			return v
		}
		out = append(out, barRect{class: attr(se, "class"), x: f("x"), w: f("width"), value: f("data-value"),
			fillOpacity: attr(se, "fill-opacity"), dataValueRaw: attr(se, "data-value")})
	}
}

// Bars are drawn to scale: within a panel, a bar's end is proportional to
// its value, for plain, stacked and range bars alike.
func TestBarLengthsAreProportional(t *testing.T) {
	for _, tc := range []struct {
		name string
		bars []Bar
		// ends are the values where each drawn rectangle ends, in order.
		ends []float64
	}{
		{"plain", []Bar{Solid(10, "#000", "10"), Solid(25, "#000", "25"), Solid(3.5, "#000", "3.5")}, []float64{10, 25, 3.5}},
		{"stacked", []Bar{{Parts: []Part{{2, "#111"}, {3, "#222"}, {5, "#333"}}, Label: "10"}, Solid(8, "#000", "8")}, []float64{2, 5, 10, 8}},
		{"range", []Bar{Span(12, 15, "#000", "12–15"), Span(4, 4, "#000", "4")}, []float64{12, 15, 4}},
		{"large values", []Bar{Solid(1965994, "#000", "1,965,994"), Solid(524755, "#000", "524,755")}, []float64{1965994, 524755}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &BarPanel{Title: "t", Unit: "u"}
			for i, b := range tc.bars {
				p.Groups = append(p.Groups, BarGroup{Rows: []BarRow{{Label: strconv.Itoa(i), Bars: []Bar{b}}}})
			}
			f := &Figure{Title: "test", Rows: [][]Panel{{p}}}
			svg := f.SVG()
			wellFormed(t, svg)
			rs := bars(t, svg)
			if len(rs) != len(tc.ends) {
				t.Fatalf("%d bar rectangles, want %d", len(rs), len(tc.ends))
			}
			// Each rectangle's right end, from the axis's zero, against
			// the value it ends at; the scale is the longest bar's, and
			// coordinates are rounded to 0.1 px.
			x0 := rs[0].x
			longest := slices.Index(tc.ends, slices.Max(tc.ends))
			perUnit := (rs[longest].x + rs[longest].w - x0) / tc.ends[longest]
			if end, _ := p.scale(); perUnit <= 0 || perUnit*end > 880 {
				t.Fatalf("%.4f px a unit on an axis of %g", perUnit, end)
			}
			for i, r := range rs {
				right := r.x + r.w - x0
				if math.Abs(right-tc.ends[i]*perUnit) > 0.2 {
					t.Errorf("rect %d ends at %.2f px for %g, want %.2f", i, right, tc.ends[i], tc.ends[i]*perUnit)
				}
			}
			if tc.name == "range" {
				if rs[1].class != "bar-range" || rs[1].fillOpacity == "" {
					t.Errorf("the range's upper part is %+v, want a lighter bar-range", rs[1])
				}
			}
		})
	}
}

// The charts draw the committed figures themselves: a bar of the Tile38
// chart carries nofly's recorded 179,407 positions/s.
func TestChartsCarryTheJSONFigures(t *testing.T) {
	outs, err := Generate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"tile38.svg":  {"179407", "177281", "13.6"},
		"replay.svg":  {"1322959", "24.1"},
		"redis.svg":   {"10", "11.3"},
		"latency.svg": {},
		"scale.svg":   {"1277", "52"},
	}
	for _, o := range outs {
		var vals []string
		for _, r := range bars(t, o.SVG) {
			vals = append(vals, r.dataValueRaw)
		}
		for _, v := range want[o.Name] {
			if !slices.Contains(vals, v) {
				t.Errorf("%s: no bar of %s (bars %v)", o.Name, v, vals)
			}
		}
	}
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct {
		max, end, step float64
	}{
		{10, 10, 2},
		{13.6, 15, 5},
		{195072, 200000, 50000},
		{1e6, 1e6, 2e5},
		{2072877, 2.5e6, 5e5},
		{0.07, 0.08, 0.02},
		{3, 3, 1},
		{0, 1, 0.25},
		{math.NaN(), 1, 0.25},
	} {
		end, step := niceAxis(tc.max)
		if end != tc.end || step != tc.step {
			t.Errorf("niceAxis(%g) = %g, %g; want %g, %g", tc.max, end, step, tc.end, tc.step)
		}
		if !math.IsNaN(tc.max) && end < tc.max {
			t.Errorf("niceAxis(%g) ends below it: %g", tc.max, end)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{num(1965994.4, 0), "1,965,994"},
		{num(-1234.5, 1), "-1,234.5"},
		{num(0.39, 2), "0.39"},
		{numAuto(88004), "88,004"},
		{numAuto(13.7), "13.7"},
		{commas("1000000.25"), "1,000,000.25"},
		{tick(1.5e6), "1.5M"},
		{tick(250000), "250k"},
		{tick(1500), "1,500"},
		{tick(0.5), "0.5"},
		{c(-0.04), "0"},
		{c(12.345), "12.3"},
		{essential("go run ./cmd/bench --rate 0 --bin /tmp/b --md x.md --json y.json --duration 30s"), "go run ./cmd/bench --rate 0 --duration 30s"},
		{commandLines([]string{"go run x --rounds 3 --drones 960", "go run x --rounds 3"}), "go run x --rounds 3 [--drones 960]"},
		{commandLines([]string{"a b", "c d"}), "a b; c d"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestCellJSON(t *testing.T) {
	for _, tc := range []struct {
		in, label, out string
		bad            bool
	}{
		{in: `14.4`, label: "14.4", out: `14.4`},
		{in: `44.0`, label: "44.0", out: `44.0`},
		{in: `1040011`, label: "1,040,011", out: `1040011`},
		{in: `[12.3, 15.2]`, label: "12.3–15.2", out: `[12.3,15.2]`},
		{in: `[2.10,2.40]`, label: "2.10–2.40", out: `[2.10,2.40]`},
		{in: `null`, label: "–", out: `null`},
		{in: `[15.2, 12.3]`, bad: true},
		{in: `[1]`, bad: true},
		{in: `[1, 2, 3]`, bad: true},
		{in: `"12"`, bad: true},
		{in: `{}`, bad: true},
	} {
		var c Cell
		err := json.Unmarshal([]byte(tc.in), &c)
		if tc.bad {
			if err == nil {
				t.Errorf("%s read as %+v", tc.in, c)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		out, err := json.Marshal(c)
		if err != nil || string(out) != tc.out || c.Label() != tc.label {
			t.Errorf("%s: label %q, JSON %s (%v); want %q, %s", tc.in, c.Label(), out, err, tc.label, tc.out)
		}
	}
}

func TestTablesValidation(t *testing.T) {
	good := `{"source": "s", "tables": [{"id": "a", "section": "x", "command": "c", "columns": ["row", "v"], "rows": [{"label": "r", "cells": [1]}]}]}`
	for _, tc := range []struct {
		name, json string
		bad        bool
	}{
		{"good", good, false},
		{"no source", strings.Replace(good, `"source": "s"`, `"source": ""`, 1), true},
		{"unknown field", strings.Replace(good, `"source": "s"`, `"source": "s", "sorce": "t"`, 1), true},
		{"cells short", strings.Replace(good, `"cells": [1]`, `"cells": []`, 1), true},
		{"no command", strings.Replace(good, `"command": "c"`, `"command": ""`, 1), true},
		{"one column", strings.Replace(good, `["row", "v"]`, `["row"]`, 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(tc.json), 0o644); err != nil {
				t.Fatal(err)
			}
			tb, err := loadTables(dir, "t.json")
			if (err != nil) != tc.bad {
				t.Fatalf("loadTables: %v, want error %v", err, tc.bad)
			}
			if err != nil {
				return
			}
			if _, err := tb.Tables[0].Cell("r", "v"); err != nil {
				t.Error(err)
			}
			for _, q := range [][2]string{{"r", "w"}, {"s", "v"}} {
				if _, err := tb.Tables[0].Cell(q[0], q[1]); err == nil {
					t.Errorf("Cell(%q, %q) found", q[0], q[1])
				}
			}
		})
	}
}
