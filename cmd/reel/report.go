package main

import (
	"context"
	"io"

	"github.com/reelkit/reel/analysis/htmlreport"
)

const reportUsage = `usage: reel report RESULTS... [flags]

Compute the metrics of replay results (or of a recording), as defined in
docs/metrics.md: exact
quantiles of E2E (from send and from schedule), TTFB, TTFT, TTST, TPOT, ITL
and lag; error classes; throughput; concurrency; goodput and window
compliance under --slo; per frame, route, model, prompt-length bucket and
status class. Shards of one run merge: pass them all.

examples:
  reel report ./results
  reel report ./results/shard-* --slo ttft=300ms,tpot=50ms,e2e=5s
  reel report ./results --frame 10s --exclude-first 30s --json > report.json
  reel report ./results --slo e2e=2s --html report.html
  reel report ./results --prompt-tokens :2999 --slo ttft=100ms   # short prompts only
  reel report ./results --model llama-3-8b --path /v1/chat/completions

Filters (--prompt-tokens MIN:MAX, --path, --model; also on stats and
compare) keep only the matching requests; the summary says how many were
left out. Requests of unknown prompt length are left out by --prompt-tokens.

flags:
`

var reportCommand = analysisCommand{
	name: "report", usage: reportUsage, hint: "reel report ./results --slo e2e=5s",
	noPaths: "no results given", jsonHelp: "print the report as JSON (keys documented in the README)",
	// One P: on two, a 10M-row report's max RSS measured 1.17–1.21× a
	// 100k one's against 1.10× on one (docs/performance.md, #22 session
	// 9), and nothing asks the report for its wall time.
	procs: 1,
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r, err := reportCommand.run(ctx, args, stdout, stderr)
	if r == nil || err != nil {
		return err
	}
	s := r.a.Summary()
	attachSignals(ctx, r.paths, s, r.series, r.ro, stderr)
	return r.emit(stdout, "report", s, s.WriteText, func(w io.Writer, title string) error {
		return htmlreport.WriteReport(w, title, s)
	})
}
