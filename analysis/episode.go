package analysis

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// episodes flags frames that stand out and joins adjacent ones.
func (a *Analyzer) episodes(s *Summary, eligible []*Frame, corr map[string]tailCorr) []Episode {
	if len(eligible) < 3 {
		return []Episode{}
	}
	var p99s, longs, rates, errs []float64
	for _, f := range eligible {
		errs = append(errs, errRate(f))
		if f.E2E.N > 0 {
			p99s = append(p99s, float64(f.E2E.P99))
		}
		longs = append(longs, f.LongPromptShare)
		rates = append(rates, f.Rate)
	}
	base := frameBaseline{p99: medianOf(p99s), long: medianOf(longs), rate: medianOf(rates), errs: medianOf(errs)}

	f := s.Frame
	type run struct {
		first, last time.Time
		reasons     []string // the first flagged frame's
	}
	var runs []run
	for _, fr := range eligible {
		rs := base.reasons(fr)
		if len(rs) == 0 {
			continue
		}
		if k := len(runs) - 1; k >= 0 && !fr.Start.After(runs[k].last.Add(2*f)) {
			runs[k].last = fr.Start // adjacent (one quiet frame in between is tolerated)
			continue
		}
		runs = append(runs, run{first: fr.Start, last: fr.Start, reasons: rs})
	}
	out := []Episode{}
	for _, r := range runs {
		e := a.episode(s, base, r.first, r.last.Add(f), corr)
		if len(e.Reasons) == 0 {
			// The episode as a whole is less extreme than its frames
			// (short episodes of small frames): say why the frame stood out.
			e.Reasons = r.reasons
			e.Explanation = strings.Replace(e.Explanation, ": ;", ": "+strings.Join(r.reasons, "; ")+";", 1)
		}
		out = append(out, e)
	}
	return out
}

// episode describes the requests whose frame starts in [from, to): how
// they differ from the rest of the run, the likely cause, and the one-line
// verdict.
func (a *Analyzer) episode(s *Summary, base frameBaseline, from, to time.Time, corr map[string]tailCorr) Episode {
	e := Episode{Start: from, End: to, Frames: int(to.Sub(from) / s.Frame)}
	in, out, e2e := a.episodeSides(from, to, s.LongPrompt)
	e.P99 = e2e.quantiles().P99
	if base.p99 > 0 {
		e.TailRatio = math.Round(float64(e.P99)/base.p99*10) / 10
	}
	secs := func(frames int) float64 { return float64(frames) * s.Frame.Seconds() }
	im, om := in.means(secs(e.Frames)), out.means(secs(out.frames))
	e.LongShare, e.RestLongShare = im.longShare, om.longShare
	workload, server := causeCandidates(im, om)
	e.Reasons = episodeReasons(e.TailRatio, im, om, in.c.promptN > 0, workload)
	e.ServerState = serverState(server, corr)
	label := e.nameCause(workload, server, corr)
	e.Explanation = explanation(s.Frame, from, to, e.Reasons, label)
	return e
}

// episodeSide sums the requests on one side of an episode.
type episodeSide struct {
	c      counts
	long   int64 // known prompts at or above the long-prompt threshold
	frames int   // frames with requests
}

// episodeSides sums the frames starting in [from, to) (in) and the others
// (out), and returns the E2E distribution of the requests in.
func (a *Analyzer) episodeSides(from, to time.Time, long int32) (in, out episodeSide, e2e *dist) {
	lo, hi := from.UnixNano(), to.UnixNano()
	var inside []*dist
	for _, fr := range a.frames {
		side := &out
		if fr.start >= lo && fr.start < hi {
			side = &in
			inside = append(inside, &fr.lat[colE2E])
		}
		side.c.merge(&fr.c)
		side.frames++
		if long > 0 {
			side.long += fr.prompt.atLeast(int64(long))
		}
	}
	return in, out, merged(inside...)
}

// episodeMeans are the shares and means one side of an episode is judged by.
type episodeMeans struct {
	longShare, errRate              float64
	rate                            float64 // requests/s of original time
	prompt, outTokens, batch, queue float64 // means where known
}

