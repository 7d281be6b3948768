package analysis

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Metric names a per-request latency metric an SLO can bound.
type Metric string

// Metrics an SLO (and Compare's rules) can name.
const (
	MetricTTFB     Metric = "ttfb"
	MetricTTFT     Metric = "ttft"
	MetricTTST     Metric = "ttst"
	MetricTPOT     Metric = "tpot"
	MetricE2E      Metric = "e2e"
	MetricE2ESched Metric = "e2e_sched"
	MetricLag      Metric = "lag"
	MetricITL      Metric = "itl"
	// MetricSessionDelay is how much later than its recorded schedule a
	// session turn became due because its predecessor was slow on the
	// shadow (replay --sessions); only delayed turns count. A compare rule
	// may name it; an SLO may not (it judges the predecessor, not the
	// request).
	MetricSessionDelay Metric = "session_delay"
)

// sloMetrics lists the metrics an SLO may bound, in print order.
var sloMetrics = []Metric{MetricTTFB, MetricTTFT, MetricTTST, MetricTPOT, MetricE2E, MetricE2ESched, MetricLag}

// SLO bounds per-request metrics: a request meets the SLO when it succeeded
// and every bounded metric it has is ≤ its bound. A metric the request does
// not have (TTFT of a non-streaming response, TPOT with one output token)
// does not fail it. The zero SLO bounds nothing.
type SLO struct {
	// Bounds maps each bounded metric to its inclusive upper bound; nil or
	// empty bounds nothing.
	Bounds map[Metric]time.Duration
}

// ParseSLO parses "ttft=300ms,tpot=50ms,e2e=5s". Names: ttfb, ttft, ttst,
// tpot, e2e, e2e_sched, lag; values are Go durations; each bound means ≤.
// The empty string is the empty SLO.
func ParseSLO(s string) (SLO, error) {
	slo := SLO{Bounds: map[Metric]time.Duration{}}
	s = strings.TrimSpace(s)
	if s == "" {
		return slo, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, val, ok := strings.Cut(part, "<=")
		if !ok {
			name, val, ok = strings.Cut(part, "=")
		}
		if !ok {
			return SLO{}, fmt.Errorf("parse slo %q: want name=duration", part)
		}
		m := Metric(strings.ToLower(strings.TrimSpace(name)))
		if !validSLOMetric(m) {
			return SLO{}, fmt.Errorf("parse slo %q: unknown metric %q (want one of %s)", part, m, metricList())
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil {
			return SLO{}, fmt.Errorf("parse slo %q: %w", part, err)
		}
		if d <= 0 {
			return SLO{}, fmt.Errorf("parse slo %q: bound must be positive", part)
		}
		if _, dup := slo.Bounds[m]; dup {
			return SLO{}, fmt.Errorf("parse slo: %s bounded twice", m)
		}
		slo.Bounds[m] = d
	}
	return slo, nil
}

// IsZero reports whether the SLO bounds nothing.
func (s SLO) IsZero() bool { return len(s.Bounds) == 0 }

// String formats the SLO as ParseSLO reads it, in a fixed metric order.
func (s SLO) String() string {
	var parts []string
	for _, m := range sloMetrics {
		if d, ok := s.Bounds[m]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", m, d))
		}
	}
	return strings.Join(parts, ",")
}

// metrics returns the bounded metrics in a fixed order.
func (s SLO) metrics() []Metric {
	var ms []Metric
	for _, m := range sloMetrics {
		if _, ok := s.Bounds[m]; ok {
			ms = append(ms, m)
		}
	}
	return ms
}

func validSLOMetric(m Metric) bool {
	for _, v := range sloMetrics {
		if v == m {
			return true
		}
	}
	return false
}

func metricList() string {
	names := make([]string, len(sloMetrics))
	for i, m := range sloMetrics {
		names[i] = string(m)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
