package benchcharts

import (
	"math"
	"strings"
)

// Colours: saturated enough to read on the white card the figure draws
// itself on, which is what GitHub shows in its dark theme too.
const (
	ink       = "#1f2328"
	muted     = "#59636e"
	gridColor = "#e5e7eb"
	axisColor = "#8c959f"
	bgColor   = "#ffffff"
	border    = "#d0d7de"
	targetInk = "#cf222e"
	fontStack = "Helvetica, Arial, sans-serif"
)

// Figure is one SVG: a title, a one-line note (command, machine), a
// legend and rows of panels, each row splitting the width evenly.
type Figure struct {
	Title  string
	Note   string
	Legend []LegendItem
	// LegendNote follows the legend's items (how to read the bars).
	LegendNote string
	Rows       [][]Panel
	Width      float64 // 0: 880, GitHub's content column

	// measured collects every figure printed on the chart (values on
	// bars, ends of lines, ratios in row labels), for the test that each
	// is in BENCHMARKS.md.
	measured []string
}

// LegendItem is a colour and what it stands for.
type LegendItem struct {
	Color, Label string
}

// Panel is a chart inside a figure, drawn in a box of width w.
type Panel interface {
	height(w float64) float64
	render(s *svgWriter, f *Figure, x, y, w float64)
}

const (
	pad       = 16.0
	gap       = 28.0
	titleSize = 17.0
	noteSize  = 11.5
	bodySize  = 12.0
	smallSize = 11.0
)