func (sd *episodeSide) means(secs float64) episodeMeans {
	c := &sd.c
	m := episodeMeans{
		longShare: ratioOr0(float64(sd.long), float64(c.promptN)),
		errRate:   ratioOr0(float64(c.n-c.ok), float64(c.n)),
		prompt:    ratioOr0(c.promptSum, float64(c.promptN)),
		outTokens: ratioOr0(float64(c.outTokens), float64(c.okWithOut)),
		batch:     ratioOr0(c.batchSum, float64(c.batchN)),
		queue:     ratioOr0(c.queueSum, float64(c.queueN)),
	}
	if secs > 0 {
		m.rate = float64(c.n) / secs
	}
	return m
}

func ratioOr0(x, n float64) float64 {
	if n == 0 {
		return 0
	}
	return x / n
}

// cause is a candidate cause of an episode: a signal raised inside it.
type cause struct {
	signals  []string // correlated signals; the best one names the cause
	label    string
	elevated bool
	ratio    float64 // inside ÷ outside, to break near-ties
	detail   string  // the signal inside vs outside the episode
}

// longElevated reports whether the long-prompt share is raised inside.
func longElevated(in, out episodeMeans) bool {
	return in.longShare >= out.longShare+mixDelta && in.longShare >= mixFactor*out.longShare
}

// causeCandidates lists the candidate causes: workload signals (what
// clients sent) and server state (batch size, queue depth), which follows
// the workload, so it is reported as moving with the tail and never
// outranks a workload signal that explains it.
func causeCandidates(in, out episodeMeans) (workload, server []cause) {
	ratio := func(in, out, floor float64) float64 { return in / max(out, floor) }
	promptElevated := out.prompt > 0 && in.prompt >= 1.5*out.prompt
	workload = []cause{
		// The long-prompt share and the mean prompt length are one cause:
		// the prompt length; either may track the tail better.
		{[]string{"long_prompt_share", "prompt_tokens"}, "long prompts", longElevated(in, out) || promptElevated,
			max(ratio(in.longShare, out.longShare, 0.01), ratio(in.prompt, out.prompt, 1)),
			fmt.Sprintf("share %.0f %% vs %.0f %%, mean %.0f vs %.0f tokens", 100*in.longShare, 100*out.longShare, in.prompt, out.prompt)},
		{[]string{"rate"}, "arrival rate", out.rate > 0 && in.rate >= 1.5*out.rate, ratio(in.rate, out.rate, 1e-9),
			fmt.Sprintf("rate %.1f/s vs %.1f/s", in.rate, out.rate)},
		{[]string{"output_tokens"}, "longer outputs", out.outTokens > 0 && in.outTokens >= 1.5*out.outTokens, ratio(in.outTokens, out.outTokens, 1),
			fmt.Sprintf("mean output %.0f vs %.0f tokens", in.outTokens, out.outTokens)},
	}
	server = []cause{
		{[]string{"queue_depth"}, "queueing", in.queue > 0 && in.queue >= 2*max(out.queue, 0.5), ratio(in.queue, out.queue, 0.5),
			fmt.Sprintf("queue depth %.1f vs %.1f", in.queue, out.queue)},
		{[]string{"batch_size"}, "large batches", out.batch > 0 && in.batch >= 1.5*out.batch, ratio(in.batch, out.batch, 1),
			fmt.Sprintf("batch size %.1f vs %.1f", in.batch, out.batch)},
	}
	return workload, server
}

// episodeReasons says what stands out inside against outside: the tail, the
// long-prompt share (or mean prompt), errors, and the other raised workload
// signals.
func episodeReasons(tailRatio float64, in, out episodeMeans, knownPrompts bool, workload []cause) []string {
	var r []string
	if tailRatio >= tailFactor {
		r = append(r, fmt.Sprintf("p99 %.1f× median frame", tailRatio))
	}
	long := knownPrompts && longElevated(in, out)
	if long {
		r = append(r, fmt.Sprintf("long-prompt share %.0f %% vs %.0f %%", 100*in.longShare, 100*out.longShare))
	}
	if ie, oe := in.errRate, out.errRate; ie >= errDelta && ie >= oe+errDelta && ie >= 3*oe {
		r = append(r, fmt.Sprintf("errors %.0f %% vs %.0f %%", 100*ie, 100*oe))
	}
	if !longElevated(in, out) && out.prompt > 0 && in.prompt >= 1.5*out.prompt {
		r = append(r, fmt.Sprintf("mean prompt %.0f vs %.0f tokens", in.prompt, out.prompt))
	}
	for _, c := range workload[1:] {
		if c.elevated {
			r = append(r, c.detail)
		}
	}
	return r
}

