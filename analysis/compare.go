package analysis

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// CompareOptions configure Compare. The zero value works.
type CompareOptions struct {
	// Resamples is the number of bootstrap resamples per quantile (default
	// 500, at most 10000).
	Resamples int
	// Confidence is the confidence level of the intervals (default 0.95).
	Confidence float64
	// Seed makes the bootstrap deterministic (default 1).
	Seed uint64
	// MaxResampleN is the sample size up to which quantiles are bootstrapped
	// by drawing whole resamples (default 20000); larger samples draw the
	// resample's order statistic from its normal approximation, which is
	// what whole resamples converge to and costs O(1) per resample.
	MaxResampleN int
}

func (o CompareOptions) withDefaults() CompareOptions {
	if o.Resamples <= 0 {
		o.Resamples = 500
	}
	o.Resamples = min(o.Resamples, 10000)
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = 0.95
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.MaxResampleN <= 0 {
		o.MaxResampleN = 20000
	}
	return o
}

// Comparison sets run B (candidate, or the replay) against run A (baseline,
// or the recording).
type Comparison struct {
	A          *Summary     `json:"a"`
	B          *Summary     `json:"b"`
	Confidence float64      `json:"confidence"`
	Resamples  int          `json:"resamples"`
	Metrics    []Delta      `json:"metrics"`
	Frames     []FrameDelta `json:"frames"`
	Tail       TailFrames   `json:"tail_frames"`
}

// TailFrames answers "does B show A's incident?": of A's tail frames (E2E
// p99 ≥ 2× A's median frame p99), how many are tail frames of B too (p99 ≥
// 2× B's median frame p99). For recording vs replay that is "did the shadow
// reproduce it?", for baseline vs fix "is the tail gone?".
type TailFrames struct {
	A     int       `json:"a"`      // tail frames of A
	InB   int       `json:"in_b"`   // of those, tail frames of B as well
	BOnly int       `json:"b_only"` // tail frames of B that are not A's
	First time.Time `json:"first"`  // A's first tail frame's start
	End   time.Time `json:"end"`    // A's last tail frame's end
}

// String is the one-line answer, empty when A has no tail frame.
func (t TailFrames) String() string {
	if t.A == 0 {
		if t.BOnly > 0 {
			return fmt.Sprintf("A has no tail frame; B has %d", t.BOnly)
		}
		return ""
	}
	verdict := "reproduced"
	switch {
	case t.InB == 0:
		verdict = "gone in B"
	case 2*t.InB < t.A:
		verdict = "mostly gone in B"
	case t.InB < t.A:
		verdict = "mostly reproduced"
	}
	return fmt.Sprintf("A's tail frames (p99 ≥ %g× its median frame): %d, %s–%s; B has the tail in %d of them (%s); B-only tail frames: %d",
		tailFactor, t.A, t.First.UTC().Format("15:04:05"), t.End.UTC().Format("15:04:05"), t.InB, verdict, t.BOnly)
}

// tailFrames compares the frames each run's tail singles out.
func tailFrames(a, b []Frame, frame time.Duration) TailFrames {
	tails := func(frames []Frame) map[int64]bool {
		el := eligibleFrames(frames)
		var p99s []float64
		for _, f := range el {
			if f.E2E.N > 0 {
				p99s = append(p99s, float64(f.E2E.P99))
			}
		}
		med := medianOf(p99s)
		out := map[int64]bool{}
		for _, f := range el {
			if med > 0 && f.E2E.N > 0 && float64(f.E2E.P99) >= tailFactor*med {
				out[f.Start.UnixNano()] = true
			}
		}
		return out
	}
	ta, tb := tails(a), tails(b)
	var t TailFrames
	for _, f := range a {
		k := f.Start.UnixNano()
		if !ta[k] {
			continue
		}
		if t.A == 0 {
			t.First = f.Start
		}
		t.A++
		t.End = f.Start.Add(frame)
		if tb[k] {
			t.InB++
		}
	}
	for k := range tb {
		if !ta[k] {
			t.BOnly++
		}
	}
	return t
}

// Delta is one metric in both runs. Abs is B − A (nanoseconds for
// latencies), Rel is Abs ÷ A. CILow and CIHigh bound Abs at the configured
// confidence; HasCI is false for metrics without an interval (rates).
// Significant means the interval excludes zero (or, without an interval,
// that the values differ).
type Delta struct {
	Name        string  `json:"name"` // "e2e.p99", "ttft.p50", "goodput", …
	Unit        string  `json:"unit"` // "ns", "req/s", "tokens/s", "ratio", "requests"
	A           float64 `json:"a"`
	B           float64 `json:"b"`
	Abs         float64 `json:"abs"`
	Rel         float64 `json:"rel"` // 0 when A is 0
	HasCI       bool    `json:"has_ci"`
	CILow       float64 `json:"ci_low"`
	CIHigh      float64 `json:"ci_high"`
	Significant bool    `json:"significant"`
}

