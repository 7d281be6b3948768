package analysis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Defaults of CompareOptions (reel compare's --resamples and --confidence).
const (
	DefaultResamples  = 500
	DefaultConfidence = 0.95
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
		o.Resamples = DefaultResamples
	}
	o.Resamples = min(o.Resamples, 10000)
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = DefaultConfidence
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
	A          *Summary     `json:"a"`           // baseline run's summary
	B          *Summary     `json:"b"`           // candidate run's summary
	Confidence float64      `json:"confidence"`  // confidence level of the intervals (CompareOptions.Confidence)
	Resamples  int          `json:"resamples"`   // bootstrap resamples per quantile (CompareOptions.Resamples)
	Metrics    []Delta      `json:"metrics"`     // per-metric deltas: latency quantiles, rates and shares
	Frames     []FrameDelta `json:"frames"`      // frames of either run, matched by original start, in time order
	Tail       TailFrames   `json:"tail_frames"` // whether B shows A's tail frames
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
	Name        string  `json:"name"`        // "e2e.p99", "ttft.p50", "goodput", …
	Unit        string  `json:"unit"`        // "ns", "req/s", "tokens/s", "ratio", "requests"
	A           float64 `json:"a"`           // A's value
	B           float64 `json:"b"`           // B's value
	Abs         float64 `json:"abs"`         // B − A (ns for latencies)
	Rel         float64 `json:"rel"`         // 0 when A is 0
	HasCI       bool    `json:"has_ci"`      // the metric has a confidence interval (false for rates)
	CILow       float64 `json:"ci_low"`      // lower bound of Abs's interval
	CIHigh      float64 `json:"ci_high"`     // upper bound of Abs's interval
	Significant bool    `json:"significant"` // the interval excludes zero (without one: the values differ)
	// NA and NB are the sample sizes behind A and B (values of a latency,
	// requests of a rate or share, judged frames of window compliance);
	// 0 means that run has no data for the metric and its value is not 0
	// but unknown.
	NA int64 `json:"n_a"`
	NB int64 `json:"n_b"`
}

// FrameDelta sets one frame of B against the frame of A with the same
// original start; a frame only one run has has zero Requests on the other.
type FrameDelta struct {
	Start     time.Time     `json:"start"`         // the frame's original start
	ARequests int64         `json:"a_requests"`    // requests of A in the frame; 0 when only B has it
	BRequests int64         `json:"b_requests"`    // requests of B in the frame; 0 when only A has it
	AP99      time.Duration `json:"a_e2e_p99_ns"`  // A's E2E p99 in the frame
	BP99      time.Duration `json:"b_e2e_p99_ns"`  // B's E2E p99 in the frame
	P99Rel    float64       `json:"e2e_p99_rel"`   // (BP99 − AP99) ÷ AP99; 0 when AP99 is 0
	ATTFTP99  time.Duration `json:"a_ttft_p99_ns"` // A's TTFT p99 in the frame
	BTTFTP99  time.Duration `json:"b_ttft_p99_ns"` // B's TTFT p99 in the frame
	AMeetsSLO bool          `json:"a_meets_slo"`   // the frame met the SLO in A
	BMeetsSLO bool          `json:"b_meets_slo"`   // the frame met the SLO in B
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
		{"ttst", colTTST, nil}, {"tpot", colTPOT, nil}, {"lag", colLag, nil}, {"session_delay", colSessionDelay, nil},
		{"itl", -1, func(x *Analyzer) *countDist { return x.tl.itl() }},
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
			d.NA, d.NB = sa.n, sb.n
			if lo != nil && q.p < 1 {
				d.CILow, d.CIHigh, d.HasCI = lo[j], hi[j], true
				d.Significant = d.CILow > 0 || d.CIHigh < 0
			}
			c.Metrics = append(c.Metrics, d)
		}
		d := newDelta(m.name+".mean", "ns", sa.mean, sb.mean)
		d.NA, d.NB = sa.n, sb.n
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
		d.NA, d.NB = na, nb
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
		g.NA, g.NB = A.Requests, B.Requests
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
		d.NA, d.NB = A.Requests, B.Requests
		d.Significant = d.Abs != 0
		c.Metrics = append(c.Metrics, d)
	}
	if d, ok := cacheReuseDelta(A.Cache, B.Cache, opt.Confidence); ok {
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
