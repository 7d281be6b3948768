package main

// The plumbing stats, report and compare share: the analysis flags, one
// Analyzer over the given datasets, and the text/--json/--html outputs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/replayer"
)

// analysisFlags are the flags stats, report and compare share.
type analysisFlags struct {
	frame, excludeFirst time.Duration
	slo                 analysis.SLO
	sloText             string
	buckets             []int32
	from, to            timeValue
	windowQuantile      float64
	minCompliance       float64
	longPrompt          int32
	skipBad             bool
	series              []string        // server-side series (scrape.go)
	filter              analysis.Filter // --path, --model, --prompt-tokens
}

func (f *analysisFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.frame, "frame", analysis.DefaultFrame, "frame (window) length")
	fs.Var(sloValue{&f.slo, &f.sloText}, "slo", "per-request SLO, each ≤ (e.g. ttft=300ms,tpot=50ms,e2e=5s; metrics in docs/metrics.md)")
	fs.DurationVar(&f.excludeFirst, "exclude-first", 0, "leave the first span of the run out of the metrics")
	fs.Float64Var(&f.windowQuantile, "window-quantile", analysis.DefaultWindowQuantile, "quantile each frame must keep within the SLO")
	fs.Float64Var(&f.minCompliance, "min-compliance", 1, "window compliance at which the run meets the SLO")
	fs.Var(newBoundsValue(analysis.DefaultLengthBuckets(), &f.buckets), "buckets", "prompt-length bucket bounds in tokens (short,medium,long,very long)")
	fs.Int32Var(&f.longPrompt, "long-prompt", 0, "prompt tokens from which a prompt counts as long (default 2 × median)")
	fs.Var(&f.from, "from", "only rows at or after this time (RFC 3339, or -DURATION before now)")
	fs.Var(&f.to, "to", "only rows before this time (RFC 3339, or +DURATION after --from)")
	registerRequestFilter(fs, &f.filter, "only")
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip unreadable files and files with corrupt pages, with a warning (default: fail)")
	fs.Var(newListValue(nil, &f.series, false), "series", "server-side series scraped beside the run (DIR.metrics) to align with frames; counters as rates (default: vLLM/SGLang queue, batch, KV usage; DCGM GPU/SM)")
}

// options turns the flags into analysis and reader options.
func (f *analysisFlags) options(stderr io.Writer) (analysis.Options, formats.ReaderOptions, error) {
	if f.frame <= 0 {
		return analysis.Options{}, formats.ReaderOptions{}, fmt.Errorf("--frame must be positive, got %s", f.frame)
	}
	if f.windowQuantile <= 0 || f.windowQuantile > 1 {
		return analysis.Options{}, formats.ReaderOptions{}, fmt.Errorf("--window-quantile must be in (0, 1], got %g", f.windowQuantile)
	}
	ro := formats.ReaderOptions{SkipBad: f.skipBad, Warn: func(err error) { fmt.Fprintf(stderr, "warning: %v\n", err) },
		ReuseSlices: true,                      // the analysis keeps nothing of a record it has added
		ReadAhead:   runtime.GOMAXPROCS(0) > 1} // decoding on a second core while the first analyses, where there is one
	var err error
	if ro.From, err = f.from.resolve("--from", time.Now(), "now"); err != nil {
		return analysis.Options{}, formats.ReaderOptions{}, err
	}
	if ro.To, err = f.to.resolve("--to", ro.From, "--from"); err != nil {
		return analysis.Options{}, formats.ReaderOptions{}, err
	}
	if !ro.To.IsZero() && !ro.To.After(ro.From) {
		return analysis.Options{}, formats.ReaderOptions{}, fmt.Errorf("--to must come after --from")
	}
	return analysis.Options{
		Frame: f.frame, SLO: f.slo, ExcludeFirst: f.excludeFirst, WindowQuantile: f.windowQuantile,
		MinCompliance: f.minCompliance, LengthBuckets: f.buckets, LongPrompt: f.longPrompt, Filter: f.filter,
	}, ro, nil
}

// analyse reads datasets into a new Analyzer.
func analyse(ctx context.Context, paths []string, opt analysis.Options, ro formats.ReaderOptions) (*analysis.Analyzer, error) {
	return analyseBeside(ctx, paths, opt, ro, nil)
}

