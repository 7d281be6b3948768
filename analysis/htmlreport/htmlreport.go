// Package htmlreport renders reel's analysis (report, stats, compare) as
// single self-contained HTML files: inline CSS and generated inline SVG
// charts, no script and nothing fetched from the network.
package htmlreport

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

//go:embed page.html.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur":    analysis.FormatDuration,
	"span":   func(d time.Duration) string { return d.String() },
	"pct":    func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) },
	"f1":     func(x float64) string { return fmt.Sprintf("%.1f", x) },
	"f2":     func(x float64) string { return fmt.Sprintf("%.2f", x) },
	"tm":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"hms":    func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"qv":     qv,
	"cell":   deltaCell,
	"mul100": func(x float64) float64 { return 100 * x },
}).Parse(pageTemplate))

// palette: colour-blind-safe (Okabe–Ito).
const (
	blue   = "#0072B2"
	orange = "#E69F00"
	green  = "#009E73"
	red    = "#D55E00"
	purple = "#CC79A7"
	grey   = "#7f7f7f"
)

const chartW, chartH, smallW = 1180, 300, 380

type pageData struct {
	Title   string
	Version string
	Kind    string // "report", "stats", "compare"
	Summary *analysis.Summary
	Stats   *analysis.Stats
	Cmp     *analysis.Comparison
	Verdict *analysis.Verdict
	NameA   string
	NameB   string
	Charts  []template.HTML
	Dists   []template.HTML
	Strip   template.HTML
	Rows    []metricRow
	Groups  []groupTable
}

type metricRow struct {
	Name string
	Q    analysis.Quantiles
}

type groupTable struct {
	Title  string
	Groups []analysis.Group
}

func qv(q analysis.Quantiles, d time.Duration) string {
	if q.N == 0 {
		return "–"
	}
	return analysis.FormatDuration(d)
}

// WriteReport writes the report of one run.
func WriteReport(w io.Writer, title string, s *analysis.Summary) error {
	d := pageData{Title: title, Version: formats.Version, Kind: "report", Summary: s}
	d.fill(s, nil)
	return page.Execute(w, d)
}

// WriteStats writes the stats of a recording, with frames that stand out
// shaded in the time charts.
func WriteStats(w io.Writer, title string, st *analysis.Stats) error {
	d := pageData{Title: title, Version: formats.Version, Kind: "stats", Summary: st.Summary, Stats: st}
	var bands []Band
	for _, e := range st.Outliers {
		bands = append(bands, Band{X0: unix(e.Start), X1: unix(e.End)})
	}
	d.fill(st.Summary, bands)
	return page.Execute(w, d)
}

// WriteCompare writes a comparison of run B against run A, both runs
// overlaid; verdict may be nil.
func WriteCompare(w io.Writer, nameA, nameB string, c *analysis.Comparison, verdict *analysis.Verdict) error {
	d := pageData{Title: "reel compare: " + nameA + " vs " + nameB, Version: formats.Version, Kind: "compare",
		Summary: c.B, Cmp: c, Verdict: verdict, NameA: nameA, NameB: nameB}
	fa, fb := framesXY(c.A.Frames, c.A.Frame), framesXY(c.B.Frames, c.B.Frame)
	d.Charts = append(d.Charts, Chart{
		Title: "E2E latency per frame: A vs B", Width: chartW, Height: chartH, XKind: xTime, YFmt: fmtMs, YLabel: "latency",
		XLo: math.Min(fa.lo, fb.lo), XHi: math.Max(fa.hi, fb.hi),
		Series: []Series{
			{Name: "A p99", X: fa.x, Y: fa.p99, Color: blue},
			{Name: "B p99", X: fb.x, Y: fb.p99, Color: orange},
			{Name: "A p50", X: fa.x, Y: fa.p50, Color: blue, Dash: true},
			{Name: "B p50", X: fb.x, Y: fb.p50, Color: orange, Dash: true},
		},
	}.SVG(), Chart{
		Title: "TTFT p99 per frame, with batch size", Width: chartW, Height: chartH, XKind: xTime, YFmt: fmtMs, YLabel: "TTFT p99",
		XLo: math.Min(fa.lo, fb.lo), XHi: math.Max(fa.hi, fb.hi),
		Y2Lab: "mean batch size",
		Series: []Series{
			{Name: "A ttft p99", X: fa.x, Y: fa.ttft, Color: blue},
			{Name: "B ttft p99", X: fb.x, Y: fb.ttft, Color: orange},
			{Name: "A batch", X: fa.x, Y: fa.batch, Color: blue, Dash: true, Right: true},
			{Name: "B batch", X: fb.x, Y: fb.batch, Color: orange, Dash: true, Right: true},
		},
	}.SVG())
	d.Charts = append(d.Charts, compareSignalCharts(c)...)
	for _, m := range []string{"e2e", "ttft", "itl"} {
		d.Dists = append(d.Dists, cdfChart(strings.ToUpper(m)+" distribution (CDF)", []namedHist{
			{"A", c.A.Histograms[m], blue}, {"B", c.B.Histograms[m], orange}}))
	}
	d.Strip = Strip{Title: sloTitle(c.B), Width: chartW, Rows: []StripRow{
		{Name: "A", Cells: stripCells(c.A.Frames)}, {Name: "B", Cells: stripCells(c.B.Frames)}}}.SVG()
	return page.Execute(w, d)
}