// FrameDelta sets one frame of B against the frame of A with the same
// original start; a frame only one run has has zero Requests on the other.
type FrameDelta struct {
	Start     time.Time     `json:"start"`
	ARequests int64         `json:"a_requests"`
	BRequests int64         `json:"b_requests"`
	AP99      time.Duration `json:"a_e2e_p99_ns"`
	BP99      time.Duration `json:"b_e2e_p99_ns"`
	P99Rel    float64       `json:"e2e_p99_rel"`
	ATTFTP99  time.Duration `json:"a_ttft_p99_ns"`
	BTTFTP99  time.Duration `json:"b_ttft_p99_ns"`
	AMeetsSLO bool          `json:"a_meets_slo"`
	BMeetsSLO bool          `json:"b_meets_slo"`
}

var compareQuantiles = []struct {
	name string
	p    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}, {"p999", 0.999}, {"max", 1}}

// bootstrapPs are the quantiles bootstrapped, in compareQuantiles order
// (max has no interval: a resample's maximum is a poor estimate of it).
var bootstrapPs = []float64{0.5, 0.9, 0.95, 0.99, 0.999}

// Compare computes both summaries and their deltas with bootstrap
// confidence intervals for every quantile difference.
func Compare(a, b *Analyzer, opt CompareOptions) *Comparison {
	opt = opt.withDefaults()
	c := &Comparison{A: a.Summary(), B: b.Summary(), Confidence: opt.Confidence, Resamples: opt.Resamples}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x7265656c))
	latency := []struct {
		name string
		col  int
		itl  func(*Analyzer) *countDist
	}{
		{"e2e", colE2E, nil}, {"e2e_sched", colE2ESched, nil}, {"ttfb", colTTFB, nil}, {"ttft", colTTFT, nil},
		{"ttst", colTTST, nil}, {"tpot", colTPOT, nil}, {"lag", colLag, nil},
		{"itl", -1, func(x *Analyzer) *countDist { return &x.itl }},
	}
	for _, m := range latency {
		var sa, sb sortedSample
		if m.itl != nil {
			sa, sb = distSample(m.itl(a)), distSample(m.itl(b))
		} else {
			sa, sb = colSample(a, m.col), colSample(b, m.col)
		}
		if sa.n == 0 && sb.n == 0 {
			continue
		}
		var lo, hi []float64
		if sa.n > 0 && sb.n > 0 {
			lo, hi = bootstrapDiffs(sa, sb, bootstrapPs, opt, rng)
		}
		for j, q := range compareQuantiles {
			d := newDelta(m.name+"."+q.name, "ns", float64(sa.quantile(q.p)), float64(sb.quantile(q.p)))
			if lo != nil && q.p < 1 {
				d.CILow, d.CIHigh, d.HasCI = lo[j], hi[j], true
				d.Significant = d.CILow > 0 || d.CIHigh < 0
			}
			c.Metrics = append(c.Metrics, d)
		}
		d := newDelta(m.name+".mean", "ns", sa.mean, sb.mean)
		if sa.n > 1 && sb.n > 1 {
			se := math.Sqrt(sa.variance/float64(sa.n) + sb.variance/float64(sb.n))
			z := normalQuantile(0.5 + opt.Confidence/2)
			d.CILow, d.CIHigh, d.HasCI = d.Abs-z*se, d.Abs+z*se, true
			d.Significant = d.CILow > 0 || d.CIHigh < 0
		}
		c.Metrics = append(c.Metrics, d)
	}
	A, B := c.A, c.B
	z := normalQuantile(0.5 + opt.Confidence/2)
	share := func(name string, pa, pb float64, na, nb int64) Delta {
		d := newDelta(name, "ratio", pa, pb)
		if na > 0 && nb > 0 {
			se := math.Sqrt(pa*(1-pa)/float64(na) + pb*(1-pb)/float64(nb))
			d.CILow, d.CIHigh, d.HasCI = d.Abs-z*se, d.Abs+z*se, true
			d.Significant = d.CILow > 0 || d.CIHigh < 0
		}
		return d
	}
	c.Metrics = append(c.Metrics,
		share("error_rate", A.ErrorRate, B.ErrorRate, A.Requests, B.Requests),
		share("timeout_rate", A.TimeoutRate, B.TimeoutRate, A.Requests, B.Requests))
	if A.SLO != "" || B.SLO != "" {
		gs := share("goodput_share", A.GoodputShare, B.GoodputShare, A.Requests, B.Requests)
		// Goodput's interval is the share's, scaled to B's request rate.
		g := newDelta("goodput", "req/s", A.Goodput, B.Goodput)
		if gs.HasCI && A.GoodputShare > 0 {
			scale := A.Goodput / A.GoodputShare
			g.CILow, g.CIHigh, g.HasCI = gs.CILow*scale, gs.CIHigh*scale, true
			g.Significant = gs.Significant
		}
		c.Metrics = append(c.Metrics, g, gs,
			share("window_compliance", A.WindowCompliance, B.WindowCompliance, int64(A.JudgedFrames), int64(B.JudgedFrames)))
	}
	for _, r := range []struct {
		name, unit string
		a, b       float64
	}{
		{"requests", "requests", float64(A.Requests), float64(B.Requests)},
		{"request_rate", "req/s", A.RequestRate, B.RequestRate},
		{"throughput", "req/s", A.Throughput, B.Throughput},
		{"output_tokens_per_s", "tokens/s", A.OutputTokenRate, B.OutputTokenRate},
		{"peak_output_tokens_per_s", "tokens/s", A.PeakOutputTokenRate, B.PeakOutputTokenRate},
		{"concurrency", "requests", A.Concurrency, B.Concurrency},
		{"peak_in_flight", "requests", float64(A.PeakInFlight), float64(B.PeakInFlight)},
		{"mean_batch_size", "requests", A.MeanBatchSize, B.MeanBatchSize},
	} {
		d := newDelta(r.name, r.unit, r.a, r.b)
		d.Significant = d.Abs != 0
		c.Metrics = append(c.Metrics, d)
	}
	c.Frames = frameDeltas(A.Frames, B.Frames)
	c.Tail = tailFrames(A.Frames, B.Frames, A.Frame)
	return c
}

