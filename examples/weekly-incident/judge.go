package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/htmlreport"
)

// findings is what the story found, for the closing lines and the checks.
type findings struct {
	cfg config

	IncidentStart, IncidentEnd time.Time // where the generator put the long prompts
	Sent, Failed               int
	Recorded                   int64 // exchanges in the dataset

	Episodes       []analysis.Episode // reel stats' frames that stand out
	Correlations   []analysis.Correlation
	TTFTvsLong     float64 // Pearson r of per-frame short TTFT p99 with long-prompt share
	TTFTvsBatch    float64 // … with mean batch size
	RecordedFrames []analysis.Frame
	Signals        *analysis.Signals // the server's scraped /metrics, per frame
	Server         []serverView      // its gauges over the incident episode

	ReplayFrom, ReplayTo      time.Time
	BaselineLagP99, FixLagP99 time.Duration

	// Short requests' TTFT p99 in the incident frames and in the replayed
	// window's other frames.
	Rec, Base, Fix tails

	FixDelta   analysis.Delta   // short requests' ttft.p99, baseline → fix, whole window
	FixVerdict analysis.Verdict // the improvement expectation (--expect) applied to it
	FixRule    string
	LongDelta  analysis.Delta // long requests' ttft.p99, baseline → fix
	Compliance analysis.Delta // short requests' window compliance, baseline → fix
}

// tails are TTFT p99s inside and outside the incident frames.
type tails struct {
	Incident, Normal   time.Duration
	NIncident, NNormal int64
}

// incidentEpisode returns the first episode reel stats flagged that overlaps
// the generated long-prompt window, or nil.
func (f *findings) incidentEpisode() *analysis.Episode {
	for i := range f.Episodes {
		e := &f.Episodes[i]
		if e.Start.Before(f.IncidentEnd) && e.End.After(f.IncidentStart) {
			return e
		}
	}
	return nil
}

// inEpisode reports whether the frame starting at t lies in a flagged episode.
func (f *findings) inEpisode(t time.Time) bool {
	for _, e := range f.Episodes {
		if !t.Before(e.Start) && t.Before(e.End) {
			return true
		}
	}
	return false
}

// conclusionError lists the story's conclusions that did not hold.
type conclusionError struct{ failed []string }

func (e *conclusionError) Error() string {
	return "the story's conclusions do not hold:\n  - " + strings.Join(e.failed, "\n  - ")
}

