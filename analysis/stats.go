package analysis

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Stats describes a recording's traffic (it works on replay results too):
// the arrival process, sizes, prefix sharing, the per-frame table, frames
// that stand out and what the tail moves with.
type Stats struct {
	Summary *Summary `json:"summary"` // the per-request metrics, as Analyzer.Summary gives them

	ArrivalRate  float64   `json:"arrival_rate"`  // requests/s over the recording
	InterArrival Quantiles `json:"inter_arrival"` // gaps between consecutive request starts
	// InterArrivalCV is the coefficient of variation of the inter-arrival
	// gaps (std ÷ mean): about 1 for Poisson arrivals, above 1 for bursty
	// traffic, below 1 for paced traffic.
	InterArrivalCV float64 `json:"inter_arrival_cv"`
	BodyBytes      Sizes   `json:"body_bytes"`    // request body bytes on the wire
	PromptTokens   Sizes   `json:"prompt_tokens"` // where known

	// Correlations of per-frame E2E p99 with per-frame signals (Pearson,
	// over frames with enough requests), workload signals first.
	Correlations []Correlation `json:"correlations"`
	// TTFTCorrelations are the same for per-frame TTFT p99 (frames with
	// TTFT), which long outputs do not dominate as they do E2E.
	TTFTCorrelations []Correlation `json:"ttft_correlations"`
	// Outliers are runs of adjacent frames whose tail or mix stands out.
	Outliers []Episode `json:"outliers"`
	// Sessions describes conversations and agent loops (nil when not
	// asked for, Options.Sessions, or not a recording).
	Sessions *SessionStats `json:"sessions,omitempty"`
}

// Sizes summarises a count distribution (bytes, tokens), exactly or, when
// RelErr is set, with quantiles within RelErr (as Quantiles).
type Sizes struct {
	N      int64   `json:"n"`                 // values in the distribution
	P50    int64   `json:"p50"`               // median
	P90    int64   `json:"p90"`               // 90th percentile
	P99    int64   `json:"p99"`               // 99th percentile
	Max    int64   `json:"max"`               // largest value
	Mean   float64 `json:"mean"`              // arithmetic mean
	RelErr float64 `json:"rel_err,omitempty"` // quantiles' relative error bound: 0 when exact, SketchRelErr when sketched
}

// Correlation is Pearson's r between a per-frame tail (E2E or TTFT p99)
// and a per-frame signal over N frames; Valid is false when N < 3 or either
// side is constant.
type Correlation struct {
	// Signal is a workload signal — "long_prompt_share", "prompt_tokens"
	// (mean), "rate", "output_tokens" (mean) — or a server-state one —
	// "batch_size", "queue_depth" (means).
	Signal string `json:"signal"`
	// Kind is "workload" (what clients sent: a possible cause) or "server"
	// (the server's state: it moves with a cause, it is rarely one).
	Kind  string  `json:"kind"`
	R     float64 `json:"r"`     // Pearson's r, rounded to 3 decimals; 0 when not Valid
	N     int     `json:"n"`     // frames the correlation is over
	Valid bool    `json:"valid"` // N ≥ 3 and neither side is constant
}

// Signal kinds.
const (
	KindWorkload = "workload"
	KindServer   = "server"
)

// frameSignal is a per-frame signal correlated with the tail.
type frameSignal struct {
	name, kind string
	get        func(f *Frame) (float64, bool)
}

var frameSignals = []frameSignal{
	{"long_prompt_share", KindWorkload, func(f *Frame) (float64, bool) { return f.LongPromptShare, f.MeanPrompt > 0 }},
	{"prompt_tokens", KindWorkload, func(f *Frame) (float64, bool) { return f.MeanPrompt, f.MeanPrompt > 0 }},
	{"rate", KindWorkload, func(f *Frame) (float64, bool) { return f.Rate, true }},
	{"output_tokens", KindWorkload, func(f *Frame) (float64, bool) {
		if f.OK == 0 || f.OutputTokens == 0 {
			return 0, false
		}
		return float64(f.OutputTokens) / float64(f.OK), true
	}},
	{"batch_size", KindServer, func(f *Frame) (float64, bool) { return f.MeanBatchSize, f.MeanBatchSize > 0 }},
	{"queue_depth", KindServer, func(f *Frame) (float64, bool) { return f.MeanQueueDepth, f.MeanQueueDepth > 0 || f.MeanBatchSize > 0 }},
}

