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
	Relative  bool
	Text      string // as written
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
	for _, l := range []string{"e2e", "e2e_sched", "ttfb", "ttft", "ttst", "tpot", "itl", "lag"} {
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
		case "e2e", "e2e_sched", "ttfb", "ttft", "ttst", "tpot", "itl", "lag":
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

// Tripped is a rule that fired, with the delta that fired it.
type Tripped struct {
	Rule  Rule   `json:"-"`
	Text  string `json:"rule"`
	Delta Delta  `json:"delta"`
}

// Verdict is the judgement of a comparison against --fail-on rules.
type Verdict struct {
	// Failed is true when any rule tripped (reel compare exits 1),
	// whichever way the change went. Regression is true when it failed and
	// every tripped change is a worsening; a rule such as "ttft.p99<-40%"
	// trips on an improvement, which fails the gate without being one.
	// Line starts "REGRESSION:", "FAIL:" or "OK:" accordingly.
	Failed     bool      `json:"failed"`
	Regression bool      `json:"regression"`
	Tripped    []Tripped `json:"tripped"`
	// Held lists rules whose threshold was crossed but whose interval
	// includes zero: not a regression.
	Held []Tripped `json:"held"`
	Line string    `json:"line"`
}

// Judge applies rules. A rule trips when the change crosses its threshold
// in its direction and is significant (its interval excludes zero). A metric
// that neither run has does not trip.
func (c *Comparison) Judge(rules []Rule) Verdict {
	v := Verdict{Tripped: []Tripped{}, Held: []Tripped{}}
	for _, r := range rules {
		d, ok := c.Metric(r.Metric)
		if !ok {
			continue
		}
		change := d.Abs
		if r.Relative {
			if d.A == 0 {
				continue
			}
			change = d.Rel
		}
		crossed := (r.Above && change > r.Threshold) || (!r.Above && change < r.Threshold)
		if !crossed {
			continue
		}
		t := Tripped{Rule: r, Text: r.Text, Delta: d}
		if d.Significant && ((r.Above && (!d.HasCI || d.CILow > 0)) || (!r.Above && (!d.HasCI || d.CIHigh < 0))) {
			v.Tripped = append(v.Tripped, t)
		} else {
			v.Held = append(v.Held, t)
		}
	}
	v.Failed = len(v.Tripped) > 0
	if v.Failed {
		// A rule is a threshold, not a judgement: one pointed at a drop
		// ("ttft.p99<-40%") trips on an improvement. Call the verdict a
		// regression only when every tripped change is one.
		parts := make([]string, len(v.Tripped))
		allWorse := true
		for i, t := range v.Tripped {
			parts[i] = fmt.Sprintf("%s %s (%s, CI %s)", t.Delta.Name, fmtChange(t.Delta), fmtValue(t.Delta, t.Delta.B), fmtCI(t.Delta))
			switch better(t.Delta.Name, t.Delta.B-t.Delta.A) {
			case -1:
				parts[i] += ", worse,"
			case 1:
				parts[i] += ", better,"
			}
			parts[i] += " trips rule " + t.Text
			allWorse = allWorse && better(t.Delta.Name, t.Delta.B-t.Delta.A) < 0
		}
		v.Regression = allWorse
		prefix := "FAIL: "
		if allWorse {
			prefix = "REGRESSION: "
		}
		v.Line = prefix + strings.Join(parts, "; ")
	} else {
		v.Line = fmt.Sprintf("OK: none of %d rule(s) tripped", len(rules))
		if len(v.Held) > 0 {
			names := make([]string, len(v.Held))
			for i, t := range v.Held {
				names[i] = fmt.Sprintf("%s %s", t.Delta.Name, fmtChange(t.Delta))
			}
			v.Line += "; within noise (CI includes 0): " + strings.Join(names, ", ")
		}
	}
	return v
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
	case "e2e", "e2e_sched", "ttfb", "ttft", "ttst", "tpot", "itl", "lag", "error_rate", "timeout_rate":
		return -sign
	case "goodput", "goodput_share", "window_compliance", "throughput", "output_tokens_per_s", "peak_output_tokens_per_s",
		"cache_reuse":
		return sign
	}
	return 0 // requests, request_rate, concurrency, peak_in_flight, mean_batch_size
}
