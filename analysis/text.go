package analysis

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// fmtDur prints a duration compactly with three significant digits:
// 412µs, 12.3ms, 1.25s.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond-500*time.Nanosecond: // below what rounds to 1000µs
		return sig3(float64(d)/1e3) + "µs"
	case d < time.Second-500*time.Microsecond:
		return sig3(float64(d)/1e6) + "ms"
	case d < time.Minute:
		return sig3(d.Seconds()) + "s"
	}
	return d.Round(time.Second).String()
}

func sig3(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// FormatDuration prints a duration as reel's reports do (three significant
// digits: 412µs, 12.3ms, 1.25s).
func FormatDuration(d time.Duration) string { return fmtDur(d) }

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// pct2 is a percentage with two decimals, for reuse ratios of a few percent.
func pct2(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

// cacheOrDash is a reuse cell: "-" when no request reported cached tokens.
func cacheOrDash(c CacheReuse) string {
	if c.Requests == 0 {
		return "-"
	}
	return pct2(c.Reuse)
}

// WriteFrameLine writes one frame's summary on one line, as replay's
// progress and --step mode print it:
//
//	14:00:05  req 120 ok 118 err 2  e2e p50 120ms p99 1.20s  ttft p99 300ms  lag p99 1.02ms  batch 12.3  SLO ok
func WriteFrameLine(w io.Writer, f *Frame) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  req %d ok %d err %d", f.Start.UTC().Format("2006-01-02 15:04:05"), f.Requests, f.OK, f.Errors)
	if f.E2E.N > 0 {
		fmt.Fprintf(&b, "  e2e p50 %s p99 %s", fmtDur(f.E2E.P50), fmtDur(f.E2E.P99))
	}
	if f.TTFT.N > 0 {
		fmt.Fprintf(&b, "  ttft p99 %s", fmtDur(f.TTFT.P99))
	}
	if f.Lag.N > 0 {
		fmt.Fprintf(&b, "  lag p99 %s", fmtDur(f.Lag.P99))
	}
	if f.MeanBatchSize > 0 {
		fmt.Fprintf(&b, "  batch %.1f", f.MeanBatchSize)
	}
	if f.Judged {
		if f.MeetsSLO {
			b.WriteString("  SLO ok")
		} else {
			fmt.Fprintf(&b, "  SLO MISS (%s)", strings.Join(f.Misses, "; "))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// quantileHeader and quantileRow print a Quantiles table row.
const quantileHeader = "metric\tn\tp50\tp90\tp95\tp99\tp99.9\tmax\tmean\tstd\t"

func quantileRow(name string, q Quantiles) string {
	if q.RelErr > 0 {
		name = sketchMark + name
	}
	if q.N == 0 {
		return name + "\t0\t-\t-\t-\t-\t-\t-\t-\t-\t"
	}
	return fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", name, q.N,
		fmtDur(q.P50), fmtDur(q.P90), fmtDur(q.P95), fmtDur(q.P99), fmtDur(q.P999), fmtDur(q.Max), fmtDur(q.Mean), fmtDur(q.Std))
}

// metricRows lists the summary's latency metrics in report order.
func (s *Summary) metricRows() []struct {
	Name string
	Q    Quantiles
} {
	rows := []struct {
		Name string
		Q    Quantiles
	}{
		{"e2e", s.E2E}, {"e2e_sched", s.E2ESched}, {"ttfb", s.TTFB}, {"ttft", s.TTFT}, {"ttst", s.TTST},
		{"tpot", s.TPOT}, {"itl", s.ITL}, {"itl_token", s.ITLToken}, {"lag", s.Lag},
	}
	if s.SessionDelay.N > 0 {
		rows = append(rows, struct {
			Name string
			Q    Quantiles
		}{"session_delay", s.SessionDelay})
	}
	return rows
}

// WriteText writes the summary as a plain-text report: totals, latency
// quantiles, throughput, SLO, breakdowns and the per-frame table.
func (s *Summary) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("%s: %d requests, %d ok, %d errors (%s), %d excluded\n", orDash(s.Source), s.Requests, s.OK, s.Errors, pct(s.ErrorRate), s.Excluded)
	if s.FilterText != "" {
		ew.printf("filter: %s (%d requests left out)\n", s.FilterText, s.Filtered)
	}
	if s.Requests == 0 {
		ew.printf("no requests\n")
		return ew.err
	}
	ew.printf("window %s → %s (%s), frames of %s\n", s.Start.Format(time.RFC3339), s.End.Format(time.RFC3339), fmtDur(s.Duration), s.Frame)
	if len(s.Classes) > 0 {
		parts := make([]string, len(s.Classes))
		for i, c := range s.Classes {
			parts[i] = fmt.Sprintf("%s %d (%s)", c.Class, c.Count, pct(c.Share))
		}
		ew.printf("status: %s\n", strings.Join(parts, ", "))
	}
	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, quantileHeader)
	for _, r := range s.metricRows() {
		fmt.Fprintln(tw, quantileRow(r.Name, r.Q))
	}
	tw.Flush()
	if line := s.exactness(); line != "" {
		ew.printf("%s\n", line)
	}
	ew.printf("\nthroughput: %.2f req/s, %.2f completed/s, %.1f output tokens/s (peak 1-s %.0f)\n",
		s.RequestRate, s.Throughput, s.OutputTokenRate, s.PeakOutputTokenRate)
	ew.printf("concurrency: %.2f mean (ΣE2E ÷ duration), %d peak in flight\n", s.Concurrency, s.PeakInFlight)
	if s.MeanBatchSize > 0 {
		ew.printf("batch size: %.2f mean; queue depth: %.2f mean\n", s.MeanBatchSize, s.MeanQueueDepth)
	}
	if s.SLO != "" {
		verdict := "MEETS"
		if !s.MeetsSLO {
			verdict = "MISSES"
		}
		ew.printf("SLO %s: goodput %.2f req/s (%s of requests); window compliance %s (%d/%d frames, %s each) — %s\n",
			s.SLO, s.Goodput, pct(s.GoodputShare), pct(s.WindowCompliance), s.CompliantFrames, s.JudgedFrames,
			quantileName(s.WindowQuantile), verdict)
	}
	if s.Signals != nil {
		s.Signals.WriteText(ew)
	}
	if s.Prefix.Blocks > 0 {
		capped := ""
		if s.Prefix.Capped {
			capped = " (lower bound: hash memory full)"
		}
		ew.printf("prefix sharing: %s of %d blocks seen before%s; %s of requests share their first block\n",
			pct(s.Prefix.Ratio), s.Prefix.Blocks, capped, pct(s.Prefix.RequestShare))
	}
	if c := s.Cache; c.Requests > 0 {
		ew.printf("prefix-cache reuse (server's cached_tokens): %s ± %s of prompt tokens (%d of %d, %d of %d requests reporting)\n",
			pct2(c.Reuse), pct2(c.StdErr), c.CachedTokens, c.PromptTokens, c.Requests, s.Requests)
	}
	for _, g := range []struct {
		title  string
		groups []Group
	}{{"route", s.Routes}, {"model", s.Models}, {"prompt length", s.PromptBuckets}, {"status class", s.StatusClasses}} {
		writeGroups(ew, g.title, g.groups)
	}
	ew.printf("\nframes (%s each):\n", s.Frame)
	writeFrameTable(ew, s.Frames)
	return ew.err
}

// sketchMark marks a sketched metric in the quantile table.
const sketchMark = "≈"

// exactness says which quantiles carry an error bound; empty when every
// one is exact.
func (s *Summary) exactness() string {
	var run []string
	for _, r := range s.metricRows() {
		if r.Q.RelErr > 0 {
			run = append(run, r.Name)
		}
	}
	frames, sketchedFrames := 0, 0
	for _, f := range s.Frames {
		if f.Requests > 0 {
			frames++
			if f.E2E.RelErr > 0 || f.TTFT.RelErr > 0 || f.TPOT.RelErr > 0 || f.Lag.RelErr > 0 || f.E2ESched.RelErr > 0 {
				sketchedFrames++
			}
		}
	}
	groups, sketchedGroups := 0, 0
	for _, gs := range [][]Group{s.Routes, s.Models, s.PromptBuckets, s.StatusClasses} {
		for _, g := range gs {
			groups++
			if g.E2E.RelErr > 0 || g.TTFT.RelErr > 0 || g.TPOT.RelErr > 0 {
				sketchedGroups++
			}
		}
	}
	if len(run) == 0 && sketchedFrames == 0 && sketchedGroups == 0 {
		return ""
	}
	return fmt.Sprintf("%s quantiles are from sketches, within ±%g %% of the exact value (more values than the analysis keeps exactly): %s; %d of %d frames; %d of %d groups. The others are exact.",
		sketchMark, 100*SketchRelErr, orDash(strings.Join(run, ", ")), sketchedFrames, frames, sketchedGroups, groups)
}

func writeGroups(w io.Writer, title string, groups []Group) {
	if len(groups) == 0 {
		return
	}
	fmt.Fprintf(w, "\nby %s:\n", title)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	cache := slices.ContainsFunc(groups, func(g Group) bool { return g.Cache.Requests > 0 })
	header := "  key\treq\terr\te2e p50\te2e p99\tttft p99\ttpot p50\t"
	if cache {
		header += "cache\t"
	}
	fmt.Fprintln(tw, header)
	for _, g := range groups {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%s\t", orDash(g.Key), g.Requests, g.Errors,
			qv(g.E2E, g.E2E.P50), qv(g.E2E, g.E2E.P99), qv(g.TTFT, g.TTFT.P99), qv(g.TPOT, g.TPOT.P50))
		if cache {
			fmt.Fprintf(tw, "%s\t", cacheOrDash(g.Cache))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func writeFrameTable(w io.Writer, frames []Frame) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	cache := slices.ContainsFunc(frames, func(f Frame) bool { return f.Cache.Requests > 0 })
	header := "  start\treq\terr\trate/s\te2e p50\tp95\tp99\tttft p99\tlag p99\tbatch\tqueue\tlong%\tSLO\t"
	if cache {
		header += "cache\t"
	}
	fmt.Fprintln(tw, header)
	for _, f := range frames {
		slo := ""
		if f.Judged {
			slo = "ok"
			if !f.MeetsSLO {
				slo = "MISS"
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t",
			f.Start.UTC().Format("01-02 15:04:05"), f.Requests, f.Errors, f.Rate,
			qv(f.E2E, f.E2E.P50), qv(f.E2E, f.E2E.P95), qv(f.E2E, f.E2E.P99), qv(f.TTFT, f.TTFT.P99), qv(f.Lag, f.Lag.P99),
			num(f.MeanBatchSize), num(f.MeanQueueDepth), pctOrDash(f.LongPromptShare, f.MeanPrompt > 0), slo)
		if cache {
			fmt.Fprintf(tw, "%s\t", cacheOrDash(f.Cache))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func qv(q Quantiles, d time.Duration) string {
	if q.N == 0 {
		return "-"
	}
	return fmtDur(d)
}

func num(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", x)
}

func pctOrDash(x float64, known bool) string {
	if !known {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter remembers the first write error so report code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
