package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/htmlreport"
	"github.com/reelkit/reel/replayer"
)

const compareUsage = `usage: reel compare A B [flags]

Set run B against run A: every metric side by side with absolute and
relative deltas, bootstrap confidence intervals for quantile differences,
and per-frame deltas aligned by original start. A and B are replay results
or recordings: recording vs replay answers "did the shadow reproduce the
incident?", baseline vs candidate "did the fix help?". Metric definitions:
docs/metrics.md.

Two verbs judge the change from A to B, each taking comma-separated rules:

  --fail-on RULES   regression gates: exit 1 when a rule TRIPS
  --expect RULES    expectations: exit 1 when one does NOT hold

  RULE      = METRIC OP THRESHOLD
  OP        = ">" (the change is above THRESHOLD)
            | "<" (the change is below THRESHOLD)
  THRESHOLD = [+|-]N%          relative change, e.g. +10% or -40%
            | [+|-]DURATION    absolute change of a latency, e.g. +50ms
            | [+|-]NUMBER      absolute change of a rate or ratio, e.g. -0.01

A change crosses a rule when it passes the threshold and the confidence
interval of the change excludes zero on that side (noise never counts).
Metrics: e2e, e2e_sched, ttfb, ttft, ttst, tpot, itl, lag with .p50 .p90
.p95 .p99 .p999 .max .mean (a bare p99 is e2e.p99, a bare ttft is
ttft.p99), goodput, goodput_share, window_compliance (these three need
--slo), error_rate, timeout_rate, throughput, output_tokens_per_s,
peak_output_tokens_per_s, requests, request_rate, concurrency,
peak_in_flight, mean_batch_size, cache_reuse (Σ cached_tokens ÷ Σ
prompt_tokens over requests whose server reported cached tokens).

When both runs report cached tokens, a line says whether B reproduced A's
prefix-cache reuse: "reproduced" when the interval of the change lies
within ±5 % of A's reuse, "differs" when it excludes zero, "inconclusive"
otherwise.

--fail-on 'p99>+10%' fails when p99 rose more than 10 %: "REGRESSION: …"
when every tripped change is a worsening, "FAIL: …" otherwise. --expect
'ttft.p99<-40%' proves a fix: "EXPECTED: …" (exit 0) when TTFT p99 fell
by more than 40 %, "NOT MET: …" (exit 1) when it did not. A rule whose
metric has no data in A or B (every request of B failed, say) trips, and
an expectation without data is not met: a gate over nothing never passes.

Whenever a verdict is asked for, B's error rate rising by more than
--max-error-rise (absolute, default one percentage point, interval
excluding zero) also fails, even when no rule names errors: a candidate
that fails more requests keeps fewer and often faster latencies, and
could pass every latency rule while being worse.

Runs must be comparable: when A and B are replay results whose windows,
frames, selections or speeds differ (their file metadata says), compare
warns on stderr and in the text. A directory holding several runs is
refused: pass one run's directory.

Filters (--prompt-tokens MIN:MAX, --path, --model) apply to both runs,
e.g. to judge short prompts alone when a fix trades their latency against
long prompts'.

exit codes: 0 no rule tripped and every expectation held, 1 a rule
tripped, an expectation was not met or the error guard fired, 2 misuse.

examples:
  reel compare ./results-base ./results-fix
  reel compare ./capture ./results --slo e2e=5s --html compare.html
  reel compare ./nightly-base ./nightly-cand --fail-on 'p99>+10%,ttft.p99>+15%,goodput<-5%' --slo e2e=5s
  reel compare base cand --json --resamples 2000 --seed 7
  reel compare ./results/baseline ./results/fix --prompt-tokens :2999 --expect 'ttft.p99<-40%'
  reel compare ./capture ./results --fail-on 'cache_reuse<-5%'

flags:
`

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var af analysisFlags
	af.register(fs)
	failOn := fs.String("fail-on", "", "regression gates METRIC>THRESHOLD or METRIC<THRESHOLD; exit 1 when one trips (grammar above), e.g. 'p99>+10%,ttft.p99>+15%,goodput<-5%'")
	expect := fs.String("expect", "", "expectations, same grammar; exit 1 when one does NOT hold, e.g. 'ttft.p99<-40%' for a fix")
	maxErrorRise := fs.Float64("max-error-rise", analysis.DefaultMaxErrorRise, "with --fail-on or --expect: fail when B's error rate rose by more than this share (0.01: one point), whatever the rules; negative: off")
	resamples := fs.Int("resamples", analysis.DefaultResamples, "bootstrap resamples per metric (at most 10000)")
	confidence := fs.Float64("confidence", analysis.DefaultConfidence, "confidence level of the intervals")
	seed := fs.Uint64("seed", 1, "bootstrap seed (results are deterministic per seed)")
	asJSON := fs.Bool("json", false, "print the comparison (and verdict) as JSON")
	html := fs.String("html", "", "also write a self-contained HTML comparison to this file")
	fs.Usage = usageFunc(fs, compareUsage)
	const hint = "reel compare ./results-base ./results-fix --fail-on 'p99>+10%'"
	if helped, err := parseFlags(fs, args, hint, stdout); helped || err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return &usageError{msg: fmt.Sprintf("want two runs A and B, got %d", fs.NArg()), hint: hint}
	}
	opt, ro, err := af.options(stderr)
	if err != nil {
		return &usageError{msg: err.Error(), hint: hint}
	}
	judge := analysis.JudgeOptions{MaxErrorRise: *maxErrorRise}
	if *maxErrorRise == 0 {
		judge.MaxErrorRise = -1 // 0 asked for: no guard (the library reads 0 as its default)
	}
	for _, v := range []struct {
		flag, text string
		rules      *[]analysis.Rule
	}{{"--fail-on", *failOn, &judge.FailOn}, {"--expect", *expect, &judge.Expect}} {
		if v.text == "" {
			continue
		}
		if *v.rules, err = analysis.ParseRules(v.text); err != nil {
			return &usageError{msg: v.flag + ": " + err.Error(), hint: hint}
		}
	}
	if *confidence <= 0 || *confidence >= 1 {
		return &usageError{msg: fmt.Sprintf("--confidence must be in (0, 1), got %g", *confidence), hint: hint}
	}
	nameA, nameB := fs.Arg(0), fs.Arg(1)
	runsA, err := oneRun(nameA, "A")
	if err != nil {
		return err
	}
	runsB, err := oneRun(nameB, "B")
	if err != nil {
		return err
	}
	a, err := analyse(ctx, []string{nameA}, opt, ro)
	if err != nil {
		return fmt.Errorf("read A: %w", err)
	}
	b, err := analyse(ctx, []string{nameB}, opt, ro)
	if err != nil {
		return fmt.Errorf("read B: %w", err)
	}
	c := analysis.Compare(a, b, analysis.CompareOptions{Resamples: *resamples, Confidence: *confidence, Seed: *seed})
	attachSignals(ctx, []string{nameA}, c.A, af.series, ro, stderr)
	attachSignals(ctx, []string{nameB}, c.B, af.series, ro, stderr)
	mismatch := runMismatch(runsA, runsB)
	for _, m := range mismatch {
		fmt.Fprintf(stderr, "reel compare: warning: A and B measured differently: %s\n", m)
	}
	var verdict *analysis.Verdict
	if judge.FailOn != nil || judge.Expect != nil {
		v := c.Check(judge)
		verdict = &v
	}
	if *html != "" {
		if err := writeHTMLFile(*html, func(w io.Writer) error { return htmlreport.WriteCompare(w, nameA, nameB, c, verdict) }); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := writeJSON(stdout, struct {
			*analysis.Comparison
			Mismatch []string          `json:"mismatch,omitempty"`
			Verdict  *analysis.Verdict `json:"verdict,omitempty"`
		}{c, mismatch, verdict}); err != nil {
			return err
		}
	} else {
		if err := c.WriteText(stdout, nameA, nameB); err != nil {
			return err
		}
		if len(mismatch) > 0 {
			fmt.Fprintf(stdout, "\nwarning: A and B measured differently: %s\n", strings.Join(mismatch, "; "))
		}
		if verdict != nil {
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, verdict.Line)
		}
	}
	if verdict != nil && verdict.Failed {
		if *asJSON {
			return &exitError{code: exitFailure, msg: verdict.Line} // the verdict on stderr
		}
		return &exitError{code: exitFailure} // already printed
	}
	return nil
}

