package analysis

// The --fail-on rule grammar and the verdict of a comparison against it.

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rule is one --fail-on condition: "p99>+10%" trips when B's e2e p99 is
// more than 10 % above A's and the confidence interval of the change
// excludes zero; "ttft.p99<-40%" trips when B's TTFT p99 is more than 40 %
// below A's (a threshold on the change, whichever way is better).
type Rule struct {
	Metric    string  // delta name, e.g. "e2e.p99"
	Above     bool    // ">": trips on increases; "<": on decreases
	Threshold float64 // relative (0.10) when Relative, else absolute in the metric's unit
	Relative  bool    // Threshold is a share of A's value (a "%" threshold)
	Text      string  // as written
}

// ParseRules parses --fail-on: comma-separated METRIC(>|<)[+|-]N(%|duration|number).
// A bare quantile (p99) means e2e's; a bare latency metric (ttft) means its p99.
// A latency threshold is a percentage or a duration, never a bare number.
func ParseRules(s string) ([]Rule, error) {
	var rules []Rule
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.IndexAny(part, "<>")
		if i <= 0 {
			return nil, fmt.Errorf("parse rule %q: want METRIC>+N%% or METRIC<-N%%", part)
		}
		r := Rule{Metric: normalizeMetric(strings.TrimSpace(part[:i])), Above: part[i] == '>', Text: part}
		val := strings.TrimSpace(strings.TrimPrefix(part[i+1:], "="))
		if strings.HasSuffix(val, "%") {
			f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
			if err != nil {
				return nil, fmt.Errorf("parse rule %q: %w", part, err)
			}
			r.Threshold, r.Relative = f/100, true
		} else if d, err := time.ParseDuration(strings.TrimPrefix(val, "+")); err == nil {
			r.Threshold = float64(d)
		} else if f, err := strconv.ParseFloat(val, 64); err == nil {
			if isLatency(r.Metric) {
				// "p99>10" almost certainly meant +10% or +10ms, not 10 ns.
				return nil, fmt.Errorf("parse rule %q: a latency threshold needs %% or a unit (e.g. +10%% or +50ms)", part)
			}
			r.Threshold = f
		} else {
			return nil, fmt.Errorf("parse rule %q: %q is not a percentage, duration or number", part, val)
		}
		if !knownDelta(r.Metric) {
			return nil, fmt.Errorf("parse rule %q: unknown metric %q", part, r.Metric)
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("parse rules: no rule in %q", s)
	}
	return rules, nil
}

func normalizeMetric(m string) string {
	m = strings.ToLower(m)
	if strings.HasPrefix(m, "p") || m == "max" || m == "mean" {
		if _, err := strconv.ParseFloat(strings.TrimPrefix(m, "p"), 64); err == nil || m == "max" || m == "mean" {
			m = "e2e." + m
		}
	}
	m = strings.Replace(m, "p99.9", "p999", 1)
	for _, l := range []string{"e2e", "e2e_sched", "ttfb", "ttft", "ttst", "tpot", "itl", "lag", "session_delay"} {
		if m == l {
			return m + ".p99"
		}
	}
	return m
}

// isLatency reports whether a delta name is a latency quantile or mean
// ("ttft.p99"), whose absolute thresholds are durations.
func isLatency(name string) bool { return strings.Contains(name, ".") }

func knownDelta(name string) bool {
	if base, q, ok := strings.Cut(name, "."); ok {
		switch base {
		case "e2e", "e2e_sched", "ttfb", "ttft", "ttst", "tpot", "itl", "lag", "session_delay":
		default:
			return false
		}
		if q == "mean" {
			return true
		}
		for _, cq := range compareQuantiles {
			if cq.name == q {
				return true
			}
		}
		return false
	}
	switch name {
	case "error_rate", "timeout_rate", "goodput", "goodput_share", "window_compliance", "requests", "request_rate",
		"throughput", "output_tokens_per_s", "peak_output_tokens_per_s", "concurrency", "peak_in_flight", "mean_batch_size",
		"cache_reuse":
		return true
	}
	return false
}

// Tripped is a rule that fired (or an expectation that was met or not),
// with the delta behind it. NoData says which run had no data for the
// metric ("no data in B"); the rule then trips without a delta.
type Tripped struct {
	Rule   Rule   `json:"-"`                 // the rule or expectation
	Text   string `json:"rule"`              // the rule as written
	Delta  Delta  `json:"delta"`             // the change it was judged on
	NoData string `json:"no_data,omitempty"` // which run had no data, e.g. "no data in B"; empty when both had some
}

