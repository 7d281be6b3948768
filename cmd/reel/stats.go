package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/replayer/analysis/htmlreport"
)

const statsUsage = `usage: reel stats DATASET... [flags]

Describe recorded traffic: volume, arrival rate and inter-arrival
distribution (CV: burstiness), request-body and prompt-token distributions,
routes and models, prefix-sharing ratio, the per-frame table (rate,
p50/p95/p99, batch size, queue depth, long-prompt share), frames whose tail
or mix stands out with their likely cause, and how per-frame E2E and TTFT
p99 correlate with workload signals (long-prompt share, mean prompt tokens,
rate, mean output tokens) and server state (batch size, queue depth).

The likely cause of a flagged episode is a workload signal raised in it
that tracks the tail (r ≥ 0.5); server state rises with any such cause, so
it is reported as "server state moving with it" and named as the cause
only when no workload signal is raised in the episode at all.

examples:
  reel stats ./capture
  reel stats ./capture --from 2026-03-04T13:55:00Z --to 2026-03-04T14:10:00Z
  reel stats ./capture --frame 10s --long-prompt 2000
  reel stats ./capture --json | jq '.outliers[].explanation'
  reel stats ./capture --html stats.html
  reel stats ./capture --prompt-tokens :2999   # short prompts only

flags:
`

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("stats", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var af analysisFlags
	af.register(fs)
	asJSON := fs.Bool("json", false, "print the stats as JSON")
	html := fs.String("html", "", "also write a self-contained HTML report to this file")
	fs.Usage = func() {
		fmt.Fprint(stderr, statsUsage)
		fs.PrintDefaults()
	}
	const hint = "reel stats ./capture"
	if helped, err := parseFlags(fs, args, hint); helped || err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{msg: "no dataset given", hint: hint}
	}
	opt, ro, err := af.options(stderr)
	if err != nil {
		return &usageError{msg: err.Error(), hint: hint}
	}
	a, err := analyse(ctx, fs.Args(), opt, ro)
	if err != nil {
		return err
	}
	st := a.Stats()
	attachSignals(ctx, fs.Args(), st.Summary, af.series, ro, stderr)
	if *html != "" {
		title := "reel stats: " + strings.Join(fs.Args(), " ")
		if err := writeHTMLFile(*html, func(w io.Writer) error { return htmlreport.WriteStats(w, title, st) }); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeJSON(stdout, st)
	}
	return st.WriteText(stdout)
}
