package benchcharts

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// svgWriter accumulates SVG elements. Every number goes through c or a
// fixed-precision format, so the same input gives the same bytes.
type svgWriter struct {
	b strings.Builder
}

// c is a coordinate: one decimal, no trailing zeros, no "-0".
func c(v float64) string {
	r := math.Round(v*10) / 10
	if r == 0 {
		r = 0 // -0 → 0
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

func (w *svgWriter) raw(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

func (w *svgWriter) rect(x, y, width, height float64, fill, extra string) {
	w.raw(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>`+"\n", c(x), c(y), c(math.Max(width, 0)), c(height), fill, extra)
}

func (w *svgWriter) line(x1, y1, x2, y2 float64, stroke, extra string) {
	w.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"%s/>`+"\n", c(x1), c(y1), c(x2), c(y2), stroke, extra)
}

// text writes s at (x, y) (y is the baseline); anchor is start, middle or
// end.
func (w *svgWriter) text(x, y float64, anchor string, size float64, fill, weight, s string) {
	extra := ""
	if weight != "" {
		extra = ` font-weight="` + weight + `"`
	}
	if anchor != "start" {
		extra += ` text-anchor="` + anchor + `"`
	}
	w.raw(`<text x="%s" y="%s" font-size="%s" fill="%s"%s>%s</text>`+"\n", c(x), c(y), c(size), fill, extra, esc(s))
}

// textWidth estimates the rendered width of s in a sans-serif face: no
// font metrics here, so it errs wide (digits and most letters are about
// 0.55 em, wide capitals more).
func textWidth(s string, size float64) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("il.,:;|!'’ ()[]", r):
			w += 0.32
		case strings.ContainsRune("MWm%@—", r):
			w += 0.85
		case r >= 'A' && r <= 'Z':
			w += 0.68
		default:
			w += 0.56
		}
	}
	return w * size
}

// Number formats. Transcribed figures are printed as recorded (numAuto:
// the shortest form of the stored float); measured ones with the decimals
// BENCHMARKS.md's tables use (num).

// num is v rounded to dec decimals with thousands separators.
func num(v float64, dec int) string {
	return commas(strconv.FormatFloat(v, 'f', dec, 64))
}

// numAuto is v as stored, with thousands separators.
func numAuto(v float64) string {
	return commas(strconv.FormatFloat(v, 'f', -1, 64))
}

// plain is v for a machine: the shortest form, no separators.
func plain(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// commas puts thousands separators into the integer part of a decimal.
func commas(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, ch := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if hasFrac {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// tick formats an axis tick compactly (1.5M, 250k, 0.5).
func tick(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	default:
		return commas(strconv.FormatFloat(v, 'f', -1, 64))
	}
}

// niceAxis is an axis from 0 covering max: its end and tick step, the
// step 1, 2, 2.5 or 5 times a power of ten, 3 to 6 ticks.
func niceAxis(max float64) (end, step float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1, 0.25
	}
	raw := max / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		step = m * p
		if step >= raw {
			break
		}
	}
	// Round away float noise (0.30000000000000004) so ticks print cleanly.
	step = roundSig(step)
	end = roundSig(math.Ceil(max/step-1e-9) * step)
	return end, step
}

func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return f
}
