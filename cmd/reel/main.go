// Command reel records the traffic reaching an AI inference gateway and
// replays it against a shadow cluster on the original clock.
//
// Each subcommand lives in its own file with its own pflag FlagSet and a
// run function; this file only dispatches and owns the exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists every subcommand. Each entry's run lives in <name>.go.
var commands = map[string]command{
	"record":  {"record gateway traffic into a dataset: sidecar proxy, capture, pcap or access-log import", runRecord},
	"version": {"print reel's version", runVersion},
	"replay":  {"replay a recorded window against a shadow target, on the original clock", runReplay},
	"inspect": {"summarise a dataset: files, rows, time range, bytes", runInspect},
	"stats":   {"describe recorded traffic: arrivals, sizes, frames that stand out and why", runStats},
	"report":  {"latency, throughput and SLO metrics of results or a recording (docs/metrics.md): text, --json, --html", runReport},
	"compare": {"compare two runs with confidence intervals; --fail-on for CI", runCompare},
	"redact":  {"re-redact a raw dataset; --explain shows what a body becomes and why", runRedact},
	"compact": {"merge each hour's small files into large time-sorted ones, crash-safe and idempotent", runCompact},
	"import":  {"turn a trace (Mooncake, Azure, BurstGPT, CSV/JSONL) into a dataset with synthesized prompts", runImport},
	"export":  {"write a recording as Mooncake, AIPerf or vLLM trace JSONL", runExport},
}

// Exit codes, documented in README "Using reel in CI".
const (
	exitOK      = 0 // success; compare: no rule tripped, every --expect held
	exitFailure = 1 // an operation failed; compare/report: a rule tripped or an expectation was not met
	exitUsage   = 2 // misuse: bad flags or arguments (stderr says why, with a hint)
	// exitNoMeasurement: reel replay ran but measured nothing a pipeline can
	// trust: no request completed, or the error share passed --max-error-rate.
	exitNoMeasurement = 3
)

// exitError carries a specific exit code (compare --fail-on uses 1 for a
// regression) without printing anything more.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError marks misuse: the message is followed by a hint.
type usageError struct {
	msg  string
	hint string
}

func (e *usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if version != "" {
		formats.Version = version // files say what the binary says
	}
	if len(args) == 0 {
		printUsage(stdout)
		return 0
	}
	registerStores(os.Getenv)
	switch args[0] {
	case "-h", "--help":
		printUsage(stdout)
		return 0
	case "-v", "--version":
		fmt.Fprintln(stdout, readBuildVersion())
		return 0
	case "help":
		if len(args) == 1 {
			printUsage(stdout)
			return 0
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(stderr, "reel help: unknown command %q\n", args[1])
			printUsage(stderr)
			return 2
		}
		args = []string{args[1], "--help"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "reel: unknown command %q\n", args[0])
		printUsage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, ee.msg)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "reel %s: %v\n", args[0], err)
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.hint != "" {
			fmt.Fprintf(stderr, "try: %s\n", ue.hint)
		}
		return exitUsage
	}
	return exitFailure
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "reel records AI inference traffic and replays it on the original clock.")
	fmt.Fprintln(w, "\nusage: reel COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-9s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nrun 'reel help COMMAND' (or 'reel COMMAND --help') for a command's flags and examples;")
	fmt.Fprintln(w, "'reel --version' for the version. Metric definitions: docs/metrics.md.")
}

// parseFlags parses args into fs. helped is true when the user asked for
// --help: the usage (fs.Usage, which must print to fs.Output()) then goes
// to stdout, as asked-for output. Any other parse failure comes back as a
// usageError carrying hint, for stderr and exit code 2.
func parseFlags(fs *pflag.FlagSet, args []string, hint string, stdout io.Writer) (helped bool, err error) {
	usage := fs.Usage
	fs.Usage = func() {} // pflag calls it on --help; printed below, to stdout
	err = fs.Parse(args)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			out := fs.Output()
			fs.SetOutput(stdout)
			if usage != nil {
				usage()
			} else {
				fs.PrintDefaults()
			}
			fs.SetOutput(out)
			return true, nil
		}
		return false, &usageError{msg: err.Error(), hint: hint}
	}
	return false, nil
}

// usageFunc prints a command's usage text and its flags to the flag set's
// output (stdout for --help, see parseFlags).
func usageFunc(fs *pflag.FlagSet, text string) func() {
	return func() {
		fmt.Fprint(fs.Output(), text)
		fs.PrintDefaults()
	}
}