func newDelta(name, unit string, a, b float64) Delta {
	d := Delta{Name: name, Unit: unit, A: a, B: b, Abs: b - a}
	if a != 0 {
		d.Rel = d.Abs / a
	}
	return d
}

// Metric returns the named delta.
func (c *Comparison) Metric(name string) (Delta, bool) {
	for _, d := range c.Metrics {
		if d.Name == name {
			return d, true
		}
	}
	return Delta{}, false
}

func frameDeltas(a, b []Frame) []FrameDelta {
	byStart := map[int64]*FrameDelta{}
	var order []int64
	get := func(t time.Time) *FrameDelta {
		k := t.UnixNano()
		if d, ok := byStart[k]; ok {
			return d
		}
		d := &FrameDelta{Start: t}
		byStart[k] = d
		order = append(order, k)
		return d
	}
	for _, f := range a {
		d := get(f.Start)
		d.ARequests, d.AP99, d.ATTFTP99, d.AMeetsSLO = f.Requests, f.E2E.P99, f.TTFT.P99, f.MeetsSLO
	}
	for _, f := range b {
		d := get(f.Start)
		d.BRequests, d.BP99, d.BTTFTP99, d.BMeetsSLO = f.Requests, f.E2E.P99, f.TTFT.P99, f.MeetsSLO
	}
	slices.Sort(order)
	out := make([]FrameDelta, 0, len(order))
	for _, k := range order {
		d := byStart[k]
		if d.AP99 > 0 {
			d.P99Rel = float64(d.BP99-d.AP99) / float64(d.AP99)
		}
		out = append(out, *d)
	}
	return out
}

// sortedSample is one metric of one run, sorted, as values or as counts of
// distinct values (ITL).
type sortedSample struct {
	vals     []int64 // sorted values, when kept individually
	keys     []int64 // sorted distinct values (count form)
	cum      []int64 // cumulative counts per key (count form)
	unit     int64   // multiplier of keys to ns
	n        int64
	mean     float64
	variance float64
}

// colSample is one latency column of a run: its exact values, sorted, or
// (once the run's distribution is sketched) the sketch's bins as counts of
// distinct values, so intervals for long runs never need every value.
func colSample(a *Analyzer, col int) sortedSample {
	d := &a.lat[col]
	s := sortedSample{n: d.n, unit: 1}
	s.mean, s.variance = d.meanVar()
	if d.exact() {
		d.sort()
		s.vals = d.vals
		return s
	}
	var cum int64
	d.sk.each(func(v, c int64) {
		cum += c
		s.keys = append(s.keys, v)
		s.cum = append(s.cum, cum)
	})
	return s
}

