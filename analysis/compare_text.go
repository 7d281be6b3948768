package analysis

// The text form of a Comparison (reel compare without --json).

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func fmtChange(d Delta) string {
	if d.A == 0 {
		return fmtSigned(d, d.Abs)
	}
	return fmt.Sprintf("%+.1f%%", 100*d.Rel)
}

func fmtValue(d Delta, x float64) string {
	switch d.Unit {
	case "ns":
		return fmtDur(time.Duration(x))
	case "ratio":
		return fmt.Sprintf("%.1f%%", 100*x)
	}
	if x == math.Trunc(x) {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func fmtSigned(d Delta, x float64) string {
	s := fmtValue(d, math.Abs(x))
	if x < 0 {
		return "-" + s
	}
	return "+" + s
}

func fmtCI(d Delta) string {
	if !d.HasCI {
		return "n/a"
	}
	return fmt.Sprintf("[%s, %s]", fmtSigned(d, d.CILow), fmtSigned(d, d.CIHigh))
}

// WriteText writes the comparison: metrics side by side, then per-frame
// deltas.
func (c *Comparison) WriteText(w io.Writer, nameA, nameB string) error {
	ew := &errWriter{w: w}
	ew.printf("A: %s (%s, %d requests)\nB: %s (%s, %d requests)\n", nameA, orDash(c.A.Source), c.A.Requests, nameB, orDash(c.B.Source), c.B.Requests)
	if c.A.FilterText != "" || c.B.FilterText != "" {
		ew.printf("filter: %s (left out: %d of A, %d of B)\n", orDash(c.A.FilterText), c.A.Filtered, c.B.Filtered)
	}
	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "metric\tA\tB\tΔ\tΔ%%\t%.0f%% CI of Δ\t\t\n", 100*c.Confidence)
	for _, d := range c.Metrics {
		if strings.HasSuffix(d.Name, ".max") || strings.HasSuffix(d.Name, ".p90") {
			continue // kept in JSON; the text table stays readable
		}
		rel := "-"
		if d.A != 0 {
			rel = fmt.Sprintf("%+.1f%%", 100*d.Rel)
		}
		mark := ""
		if d.HasCI && d.Significant {
			mark = "*"
		}
		a, b, abs := fmtValue(d, d.A), fmtValue(d, d.B), fmtSigned(d, d.Abs)
		if d.NA == 0 || d.NB == 0 {
			// A value without data is unknown, not 0: say so, no change.
			if d.NA == 0 {
				a = "no data"
			}
			if d.NB == 0 {
				b = "no data"
			}
			abs, rel, mark = "-", "-", ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.Name, a, b, abs, rel, fmtCI(d), mark)
	}
	tw.Flush()
	ew.printf("(* the interval excludes zero)\n")
	if line := c.Tail.String(); line != "" {
		ew.printf("\n%s\n", line)
	}
	if line := c.CacheLine(); line != "" {
		ew.printf("\n%s\n", line)
	}
	writeCompareSignals(ew, c)
	ew.printf("\nframes (e2e p99, aligned by original start):\n")
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	slo := c.A.SLO != "" || c.B.SLO != ""
	header := "  start\tA req\tB req\tA p99\tB p99\tΔ%\t"
	if slo {
		header += "A SLO\tB SLO\t"
	}
	fmt.Fprintln(tw, header)
	for _, f := range c.Frames {
		rel := "-"
		if f.AP99 > 0 && f.BP99 > 0 {
			rel = fmt.Sprintf("%+.0f%%", 100*f.P99Rel)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t", f.Start.UTC().Format("01-02 15:04:05"), f.ARequests, f.BRequests,
			durOrDash(f.AP99), durOrDash(f.BP99), rel)
		if slo {
			fmt.Fprintf(tw, "%s\t%s\t", sloMark(f.AMeetsSLO, f.ARequests), sloMark(f.BMeetsSLO, f.BRequests))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	return ew.err
}

func durOrDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmtDur(d)
}

func sloMark(ok bool, n int64) string {
	switch {
	case n == 0:
		return ""
	case ok:
		return "ok"
	}
	return "MISS"
}