// analyseBeside reads datasets into a new Analyzer while beside, unless
// nil, makes a pass of its own over them on another goroutine. The first
// error of either stops both. On one P the two passes run one after the
// other: side by side they would take as long, holding both readers'
// buffers at once.
func analyseBeside(ctx context.Context, paths []string, opt analysis.Options, ro formats.ReaderOptions, beside func(context.Context) error) (*analysis.Analyzer, error) {
	if beside != nil && runtime.GOMAXPROCS(0) == 1 {
		a, err := analyseBeside(ctx, paths, opt, ro, nil)
		if err != nil {
			return nil, err
		}
		return a, beside(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	besideErr := make(chan error, 1)
	if beside == nil {
		besideErr <- nil
	} else {
		go func() {
			err := beside(ctx)
			if err != nil {
				cancel()
			}
			besideErr <- err
		}()
	}
	a := analysis.New(opt)
	_, err := a.AddDataset(ctx, paths, ro)
	if err != nil {
		cancel()
	}
	if berr := <-besideErr; berr != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = berr // the pass that failed first, not the one it cancelled
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeHTMLFile writes an HTML report through write, creating path.
func writeHTMLFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create html report: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write html report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// analysisCommand describes a subcommand that analyses datasets and prints
// one result as text, --json or --html (stats and report).
type analysisCommand struct {
	name     string // subcommand name, for the flag set and HTML title
	usage    string // usage text printed before the flags
	hint     string // a correct command line, shown on misuse
	noPaths  string // the message when no dataset is given
	jsonHelp string // --json's help text
	// flags registers the subcommand's own flags, if any.
	flags func(fs *pflag.FlagSet)
	// procs caps GOMAXPROCS unless $GOMAXPROCS is set (default
	// analysis.Procs).
	procs int
	// beside, if set, is a pass of the subcommand's own over the datasets
	// that runs beside the analysis, on a core of its own where there is
	// one (stats' sessions).
	beside func(ctx context.Context, paths []string, ro formats.ReaderOptions) error
}

// analysisRun is a parsed analysisCommand, its datasets analysed.
type analysisRun struct {
	a      *analysis.Analyzer
	paths  []string
	series []string
	ro     formats.ReaderOptions
	asJSON bool
	html   string
}

// run parses args and analyses the datasets they name. It returns nil and
// no error when --help was asked for.
func (c analysisCommand) run(ctx context.Context, args []string, stdout, stderr io.Writer) (*analysisRun, error) {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var af analysisFlags
	af.register(fs)
	r := &analysisRun{}
	fs.BoolVar(&r.asJSON, "json", false, c.jsonHelp)
	fs.StringVar(&r.html, "html", "", "also write a self-contained HTML report to this file")
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Usage = usageFunc(fs, c.usage)
	if helped, err := parseFlags(fs, args, c.hint, stdout); helped || err != nil {
		return nil, err
	}
	if fs.NArg() == 0 {
		return nil, &usageError{msg: c.noPaths, hint: c.hint}
	}
	defaultGCPercent(analysis.GCPercent)
	procs := analysis.Procs
	if c.procs > 0 {
		procs = c.procs
	}
	defaultMaxProcs(procs)
	opt, ro, err := af.options(stderr)
	if err != nil {
		return nil, &usageError{msg: err.Error(), hint: c.hint}
	}
	runs, err := replayer.ListRuns(fs.Args())
	if err != nil {
		return nil, err
	}
	if err := refuseMixedRuns(runs, strings.Join(fs.Args(), " ")); err != nil {
		return nil, err
	}
	var beside func(context.Context) error
	if c.beside != nil {
		beside = func(ctx context.Context) error { return c.beside(ctx, fs.Args(), ro) }
	}
	a, err := analyseBeside(ctx, fs.Args(), opt, ro, beside)
	if err != nil {
		return nil, err
	}
	r.a, r.paths, r.series, r.ro = a, fs.Args(), af.series, ro
	return r, nil
}

// defaultGCPercent sets the collector's GOGC to percent, unless the user
// set $GOGC: the one rule for every command that tunes it.
func defaultGCPercent(percent int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
}

// defaultMemoryLimit sets the soft Go memory limit to limit (> 0), unless
// the user set $GOMEMLIMIT, and reports whether it did.
func defaultMemoryLimit(limit int64) bool {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	debug.SetMemoryLimit(limit)
	return true
}

// defaultMaxProcs caps GOMAXPROCS at n, unless the user set $GOMAXPROCS.
func defaultMaxProcs(n int) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(min(n, runtime.GOMAXPROCS(0)))
	}
}

// emit writes the HTML file when asked, then v as JSON or as text.
func (r *analysisRun) emit(stdout io.Writer, name string, v any, text func(io.Writer) error, html func(w io.Writer, title string) error) error {
	if r.html != "" {
		title := "reel " + name + ": " + strings.Join(r.paths, " ")
		if err := writeHTMLFile(r.html, func(w io.Writer) error { return html(w, title) }); err != nil {
			return err
		}
	}
	if r.asJSON {
		return writeJSON(stdout, v)
	}
	return text(stdout)
}