func (d *pageData) fill(s *analysis.Summary, bands []Band) {
	f := framesXY(s.Frames, s.Frame)
	d.Charts = append(d.Charts, Chart{
		Title: "E2E latency per frame, with batch size", Width: chartW, Height: chartH, XKind: xTime, YFmt: fmtMs,
		YLabel: "latency", Y2Lab: "mean batch size", Bands: bands, XLo: f.lo, XHi: f.hi,
		Series: []Series{
			{Name: "p50", X: f.x, Y: f.p50, Color: green},
			{Name: "p95", X: f.x, Y: f.p95, Color: orange},
			{Name: "p99", X: f.x, Y: f.p99, Color: red},
			{Name: "batch size", X: f.x, Y: f.batch, Color: grey, Dash: true, Right: true},
		},
	}.SVG(), Chart{
		Title: "E2E p99 per frame, with long-prompt share", Width: chartW, Height: chartH, XKind: xTime, YFmt: fmtMs,
		YLabel: "p99", Y2Lab: "long-prompt share", Y2Fmt: fmtPct, Y2Max: 1, Bands: bands, XLo: f.lo, XHi: f.hi,
		Series: []Series{
			{Name: "p99", X: f.x, Y: f.p99, Color: red},
			{Name: "TTFT p99", X: f.x, Y: f.ttft, Color: blue},
			{Name: "long-prompt share", X: f.x, Y: f.long, Color: purple, Dash: true, Right: true},
		},
	}.SVG())
	d.Charts = append(d.Charts, signalCharts(s)...)
	for _, m := range []struct{ key, title string }{{"e2e", "E2E"}, {"ttft", "TTFT"}, {"itl", "ITL"}} {
		d.Dists = append(d.Dists, histChart(m.title+" distribution", s.Histograms[m.key]))
	}
	d.Strip = Strip{Title: sloTitle(s), Width: chartW, Rows: []StripRow{{Name: "frames", Cells: stripCells(s.Frames)}}}.SVG()
	d.Rows = []metricRow{{"e2e", s.E2E}, {"e2e_sched", s.E2ESched}, {"ttfb", s.TTFB}, {"ttft", s.TTFT}, {"ttst", s.TTST},
		{"tpot", s.TPOT}, {"itl", s.ITL}, {"itl_token", s.ITLToken}, {"lag", s.Lag}}
	d.Groups = []groupTable{{"route", s.Routes}, {"model", s.Models}, {"prompt length", s.PromptBuckets}, {"status class", s.StatusClasses}}
}

func sloTitle(s *analysis.Summary) string {
	if s.SLO == "" {
		return "SLO windows (no --slo given)"
	}
	return fmt.Sprintf("SLO windows: %s per frame meets %s (green meets, red misses, grey no requests)", quantileLabel(s.WindowQuantile), s.SLO)
}

func quantileLabel(p float64) string {
	if p >= 1 {
		return "max"
	}
	return fmt.Sprintf("p%g", 100*p)
}