// signalNames are the signals as the text reports name them.
var signalNames = map[string]string{
	"long_prompt_share": "long-prompt share", "prompt_tokens": "mean prompt tokens", "rate": "rate",
	"output_tokens": "mean output tokens", "batch_size": "batch size", "queue_depth": "queue depth",
}

// tailCorr is one signal's correlation with both tails.
type tailCorr struct{ e2e, ttft Correlation }

// best returns the stronger valid correlation and the tail it is with
// ("e2e p99" or "TTFT p99"); ok is false when neither is valid.
func (t tailCorr) best() (r float64, tail string, ok bool) {
	if t.e2e.Valid {
		r, tail, ok = t.e2e.R, "e2e p99", true
	}
	if t.ttft.Valid && (!ok || t.ttft.R > r) {
		r, tail, ok = t.ttft.R, "TTFT p99", true
	}
	return r, tail, ok
}

// correlateFrames computes Pearson's r of tail against sig over frames.
func correlateFrames(frames []*Frame, sig frameSignal, tail func(f *Frame) (float64, bool)) Correlation {
	var xs, ys []float64
	for _, f := range frames {
		y, ok1 := tail(f)
		x, ok2 := sig.get(f)
		if ok1 && ok2 {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	c := Correlation{Signal: sig.name, Kind: sig.kind, N: len(xs)}
	c.R, c.Valid = pearson(xs, ys)
	return c
}

// Episode is a run of adjacent frames that stand out, with why.
type Episode struct {
	Start  time.Time `json:"start"`  // first frame's start
	End    time.Time `json:"end"`    // last frame's end
	Frames int       `json:"frames"` // adjacent frames in the episode
	// P99 is the E2E p99 over the episode's requests; TailRatio divides it
	// by the median frame's p99.
	P99       time.Duration `json:"p99_ns"`
	TailRatio float64       `json:"tail_ratio"`
	// LongShare and RestLongShare are the long-prompt shares inside and
	// outside the episode.
	LongShare     float64  `json:"long_prompt_share"`
	RestLongShare float64  `json:"rest_long_prompt_share"`
	Reasons       []string `json:"reasons"` // what stands out, e.g. "p99 4.1× median frame"
	// ServerState lists server-side signals elevated in the episode, with
	// their r, e.g. "queue depth 12.8 vs 0.2 (r=0.60)": they move with the
	// tail rather than cause it.
	ServerState []string `json:"server_state"`
	// Cause is the likely cause: the workload signal elevated in the episode
	// that correlates best (r ≥ 0.5) with the per-frame E2E or TTFT p99
	// ("long_prompt_share", "prompt_tokens", "rate", "output_tokens"); only
	// when none does, the server-state one that does ("queue_depth",
	// "batch_size"); empty when nothing does. CauseKind says which
	// ("workload" or "server"), CauseTail which tail ("e2e p99" or
	// "TTFT p99").
	Cause       string  `json:"cause"`
	CauseKind   string  `json:"cause_kind"`
	CauseR      float64 `json:"cause_r"` // Cause's correlation r with the tail
	CauseTail   string  `json:"cause_tail"`
	Explanation string  `json:"explanation"` // the one-line verdict
}

// Outlier thresholds: a frame's tail stands out at ≥ tailFactor × the median
// frame's p99; its long-prompt share at ≥ mixFactor × and ≥ mixDelta above
// the median frame's.
const (
	tailFactor = 2.0
	mixFactor  = 2.0
	mixDelta   = 0.2
	rateFactor = 3.0
	errDelta   = 0.1
	causeMinR  = 0.5
	// causeTie: candidate causes whose r is this close to the best one's
	// are told apart by how elevated they are in the episode.
	causeTie = 0.1
)

// Stats computes the summary plus the traffic description, from the
// analyzer's distributions and per-frame sums: its extra memory is one
// distribution of inter-arrival gaps and the frame table. With
// Options.Sessions it closes the sessions still open: add no more
// exchanges afterwards.
func (a *Analyzer) Stats() *Stats {
	s := a.Summary()
	st := &Stats{Summary: s, Correlations: []Correlation{}, TTFTCorrelations: []Correlation{}, Outliers: []Episode{}}
	if a.sessions != nil && a.recordings > 0 {
		st.Sessions = a.sessions.Stats()
	}
	arr := &a.starts
	if arr.n == 0 {
		return st
	}
	if span := arr.max - arr.min; span > 0 {
		st.ArrivalRate = float64(arr.n-1) / (float64(span) / 1e9)
	}
	st.InterArrival = arr.interArrival().quantiles()
	if st.InterArrival.Mean > 0 {
		st.InterArrivalCV = float64(st.InterArrival.Std) / float64(st.InterArrival.Mean)
	}
	st.BodyBytes = a.body.sizes()
	st.PromptTokens = a.prompt.sizes()

	eligible := eligibleFrames(s.Frames)
	corr := map[string]tailCorr{}
	for _, sig := range frameSignals {
		e2e := correlateFrames(eligible, sig, func(f *Frame) (float64, bool) { return float64(f.E2E.P99), f.E2E.N > 0 })
		ttft := correlateFrames(eligible, sig, func(f *Frame) (float64, bool) { return float64(f.TTFT.P99), f.TTFT.N > 0 })
		corr[sig.name] = tailCorr{e2e: e2e, ttft: ttft}
		st.Correlations = append(st.Correlations, e2e)
		st.TTFTCorrelations = append(st.TTFTCorrelations, ttft)
	}
	st.Outliers = a.episodes(s, eligible, corr)
	return st
}

// eligibleFrames returns the frames with enough requests for their p99 to
// mean something: at least 3, and at least a quarter of the median frame's.
func eligibleFrames(frames []Frame) []*Frame {
	var counts []int64
	for _, f := range frames {
		if f.Requests > 0 {
			counts = append(counts, f.Requests)
		}
	}
	if len(counts) == 0 {
		return nil
	}
	slices.Sort(counts)
	minReq := max(3, counts[rank(0.5, len(counts))]/4)
	var out []*Frame
	for i := range frames {
		if frames[i].Requests >= minReq {
			out = append(out, &frames[i])
		}
	}
	return out
}

// pearson returns Pearson's r; false when fewer than 3 pairs or a constant side.
func pearson(xs, ys []float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 3 {
		return 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return math.Round(sxy/math.Sqrt(sxx*syy)*1000) / 1000, true
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[rank(0.5, len(c))]
}

// frameBaseline is the median frame: its p99, long-prompt share, rate and
// error rate.
type frameBaseline struct{ p99, long, rate, errs float64 }

// reasons says why one frame stands out against the median frame, or
// nothing.
func (b frameBaseline) reasons(f *Frame) []string {
	var r []string
	if b.p99 > 0 && f.E2E.N > 0 && float64(f.E2E.P99) >= tailFactor*b.p99 {
		r = append(r, fmt.Sprintf("p99 %.1f× median frame", float64(f.E2E.P99)/b.p99))
	}
	if f.MeanPrompt > 0 && f.LongPromptShare >= b.long+mixDelta && f.LongPromptShare >= mixFactor*b.long {
		r = append(r, fmt.Sprintf("long-prompt share %.0f %% vs %.0f %%", 100*f.LongPromptShare, 100*b.long))
	}
	if b.rate > 0 && f.Rate >= rateFactor*b.rate {
		r = append(r, fmt.Sprintf("rate %.1f× median frame", f.Rate/b.rate))
	}
	if e := errRate(f); e >= errDelta && e >= b.errs+errDelta && e >= 3*b.errs {
		r = append(r, fmt.Sprintf("errors %.0f %% vs %.0f %%", 100*e, 100*b.errs))
	}
	return r
}

func errRate(f *Frame) float64 {
	if f.Requests == 0 {
		return 0
	}
	return float64(f.Errors) / float64(f.Requests)
}

// WriteText writes the stats report: traffic, distributions, the summary,
// correlations and frames that stand out.
func (st *Stats) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	s := st.Summary
	ew.printf("%d requests, %.2f req/s; %sinter-arrival p50 %s p99 %s, CV %.2f (%s)\n", s.Requests, st.ArrivalRate, markIf(st.InterArrival.RelErr),
		fmtDur(st.InterArrival.P50), fmtDur(st.InterArrival.P99), st.InterArrivalCV, burstiness(st.InterArrivalCV))
	if st.BodyBytes.N > 0 {
		ew.printf("%srequest body bytes: p50 %d p90 %d p99 %d max %d mean %.0f\n", markIf(st.BodyBytes.RelErr), st.BodyBytes.P50, st.BodyBytes.P90, st.BodyBytes.P99, st.BodyBytes.Max, st.BodyBytes.Mean)
	}
	if st.PromptTokens.N > 0 {
		ew.printf("%sprompt tokens: p50 %d p90 %d p99 %d max %d mean %.0f (long: ≥ %d)\n", markIf(st.PromptTokens.RelErr), st.PromptTokens.P50, st.PromptTokens.P90, st.PromptTokens.P99, st.PromptTokens.Max, st.PromptTokens.Mean, s.LongPrompt)
	}
	if st.Sessions != nil {
		if err := st.Sessions.WriteText(w); err != nil {
			return err
		}
	}
	if len(st.Outliers) > 0 {
		ew.printf("\nframes that stand out:\n")
		for _, e := range st.Outliers {
			ew.printf("  %s\n", e.Explanation)
		}
	} else {
		ew.printf("\nno frame stands out\n")
	}
	ew.printf("\n")
	writeCorrelations(ew, "per-frame e2e p99", st.Correlations)
	writeCorrelations(ew, "per-frame TTFT p99", st.TTFTCorrelations)
	ew.printf("\n")
	if ew.err != nil {
		return ew.err
	}
	return s.WriteText(w)
}

// writeCorrelations writes one line: the tail's correlations, workload
// signals then server state. A signal without enough frames to correlate
// is named once at the end, not printed as a value; when none has enough,
// the line says so instead.
func writeCorrelations(ew *errWriter, tail string, cs []Correlation) {
	if len(cs) == 0 {
		return
	}
	var undecided []string
	for _, c := range cs {
		if !c.Valid {
			undecided = append(undecided, c.Signal)
		}
	}
	if len(undecided) == len(cs) {
		ew.printf("%s: too few frames with data to correlate (3 needed, with the values varying; try a shorter --frame)\n", tail)
		return
	}
	ew.printf("%s moves with", tail)
	for _, kind := range []string{KindWorkload, KindServer} {
		label := map[string]string{KindWorkload: "workload", KindServer: "server state"}[kind]
		wrote := false
		for _, c := range cs {
			if c.Kind != kind || !c.Valid {
				continue
			}
			if !wrote {
				ew.printf(" — %s:", label)
				wrote = true
			}
			ew.printf(" %s r=%.2f (n=%d)", c.Signal, c.R, c.N)
		}
	}
	if len(undecided) > 0 {
		ew.printf(" (too few frames with data for %s)", strings.Join(undecided, ", "))
	}
	ew.printf("\n")
}

// markIf returns the sketch mark for a sketched distribution.
func markIf(relErr float64) string {
	if relErr > 0 {
		return sketchMark
	}
	return ""
}

func burstiness(cv float64) string {
	switch {
	case cv > 1.3:
		return "bursty"
	case cv < 0.7:
		return "paced"
	}
	return "Poisson-like"
}