// check asserts the story's conclusions.
func (f *findings) check() error {
	var failed []string
	if f.incidentEpisode() == nil {
		var got []string
		for _, e := range f.Episodes {
			got = append(got, fmt.Sprintf("%s–%s", clock(e.Start), clock(e.End)))
		}
		failed = append(failed, fmt.Sprintf("reel stats flagged no frames overlapping the long-prompt burst %s–%s (flagged: %s)",
			clock(f.IncidentStart), clock(f.IncidentEnd), orNone(got)))
	}
	d := f.FixDelta
	switch {
	case d.A == 0 || d.B == 0:
		failed = append(failed, "no TTFT for short requests in one of the replays")
	case d.Rel > -f.cfg.MinImprovement:
		failed = append(failed, fmt.Sprintf("the fix changed short requests' TTFT p99 by %+.0f%% (%s → %s), want at most −%.0f%%",
			100*d.Rel, dur(time.Duration(d.A)), dur(time.Duration(d.B)), 100*f.cfg.MinImprovement))
	case f.FixVerdict.Failed: // the expectation ("ttft.p99<-N%") did not hold
		failed = append(failed, fmt.Sprintf("the fix's TTFT p99 change %+.0f%% is within noise (CI [%s, %s])",
			100*d.Rel, dur(time.Duration(d.CILow)), dur(time.Duration(d.CIHigh))))
	}
	if len(failed) > 0 {
		return &conclusionError{failed: failed}
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// judge runs steps 8 and 9: did the shadow reproduce the incident, did the
// fix help.
func (s *story) judge(ctx context.Context) error {
	cfg, nb, f := &s.cfg, s.nb, s.f
	opt := s.analysisOptions()
	from, to := f.ReplayFrom, f.ReplayTo
	incFrom, incTo := f.IncidentStart, f.IncidentEnd
	if ep := f.incidentEpisode(); ep != nil {
		incFrom, incTo = ep.Start, ep.End
	} else {
		incFrom, incTo = analysis.FrameOf(incFrom, time.Time{}, cfg.Frame), analysis.FrameOf(incTo, time.Time{}, cfg.Frame).Add(cfg.Frame)
	}
	short := shortOnly(cfg.LongPrompt)
	long := func(p int32) bool { return int(p) >= cfg.LongPrompt }

	// Short requests, whole window.
	recS, err := loadExchanges(ctx, s.recDir, opt, from, to, short)
	if err != nil {
		return err
	}
	baseS, err := loadResults(ctx, s.baseDir, opt, from, to, short)
	if err != nil {
		return err
	}
	fixS, err := loadResults(ctx, s.fixDir, opt, from, to, short)
	if err != nil {
		return err
	}
	// Short requests, incident frames and the rest.
	tailsOf := func(load func(from, to time.Time) (*analysis.Analyzer, error), whole *analysis.Analyzer) (tails, error) {
		in, err := load(incFrom, incTo)
		if err != nil {
			return tails{}, err
		}
		var t tails
		is := in.Summary()
		t.Incident, t.NIncident = is.TTFT.P99, is.TTFT.N
		// The rest: the window's frames outside the incident.
		var normal []time.Duration
		for _, fr := range whole.Summary().Frames {
			if fr.Start.Before(incFrom) || !fr.Start.Before(incTo) {
				if fr.TTFT.N > 0 {
					normal = append(normal, fr.TTFT.P99)
					t.NNormal += fr.TTFT.N
				}
			}
		}
		t.Normal = median(normal)
		return t, nil
	}
	if f.Rec, err = tailsOf(func(a, b time.Time) (*analysis.Analyzer, error) {
		return loadExchanges(ctx, s.recDir, opt, a, b, short)
	}, recS); err != nil {
		return err
	}
	if f.Base, err = tailsOf(func(a, b time.Time) (*analysis.Analyzer, error) {
		return loadResults(ctx, s.baseDir, opt, a, b, short)
	}, baseS); err != nil {
		return err
	}
	if f.Fix, err = tailsOf(func(a, b time.Time) (*analysis.Analyzer, error) {
		return loadResults(ctx, s.fixDir, opt, a, b, short)
	}, fixS); err != nil {
		return err
	}

	nb.section("Did the shadow reproduce it?  (recording vs baseline replay)")
	recAll, err := loadExchanges(ctx, s.recDir, opt, from, to, nil)
	if err != nil {
		return err
	}
	baseAll, err := loadResults(ctx, s.baseDir, opt, from, to, nil)
	if err != nil {
		return err
	}
	repro := analysis.Compare(recAll, baseAll, analysis.CompareOptions{})
	reproHTML := filepath.Join(cfg.Dir, "reproduce.html")
	if err := writeFile(reproHTML, func(w io.Writer) error {
		return htmlreport.WriteCompare(w, "recording "+s.recDir, "baseline replay "+s.baseDir, repro, nil)
	}); err != nil {
		return err
	}
	nb.say("short prompts' TTFT p99 in the incident frames %s–%s:", clock(incFrom), clock(incTo))
	nb.say("  recorded %s, shadow %s (%.2f× the recording); other frames: %s vs %s (frame median)",
		dur(f.Rec.Incident), dur(f.Base.Incident), ratio(f.Base.Incident, f.Rec.Incident), dur(f.Rec.Normal), dur(f.Base.Normal))
	if f.Base.Incident >= 2*f.Base.Normal {
		nb.say("→ reproduced: the shadow's incident frames are %.1f× its normal ones (production: %.1f×)",
			ratio(f.Base.Incident, f.Base.Normal), ratio(f.Rec.Incident, f.Rec.Normal))
	} else {
		nb.say("→ NOT reproduced: the shadow's incident frames are only %.1f× its normal ones (production: %.1f×)",
			ratio(f.Base.Incident, f.Base.Normal), ratio(f.Rec.Incident, f.Rec.Normal))
	}
	if rc, bc := repro.A.Cache, repro.B.Cache; rc.Requests > 0 || bc.Requests > 0 {
		nb.say("prefix-cache reuse (cached ÷ prompt tokens, from usage): production %.2f%% (%d of %d), shadow %.2f%% (%d of %d)",
			100*rc.Reuse, rc.CachedTokens, rc.PromptTokens, 100*bc.Reuse, bc.CachedTokens, bc.PromptTokens)
		if line := repro.CacheLine(); line != "" {
			nb.say("→ %s", line)
		}
	}
	nb.cmd(fmt.Sprintf("reel compare %s %s --from %s --to %s --frame %s \\", s.recDir, s.baseDir, rfc(from), rfc(to), cfg.Frame),
		"    --html "+reproHTML)

	nb.section("Did the fix help?  (baseline vs long-prompt queue, same traffic)")
	fix := analysis.Compare(baseS, fixS, analysis.CompareOptions{})
	f.FixRule = fmt.Sprintf("ttft.p99<-%.0f%%", 100*cfg.MinImprovement)
	rules, err := analysis.ParseRules(f.FixRule)
	if err != nil {
		return fmt.Errorf("fix rule: %w", err)
	}
	f.FixVerdict = fix.Check(analysis.JudgeOptions{Expect: rules})
	f.FixDelta, _ = fix.Metric("ttft.p99")
	fixHTML := filepath.Join(cfg.Dir, "fix.html")
	if err := writeFile(fixHTML, func(w io.Writer) error {
		return htmlreport.WriteCompare(w, "baseline, short prompts", "fix, short prompts", fix, &f.FixVerdict)
	}); err != nil {
		return err
	}
	baseL, err := loadResults(ctx, s.baseDir, opt, from, to, long)
	if err != nil {
		return err
	}
	fixL, err := loadResults(ctx, s.fixDir, opt, from, to, long)
	if err != nil {
		return err
	}
	f.LongDelta, _ = analysis.Compare(baseL, fixL, analysis.CompareOptions{Resamples: 100}).Metric("ttft.p99")

	s.frameTable(recS, baseS, fixS, recAll)
	fixAll, err := loadResults(ctx, s.fixDir, opt, from, to, nil)
	if err != nil {
		return err
	}
	if err := s.serverSide(ctx, baseAll, fixAll, incFrom, incTo); err != nil {
		return err
	}
	nb.say("")
	nb.say("short prompts (< %d tokens), whole replayed window, baseline → fix:", cfg.LongPrompt)
	for _, name := range []string{"ttft.p50", "ttft.p99", "tpot.p99", "e2e.p99"} {
		if d, ok := fix.Metric(name); ok {
			nb.say("  %-9s %8s → %-8s %+5.0f%%   95%% CI of Δ [%s, %s]", name, dur(time.Duration(d.A)), dur(time.Duration(d.B)),
				100*d.Rel, signed(d.CILow), signed(d.CIHigh))
		}
	}
	if d, ok := fix.Metric("window_compliance"); ok {
		f.Compliance = d
		nb.say("  frames meeting the SLO (p%g of TTFT ≤ %s): %.0f%% → %.0f%% of %d",
			100*fix.A.WindowQuantile, strings.TrimPrefix(cfg.SLO, "ttft="), 100*d.A, 100*d.B, fix.B.JudgedFrames)
	}
	nb.say("long prompts pay for it: their TTFT p99 %s → %s (%+.0f%%) — they now wait their turn",
		dur(time.Duration(f.LongDelta.A)), dur(time.Duration(f.LongDelta.B)), 100*f.LongDelta.Rel)
	d := f.FixDelta
	if !f.FixVerdict.Failed && d.Rel <= -cfg.MinImprovement {
		nb.say("verdict: FIX CONFIRMED — short requests' TTFT p99 %+.0f%% (%s → %s), CI [%s, %s] excludes zero; rule %s holds",
			100*d.Rel, dur(time.Duration(d.A)), dur(time.Duration(d.B)), signed(d.CILow), signed(d.CIHigh), f.FixRule)
	} else {
		nb.say("verdict: NOT CONFIRMED — short requests' TTFT p99 %+.0f%% (%s → %s), CI [%s, %s]; rule %s does not hold",
			100*d.Rel, dur(time.Duration(d.A)), dur(time.Duration(d.B)), signed(d.CILow), signed(d.CIHigh), f.FixRule)
	}
	shortFlag := fmt.Sprintf("--prompt-tokens :%d", cfg.LongPrompt-1)
	nb.cmd(fmt.Sprintf("reel report %s %s", s.baseDir, shortFlag))
	nb.cmd(fmt.Sprintf("reel report %s %s", s.fixDir, shortFlag))
	nb.cmd(fmt.Sprintf("reel compare %s %s --frame %s %s --expect '%s' --html %s", s.baseDir, s.fixDir, cfg.Frame, shortFlag, f.FixRule, fixHTML))
	all, _ := analysis.Compare(baseAll, fixAll, analysis.CompareOptions{Resamples: 100}).Metric("ttft.p99")
	nb.say("(--expect is the verb for good news: compare prints EXPECTED and exits 0 when TTFT p99 fell by more than it asks, NOT MET and exit 1 otherwise.")
	nb.say(" Without %s it judges all requests, whose TTFT p99 is the long prompts' — %s → %s (%+.0f%%) here.)",
		shortFlag, dur(time.Duration(all.A)), dur(time.Duration(all.B)), 100*all.Rel)
	return nil
}

// serverSide prints the shadows' scraped gauges over the incident frames.
func (s *story) serverSide(ctx context.Context, baseAll, fixAll *analysis.Analyzer, from, to time.Time) error {
	views := func(dir string, a *analysis.Analyzer) ([]serverView, error) {
		sig, err := analysis.LoadSignals(ctx, []string{dir}, a.Summary(), analysis.SignalOptions{})
		if err != nil {
			return nil, fmt.Errorf("server-side signals of %s: %w", dir, err)
		}
		return serverViews(sig, from, to), nil
	}
	base, err := views(s.baseDir, baseAll)
	if err != nil {
		return err
	}
	fix, err := views(s.fixDir, fixAll)
	if err != nil {
		return err
	}
	if len(base) == 0 || len(fix) == 0 {
		return nil
	}
	s.nb.say("")
	s.nb.say("server side in the incident frames (scraped /metrics, mean):  baseline → fix")
	for _, b := range base {
		for _, x := range fix {
			if x.Name == b.Name {
				s.nb.say("  %-20s %5s → %s", b.Label, num(b.In), num(x.In))
			}
		}
	}
	return nil
}

// frameTable prints short requests' TTFT p99 per frame for the recording
// and both replays.
func (s *story) frameTable(rec, base, fix, all *analysis.Analyzer) {
	nb := s.nb
	byStart := func(a *analysis.Analyzer) map[int64]analysis.Frame {
		m := map[int64]analysis.Frame{}
		for _, f := range a.Summary().Frames {
			m[f.Start.UnixNano()] = f
		}
		return m
	}
	rf, bf, ff := byStart(rec), byStart(base), byStart(fix)
	nb.say("short prompts' TTFT p99 per frame:")
	nb.say("  frame     long  recorded  baseline       fix")
	for _, af := range all.Summary().Frames {
		k := af.Start.UnixNano()
		mark := ""
		if s.f.inEpisode(af.Start) {
			mark = "  ◀ incident"
		}
		nb.say("  %s  %3.0f%%  %8s  %8s  %8s%s", clock(af.Start), 100*af.LongPromptShare,
			frameP99(rf, k), frameP99(bf, k), frameP99(ff, k), mark)
	}
}

func frameP99(m map[int64]analysis.Frame, k int64) string {
	f, ok := m[k]
	if !ok || f.TTFT.N == 0 {
		return "-"
	}
	return dur(f.TTFT.P99)
}

// conclude prints the closing lines.
func (s *story) conclude() {
	nb, f, cfg := s.nb, s.f, &s.cfg
	nb.section("What we learned")
	if ep := f.incidentEpisode(); ep != nil {
		cause := "no single cause"
		if ep.Cause != "" {
			cause = fmt.Sprintf("reel's likely cause %s (r=%.2f)", strings.ReplaceAll(ep.Cause, "_", " "), ep.CauseR)
		}
		nb.say("1. reel stats flagged %s–%s, where the burst ran (%s–%s): long-prompt share %.0f%% vs %.0f%%, %s;",
			clock(ep.Start), clock(ep.End), clock(f.IncidentStart), clock(f.IncidentEnd), 100*ep.LongShare, 100*ep.RestLongShare, cause)
		nb.say("   short requests' TTFT p99 tracks the long-prompt share frame by frame (r=%.2f) and the batch size (r=%.2f)",
			f.TTFTvsLong, f.TTFTvsBatch)
	} else {
		nb.say("1. reel stats did NOT flag the burst window %s–%s", clock(f.IncidentStart), clock(f.IncidentEnd))
	}
	if len(f.Server) > 0 {
		var parts []string
		for _, v := range f.Server {
			parts = append(parts, fmt.Sprintf("%s %s vs %s", v.Label, num(v.In), num(v.Out)))
		}
		nb.say("   server side (scraped /metrics, flagged frames vs the rest): %s", strings.Join(parts, "; "))
	}
	nb.say("2. the shadow reproduced it from the recording alone: TTFT p99 %s vs %s in production",
		dur(f.Base.Incident), dur(f.Rec.Incident))
	d := f.FixDelta
	nb.say("3. a separate long-prompt queue takes short requests' TTFT p99 from %s to %s (%+.0f%%) on the same traffic",
		dur(time.Duration(d.A)), dur(time.Duration(d.B)), 100*d.Rel)
	nb.say("   (×%g: %s → %s on the simulated GPU); frames meeting the SLO %.0f%% → %.0f%%", cfg.TimeScale,
		dur(time.Duration(d.A*cfg.TimeScale)), dur(time.Duration(d.B*cfg.TimeScale)), 100*f.Compliance.A, 100*f.Compliance.B)
	nb.say("")
	nb.say("files: %s/", cfg.Dir)
	for _, p := range []string{"recording/   the redacted exchange/1 dataset (Parquet)", "results/baseline/, results/fix/   result/1 rows per replayed request",
		"stats.txt, stats.html   reel stats", "reproduce.html   recording vs baseline replay", "fix.html   baseline vs fix, short prompts",
		"redact.key   the dataset's redaction key"} {
		nb.say("  %s", p)
	}
	nb.say("done in %s", time.Since(nb.start).Round(time.Second))
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func signed(ns float64) string {
	if ns < 0 {
		return "-" + dur(time.Duration(-ns))
	}
	return "+" + dur(time.Duration(ns))
}

func median(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