func distSample(d *countDist) sortedSample {
	s := sortedSample{unit: 1000, n: d.n}
	var cum int64
	var sum, ss float64
	d.each(func(v, c int64) {
		cum += c
		s.keys = append(s.keys, v)
		s.cum = append(s.cum, cum)
		sum += float64(v*1000) * float64(c)
	})
	if d.n > 0 {
		s.mean = sum / float64(d.n)
		d.each(func(v, c int64) {
			x := float64(v*1000) - s.mean
			ss += x * x * float64(c)
		})
		s.variance = ss / float64(d.n)
	}
	return s
}

func meanVar(v []int64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	m := sum / float64(len(v))
	var ss float64
	for _, x := range v {
		ss += (float64(x) - m) * (float64(x) - m)
	}
	return m, ss / float64(len(v))
}

// at returns the i-th smallest value (0-based).
func (s *sortedSample) at(i int64) int64 {
	if s.vals != nil {
		return s.vals[i]
	}
	j, _ := slices.BinarySearchFunc(s.cum, i+1, func(c, t int64) int {
		if c < t {
			return -1
		}
		if c > t {
			return 1
		}
		return 0
	})
	return s.keys[j] * s.unit
}

func (s *sortedSample) quantile(p float64) int64 {
	if s.n == 0 {
		return 0
	}
	return s.at(int64(rank(p, int(s.n))))
}

// resampleQuantiles draws one bootstrap resample and returns its
// quantiles at ps (ascending) into out.
func (s *sortedSample) resampleQuantiles(ps []float64, maxN int, rng *rand.Rand, counts []int32, out []int64) {
	n := s.n
	if n <= int64(maxN) {
		// Whole resample: draw n indices into the sorted sample, count them
		// and walk to each quantile's rank.
		clear(counts[:n])
		for range n {
			counts[rng.Int64N(n)]++
		}
		var cum int64
		j := 0
		for i := int64(0); i < n && j < len(ps); i++ {
			cum += int64(counts[i])
			for j < len(ps) && cum > int64(rank(ps[j], int(n))) {
				out[j] = s.at(i)
				j++
			}
		}
		for ; j < len(ps); j++ {
			out[j] = s.at(n - 1)
		}
		return
	}
	// Large sample: a resample's p-quantile sits at the sample's
	// (p + Z·√(p(1−p)/n))-quantile, Z standard normal (one Z per resample
	// keeps the quantiles of one resample ordered).
	z := rng.NormFloat64()
	for j, p := range ps {
		pp := p + z*math.Sqrt(p*(1-p)/float64(n))
		out[j] = s.at(int64(rank(min(max(pp, 0), 1), int(n))))
	}
}

// bootstrapDiffs returns, for each p in ps, the percentile interval of
// quantile(B*) − quantile(A*).
func bootstrapDiffs(a, b sortedSample, ps []float64, opt CompareOptions, rng *rand.Rand) (lo, hi []float64) {
	counts := make([]int32, min(max(a.n, b.n), int64(opt.MaxResampleN)))
	diffs := make([][]float64, len(ps))
	for j := range diffs {
		diffs[j] = make([]float64, opt.Resamples)
	}
	qa, qb := make([]int64, len(ps)), make([]int64, len(ps))
	for i := range opt.Resamples {
		a.resampleQuantiles(ps, opt.MaxResampleN, rng, counts, qa)
		b.resampleQuantiles(ps, opt.MaxResampleN, rng, counts, qb)
		for j := range ps {
			diffs[j][i] = float64(qb[j] - qa[j])
		}
	}
	alpha := (1 - opt.Confidence) / 2
	lo, hi = make([]float64, len(ps)), make([]float64, len(ps))
	for j, d := range diffs {
		slices.Sort(d)
		lo[j], hi[j] = d[rank(alpha, len(d))], d[rank(1-alpha, len(d))]
	}
	return lo, hi
}

// normalQuantile is the standard normal quantile (Acklam's approximation,
// relative error < 1.2e-9).
func normalQuantile(p float64) float64 {
	a := []float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := []float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := []float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := []float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	const plow = 0.02425
	switch {
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	case p < plow:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-plow:
		return -normalQuantile(1 - p)
	}
	q := p - 0.5
	r := q * q
	return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
}

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
		"throughput", "output_tokens_per_s", "peak_output_tokens_per_s", "concurrency", "peak_in_flight", "mean_batch_size":
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
	case "goodput", "goodput_share", "window_compliance", "throughput", "output_tokens_per_s", "peak_output_tokens_per_s":
		return sign
	}
	return 0 // requests, request_rate, concurrency, peak_in_flight, mean_batch_size
}

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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.Name, fmtValue(d, d.A), fmtValue(d, d.B), fmtSigned(d, d.Abs), rel, fmtCI(d), mark)
	}
	tw.Flush()
	ew.printf("(* the interval excludes zero)\n")
	if line := c.Tail.String(); line != "" {
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
