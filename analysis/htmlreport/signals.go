package htmlreport

import (
	"html"
	"html/template"
	"math"
	"sort"
	"strings"

	"github.com/reelkit/reel/analysis"
)

// maxSignalCharts bounds the server-side overlay charts of one run.
const maxSignalCharts = 3

// signalCharts overlays the server-side series (the one that moves with the
// tail first, then by correlation) on the per-frame E2E p99, one chart each.
func signalCharts(s *analysis.Summary) []template.HTML {
	if s == nil || s.Signals == nil || len(s.Signals.Series) == 0 {
		return nil
	}
	f := framesXY(s.Frames, s.Frame)
	out := []template.HTML{verdictHTML(s.Signals.Explanation)}
	for _, ss := range rankedSeries(s.Signals) {
		out = append(out, Chart{
			Title: "E2E p99 per frame, with " + seriesTitle(ss), Width: chartW, Height: chartH, XKind: xTime, YFmt: fmtMs,
			YLabel: "p99", Y2Lab: ss.Name, XLo: f.lo, XHi: f.hi,
			Series: []Series{
				{Name: "p99", X: f.x, Y: f.p99, Color: red},
				{Name: "TTFT p99", X: f.x, Y: f.ttft, Color: blue},
				{Name: seriesTitle(ss), X: f.x, Y: signalY(ss), Color: green, Dash: true, Right: true},
			},
		}.SVG())
	}
	return out
}

// compareSignalCharts overlays each run's series on its own p99.
func compareSignalCharts(c *analysis.Comparison) []template.HTML {
	if c.A == nil || c.B == nil || (c.A.Signals == nil && c.B.Signals == nil) {
		return nil
	}
	fa, fb := framesXY(c.A.Frames, c.A.Frame), framesXY(c.B.Frames, c.B.Frame)
	byName := func(sig *analysis.Signals, name string) *analysis.SignalSeries {
		if sig == nil {
			return nil
		}
		for i := range sig.Series {
			if sig.Series[i].Name == name {
				return &sig.Series[i]
			}
		}
		return nil
	}
	var names []string
	for _, sig := range []*analysis.Signals{c.B.Signals, c.A.Signals} {
		if sig == nil {
			continue
		}
		for _, ss := range rankedSeries(sig) {
			if !containsString(names, ss.Name) && len(names) < maxSignalCharts {
				names = append(names, ss.Name)
			}
		}
	}
	var out []template.HTML
	for _, side := range []struct {
		name string
		sig  *analysis.Signals
	}{{"A", c.A.Signals}, {"B", c.B.Signals}} {
		if side.sig != nil {
			out = append(out, verdictHTML(side.name+" "+side.sig.Explanation))
		}
	}
	for _, name := range names {
		series := []Series{
			{Name: "A p99", X: fa.x, Y: fa.p99, Color: blue},
			{Name: "B p99", X: fb.x, Y: fb.p99, Color: orange},
		}
		if ss := byName(c.A.Signals, name); ss != nil {
			series = append(series, Series{Name: "A " + name, X: fa.x, Y: signalY(*ss), Color: blue, Dash: true, Right: true})
		}
		if ss := byName(c.B.Signals, name); ss != nil {
			series = append(series, Series{Name: "B " + name, X: fb.x, Y: signalY(*ss), Color: orange, Dash: true, Right: true})
		}
		out = append(out, Chart{
			Title: "E2E p99 per frame, with " + name + ": A vs B", Width: chartW, Height: chartH, XKind: xTime, YFmt: fmtMs,
			YLabel: "p99", Y2Lab: name, XLo: math.Min(fa.lo, fb.lo), XHi: math.Max(fa.hi, fb.hi), Series: series,
		}.SVG())
	}
	return out
}

// verdictHTML is the server-side verdict as a paragraph above the charts.
func verdictHTML(text string) template.HTML {
	return template.HTML(`<div class="outlier">` + html.EscapeString(text) + `</div>`)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rankedSeries orders series: the mover first, then by correlation with
// the per-frame p99; at most maxSignalCharts.
func rankedSeries(sig *analysis.Signals) []analysis.SignalSeries {
	list := append([]analysis.SignalSeries(nil), sig.Series...)
	score := func(ss analysis.SignalSeries) float64 {
		switch {
		case ss.Name == sig.Mover:
			return 2
		case ss.P99.Valid:
			return ss.P99.R
		}
		return -2
	}
	sort.SliceStable(list, func(i, j int) bool { return score(list[i]) > score(list[j]) })
	return list[:min(len(list), maxSignalCharts)]
}

func seriesTitle(ss analysis.SignalSeries) string {
	t := ss.Name
	if ss.Rate {
		t += " (rate/s)"
	}
	if ss.Label != "" && !strings.Contains(ss.Label, ss.Name) {
		t = ss.Label + ": " + t
	}
	return t
}

// signalY is the per-frame mean; frames without points leave gaps.
func signalY(ss analysis.SignalSeries) []float64 {
	y := make([]float64, len(ss.Frames))
	for i, f := range ss.Frames {
		y[i] = math.NaN()
		if f.N > 0 {
			y[i] = f.Mean
		}
	}
	return y
}
