package htmlreport

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"
)

// Series is one line (or set of bars) of a chart.
type Series struct {
	Name  string    // legend label; empty leaves the series out of the legend
	X, Y  []float64 // same length; NaN Y leaves a gap
	Color string    // SVG stroke/fill colour, e.g. "#0072B2"
	Dash  bool      // dashed line
	Right bool      // plotted against the right axis
	Bars  bool      // bars from X[i] to X[i+1] (len(X) = len(Y)+1)
}

// Chart is an SVG line/bar chart with an optional right axis.
type Chart struct {
	Title         string               // drawn above the chart and used as its aria-label
	Width, Height int                  // SVG size in pixels
	XKind         axisKind             // xTime (Unix seconds), xLog (ns, log scale) or xLinear
	YFmt, Y2Fmt   func(float64) string // tick label formats of the left and right axes (nil: plain numbers)
	YLabel, Y2Lab string               // axis titles, left and right (the right one only with a right-axis series)
	Y2Max         float64              // fixed right-axis maximum (0: from data)
	Series        []Series             // the lines and bars to draw
	Bands         []Band               // shaded x ranges drawn behind the series
	XLo, XHi      float64              // fixed x range (both 0: from the data)
}

// Band shades the x range [X0, X1] (frames that stand out).
type Band struct{ X0, X1 float64 }

type axisKind int

const (
	xLinear axisKind = iota
	xTime
	xLog
)

const (
	padL, padR, padT, padB = 64, 64, 46, 40
)

type scale struct {
	lo, hi   float64
	px0, px1 float64
	log      bool
}

func (s scale) at(v float64) float64 {
	if s.log {
		v, s.lo, s.hi = math.Log10(math.Max(v, 1)), math.Log10(math.Max(s.lo, 1)), math.Log10(math.Max(s.hi, 1))
	}
	if s.hi == s.lo {
		return (s.px0 + s.px1) / 2
	}
	return s.px0 + (v-s.lo)/(s.hi-s.lo)*(s.px1-s.px0)
}

// niceStep returns a 1-2-5 step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

var timeSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// SVG renders the chart.
func (c Chart) SVG() template.HTML {
	w, h := float64(c.Width), float64(c.Height)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		c.Width, c.Height, c.Width, c.Height, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%d" y="20" class="title">%s</text>`, padL, html.EscapeString(c.Title))

	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := 0.0, math.Inf(-1)
	y2hi := math.Inf(-1)
	for _, s := range c.Series {
		for _, x := range s.X {
			if c.XKind == xLog && x <= 0 {
				continue
			}
			xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
		}
		for _, y := range s.Y {
			if math.IsNaN(y) {
				continue
			}
			if s.Right {
				y2hi = math.Max(y2hi, y)
			} else {
				yhi = math.Max(yhi, y)
			}
		}
	}
	if c.XHi > c.XLo {
		xlo, xhi = c.XLo, c.XHi
	}
	if math.IsInf(xlo, 0) {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="empty">no data</text></svg>`, w/2, h/2)
		return template.HTML(b.String())
	}
	if xhi == xlo {
		xhi = xlo + 1
	}
	if math.IsInf(yhi, 0) || yhi <= 0 {
		yhi = 1
	}
	ystep := niceStep(yhi, 5)
	yhi = math.Ceil(yhi/ystep) * ystep
	if c.Y2Max > 0 {
		y2hi = c.Y2Max
	}
	if math.IsInf(y2hi, 0) || y2hi <= 0 {
		y2hi = 1
	}
	y2step := niceStep(y2hi, 5)
	y2hi = math.Ceil(y2hi/y2step) * y2step

	xs := scale{lo: xlo, hi: xhi, px0: padL, px1: w - padR, log: c.XKind == xLog}
	ys := scale{lo: ylo, hi: yhi, px0: h - padB, px1: padT}
	y2s := scale{lo: 0, hi: y2hi, px0: h - padB, px1: padT}

	// Grid and left axis.
	for v := 0.0; v <= yhi+ystep/2; v += ystep {
		y := ys.at(v)
		fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" class="grid"/>`, padL, w-padR, y, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`, padL-6, y+4, html.EscapeString(fmtOr(c.YFmt, v)))
	}
	hasRight := false
	for _, s := range c.Series {
		hasRight = hasRight || s.Right
	}
	if hasRight {
		for v := 0.0; v <= y2hi+y2step/2; v += y2step {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" class="tick">%s</text>`, w-padR+6, y2s.at(v)+4, html.EscapeString(fmtOr(c.Y2Fmt, v)))
		}
	}
	// X axis ticks.
	for _, t := range c.xTicks(xlo, xhi) {
		x := xs.at(t.v)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" class="axis"/>`, x, x, h-padB, h-padB+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" class="tick" text-anchor="middle">%s</text>`, x, h-padB+16, html.EscapeString(t.label))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.0f" y2="%.0f" class="axis"/>`, padL, w-padR, h-padB, h-padB)
	if c.YLabel != "" {
		fmt.Fprintf(&b, `<text x="14" y="%.0f" class="label" transform="rotate(-90 14 %.0f)" text-anchor="middle">%s</text>`, (h-padB+padT)/2, (h-padB+padT)/2, html.EscapeString(c.YLabel))
	}
	if c.Y2Lab != "" && hasRight {
		x := w - 12
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="label" transform="rotate(90 %.0f %.0f)" text-anchor="middle">%s</text>`, x, (h-padB+padT)/2, x, (h-padB+padT)/2, html.EscapeString(c.Y2Lab))
	}

	for _, bd := range c.Bands {
		x0, x1 := xs.at(math.Max(bd.X0, xlo)), xs.at(math.Min(bd.X1, xhi))
		if x1 > x0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.0f" class="band"/>`, x0, padT, x1-x0, h-padB-padT)
		}
	}
	// Series.
	for _, s := range c.Series {
		sy := ys
		if s.Right {
			sy = y2s
		}
		if s.Bars {
			for i, y := range s.Y {
				if i+1 >= len(s.X) || math.IsNaN(y) || y <= 0 {
					continue
				}
				x0, x1 := xs.at(s.X[i]), xs.at(s.X[i+1])
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.55"/>`,
					x0+0.5, sy.at(y), math.Max(x1-x0-1, 0.5), sy.at(0)-sy.at(y), s.Color)
			}
			continue
		}
		var path strings.Builder
		pen := false
		for i := range s.X {
			if i >= len(s.Y) || math.IsNaN(s.Y[i]) || (c.XKind == xLog && s.X[i] <= 0) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f,%.1f ", cmd, xs.at(s.X[i]), sy.at(s.Y[i]))
			pen = true
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8"%s/>`, strings.TrimSpace(path.String()), s.Color, dash)
	}
	// Legend.
	lx := float64(padL)
	for _, s := range c.Series {
		if s.Name == "" {
			continue
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%d" y2="%d" stroke="%s" stroke-width="%d"%s/>`, lx, lx+18, padT-12, padT-12, s.Color, map[bool]int{true: 8, false: 2}[s.Bars], dash)
		name := s.Name
		if s.Right {
			name += " (right)"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" class="legend">%s</text>`, lx+22, padT-8, html.EscapeString(name))
		lx += 30 + 6.5*float64(len([]rune(name)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

type tick struct {
	v     float64
	label string
}

func (c Chart) xTicks(lo, hi float64) []tick {
	var ts []tick
	switch c.XKind {
	case xTime:
		span := time.Duration((hi - lo) * 1e9)
		step := timeSteps[len(timeSteps)-1]
		for _, s := range timeSteps {
			if span/s <= 8 {
				step = s
				break
			}
		}
		layout := "15:04:05"
		if step >= time.Minute {
			layout = "15:04"
		}
		st := step.Seconds()
		for v := math.Ceil(lo/st) * st; v <= hi; v += st {
			ts = append(ts, tick{v, time.Unix(int64(v), 0).UTC().Format(layout)})
		}
	case xLog:
		mults := []float64{1}
		if hi/lo < 1000 { // few decades: label 1-2-5 steps
			mults = []float64{1, 2, 5}
		}
		for e := math.Floor(math.Log10(math.Max(lo, 1))); e <= math.Ceil(math.Log10(hi)); e++ {
			for _, m := range mults {
				v := m * math.Pow(10, e)
				if v >= lo && v <= hi {
					ts = append(ts, tick{v, fmtNs(v)})
				}
			}
		}
	default:
		step := niceStep(hi-lo, 6)
		for v := math.Ceil(lo/step) * step; v <= hi; v += step {
			ts = append(ts, tick{v, trimFloat(v)})
		}
	}
	return ts
}

func fmtOr(f func(float64) string, v float64) string {
	if f == nil {
		return trimFloat(v)
	}
	return f(v)
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// fmtNs formats nanoseconds as a short duration.
func fmtNs(v float64) string {
	d := time.Duration(v)
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return trimFloat(float64(d)/1e3) + "µs"
	case d < time.Second:
		return trimFloat(float64(d)/1e6) + "ms"
	}
	return trimFloat(d.Seconds()) + "s"
}

// fmtPct formats a 0..1 share as a percentage.
func fmtPct(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// Strip is a row of coloured cells, one per frame: the SLO window strip.
type Strip struct {
	Title string     // drawn above the strip and used as its aria-label
	Width int        // SVG width in pixels
	Rows  []StripRow // one per run, top to bottom
}

// StripRow is one run's frames.
type StripRow struct {
	Name  string      // label left of the row
	Cells []StripCell // one per frame, left to right
}

// StripCell is one frame: State "ok", "miss" or "" (not judged).
type StripCell struct {
	State string // "ok", "miss" or "" (not judged)
	Tip   string // tooltip text
}

// SVG renders the strip.
func (s Strip) SVG() template.HTML {
	const rowH, gap, labelW = 18, 6, padL
	h := padT + len(s.Rows)*(rowH+gap) + 4
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`, s.Width, h, s.Width, h, html.EscapeString(s.Title))
	fmt.Fprintf(&b, `<text x="%d" y="20" class="title">%s</text>`, padL, html.EscapeString(s.Title))
	for r, row := range s.Rows {
		y := padT + r*(rowH+gap)
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick" text-anchor="end">%s</text>`, labelW-8, y+13, html.EscapeString(row.Name))
		n := len(row.Cells)
		if n == 0 {
			continue
		}
		cw := float64(s.Width-labelW-padR) / float64(n)
		for i, c := range row.Cells {
			cls := "na"
			switch c.State {
			case "ok":
				cls = "ok"
			case "miss":
				cls = "miss"
			}
			fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" class="%s"><title>%s</title></rect>`,
				float64(labelW)+float64(i)*cw, y, math.Max(cw-0.6, 0.4), rowH, cls, html.EscapeString(c.Tip))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