// best returns a candidate's strongest correlation with either tail.
func (c cause) best(corr map[string]tailCorr) (signal string, r float64, tail string, ok bool) {
	for _, sig := range c.signals {
		if r1, t1, ok1 := corr[sig].best(); ok1 && (!ok || r1 > r) {
			signal, r, tail, ok = sig, r1, t1, true
		}
	}
	return signal, r, tail, ok
}

// pickCause returns the elevated candidate that explains the tail (r ≥
// causeMinR): the best r, and of candidates within causeTie of it the most
// elevated one; best is -1 when none does.
func pickCause(cs []cause, corr map[string]tailCorr) (best int, signal string, r float64, tail string) {
	best = -1
	top := math.Inf(-1)
	for _, c := range cs {
		if _, r1, _, ok := c.best(corr); c.elevated && ok && r1 >= causeMinR {
			top = max(top, r1)
		}
	}
	for i, c := range cs {
		sig1, r1, t1, ok := c.best(corr)
		if !c.elevated || !ok || r1 < causeMinR || r1 < top-causeTie {
			continue
		}
		if best < 0 || c.ratio > cs[best].ratio {
			best, signal, r, tail = i, sig1, r1, t1
		}
	}
	return best, signal, r, tail
}

// raisedWeakly lists the elevated candidates, with their r where known.
func raisedWeakly(cs []cause, corr map[string]tailCorr) []string {
	var out []string
	for _, c := range cs {
		if !c.elevated {
			continue
		}
		if sig, r, _, ok := c.best(corr); ok {
			out = append(out, fmt.Sprintf("%s (%s r=%.2f)", c.label, signalNames[sig], r))
		} else {
			out = append(out, c.label)
		}
	}
	return out
}

// serverState describes the raised server-side signals, with their r.
func serverState(server []cause, corr map[string]tailCorr) []string {
	out := []string{}
	for _, c := range server {
		if !c.elevated {
			continue
		}
		d := c.detail
		if _, r, _, ok := c.best(corr); ok {
			d += fmt.Sprintf(" (r=%.2f)", r)
		}
		out = append(out, d)
	}
	return out
}

// nameCause sets the episode's cause — a workload candidate that tracks
// the tail, else (with no workload change at all) a server-side one — and
// returns the verdict's label.
func (e *Episode) nameCause(workload, server []cause, corr map[string]tailCorr) string {
	label := "cause unclear"
	if i, sig, r, tail := pickCause(workload, corr); i >= 0 {
		e.Cause, e.CauseKind, e.CauseR, e.CauseTail = sig, KindWorkload, r, tail
		label = fmt.Sprintf("likely cause: %s (%s; %s r=%.2f with %s)", workload[i].label, workload[i].detail, signalNames[sig], r, tail)
	} else if weak := raisedWeakly(workload, corr); len(weak) > 0 {
		// A workload change is there but does not track the tail well
		// enough to be named; it still rules out blaming the server.
		label = "cause unclear: " + strings.Join(weak, ", ") + " raised but tracking the tail weakly"
	} else if i, sig, r, tail := pickCause(server, corr); i >= 0 {
		e.Cause, e.CauseKind, e.CauseR, e.CauseTail = sig, KindServer, r, tail
		label = fmt.Sprintf("no workload change explains it; likely cause: server-side %s (%s r=%.2f with %s)", server[i].label, signalNames[sig], r, tail)
	}
	if len(e.ServerState) > 0 {
		label += "; server state moving with it: " + strings.Join(e.ServerState, ", ")
	}
	return label
}

// explanation is the episode's one-line verdict.
func explanation(frame time.Duration, from, to time.Time, reasons []string, label string) string {
	layout := "15:04:05"
	if frame%time.Second != 0 {
		layout = "15:04:05.999"
	}
	return fmt.Sprintf("frames %s–%s: %s; %s", from.UTC().Format(layout), to.UTC().Format(layout),
		strings.Join(reasons, "; "), label)
}