type frameSeries struct {
	x, p50, p95, p99, ttft, batch, long []float64
	lo, hi                              float64 // first frame's start, last frame's end
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// framesXY turns frames into chart series, x at the frame's middle; frames
// without a value leave gaps.
func framesXY(frames []analysis.Frame, frame time.Duration) frameSeries {
	var f frameSeries
	nan := math.NaN()
	val := func(q analysis.Quantiles, d time.Duration) float64 {
		if q.N == 0 {
			return nan
		}
		return float64(d)
	}
	if len(frames) > 0 {
		f.lo, f.hi = unix(frames[0].Start), unix(frames[len(frames)-1].Start.Add(frame))
	}
	for _, fr := range frames {
		f.x = append(f.x, unix(fr.Start.Add(frame/2)))
		f.p50 = append(f.p50, val(fr.E2E, fr.E2E.P50))
		f.p95 = append(f.p95, val(fr.E2E, fr.E2E.P95))
		f.p99 = append(f.p99, val(fr.E2E, fr.E2E.P99))
		f.ttft = append(f.ttft, val(fr.TTFT, fr.TTFT.P99))
		b, l := nan, nan
		if fr.MeanBatchSize > 0 {
			b = fr.MeanBatchSize
		}
		if fr.MeanPrompt > 0 {
			l = fr.LongPromptShare
		}
		f.batch, f.long = append(f.batch, b), append(f.long, l)
	}
	return f
}

func fmtMs(v float64) string { return fmtNs(v) }

func histChart(title string, h analysis.Histogram) template.HTML {
	x := make([]float64, len(h.Edges))
	for i, e := range h.Edges {
		x[i] = float64(e)
	}
	var total int64
	for _, c := range h.Counts {
		total += c
	}
	y := make([]float64, len(h.Counts))
	cdf := make([]float64, len(h.Edges))
	var cum int64
	for i, c := range h.Counts {
		y[i] = float64(c) / float64(max(total, 1))
		cum += c
		cdf[i+1] = float64(cum) / float64(max(total, 1))
	}
	return Chart{Title: title, Width: smallW, Height: 240, XKind: xLog, YFmt: fmtPct, Y2Fmt: fmtPct, Y2Max: 1,
		Series: []Series{{Name: "share", X: x, Y: y, Color: blue, Bars: true}, {Name: "CDF", X: x, Y: cdf, Color: red, Right: true}},
	}.SVG()
}

type namedHist struct {
	name  string
	h     analysis.Histogram
	color string
}

func cdfChart(title string, hs []namedHist) template.HTML {
	c := Chart{Title: title, Width: smallW, Height: 240, XKind: xLog, YFmt: fmtPct}
	for _, nh := range hs {
		var total, cum int64
		for _, n := range nh.h.Counts {
			total += n
		}
		x := make([]float64, len(nh.h.Edges))
		y := make([]float64, len(nh.h.Edges))
		for i, e := range nh.h.Edges {
			x[i] = float64(e)
			if i > 0 {
				cum += nh.h.Counts[i-1]
			}
			y[i] = float64(cum) / float64(max(total, 1))
		}
		c.Series = append(c.Series, Series{Name: nh.name, X: x, Y: y, Color: nh.color})
	}
	return c.SVG()
}

func stripCells(frames []analysis.Frame) []StripCell {
	cells := make([]StripCell, len(frames))
	for i, f := range frames {
		c := StripCell{Tip: fmt.Sprintf("%s: %d requests", f.Start.UTC().Format("15:04:05"), f.Requests)}
		if f.Judged {
			c.State = "ok"
			if !f.MeetsSLO {
				c.State = "miss"
				c.Tip += "; " + strings.Join(f.Misses, "; ")
			}
		}
		cells[i] = c
	}
	return cells
}

// deltaCell formats one side-by-side row's values for the compare table.
func deltaCell(d analysis.Delta, which string) string {
	v := map[string]float64{"a": d.A, "b": d.B, "abs": d.Abs}[which]
	switch which {
	case "rel":
		if d.A == 0 {
			return "–"
		}
		return fmt.Sprintf("%+.1f%%", 100*d.Rel)
	case "ci":
		if !d.HasCI {
			return "–"
		}
		return "[" + signed(d, d.CILow) + ", " + signed(d, d.CIHigh) + "]"
	case "abs":
		return signed(d, v)
	}
	return value(d, v)
}

func value(d analysis.Delta, v float64) string {
	switch d.Unit {
	case "ns":
		return analysis.FormatDuration(time.Duration(v))
	case "ratio":
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return fmt.Sprintf("%.2f", v)
}

func signed(d analysis.Delta, v float64) string {
	if v < 0 {
		return "-" + value(d, -v)
	}
	return "+" + value(d, v)
}