// SVG renders the figure.
func (f *Figure) SVG() []byte {
	width := f.Width
	if width == 0 {
		width = 880
	}
	var body svgWriter
	y := pad + titleSize
	body.text(pad, y, "start", titleSize, ink, "bold", f.Title)
	if f.Note != "" {
		y += 18
		body.text(pad, y, "start", noteSize, muted, "", f.Note)
	}
	if len(f.Legend) > 0 {
		y += 22
		x := pad
		for _, it := range f.Legend {
			body.rect(x, y-10, 12, 12, it.Color, ` rx="2"`)
			body.text(x+17, y, "start", bodySize, ink, "", it.Label)
			x += 17 + textWidth(it.Label, bodySize) + 18
		}
		if f.LegendNote != "" {
			body.text(x, y, "start", smallSize, muted, "", f.LegendNote)
		}
	}
	y += 14
	for _, row := range f.Rows {
		n := float64(len(row))
		w := (width - 2*pad - (n-1)*gap) / n
		h := 0.0
		for i, p := range row {
			p.render(&body, f, pad+float64(i)*(w+gap), y, w)
			h = math.Max(h, p.height(w))
		}
		y += h + 14
	}
	height := math.Ceil(y + pad - 14)
	var out svgWriter
	out.raw(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="%s" role="img" aria-label="%s">`+"\n",
		c(width), c(height), c(width), c(height), fontStack, esc(f.Title))
	out.raw("<title>%s</title>\n", esc(f.Title))
	out.rect(0.5, 0.5, width-1, height-1, bgColor, ` rx="6" stroke="`+border+`"`)
	out.b.WriteString(body.b.String())
	out.raw("</svg>\n")
	return []byte(out.b.String())
}

// halo is the attribute set that outlines text in the background colour,
// so a label stays legible where a grid or target line crosses it.
const halo = ` stroke="` + bgColor + `" stroke-width="3" paint-order="stroke"`

func (f *Figure) measure(label string) string {
	f.measured = append(f.measured, label)
	return label
}

// Bar is one bar: stacked parts (one for a plain bar), or, with Lo set, a
// range over runs: solid to Lo, lighter from Lo to the end.
type Bar struct {
	Parts []Part
	Lo    float64 // > 0: the range's low end; the parts' sum is its high end
	Label string  // printed after the bar
}

// Part is a stacked segment.
type Part struct {
	Value float64
	Color string
}

func (b Bar) total() float64 {
	t := 0.0
	for _, p := range b.Parts {
		t += p.Value
	}
	return t
}

// Solid is a plain bar of one colour.
func Solid(v float64, color, label string) Bar {
	return Bar{Parts: []Part{{v, color}}, Label: label}
}

// Span is a range bar from lo to hi.
func Span(lo, hi float64, color, label string) Bar {
	b := Bar{Parts: []Part{{hi, color}}, Label: label}
	if lo < hi {
		b.Lo = lo
	}
	return b
}

// BarRow is a row of the panel: its label and its bars, one under the
// other (one per series).
type BarRow struct {
	Label string
	Bars  []Bar
}

// BarGroup is rows under a heading ("" for none).
type BarGroup struct {
	Label string
	Rows  []BarRow
}

// Target is a vertical dashed line at a requirement's value.
type Target struct {
	Value float64
	Label string
}

// BarPanel is a horizontal bar chart on a linear axis from 0.
type BarPanel struct {
	Title  string
	Unit   string // under the axis
	Groups []BarGroup
	Target *Target
	// LabelWidth is the room for row labels; 0 fits the longest.
	LabelWidth float64
	// Max is the axis's least end (0: fit the data and the target).
	Max float64
}

const (
	barH    = 13.0
	barGap  = 2.0
	rowGap  = 7.0
	groupH  = 18.0
	panelT  = 22.0 // title band
	axisH   = 36.0 // ticks and unit
	valueSz = 11.0
)

func (p *BarPanel) rowHeight(r BarRow) float64 {
	n := float64(max(len(r.Bars), 1))
	return n*barH + (n-1)*barGap + rowGap
}

// targetBand is the room above the bars for the target's label.
func (p *BarPanel) targetBand() float64 {
	if p.Target == nil {
		return 0
	}
	return 14
}

func (p *BarPanel) height(float64) float64 {
	h := panelT + 4 + p.targetBand()
	for _, g := range p.Groups {
		if g.Label != "" {
			h += groupH
		}
		for _, r := range g.Rows {
			h += p.rowHeight(r)
		}
	}
	return h + axisH
}

// scale is the axis's end: nice, covering every bar and the target.
func (p *BarPanel) scale() (end, step float64) {
	m := p.Max
	for _, g := range p.Groups {
		for _, r := range g.Rows {
			for _, b := range r.Bars {
				m = math.Max(m, b.total())
			}
		}
	}
	if p.Target != nil {
		m = math.Max(m, p.Target.Value)
	}
	return niceAxis(m)
}

func (p *BarPanel) labelWidth() float64 {
	if p.LabelWidth > 0 {
		return p.LabelWidth
	}
	w := 0.0
	for _, g := range p.Groups {
		for _, r := range g.Rows {
			w = math.Max(w, textWidth(r.Label, bodySize))
		}
	}
	return w + 10
}

func (p *BarPanel) valueWidth() float64 {
	w := 0.0
	for _, g := range p.Groups {
		for _, r := range g.Rows {
			for _, b := range r.Bars {
				w = math.Max(w, textWidth(b.Label, valueSz))
			}
		}
	}
	return w + 8
}

func (p *BarPanel) render(s *svgWriter, f *Figure, x, y, w float64) {
	s.text(x, y+14, "start", 13, ink, "bold", p.Title)
	lw := p.labelWidth()
	px := x + lw
	pw := w - lw - p.valueWidth()
	end, step := p.scale()
	top := y + panelT + 4 + p.targetBand()
	bottom := y + p.height(w) - axisH
	xOf := func(v float64) float64 { return px + v/end*pw }

	// Grid and ticks first, bars over them.
	for t := 0.0; t <= end+step/1e6; t += step {
		t = roundSig(t)
		gx := xOf(t)
		s.line(gx, top, gx, bottom, gridColor, "")
		s.text(gx, bottom+14, "middle", smallSize, muted, "", tick(t))
	}
	s.line(px, bottom, px+pw, bottom, axisColor, "")
	s.line(px, top, px, bottom, axisColor, "")
	s.text(px+pw/2, bottom+30, "middle", smallSize, muted, "", p.Unit)
	if t := p.Target; t != nil {
		// Under the bars, its label in the band above them.
		tx := xOf(t.Value)
		s.line(tx, top-4, tx, bottom, targetInk, ` stroke-width="1.5" stroke-dasharray="5 3"`)
		anchor, lx := "start", tx+4
		if tx > px+pw*0.6 {
			anchor, lx = "end", tx-4
		}
		s.raw(`<text x="%s" y="%s" font-size="%s" fill="%s" font-weight="bold" text-anchor="%s">%s</text>`+"\n",
			c(lx), c(top-5), c(smallSize), targetInk, anchor, esc(t.Label))
	}

	cy := top
	for _, g := range p.Groups {
		if g.Label != "" {
			s.raw(`<text x="%s" y="%s" font-size="%s" fill="%s" font-weight="bold"%s>%s</text>`+"\n",
				c(x), c(cy+13), c(smallSize), muted, halo, esc(g.Label))
			cy += groupH
		}
		for _, r := range g.Rows {
			rh := p.rowHeight(r)
			s.text(px-6, cy+(rh-rowGap)/2+4, "end", bodySize, ink, "", r.Label)
			by := cy
			for _, b := range r.Bars {
				bx := px
				for _, part := range b.Parts {
					bw := part.Value / end * pw
					if b.Lo > 0 {
						// Range: solid to the low end, the rest lighter.
						s.rect(bx, by, b.Lo/end*pw, barH, part.Color, ` class="bar" data-value="`+plain(b.Lo)+`"`)
						s.rect(bx+b.Lo/end*pw, by, bw-b.Lo/end*pw, barH, part.Color, ` class="bar-range" fill-opacity="0.4" data-value="`+plain(part.Value)+`"`)
					} else {
						s.rect(bx, by, bw, barH, part.Color, ` class="bar" data-value="`+plain(part.Value)+`"`)
					}
					bx += bw
				}
				if b.Label != "" {
					s.raw(`<text x="%s" y="%s" font-size="%s" fill="%s"%s>%s</text>`+"\n",
						c(bx+4), c(by+barH-2.5), c(valueSz), ink, halo, esc(f.measure(b.Label)))
				}
				by += barH + barGap
			}
			cy += rh
		}
	}
}

// Series is a line of a LinePanel.
type Series struct {
	Label  string
	Color  string
	Points [][2]float64
	// EndLabel is printed after the last point (its value, as measured).
	EndLabel string
}

// LinePanel is a line chart on linear axes from 0.
type LinePanel struct {
	Title  string
	XUnit  string
	YUnit  string
	XTicks []float64
	XTick  func(float64) string
	Series []Series
	Height float64 // of the plot; 0: 150
}

func (p *LinePanel) plotHeight() float64 {
	if p.Height > 0 {
		return p.Height
	}
	return 150
}

func (p *LinePanel) height(float64) float64 { return panelT + 10 + p.plotHeight() + axisH }

func (p *LinePanel) render(s *svgWriter, f *Figure, x, y, w float64) {
	s.text(x, y+14, "start", 13, ink, "bold", p.Title)
	xmax, ymax := 0.0, 0.0
	endW := 0.0
	for _, sr := range p.Series {
		for _, pt := range sr.Points {
			xmax, ymax = math.Max(xmax, pt[0]), math.Max(ymax, pt[1])
		}
		endW = math.Max(endW, textWidth(sr.EndLabel, valueSz))
	}
	for _, t := range p.XTicks {
		xmax = math.Max(xmax, t)
	}
	yend, ystep := niceAxis(ymax)
	yw := 0.0
	for t := 0.0; t <= yend+ystep/1e6; t += ystep {
		yw = math.Max(yw, textWidth(tick(roundSig(t)), smallSize))
	}
	px, pw := x+yw+8, w-yw-8-endW-8
	top := y + panelT + 10
	ph := p.plotHeight()
	bottom := top + ph
	xOf := func(v float64) float64 { return px + v/xmax*pw }
	yOf := func(v float64) float64 { return bottom - v/yend*ph }
	for t := 0.0; t <= yend+ystep/1e6; t += ystep {
		t = roundSig(t)
		s.line(px, yOf(t), px+pw, yOf(t), gridColor, "")
		s.text(px-5, yOf(t)+4, "end", smallSize, muted, "", tick(t))
	}
	for _, t := range p.XTicks {
		s.line(xOf(t), bottom, xOf(t), bottom+4, axisColor, "")
		s.text(xOf(t), bottom+15, "middle", smallSize, muted, "", p.XTick(t))
	}
	s.line(px, bottom, px+pw, bottom, axisColor, "")
	s.line(px, top, px, bottom, axisColor, "")
	s.text(px+pw/2, bottom+31, "middle", smallSize, muted, "", p.XUnit)
	s.text(px+6, top+10, "start", smallSize, muted, "", p.YUnit)
	for _, sr := range p.Series {
		pts := make([]string, len(sr.Points))
		for i, pt := range sr.Points {
			pts[i] = c(xOf(pt[0])) + "," + c(yOf(pt[1]))
		}
		s.raw(`<polyline class="line" points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), sr.Color)
		for _, pt := range sr.Points {
			s.raw(`<circle class="point" cx="%s" cy="%s" r="2.5" fill="%s" data-value="%s"/>`+"\n", c(xOf(pt[0])), c(yOf(pt[1])), sr.Color, plain(pt[1]))
		}
		if n := len(sr.Points); n > 0 && sr.EndLabel != "" {
			last := sr.Points[n-1]
			s.text(xOf(last[0])+6, yOf(last[1])+4, "start", valueSz, sr.Color, "bold", f.measure(sr.EndLabel))
		}
	}
}