// DefaultMaxErrorRise is the rise of B's error rate over A's (absolute,
// 0.01 = one percentage point, with an interval excluding zero) that fails
// a judged comparison even when no rule names errors: a candidate that
// fails more requests has fewer, faster-looking latencies and could pass
// every latency rule while being worse. One point is above the noise of a
// nightly run's sample and small enough that "1 in 100 more requests fail"
// never passes.
const DefaultMaxErrorRise = 0.01

// JudgeOptions say what a comparison is judged against.
type JudgeOptions struct {
	// FailOn are regression gates (--fail-on): the verdict fails when one
	// trips.
	FailOn []Rule
	// Expect are expectations (--expect): the verdict fails when one does
	// NOT hold — its change did not cross the threshold significantly.
	Expect []Rule
	// MaxErrorRise fails the verdict when B's error rate rose by more than
	// this (absolute share, significant), whatever the rules say; 0 means
	// DefaultMaxErrorRise, a negative value turns the guard off.
	MaxErrorRise float64
}

// Verdict is the judgement of a comparison against --fail-on rules and
// --expect expectations.
type Verdict struct {
	// Failed is true when any rule tripped (reel compare exits 1),
	// whichever way the change went, when an expectation was not met, or
	// when the error guard fired. Regression is true when rules tripped and
	// every tripped change is a worsening; a --fail-on rule such as
	// "ttft.p99<-40%" trips on an improvement, which fails the gate without
	// being one (say it as --expect 'ttft.p99<-40%' instead).
	Failed     bool      `json:"failed"`
	Regression bool      `json:"regression"`
	Tripped    []Tripped `json:"tripped"` // --fail-on rules that tripped: significant crossings and rules without data
	// Held lists rules whose threshold was crossed but whose interval
	// includes zero: not a regression.
	Held []Tripped `json:"held"`
	// Expected and NotMet split the expectations.
	Expected []Tripped `json:"expected,omitempty"`
	NotMet   []Tripped `json:"not_met,omitempty"`
	// ErrorRise is set when B's error rate rose beyond MaxErrorRise.
	ErrorRise *Delta `json:"error_rise,omitempty"`
	// Status is the verdict in one word: "OK", "EXPECTED", "REGRESSION",
	// "FAIL" or "NOT MET" (the worst that applies).
	Status string `json:"status"`
	// Line is the verdict as printed, one line per finding, the first
	// starting with Status.
	Line string `json:"line"`
}

// Judge applies --fail-on rules alone (Check with FailOn: rules).
func (c *Comparison) Judge(rules []Rule) Verdict {
	return c.Check(JudgeOptions{FailOn: rules})
}

// change is the rule's measure of d: relative or absolute.
func (r Rule) change(d Delta) (float64, bool) {
	if r.Relative {
		if d.A == 0 {
			return 0, false
		}
		return d.Rel, true
	}
	return d.Abs, true
}

// crosses reports whether d crosses r's threshold in r's direction, and
// whether it does so significantly (the interval excludes zero that side).
func (r Rule) crosses(d Delta) (crossed, significant bool) {
	change, ok := r.change(d)
	if !ok {
		return false, false
	}
	crossed = (r.Above && change > r.Threshold) || (!r.Above && change < r.Threshold)
	significant = d.Significant && ((r.Above && (!d.HasCI || d.CILow > 0)) || (!r.Above && (!d.HasCI || d.CIHigh < 0)))
	return crossed, crossed && significant
}

// noData says which run lacks the data a rule on metric needs, "" when
// both have it.
func (c *Comparison) noData(metric string) (Delta, string) {
	d, ok := c.Metric(metric)
	switch {
	case !ok && (metric == "goodput" || metric == "goodput_share" || metric == "window_compliance"):
		return d, "no SLO to judge it (give --slo)"
	case !ok || (d.NA == 0 && d.NB == 0):
		return d, "no data in A or B"
	case d.NA == 0:
		return d, "no data in A"
	case d.NB == 0:
		return d, "no data in B"
	}
	return d, ""
}

