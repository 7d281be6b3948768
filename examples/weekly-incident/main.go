// Command weekly-incident tells reel's whole story in one run, on a laptop
// with no GPU: a simulated inference server (examples/simcluster) whose tail
// latency spikes once a week when a batch tenant sends prompts four times
// longer than usual; the reel sidecar recording production traffic; reel
// stats pointing at the incident frames and at long prompts; the incident
// window replayed against a shadow copy of the server and against one with a
// separate long-prompt queue (the fix); reel compare showing whether the
// shadow reproduced the incident and whether the fix brings short requests'
// TTFT back. Every step runs reel's real code paths in process and prints
// the reel command that does the same by hand.
//
//	go run ./examples/weekly-incident            # about two minutes
//	go run ./examples/weekly-incident --quick    # ~30 s, asserts the conclusions (CI)
//
// The simulator runs ten times faster than real time (--time-scale): a
// simulated minute passes in six seconds, and every latency printed is wall
// clock, a tenth of what the simulated GPU would take.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var fail *conclusionError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
	case errors.As(err, &fail):
		fmt.Fprintln(os.Stderr, "weekly-incident:", err)
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "weekly-incident:", err)
		os.Exit(2)
	}
}

const usage = `weekly-incident: reel's end-to-end story on a simulated GPU server.

usage:
  go run ./examples/weekly-incident [--quick] [--out DIR] [--seed N]

Records chat traffic with a weekly long-prompt burst through the reel sidecar,
finds the incident with reel stats, replays it against a shadow server with
and without the long-prompt queue, and compares. Exits 1 when --quick (or
--check) and a conclusion does not hold: the incident frames were not found
where the burst was, or the fix did not cut short requests' TTFT p99.

examples:
  go run ./examples/weekly-incident
  go run ./examples/weekly-incident --quick --out /tmp/story
  go run ./examples/weekly-incident --seed 7 --check

flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("weekly-incident", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	quick := fs.Bool("quick", false, "short run for CI (~30 s) that asserts the story's conclusions")
	check := fs.Bool("check", false, "assert the conclusions in a full run too (exit 1 when one fails)")
	out := fs.String("out", "", "output directory, new or empty (default: ./reel-story/run-TIMESTAMP)")
	seed := fs.Uint64("seed", 1, "traffic seed")
	scale := fs.Float64("time-scale", 0, "simulated seconds per wall-clock second (default 10)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := defaultConfig()
	if *quick {
		cfg = quickConfig()
	}
	cfg.Seed = *seed
	if *scale != 0 {
		if *scale < 1 || *scale > 50 {
			return fmt.Errorf("--time-scale %v: want 1 to 50", *scale)
		}
		cfg.TimeScale = *scale
	}
	dir, err := outputDir(*out)
	if err != nil {
		return err
	}
	cfg.Dir = dir
	f, err := runStory(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	if *quick || *check {
		return f.check()
	}
	return nil
}
