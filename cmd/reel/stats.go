package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"

	"github.com/reelkit/reel/analysis/htmlreport"
)

const statsUsage = `usage: reel stats DATASET... [flags]

Describe recorded traffic: volume, arrival rate and inter-arrival
distribution (CV: burstiness), request-body and prompt-token distributions,
routes and models, prefix-sharing ratio, the per-frame table (rate,
p50/p95/p99, batch size, queue depth, long-prompt share), frames whose tail
or mix stands out with their likely cause, and how per-frame E2E and TTFT
p99 correlate with workload signals (long-prompt share, mean prompt tokens,
rate, mean output tokens) and server state (batch size, queue depth).
Sessions (conversations, agent loops): how many, turns per session, the
think time from an answer's end to the next turn, the share of requests in
multi-turn sessions and the longest chains (--sessions).

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
  reel stats ./capture --sessions recorded      # group by the recorded session id

flags:
`

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var sessions sessionsValue
	statsCommand := analysisCommand{
		name: "stats", usage: statsUsage, hint: "reel stats ./capture",
		noPaths: "no dataset given", jsonHelp: "print the stats as JSON",
		flags: func(fs *pflag.FlagSet) {
			registerSessions(fs, &sessions, "group requests into sessions: off, recorded (the session column) or infer (turns that carry an earlier answer)")
		},
	}
	var sessionStats *analysis.SessionStats
	// A second pass over the linker's columns alone, beside the metrics'
	// pass: in it (Options.Sessions) the peak memory of a long recording
	// was higher (docs/performance.md, #22).
	statsCommand.beside = func(ctx context.Context, paths []string, ro formats.ReaderOptions) error {
		if sessions.mode == analysis.SessionsOff {
			return nil
		}
		if kind, err := analysis.DatasetKind(paths); err != nil || kind != analysis.KindExchange {
			return nil // results carry no turn links; a dataset error is the analysis's to report
		}
		st, err := analysis.SessionStatsOf(ctx, paths, ro, sessions.mode, analysis.LinkerOptions{})
		if err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		sessionStats = st
		return nil
	}
	r, err := statsCommand.run(ctx, args, stdout, stderr)
	if r == nil || err != nil {
		return err
	}
	st := r.a.Stats()
	st.Sessions = sessionStats
	attachSignals(ctx, r.paths, st.Summary, r.series, r.ro, stderr)
	return r.emit(stdout, "stats", st, st.WriteText, func(w io.Writer, title string) error {
		return htmlreport.WriteStats(w, title, st)
	})
}