// Check judges the comparison. A --fail-on rule trips when the change
// crosses its threshold in its direction and is significant (its interval
// excludes zero), or when either run has no data for its metric (a gate
// over nothing must not pass). An expectation holds when its change
// crosses the threshold significantly; without data it does not hold.
func (c *Comparison) Check(o JudgeOptions) Verdict {
	v := Verdict{Tripped: []Tripped{}, Held: []Tripped{}}
	for _, r := range o.FailOn {
		d, none := c.noData(r.Metric)
		t := Tripped{Rule: r, Text: r.Text, Delta: d, NoData: none}
		if none != "" {
			v.Tripped = append(v.Tripped, t)
			continue
		}
		switch crossed, sig := r.crosses(d); {
		case sig:
			v.Tripped = append(v.Tripped, t)
		case crossed:
			v.Held = append(v.Held, t)
		}
	}
	for _, r := range o.Expect {
		d, none := c.noData(r.Metric)
		t := Tripped{Rule: r, Text: r.Text, Delta: d, NoData: none}
		if _, sig := r.crosses(d); none == "" && sig {
			v.Expected = append(v.Expected, t)
		} else {
			v.NotMet = append(v.NotMet, t)
		}
	}
	guard := o.MaxErrorRise
	if guard == 0 {
		guard = DefaultMaxErrorRise
	}
	if d, ok := c.Metric("error_rate"); ok && guard > 0 && d.Abs > guard && d.Significant && (!d.HasCI || d.CILow > 0) {
		v.ErrorRise = &d
	}

	var lines []string
	if len(v.NotMet) > 0 {
		v.Status = "NOT MET"
		lines = append(lines, "NOT MET: "+describe(v.NotMet, "expected"))
	}
	if v.ErrorRise != nil {
		d := *v.ErrorRise
		if v.Status == "" {
			v.Status = "REGRESSION"
		}
		lines = append(lines, fmt.Sprintf("REGRESSION: error_rate %s → %s (%s, CI %s), more than the %s allowed (--max-error-rise)",
			fmtValue(d, d.A), fmtValue(d, d.B), fmtSigned(d, d.Abs), fmtCI(d), fmtValue(d, guard)))
	}
	if len(v.Tripped) > 0 {
		allWorse := true
		for _, t := range v.Tripped {
			allWorse = allWorse && t.NoData == "" && better(t.Delta.Name, t.Delta.B-t.Delta.A) < 0
		}
		v.Regression = allWorse
		prefix := "FAIL"
		if allWorse {
			prefix = "REGRESSION"
		}
		if v.Status == "" {
			v.Status = prefix
		}
		lines = append(lines, prefix+": "+describe(v.Tripped, "trips"))
	}
	v.Failed = len(v.Tripped) > 0 || len(v.NotMet) > 0 || v.ErrorRise != nil
	if !v.Failed {
		if len(v.Expected) > 0 {
			v.Status = "EXPECTED"
			lines = append(lines, "EXPECTED: "+describe(v.Expected, "meets"))
		}
		if n := len(o.FailOn); n > 0 || len(lines) == 0 {
			line := fmt.Sprintf("none of %d rule(s) tripped", n)
			if len(v.Held) > 0 {
				names := make([]string, len(v.Held))
				for i, t := range v.Held {
					names[i] = fmt.Sprintf("%s %s", t.Delta.Name, fmtChange(t.Delta))
				}
				line += "; within noise (CI includes 0): " + strings.Join(names, ", ")
			}
			if v.Status == "" {
				v.Status = "OK"
				line = "OK: " + line
			}
			lines = append(lines, line)
		}
	}
	v.Line = strings.Join(lines, "\n")
	return v
}

// describe lists rules with their changes: "ttft.p99 -52.0% (180ms, CI
// [-210ms, -160ms]), better, meets ttft.p99<-40%".
func describe(ts []Tripped, verb string) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		if t.NoData != "" {
			parts[i] = fmt.Sprintf("%s: %s, %s rule %s", t.Rule.Metric, t.NoData, verb, t.Text)
			if verb == "expected" {
				parts[i] = fmt.Sprintf("%s: %s; expected %s", t.Rule.Metric, t.NoData, t.Text)
			}
			continue
		}
		d := t.Delta
		parts[i] = fmt.Sprintf("%s %s (%s, CI %s)", d.Name, fmtChange(d), fmtValue(d, d.B), fmtCI(d))
		switch better(d.Name, d.B-d.A) {
		case -1:
			parts[i] += ", worse,"
		case 1:
			parts[i] += ", better,"
		}
		switch verb {
		case "expected":
			parts[i] += " expected " + t.Text
		default:
			parts[i] += " " + verb + " rule " + t.Text
		}
	}
	return strings.Join(parts, "; ")
}

// better says whether a change of metric by delta is an improvement (1), a
// worsening (-1) or neither / not a matter of better or worse (0): lower
// latencies and error rates are better, higher goodput, compliance and
// throughput.
func better(metric string, delta float64) int {
	if delta == 0 {
		return 0
	}
	sign := 1
	if delta < 0 {
		sign = -1
	}
	base, _, _ := strings.Cut(metric, ".")
	switch base {
	case "e2e", "e2e_sched", "ttfb", "ttft", "ttst", "tpot", "itl", "lag", "session_delay", "error_rate", "timeout_rate":
		return -sign
	case "goodput", "goodput_share", "window_compliance", "throughput", "output_tokens_per_s", "peak_output_tokens_per_s",
		"cache_reuse":
		return sign
	}
	return 0 // requests, request_rate, concurrency, peak_in_flight, mean_batch_size
}
