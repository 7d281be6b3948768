package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/htmlreport"
)

const compareUsage = `usage: reel compare A B [flags]

Set run B against run A: every metric side by side with absolute and
relative deltas, bootstrap confidence intervals for quantile differences,
and per-frame deltas aligned by original start. A and B are replay results
or recordings: recording vs replay answers "did the shadow reproduce the
incident?", baseline vs candidate "did the fix help?".

--fail-on takes comma-separated rules; each is a threshold on the change
from A to B:

  RULE      = METRIC OP THRESHOLD
  OP        = ">" (trips when the change is above THRESHOLD)
            | "<" (trips when the change is below THRESHOLD)
  THRESHOLD = [+|-]N%          relative change, e.g. +10% or -40%
            | [+|-]DURATION    absolute change of a latency, e.g. +50ms
            | [+|-]NUMBER      absolute change of a rate or ratio, e.g. -0.01

A rule trips when the change crosses its threshold and the confidence
interval of the change excludes zero on that side (noise never trips).
Metrics: e2e, e2e_sched, ttfb, ttft, ttst, tpot, itl, lag with .p50 .p90
.p95 .p99 .p999 .max .mean (a bare p99 is e2e.p99, a bare ttft is
ttft.p99), goodput, goodput_share, window_compliance, error_rate,
timeout_rate, throughput, output_tokens_per_s, peak_output_tokens_per_s,
requests, request_rate, concurrency, peak_in_flight, mean_batch_size,
cache_reuse (Σ cached_tokens ÷ Σ prompt_tokens over requests whose server
reported cached tokens).

When both runs report cached tokens, a line says whether B reproduced A's
prefix-cache reuse: "reproduced" when the interval of the change lies
within ±5 % of A's reuse, "differs" when it excludes zero, "inconclusive"
otherwise.

Rules are meant as regression gates ('p99>+10%': fail when p99 rose more
than 10 %). When any rule trips reel prints a one-line verdict and exits 1:
"REGRESSION: …" when every tripped change is a worsening, "FAIL: …"
otherwise — a rule pointed at a drop ('ttft.p99<-40%') trips when TTFT p99
fell more than 40 %, and the verdict marks that change "better". Each
tripped metric is listed with its change, B's value, the interval and the
rule; "OK: none of N rule(s) tripped" otherwise.

Filters (--prompt-tokens MIN:MAX, --path, --model) apply to both runs,
e.g. to judge short prompts alone when a fix trades their latency against
long prompts'.

exit codes: 0 no rule tripped, 1 a rule tripped, 2 misuse.

examples:
  reel compare ./results-base ./results-fix
  reel compare ./capture ./results --slo e2e=5s --html compare.html
  reel compare ./nightly-base ./nightly-cand --fail-on 'p99>+10%,ttft.p99>+15%,goodput<-5%'
  reel compare base cand --json --resamples 2000 --seed 7
  reel compare ./results/baseline ./results/fix --prompt-tokens :2999 --fail-on 'ttft.p99<-40%'
  reel compare ./capture ./results --fail-on 'cache_reuse<-5%'

flags:
`

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var af analysisFlags
	af.register(fs)
	failOn := fs.String("fail-on", "", "rules METRIC>THRESHOLD or METRIC<THRESHOLD; exit 1 when one trips (grammar above), e.g. 'p99>+10%,ttft.p99>+15%,goodput<-5%'")
	resamples := fs.Int("resamples", 500, "bootstrap resamples per metric (at most 10000)")
	confidence := fs.Float64("confidence", 0.95, "confidence level of the intervals")
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
	var rules []analysis.Rule
	if *failOn != "" {
		if rules, err = analysis.ParseRules(*failOn); err != nil {
			return &usageError{msg: err.Error(), hint: hint}
		}
	}
	if *confidence <= 0 || *confidence >= 1 {
		return &usageError{msg: fmt.Sprintf("--confidence must be in (0, 1), got %g", *confidence), hint: hint}
	}
	nameA, nameB := fs.Arg(0), fs.Arg(1)
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
	var verdict *analysis.Verdict
	if rules != nil {
		v := c.Judge(rules)
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
			Verdict *analysis.Verdict `json:"verdict,omitempty"`
		}{c, verdict}); err != nil {
			return err
		}
	} else {
		if err := c.WriteText(stdout, nameA, nameB); err != nil {
			return err
		}
		if verdict != nil {
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, verdict.Line)
		}
	}
	if verdict != nil && verdict.Failed {
		if *asJSON {
			return &exitError{code: 1, msg: verdict.Line} // the one-line verdict on stderr
		}
		return &exitError{code: 1} // already printed
	}
	return nil
}