// oneRun refuses a results location that holds more than one run (or
// several speeds of a sweep): comparing them merged would mix runs. It
// returns the run found (nil for a recording).
func oneRun(path, which string) (*replayer.Run, error) {
	runs, err := replayer.ListRuns([]string{path})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", which, err)
	}
	if err := refuseMixedRuns(runs, path); err != nil {
		return nil, fmt.Errorf("%s: %w", which, err)
	}
	if len(runs) == 1 {
		return &runs[0], nil
	}
	return nil, nil
}

// refuseMixedRuns is the rule of report and compare: results of several
// runs (or speeds) under one path are not merged silently.
func refuseMixedRuns(runs []replayer.Run, path string) error {
	if len(runs) <= 1 {
		return nil
	}
	var parts []string
	for _, r := range runs {
		parts = append(parts, fmt.Sprintf("%s (%d files in %s)", r.Name(), r.Files, strings.Join(r.Dirs, ", ")))
	}
	return &usageError{
		msg:  fmt.Sprintf("%s holds %d runs, which would mix: %s", path, len(runs), strings.Join(parts, "; ")),
		hint: "pass one run's directory, e.g. reel report " + runs[0].Dirs[0],
	}
}

// comparedMeta are the result metadata keys that must agree for two runs
// to have measured the same thing.
var comparedMeta = []string{
	replayer.MetaFrom, replayer.MetaTo, replayer.MetaFrames, replayer.MetaFrame, replayer.MetaSelection,
	replayer.MetaSpeed, replayer.MetaLoop, replayer.MetaSample, replayer.MetaWarmup, replayer.MetaExcludeFirst,
	replayer.MetaPinOutput, replayer.MetaIncludeUsage, replayer.MetaDataset,
}

// runMismatch lists how two replay runs' parameters differ (nothing when
// either is a recording).
func runMismatch(a, b *replayer.Run) []string {
	if a == nil || b == nil {
		return nil
	}
	var out []string
	for _, k := range comparedMeta {
		va, vb := a.Meta[k], b.Meta[k]
		if va != vb {
			out = append(out, fmt.Sprintf("%s %s vs %s", k, orNone(va), orNone(vb)))
		}
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
